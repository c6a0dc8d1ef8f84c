// attend_group over F16 and Q8_0 caches: the rows are converted through the kernel table, so
// the result equals, bit for bit, attention over an F32 cache holding the converted values;
// and over caches cut into memory chunks of any number of positions (the key blocks end at
// the chunks' ends, including the default layout's first, shorter chunk), bit for bit
// attention over one chunk.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <utility>
#include <vector>

#include "kernels/kernels.h"
#include "ops/attention.h"
#include "state/kv_cache.h"

namespace krafla {
namespace {

namespace K = kernels;

// attend_group for `group` query heads of 64 over keys first..n_ctx-1 of views a and b; the
// outputs are equal bit for bit.
void expect_same_attention(const std::vector<float>& q, int group, const KvCache::HeadView& a,
                           const KvCache::HeadView& b, int64_t n_ctx, int64_t first,
                           const std::string& what) {
  const int64_t hd = 64, n_keys = n_ctx - first;
  std::vector<float> s1(group * n_keys), s2(group * n_keys), buf(kKvRows * hd);
  std::vector<float> o1(group * hd), o2(group * hd);
  attend_group(q.data(), group, a, first, n_keys, 0.125f, 0.0f, s1.data(), buf.data(), o1.data());
  attend_group(q.data(), group, b, first, n_keys, 0.125f, 0.0f, s2.data(), buf.data(), o2.data());
  for (int i = 0; i < group * hd; ++i)
    ASSERT_EQ(o1[i], o2[i]) << what << " first " << first << " i " << i;
}

TEST(AttendGroup, ReducedCachesEqualF32OverTheirOwnValues) {
  ModelConfig c;
  c.n_layers = 1, c.n_heads = 4, c.n_kv_heads = 2, c.head_dim = 64;
  c.layers = {{LayerConfig::Kind::Attention}};
  const int n_ctx = 100, hd = 64, group = 2;
  std::mt19937 rng(5);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  for (const auto& [t, chunk] : {std::pair{KvType::F16, 0},
                                 {KvType::Q8_0, 0},
                                 {KvType::F32, 7},
                                 {KvType::F16, 5},
                                 {KvType::Q8_0, 32},
                                 {KvType::F32, 33}}) {
    KvCache reduced(c, n_ctx, t, chunk), exact(c, n_ctx, KvType::F32, 128);
    std::vector<float> k(hd), v(hd), kr(hd), vr(hd);
    std::vector<K::BlockQ8_0> blk(hd / 32);
    std::vector<uint16_t> half(hd);
    const auto round_trip = [&](const std::vector<float>& x, std::vector<float>& out) {
      if (t == KvType::F32) {
        out = x;
      } else if (t == KvType::F16) {
        K::f32_to_f16(x.data(), half.data(), hd);
        K::f16_to_f32(half.data(), out.data(), hd);
      } else {
        K::quantize_row_q8_0(x.data(), blk.data(), hd);
        K::dequantize_row(K::WType::Q8_0, blk.data(), out.data(), hd);
      }
    };
    for (int p = 0; p < n_ctx; ++p) {
      for (int i = 0; i < hd; ++i) k[i] = nd(rng), v[i] = nd(rng);
      reduced.store(0, 1, p, k.data(), v.data());
      round_trip(k, kr), round_trip(v, vr);
      exact.store(0, 1, p, kr.data(), vr.data());
    }
    std::vector<float> q(group * hd);
    for (float& x : q) x = nd(rng);
    for (int64_t first : {0, 7, 33})
      expect_same_attention(q, group, reduced.head(0, 1), exact.head(0, 1), n_ctx, first,
                            fmt::format("{} chunk {}", kv_type_name(t), chunk));
    if (chunk == 0) {  // one chunk of 128 positions each
      EXPECT_EQ(reduced.size_bytes() * (t == KvType::F16 ? 2 : 128),
                exact.size_bytes() * (t == KvType::F16 ? 1 : 34));
    }
  }
}

// The default layout of a large model's cache: a first chunk of 32 positions (at least 2 MiB
// of K over 64 layers x 16 heads of 64), then chunks of 64, 128, 256 (F32: 64 KiB runs) and
// 512 (F16). Attention across those boundaries equals, bit for bit, attention over one chunk
// holding the same rows.
TEST(AttendGroup, DefaultChunksEqualOneChunk) {
  ModelConfig c;
  c.n_layers = 64, c.n_heads = 32, c.n_kv_heads = 16, c.head_dim = 64;
  c.layers.resize(64);
  const int n_ctx = 1000, hd = 64, group = 2;
  std::mt19937 rng(7);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  for (KvType t : {KvType::F32, KvType::F16}) {
    KvCache chunked(c, n_ctx, t), whole(c, n_ctx, t, 1024);
    ASSERT_EQ(chunked.first_chunk_positions(), 32);
    ASSERT_EQ(chunked.chunk_positions(), t == KvType::F32 ? 256 : 512);
    ASSERT_EQ(chunked.head(0, 0).run(100), 224 - 100);
    std::vector<float> k(hd), v(hd);
    for (int p = 0; p < n_ctx; ++p)
      for (const auto& [l, h] : {std::pair{0, 0}, {63, 15}}) {
        for (int i = 0; i < hd; ++i) k[i] = nd(rng), v[i] = nd(rng);
        chunked.store(l, h, p, k.data(), v.data());
        whole.store(l, h, p, k.data(), v.data());
      }
    std::vector<float> q(group * hd);
    for (float& x : q) x = nd(rng);
    for (const auto& [l, h] : {std::pair{0, 0}, {63, 15}})
      for (int64_t first : {0, 20, 40, 100, 300, 500})
        expect_same_attention(q, group, chunked.head(l, h), whole.head(l, h), n_ctx, first,
                              fmt::format("{} layer {}", kv_type_name(t), l));
  }
}

}  // namespace
}  // namespace krafla
