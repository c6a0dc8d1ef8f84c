// A sequence's state: the KV cache's slots and views, and the DeltaNet state, each created
// from a config alone (several per model).
#include "state/kv_cache.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "krafla/error.h"
#include "state/sequence.h"

namespace krafla {
namespace {

using Kind = LayerConfig::Kind;

// Layers 0 and 2 DeltaNet, 1 and 3 attention (Qwen3.5's pattern, shortened).
ModelConfig hybrid() {
  ModelConfig c;
  c.n_layers = 4, c.n_heads = 4, c.n_kv_heads = 2, c.head_dim = 8;
  c.lin_k_heads = 1, c.lin_v_heads = 2, c.lin_k_dim = 4, c.lin_v_dim = 4, c.lin_conv = 3;
  c.layers = {{Kind::Linear}, {Kind::Attention}, {Kind::Linear}, {Kind::Attention}};
  return c;
}

TEST(KvCache, OneSlotPerAttentionLayerEachHeadItsOwnRows) {
  const ModelConfig c = hybrid();
  KvCache kv(c, 16, KvType::F32, 16);  // one chunk
  EXPECT_EQ(kv.type(), KvType::F32);
  EXPECT_EQ(kv.n_ctx(), 16);
  EXPECT_EQ(kv.row_bytes(), 8 * sizeof(float));
  EXPECT_EQ(kv.size_bytes(), 2 * size_t(2 * 2 * 16 * 8) * sizeof(float));  // K and V
  // Every (layer, head, pos) written with its own values, then read back through the views.
  const auto value = [](int l, int h, int p, int i, bool is_v) {
    return float(l * 1000 + h * 100 + p) + i * 0.125f + (is_v ? 0.5f : 0.0f);
  };
  for (int l : {1, 3})
    for (int h = 0; h < 2; ++h)
      for (int p = 0; p < 16; ++p) {
        std::vector<float> k(8), v(8);
        for (int i = 0; i < 8; ++i) {
          k[i] = value(l, h, p, i, false);
          v[i] = value(l, h, p, i, true);
        }
        kv.store(l, h, p, k.data(), v.data());
      }
  for (int l : {1, 3})
    for (int h = 0; h < 2; ++h) {
      const KvCache::HeadView view = kv.head(l, h);
      std::vector<float> buf(16 * 8);
      for (int p = 0; p < 16; ++p)
        for (int i = 0; i < 8; ++i) {
          ASSERT_EQ(view.k_rows(p, 1, buf.data())[i], value(l, h, p, i, false));
          ASSERT_EQ(view.v_rows(0, 16, buf.data())[p * 8 + i], value(l, h, p, i, true));
        }
    }
}

// Layers of their own head size and KV head count (Gemma 4's full layers), and a layer that
// reads an earlier one's K/V: every owner's rows stay its own across chunks, the sharing layer
// sees its source's, and only owners take memory.
TEST(KvCache, PerLayerGeometryAndSharedLayers) {
  ModelConfig c;
  c.n_layers = 4, c.n_heads = 4, c.n_kv_heads = 2, c.head_dim = 8;
  c.layers = {{Kind::Attention}, {Kind::Attention}, {Kind::Attention}, {Kind::Attention}};
  c.layers[1].head_dim = 16, c.layers[1].n_kv_heads = 1;
  c.layers[3].kv_source = 1;
  for (KvType t : {KvType::F32, KvType::F16}) {
    KvCache kv(c, 24, t, 8);  // three chunks
    EXPECT_EQ(kv.n_slots(), 3);
    const size_t elem = t == KvType::F32 ? 4 : 2;
    EXPECT_EQ(kv.size_bytes(), 2 * size_t(24) * (2 * 8 + 16 + 2 * 8) * elem);
    EXPECT_EQ(kv.row_bytes(), 8 * elem);  // the smallest
    const auto value = [](int l, int h, int p, int i) { return float(l * 64 + h * 32 + p) + i; };
    for (int l : {0, 1, 2})
      for (int h = 0; h < (l == 1 ? 1 : 2); ++h)
        for (int p = 0; p < 24; ++p) {
          std::vector<float> k(16), v(16);
          for (int i = 0; i < 16; ++i) k[i] = value(l, h, p, i), v[i] = -value(l, h, p, i);
          kv.store(l, h, p, k.data(), v.data());
        }
    std::vector<float> buf(16 * 8);
    for (int l : {0, 1, 2, 3})
      for (int h = 0; h < (l % 2 ? 1 : 2); ++h) {
        const KvCache::HeadView view = kv.head(l, h);
        const int owner = l == 3 ? 1 : l, hd = l % 2 ? 16 : 8;
        ASSERT_EQ(view.head_dim, hd);
        for (int p = 0; p < 24; ++p)
          for (int i = 0; i < hd; ++i) {
            ASSERT_EQ(view.k_rows(p, 1, buf.data())[i], value(owner, h, p, i)) << l << " " << p;
            ASSERT_EQ(view.v_rows(p, 1, buf.data())[i], -value(owner, h, p, i));
          }
      }
  }
}

// Chunks of 5 positions (the last one partly past n_ctx): every row stays its own, the views
// give contiguous runs to the end of each chunk, and memory is (chunk, slot, head, row): the
// first positions of every layer and head come first.
TEST(KvCache, ChunkedRowsStayTheirOwn) {
  const ModelConfig c = hybrid();
  KvCache kv(c, 16, KvType::F32, 5);
  EXPECT_EQ(kv.chunk_positions(), 5);
  EXPECT_EQ(kv.size_bytes(), 2 * size_t(4 * 2 * 2 * 5 * 8) * sizeof(float));  // 4 chunks
  const auto value = [](int l, int h, int p, int i) { return float(l * 1000 + h * 100 + p + i); };
  for (int l : {1, 3})
    for (int h = 0; h < 2; ++h)
      for (int p = 0; p < 16; ++p) {
        std::vector<float> k(8), v(8);
        for (int i = 0; i < 8; ++i) k[i] = value(l, h, p, i), v[i] = -value(l, h, p, i);
        kv.store(l, h, p, k.data(), v.data());
      }
  std::vector<float> buf(16 * 8);
  for (int l : {1, 3})
    for (int h = 0; h < 2; ++h) {
      const KvCache::HeadView view = kv.head(l, h);
      EXPECT_EQ(view.run(0), 5);
      EXPECT_EQ(view.run(7), 3);
      for (int64_t p = 0; p < 16; p += view.run(p)) {
        const int64_t m = std::min<int64_t>(view.run(p), 16 - p);
        const float* k = view.k_rows(p, m, buf.data());
        for (int64_t r = 0; r < m; ++r)
          for (int i = 0; i < 8; ++i) ASSERT_EQ(k[r * 8 + i], value(l, h, int(p + r), i));
        EXPECT_EQ(view.v_rows(p, 1, buf.data())[3], -value(l, h, int(p), 3));
      }
      EXPECT_THROW(view.k_rows(3, 3, buf.data()), Error);  // crosses into the next chunk
    }
  // Position 5 of slot 0, head 0 starts the second chunk.
  EXPECT_EQ(kv.head(1, 0).k_rows(5, 1, buf.data())[0], value(1, 0, 5, 0));
  EXPECT_EQ(kv.head(1, 0).k_rows(5, 1, buf.data()),
            kv.head(1, 0).k_rows(0, 1, buf.data()) + 2 * 2 * 5 * 8);
}

// F16 and Q8_0 rows are stored through f32_to_f16 / quantize_row_q8_0 and read back through
// f16_to_f32 / dequantize_row: values those formats hold exactly come back unchanged.
TEST(KvCache, F16AndQ8_0RowsReadBackExactly) {
  ModelConfig c = hybrid();
  for (KvType t : {KvType::F16, KvType::Q8_0}) {
    c.head_dim = t == KvType::Q8_0 ? 32 : 8;
    const int hd = c.head_dim;
    KvCache kv(c, 16, t);
    EXPECT_EQ(kv.type(), t);
    EXPECT_EQ(kv.row_bytes(), t == KvType::F16 ? size_t(hd) * 2 : size_t(hd / 32) * 34);
    // F16: quarter steps below 32 are exact. Q8_0: integers with a block maximum of 127
    // (scale 1) are exact.
    const auto value = [&](int p, int i, bool is_v) {
      if (t == KvType::F16) return (is_v ? -1.0f : 1.0f) * (float(p) + 0.25f * float(i));
      return i == 0 ? 127.0f : float((p + 3 * i) % 100 - 50) * (is_v ? -1.0f : 1.0f);
    };
    for (int h = 0; h < 2; ++h)
      for (int p = 0; p < 16; ++p) {
        std::vector<float> k(hd), v(hd);
        for (int i = 0; i < hd; ++i) k[i] = value(p, i, false), v[i] = value(p, i, true);
        kv.store(3, h, p, k.data(), v.data());
      }
    std::vector<float> buf(16 * size_t(hd));
    const KvCache::HeadView view = kv.head(3, 1);
    const float* k = view.k_rows(0, 16, buf.data());
    for (int p = 0; p < 16; ++p)
      for (int i = 0; i < hd; ++i) ASSERT_EQ(k[p * hd + i], value(p, i, false)) << p << " " << i;
    const float* v = view.v_rows(5, 3, buf.data());
    for (int p = 5; p < 8; ++p)
      for (int i = 0; i < hd; ++i) ASSERT_EQ(v[(p - 5) * hd + i], value(p, i, true));
  }
}

// The default chunks: the first holds the most positions (a multiple of 32, at least 32) whose
// K fits 2 MiB; the next ones double until one holds a 64 KiB run of each head's rows, and the
// rest are that size. Checked against the rule, walking the layout through a view, on the 1B
// shape (16 layers x 8 KV heads of 64: the runs need doubling) and on a small hybrid model
// (the first chunk's runs are long enough), for each element type; a short context is one
// chunk.
TEST(KvCache, DefaultChunksGrowToLongRuns) {
  ModelConfig big;
  big.n_layers = 16, big.n_heads = 32, big.n_kv_heads = 8, big.head_dim = 64;
  big.layers.resize(16);
  ModelConfig small = hybrid();
  small.head_dim = 32;
  for (const ModelConfig* c : {&big, &small})
    for (KvType t : {KvType::F32, KvType::F16, KvType::Q8_0}) {
      const int n_ctx = 32768;
      const KvCache kv(*c, n_ctx, t);  // memory is reserved, not touched
      const int64_t first = kv.first_chunk_positions(), steady = kv.chunk_positions();
      const size_t rb = kv.row_bytes();
      const int n_slots = c == &big ? 16 : 2;
      const size_t per_pos = size_t(c->n_kv_heads) * n_slots * rb;
      EXPECT_EQ(first % 32, 0);
      EXPECT_LE(size_t(first) * per_pos, size_t(2) << 20);
      EXPECT_GT(size_t(first + 32) * per_pos, size_t(2) << 20);
      const KvCache::HeadView h0 = kv.head(c == &big ? 0 : 1, 0);
      const KvCache::HeadView hl = kv.head(c == &big ? 15 : 3, c->n_kv_heads - 1);
      int64_t expect = first;  // the next chunk's size
      int64_t p = 0;
      for (int chunks = 0; p < n_ctx; ++chunks) {
        const int64_t size = h0.run(p);
        ASSERT_EQ(size, expect) << "chunk " << chunks << " at " << p;
        // Contiguous: the first head's rows start the chunk at p * per_pos, the last head's
        // end it.
        ASSERT_EQ(h0.offset(p), size_t(p) * per_pos);
        ASSERT_EQ(hl.offset(p + size - 1) + rb, size_t(p + size) * per_pos);
        ASSERT_EQ(h0.run(p + size - 1), 1);
        p += size;
        if (size_t(expect) * rb < 65536) expect *= 2;
      }
      EXPECT_EQ(steady, expect);
      EXPECT_GE(size_t(steady) * rb, size_t(65536));
      EXPECT_EQ(kv.size_bytes(), 2 * size_t(p) * per_pos);
      const KvCache one(*c, 20, t);
      EXPECT_EQ(one.first_chunk_positions(), 32);  // the whole context, rounded up
      EXPECT_EQ(one.size_bytes(), 2 * 32 * per_pos);
    }
  const KvCache f16(big, 32768, KvType::F16);
  EXPECT_EQ(f16.first_chunk_positions(), 128);  // 2 MiB / 16 KiB
  EXPECT_EQ(f16.chunk_positions(), 512);        // 64 KiB / 128 B
}

TEST(KvCache, Q8_0NeedsWholeBlocksPerHead) {
  const ModelConfig c = hybrid();  // head_dim 8
  EXPECT_THROW(KvCache(c, 16, KvType::Q8_0), Error);
  EXPECT_STREQ(kv_type_name(KvType::Q8_0), "q8_0");
  EXPECT_EQ(parse_kv_type("f16"), KvType::F16);
  EXPECT_FALSE(parse_kv_type("q4_0").has_value());
}

TEST(SequenceState, DeltaNetStatePerLayerZeroedByReset) {
  const ModelConfig c = hybrid();
  SequenceState a(c, 8), b(c, 8);  // two sequences of one model: separate memory
  const int64_t conv = (c.lin_conv - 1) * c.lin_conv_dim();
  const int64_t ssm = int64_t{c.lin_v_heads} * c.lin_k_dim * c.lin_v_dim;
  EXPECT_NE(a.linear.conv(0), b.linear.conv(0));
  EXPECT_EQ(a.linear.conv(2), a.linear.conv(0) + conv);
  EXPECT_EQ(a.linear.ssm(2), a.linear.ssm(0) + ssm);
  for (int l : {0, 2}) {
    for (int64_t i = 0; i < conv; ++i) EXPECT_EQ(a.linear.conv(l)[i], 0.0f);
    for (int64_t i = 0; i < ssm; ++i) a.linear.ssm(l)[i] = 1.0f;
  }
  a.reset();
  for (int l : {0, 2})
    for (int64_t i = 0; i < ssm; ++i) ASSERT_EQ(a.linear.ssm(l)[i], 0.0f);
  EXPECT_EQ(a.n_ctx(), 8);
}

}  // namespace
}  // namespace krafla
