#include "tokenizer/decoder.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "krafla/error.h"
#include "tokenizer/json_reader.h"
#include "tokenizer/normalizer.h"

namespace krafla::tok {

namespace {

void add_step(DecoderPlan& plan, const nlohmann::json& j) {
  std::string type = j.value("type", "");
  if (type == "Sequence") {
    for (const auto& d : j.at("decoders")) add_step(plan, d);
  } else if (type == "Replace") {
    plan.replacements.emplace_back(literal_pattern(j.at("pattern"), "Replace decoder"),
                                   j.at("content").get<std::string>());
  } else if (type == "ByteFallback") {
    plan.byte_fallback = true;
  } else if (type == "Fuse") {
    // Concatenation is what the stream does anyway.
  } else if (type == "Strip") {
    std::string content = j.value("content", " ");
    if (content.size() != 1 || tok::int_field(j, "stop", 0, 0, 0, "Strip decoder") != 0)
      throw Error(fmt::format("tokenizer.json: Strip decoder {} is not supported", j.dump()));
    plan.strip_start = tok::int_field(j, "start", 0, 0, 1 << 20, "Strip decoder");
    plan.strip_char = content[0];
  } else if (type == "ByteLevel") {
    plan.byte_level = true;
  } else if (type == "Metaspace") {
    std::string rep = j.value("replacement", "\u2581");
    plan.replacements.emplace_back(rep, " ");
    // Older files say add_prefix_space; newer ones prepend_scheme (Hugging Face strips the
    // first token's space unless it is "never"). The JS reference reads only add_prefix_space.
    bool prefix = j.contains("add_prefix_space") ? j["add_prefix_space"].get<bool>()
                                                 : j.value("prepend_scheme", "always") != "never";
    plan.strip_first_token = prefix;
  } else {
    throw Error(fmt::format("tokenizer.json: unsupported decoder type '{}'", type));
  }
}

}  // namespace

DecoderPlan DecoderPlan::from_json(const nlohmann::json& j) {
  DecoderPlan plan;
  if (j.is_null()) {
    plan.join_with_space = true;
  } else {
    add_step(plan, j);
  }
  return plan;
}

std::string clean_up_tokenization(std::string text) {
  if (text.find(' ') == std::string::npos) return text;
  static const std::pair<const char*, const char*> kRules[] = {
      {" .", "."},     {" ?", "?"},   {" !", "!"},   {" ,", ","},     {" ' ", "'"},
      {" n't", "n't"}, {" 'm", "'m"}, {" 's", "'s"}, {" 've", "'ve"}, {" 're", "'re"}};
  for (auto [from, to] : kRules) text = replace_all(text, from, to);
  return text;
}

size_t cleanup_safe_prefix(std::string_view text) {
  size_t c = text.size();
  auto ok = [&](size_t c) {
    if (c < text.size() && (static_cast<unsigned char>(text[c]) & 0xC0) == 0x80) return false;
    for (size_t k = c >= 3 ? c - 3 : 0; k < c; ++k)
      if (text[k] == ' ') return false;
    return true;
  };
  while (c > 0 && !ok(c)) --c;
  return c;
}

}  // namespace krafla::tok
