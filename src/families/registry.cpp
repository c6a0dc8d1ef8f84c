// The registry: one line per family (a family's descriptor lives in its own file). Listed
// here explicitly rather than registered by static constructors, which a static library's
// link would drop.
#include <algorithm>

#include "families/family.h"

namespace krafla {

extern const Family kLlama, kMistral, kQwen2, kQwen3, kSmolLM3, kGemma2, kGemma3, kQwen35,
    kQwen3Moe, kQwen35Moe;

namespace {
constexpr const Family* kFamilies[] = {&kLlama,  &kMistral, &kQwen2,  &kQwen3,    &kSmolLM3,
                                       &kGemma2, &kGemma3,  &kQwen35, &kQwen3Moe, &kQwen35Moe};
}  // namespace

std::span<const Family* const> families() { return kFamilies; }

const Family* find_family(std::string_view arch) {
  for (const Family* f : kFamilies)
    if (arch == f->arch) return f;
  return nullptr;
}

const Family* find_gguf_family(std::string_view gguf_arch) {
  if (gguf_arch.empty()) return nullptr;
  for (const Family* f : kFamilies)
    if (gguf_arch == f->gguf_arch) return f;
  return nullptr;
}

}  // namespace krafla
