#include "state/kv_cache.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <iterator>

#include "kernels/kernels.h"
#include "krafla/error.h"

namespace krafla {

namespace {
constexpr const char* kNames[] = {"f32", "f16", "q8_0"};  // KvType's order
}  // namespace

const char* kv_type_name(KvType t) {
  const auto i = size_t(t);
  return i < std::size(kNames) ? kNames[i] : "?";
}

std::optional<KvType> parse_kv_type(std::string_view s) {
  for (size_t i = 0; i < std::size(kNames); ++i)
    if (s == kNames[i]) return KvType(i);
  return std::nullopt;
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

KvCache::KvCache(const ModelConfig& c, int n_ctx, KvType type, int64_t chunk_positions)
    : type_(type), n_ctx_(n_ctx) {
  for (size_t l = 0; l < c.layers.size(); ++l) {
    const LayerConfig& L = c.layers[l];
    if (L.kind != LayerConfig::Kind::Attention) {
      slot_.push_back(-1);
      continue;
    }
    if (L.kv_source >= 0) {  // config.cpp: an earlier attention layer of the same geometry
      slot_.push_back(slot_[size_t(L.kv_source)]);
      continue;
    }
    const int hd = L.head_dim ? L.head_dim : c.head_dim;  // 0: the model's
    const int heads = L.n_kv_heads ? L.n_kv_heads : c.n_kv_heads;
    if (type == KvType::Q8_0 && hd % kernels::kQBlock != 0)
      throw Error(
          fmt::format("--kv q8_0 needs a head size that is a multiple of {}; this model's "
                      "is {} (use --kv f16)",
                      kernels::kQBlock, hd));
    const size_t rb = kv_row_bytes(type, hd);
    slot_.push_back(int(slots_.size()));
    slots_.push_back({heads, hd, rb, per_pos_});
    per_pos_ += size_t(heads) * rb;
    row_bytes_ = row_bytes_ ? std::min(row_bytes_, rb) : rb;
  }
  per_pos_ = std::max<size_t>(1, per_pos_);
  if (row_bytes_ == 0) row_bytes_ = kv_row_bytes(type, c.head_dim);
  // The first chunk: about a transparent huge page of K; then chunks doubling in size until
  // one holds 64 KiB of each head's rows.
  constexpr size_t kChunkBytes = size_t(2) << 20, kRunBytes = size_t(64) << 10;
  const int64_t ctx = std::max(n_ctx, 1);
  const int64_t page = std::max<int64_t>(32, int64_t(kChunkBytes / per_pos_) / 32 * 32);
  first_ = chunk_positions > 0 ? chunk_positions : std::min((ctx + 31) / 32 * 32, page);
  chunk_ = first_;
  while (chunk_positions <= 0 && size_t(chunk_) * row_bytes_ < kRunBytes && steady_ + chunk_ < ctx)
    steady_ += chunk_, chunk_ *= 2;
  const size_t positions =
      size_t(steady_ + (std::max(ctx - steady_, int64_t{0}) + chunk_ - 1) / chunk_ * chunk_);
  const size_t bytes = positions * per_pos_;
  k_.resize(bytes, Pages::Huge);
  v_.resize(bytes, Pages::Huge);
}

KvCache::HeadView KvCache::head(int layer, int kv_head) const {
  const Slot& s = slots_[size_t(slot_[size_t(layer)])];
  return {k_.data(), v_.data(),  s.row_bytes,
          type_,     s.head_dim, first_,
          chunk_,    steady_,    s.head_bytes + size_t(kv_head) * s.row_bytes,
          per_pos_};
}

const float* KvCache::HeadView::rows(const uint8_t* base, int64_t pos, int64_t m,
                                     float* buf) const {
  if (m > run(pos))
    throw Error(fmt::format("internal: KV rows {}..{} cross the end of a chunk", pos, pos + m));
  const uint8_t* p = base + offset(pos);
  switch (type) {
    case KvType::F32:
      return reinterpret_cast<const float*>(p);
    case KvType::F16:
      kernels::f16_to_f32(reinterpret_cast<const uint16_t*>(p), buf, m * head_dim);
      return buf;
    case KvType::Q8_0:
      kernels::dequantize_row(kernels::WType::Q8_0, p, buf, m * head_dim);
      return buf;
  }
  return buf;
}

const uint16_t* KvCache::HeadView::halves(const uint8_t* base, int64_t pos, int64_t m) const {
  if (type != KvType::F16 || m > run(pos))
    throw Error(fmt::format("internal: KV rows {}..{} read as halves", pos, pos + m));
  return reinterpret_cast<const uint16_t*>(base + offset(pos));
}

void KvCache::store(int layer, int kv_head, int64_t pos, const float* k, const float* v) {
  const HeadView h = head(layer, kv_head);
  const size_t at = h.offset(pos);
  uint8_t* dk = h.k + at;
  uint8_t* dv = h.v + at;
  switch (type_) {
    case KvType::F32:
      std::memcpy(dk, k, h.row_bytes);
      std::memcpy(dv, v, h.row_bytes);
      return;
    case KvType::F16:
      kernels::f32_to_f16(k, reinterpret_cast<uint16_t*>(dk), h.head_dim);
      kernels::f32_to_f16(v, reinterpret_cast<uint16_t*>(dv), h.head_dim);
      return;
    case KvType::Q8_0:
      kernels::quantize_row_q8_0(k, reinterpret_cast<kernels::BlockQ8_0*>(dk), h.head_dim);
      kernels::quantize_row_q8_0(v, reinterpret_cast<kernels::BlockQ8_0*>(dv), h.head_dim);
      return;
  }
}

}  // namespace krafla
