// ml_tok: encode text to token ids or decode ids to text with a model's tokenizer.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <CLI/CLI.hpp>

#include "cli_common.h"
#include "krafla/error.h"
#include "krafla/model.h"

using namespace krafla;

int main(int argc, char** argv) {
  return cli::run_main("ml_tok", [&] {
    std::string path, text;
    std::vector<std::string> ids;
    bool no_special = false, skip_special = false;
    CLI::App app{"ml_tok: tokenize with the tokenizer of a .mlb or .mlt file"};
    app.add_option("file", path, "model (.mlb) or tokenizer (.mlt) file")->required();
    app.require_subcommand(1);
    auto* enc = app.add_subcommand("encode", "print the ids of TEXT (or of stdin with -)");
    enc->add_option("text", text, "text, or - to read stdin")->required();
    enc->add_flag("--no-special", no_special, "do not add the special tokens (e.g. BOS)");
    auto* dec = app.add_subcommand("decode", "print the text of token ids");
    dec->add_option("ids", ids, "token ids")->required();
    dec->add_flag("--skip-special", skip_special, "leave special tokens out");
    cli::add_version_flag(app, "ml_tok");
    if (auto rc = cli::parse(app, argc, argv, "ml_tok")) return *rc;
    const Tokenizer tok = load_tokenizer(path);
    if (*enc) {
      const std::string input = text == "-" ? cli::read_file_or_stdin("-") : text;
      fmt::print("{}\n", fmt::join(tok.encode(input, !no_special), " "));
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
