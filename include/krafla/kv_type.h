// The element type of the KV cache (ml_run/ml_bench/ml_server --kv): f32, f16 (half the
// memory) or q8_0 (ggml's 34-byte blocks of 32: ~0.27 of f32; needs head_dim % 32 == 0).
#pragma once
#include <optional>
#include <string_view>

namespace krafla {

enum class KvType { F32, F16, Q8_0 };

const char* kv_type_name(KvType t);                       // "f32", "f16", "q8_0"
std::optional<KvType> parse_kv_type(std::string_view s);  // the inverse; nullopt for others

}  // namespace krafla
