#include "runtime/kv_cache.h"

#include <fmt/format.h>

#include <cstring>
#include <iterator>

#include "kernels/kernels.h"
#include "krafla/error.h"

namespace krafla {

const char* kv_type_name(KvType t) {
  static constexpr const char* kNames[] = {"f32", "f16", "q8_0"};  // KvType's order
  const auto i = size_t(t);
  return i < std::size(kNames) ? kNames[i] : "?";
}

namespace {
size_t kv_row_bytes(KvType t, int64_t head_dim) {
  switch (t) {
    case KvType::F32:
      return size_t(head_dim) * sizeof(float);
    case KvType::F16:
      return size_t(head_dim) * sizeof(uint16_t);
    case KvType::Q8_0:
      return size_t(head_dim / kernels::kQBlock) * sizeof(kernels::BlockQ8_0);
  }
  return 0;
}
}  // namespace

KvCache::KvCache(const ModelConfig& c, int n_ctx, KvType type)
    : type_(type),
      n_ctx_(n_ctx),
      n_kv_heads_(c.n_kv_heads),
      row_bytes_(kv_row_bytes(type, c.head_dim)) {
  if (type != KvType::F32)
    throw Error(fmt::format("KV cache type {} is not supported yet (this build caches f32)",
                            kv_type_name(type)));
  int n_slots = 0;
  for (const LayerConfig& l : c.layers)
    slot_.push_back(l.kind == LayerConfig::Kind::Attention ? n_slots++ : -1);
  const size_t bytes = size_t(n_slots) * n_kv_heads_ * n_ctx * row_bytes_;
  k_.resize(bytes);
  v_.resize(bytes);
}

KvCache::HeadView KvCache::head(int layer, int kv_head) const {
  const size_t offset = (size_t(slot_[layer]) * n_kv_heads_ + kv_head) * n_ctx_ * row_bytes_;
  return {k_.data() + offset, v_.data() + offset, row_bytes_};
}

void KvCache::store(int layer, int kv_head, int64_t pos, const float* k, const float* v) {
  const HeadView h = head(layer, kv_head);
  std::memcpy(h.k + pos * row_bytes_, k, row_bytes_);
  std::memcpy(h.v + pos * row_bytes_, v, row_bytes_);
}

}  // namespace krafla
