// ml_tok: encode text to token ids or decode ids to text with a model's tokenizer, and dump
// what a model file holds (ml_tok info FILE).
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <CLI/CLI.hpp>

#include "cli_common.h"
#include "krafla/error.h"
#include "krafla/model.h"
#include "model_info.h"

using namespace krafla;

namespace {

struct EncodeArgs {
  std::string text;
  bool no_special = false, no_parse_special = false, show_pieces = false, count = false;
};

void print_encoded(const Tokenizer& tok, const EncodeArgs& a) {
  const std::string input = a.text == "-" ? cli::read_file_or_stdin("-") : a.text;
  const std::vector<int32_t> ids = tok.encode(input, !a.no_special, !a.no_parse_special);
  if (a.count) {
    fmt::print("{}\n", ids.size());
  } else if (a.show_pieces) {
    // llama-tokenize's layout: the piece's bytes as they are, even a partial UTF-8 sequence.
    for (int32_t id : ids) fmt::print("{:>6} -> '{}'\n", id, tok.piece(id));
  } else {
    fmt::print("{}\n", fmt::join(ids, " "));
  }
}

}  // namespace

int main(int argc, char** argv) {
  return cli::run_main("ml_tok", [&] {
    std::string path, info_path;
    std::vector<std::string> ids;
    EncodeArgs e;
    bool skip_special = false, info_json = false;
    CLI::App app{"ml_tok: tokenize with the tokenizer of a .mlb or .mlt file"};
    app.add_option("file", path, "model (.mlb) or tokenizer (.mlt) file");
    app.require_subcommand(1);
    auto* enc = app.add_subcommand("encode", "print the ids of TEXT (or of stdin with -)");
    enc->add_option("text", e.text, "text, or - to read stdin")->required();
    enc->add_flag("--no-special", e.no_special, "do not add the special tokens (e.g. BOS)");
    enc->add_flag("--no-parse-special", e.no_parse_special,
                  "tokenize special-token text such as <|im_start|> as plain text");
    auto* pieces = enc->add_flag("--show-pieces", e.show_pieces, "print each id with its text");
    enc->add_flag("--count", e.count, "print only the number of tokens")->excludes(pieces);
    auto* dec = app.add_subcommand("decode", "print the text of token ids");
    dec->add_option("ids", ids, "token ids")->required();
    dec->add_flag("--skip-special", skip_special, "leave special tokens out");
    auto* info = app.add_subcommand(
        "info", "print the file's format, config, tokenizer and tensors (ml_tok info FILE)");
    info->add_option("info_file", info_path, "model (.mlb) or tokenizer (.mlt) file");
    info->add_flag("--json", info_json, "print one JSON object");
    if (auto rc = cli::parse(app, argc, argv, "ml_tok")) return *rc;
    if (*info) {
      // Both `ml_tok info FILE` and `ml_tok FILE info` read naturally; take either.
      if (!info_path.empty() && !path.empty())
        throw Error("info: give the file once (ml_tok info FILE)");
      if (info_path.empty() && path.empty())
        throw Error("info: the file is missing (ml_tok info FILE)");
      return cli::print_model_info(info_path.empty() ? path : info_path, info_json);
    }
    if (path.empty()) throw Error("the file is missing (ml_tok FILE encode|decode …)");
    const Tokenizer tok = load_tokenizer(path);
    if (*enc) {
      print_encoded(tok, e);
    } else {
      std::string joined;
      for (const auto& s : ids) joined += s + " ";
      const std::vector<int32_t> v = cli::parse_ids(joined);
      const std::string out = tok.decode(v, skip_special);
      std::fwrite(out.data(), 1, out.size(), stdout);
      std::fputc('\n', stdout);
    }
    return 0;
  });
}
