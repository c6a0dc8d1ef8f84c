// parse_config: the table of keys (required, optional, unknown, wrong type), the defaults the
// validation fills in, the per-layer lists turned into ModelConfig::layers, and the messages
// that name the field.
#include "model/config.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <string>

#include "krafla/error.h"

namespace krafla {
namespace {

using nlohmann::json;
using Kind = LayerConfig::Kind;
using Rope = LayerConfig::Rope;

// The smallest valid config: a 2-layer llama.
json minimal() {
  return {{"arch", "llama"},
          {"n_vocab", 100},
          {"dim", 64},
          {"n_layers", 2},
          {"n_heads", 4},
          {"n_kv_heads", 2},
          {"head_dim", 16},
          {"ffn_dim", 128},
          {"norm_eps", 1e-5},
          {"rope_freqs", json::array({1.0, 0.5, 0.25, 0.125, 0.1, 0.05, 0.01, 0.001})},
          {"max_ctx", 256},
          {"tie_embeddings", true}};
}

ModelConfig parse(const json& config) { return parse_config({{"config", config}}, "m.mlb"); }

// The message of the krafla::Error that parsing `config` throws ("" when it does not throw).
std::string error_of(const json& config) {
  try {
    parse(config);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(Config, MinimalGetsTheDefaults) {
  const ModelConfig c = parse(minimal());
  EXPECT_EQ(c.arch, "llama");
  EXPECT_EQ(c.n_layers, 2);
  EXPECT_EQ(c.rope_dim, 16);             // head_dim
  EXPECT_FLOAT_EQ(c.attn_scale, 0.25f);  // 1/sqrt(head_dim)
  EXPECT_EQ(c.bos_id, -1);
  EXPECT_TRUE(c.eos_ids.empty());
  EXPECT_EQ(c.activation, ModelConfig::Activation::SiLU);
  EXPECT_FLOAT_EQ(c.rope_attn_factor, 1.0f);
  ASSERT_EQ(c.layers.size(), 2u);
  for (const LayerConfig& l : c.layers) {
    EXPECT_EQ(l.kind, Kind::Attention);
    EXPECT_EQ(l.window, 0);
    EXPECT_EQ(l.rope, Rope::Global);
  }
  EXPECT_FALSE(c.has_linear());
  EXPECT_EQ(c.n_attn_layers(), 2);
}

TEST(Config, SlidingWindowIsEveryLayersDefaultWindow) {
  json j = minimal();
  j["sliding_window"] = 32;
  for (const LayerConfig& l : parse(j).layers) EXPECT_EQ(l.window, 32);
  j["layer_window"] = {0, 8};  // replaces sliding_window
  const ModelConfig c = parse(j);
  EXPECT_EQ(c.layers[0].window, 0);
  EXPECT_EQ(c.layers[1].window, 8);
}

TEST(Config, PerLayerListsBecomeLayers) {
  json j = minimal();
  j["arch"] = "qwen3_5";
  j["n_layers"] = 4;
  j["layer_rope"] = {true, false, true, true};
  j["rope_freqs_local"] = j["rope_freqs"];
  j["layer_rope_local"] = {false, false, true, false};
  j["layer_linear"] = {true, false, false, false};
  j["layer_window"] = {0, 0, 0, 5};
  for (const char* k : {"lin_k_heads", "lin_v_heads"}) j[k] = 2;
  for (const char* k : {"lin_k_dim", "lin_v_dim"}) j[k] = 8;
  j["lin_conv"] = 4;
  const ModelConfig c = parse(j);
  ASSERT_EQ(c.layers.size(), 4u);
  EXPECT_EQ(c.layers[0].kind, Kind::Linear);
  EXPECT_EQ(c.layers[1].rope, Rope::None);
  EXPECT_EQ(c.layers[2].rope, Rope::Local);
  EXPECT_EQ(c.layers[3].rope, Rope::Global);
  EXPECT_EQ(c.layers[3].window, 5);
  EXPECT_TRUE(c.has_linear());
  EXPECT_EQ(c.n_attn_layers(), 3);
  EXPECT_EQ(c.lin_conv_dim(), 2 * 2 * 8 + 2 * 8);
}

TEST(Config, MissingRequiredKeyIsNamed) {
  for (const char* key : {"arch", "n_vocab", "dim", "norm_eps", "rope_freqs", "tie_embeddings"}) {
    json j = minimal();
    j.erase(key);
    EXPECT_EQ(error_of(j), fmt::format("m.mlb: config field '{}' is missing", key));
  }
}

TEST(Config, WrongTypeIsNamed) {
  json j = minimal();
  j["n_heads"] = "four";
  EXPECT_EQ(error_of(j), "m.mlb: config field 'n_heads' has the wrong type (\"four\")");
  j = minimal();
  j["layer_rope"] = 3;
  EXPECT_EQ(error_of(j), "m.mlb: config field 'layer_rope' has the wrong type (3)");
}

TEST(Config, UnknownKeyIsRefused) {
  json j = minimal();
  j["moe_experts"] = 8;
  EXPECT_EQ(error_of(j),
            "m.mlb: config field 'moe_experts' is not known to this build (a newer converter "
            "wrote it); update Krafla");
}

TEST(Config, UnknownArchAndActivationAreRefused) {
  json j = minimal();
  j["arch"] = "gpt2";
  EXPECT_NE(error_of(j).find("unknown architecture 'gpt2'"), std::string::npos);
  j = minimal();
  j["activation"] = "relu";
  EXPECT_EQ(error_of(j), "m.mlb: config field 'activation' = 'relu' is not one of silu, gelu_tanh");
  j["activation"] = "gelu_tanh";
  EXPECT_EQ(parse(j).activation, ModelConfig::Activation::GeluTanh);
}

TEST(Config, NoConfigObject) {
  EXPECT_THROW(parse_config(json::object(), "m.mlb"), Error);
  EXPECT_THROW(parse_config({{"config", 3}}, "m.mlb"), Error);
}

TEST(Config, ValidationNamesTheField) {
  const auto with = [](const char* key, json v) {
    json j = minimal();
    j[key] = std::move(v);
    return error_of(j);
  };
  EXPECT_EQ(with("dim", 0), "m.mlb: config field 'dim' = 0 is out of range");
  EXPECT_EQ(with("n_kv_heads", 3),
            "m.mlb: config field 'n_kv_heads' = 3 does not divide n_heads = 4");
  EXPECT_EQ(with("head_dim", 15), "m.mlb: config field 'head_dim' must be even for RoPE");
  EXPECT_EQ(with("rope_dim", 6),
            "m.mlb: config field 'rope_freqs' has 8 entries, expected rope_dim/2 = 3");
  EXPECT_EQ(with("rope_dim", 18),
            "m.mlb: config field 'rope_dim' = 18 must be even and in 2..head_dim (16)");
  EXPECT_EQ(with("layer_window", {0}),
            "m.mlb: config field 'layer_window' has 1 entries for 2 layers");
  EXPECT_EQ(with("layer_window", {0, -1}),
            "m.mlb: config field 'layer_window' holds a negative window");
  EXPECT_EQ(with("layer_rope", {true}),
            "m.mlb: config field 'layer_rope' has 1 entries for 2 layers");
  EXPECT_EQ(with("layer_rope_local", {true, false}),
            "m.mlb: config field 'rope_freqs_local' must have rope_dim/2 = 8 entries when a layer "
            "uses it");
  EXPECT_EQ(with("layer_linear", {true, false}),
            "m.mlb: config field 'layer_linear' marks DeltaNet layers in a llama model");
  EXPECT_EQ(with("attn_softcap", -1), "m.mlb: config field 'attn_softcap' is negative");
  EXPECT_EQ(with("norm_eps", 0), "m.mlb: config field 'norm_eps' is out of range");
  EXPECT_EQ(with("eos_ids", {100}),
            "m.mlb: config field 'eos_ids' holds 100 outside the vocabulary");
  EXPECT_EQ(with("bos_id", 100), "m.mlb: config field 'bos_id' is outside the vocabulary");
}

TEST(Config, DeltaNetShapeIsChecked) {
  json j = minimal();
  j["arch"] = "qwen3_5";
  j["layer_linear"] = {true, false};
  EXPECT_EQ(error_of(j), "m.mlb: config field 'lin_k_heads' = 0 is out of range");
  for (const char* k : {"lin_k_heads", "lin_k_dim", "lin_v_dim", "lin_conv"}) j[k] = 2;
  j["lin_v_heads"] = 3;
  EXPECT_EQ(error_of(j),
            "m.mlb: config field 'lin_v_heads' = 3 is not a multiple of lin_k_heads = 2");
}

}  // namespace
}  // namespace krafla
