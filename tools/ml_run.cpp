// ml_run: generate text from a prompt, chat interactively, or dump logits for tests.
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <iostream>

#include "cli_common.h"
#include "krafla/chat.h"
#include "krafla/error.h"
#include "krafla/generate.h"
#include "krafla/model.h"
#include "krafla/sampler.h"
#include "krafla/session.h"

using namespace krafla;

namespace {

struct Args {
  std::string model, prompt, prompt_file, tokens, logits_out, chat, system, think = "show";
  int n_predict = -1, threads = 0, ctx = 0, batch = 128;
  SamplerParams sp;
  bool verbose = false;
  std::string pack_cache;
};

void print_stats(const Session& s, int n_prompt, double t_prompt, const GenerateResult& g) {
  fmt::print(stderr, "\nprompt: {} tokens in {:.2f} s ({:.1f} tok/s); generated: {} tokens in "
             "{:.2f} s ({:.1f} tok/s); {} threads\n",
             n_prompt, t_prompt, t_prompt > 0 ? n_prompt / t_prompt : 0.0, g.n_tokens, g.seconds,
             g.seconds > 0 ? g.n_tokens / g.seconds : 0.0, s.n_threads());
}

int dump_logits(const Model& model, const Args& a) {
  const std::vector<int32_t> ids = cli::parse_ids(a.tokens);
  if (ids.empty()) throw Error("--tokens: no token ids given");
  SessionOptions so{a.threads, a.ctx > 0 ? a.ctx : std::max<int>(int(ids.size()), 1), a.batch};
  if (so.n_ctx > model.config().max_ctx) so.n_ctx = model.config().max_ctx;
  Session s(model, so);
  std::vector<float> logits;
  s.eval(ids, &logits);
  cli::write_npy(a.logits_out, logits.data(), {int64_t(ids.size()), model.config().n_vocab});
  fmt::print(stderr, "ml_run: wrote logits [{}, {}] to {}\n", ids.size(), model.config().n_vocab,
             a.logits_out);
  return 0;
}

int complete(const Model& model, const Args& a) {
  std::string prompt = a.prompt_file.empty() ? a.prompt : cli::read_file_or_stdin(a.prompt_file);
  std::vector<int32_t> ids = model.tokenizer().encode(prompt, true);
  if (ids.empty()) throw Error("the prompt is empty (give -p TEXT)");
  Session s(model, {a.threads, a.ctx, a.batch});
  if (int(ids.size()) >= s.n_ctx())
    throw Error(fmt::format("the prompt has {} tokens but --ctx is {}; raise --ctx (up to {})",
                            ids.size(), s.n_ctx(), model.config().max_ctx));
  std::fwrite(prompt.data(), 1, prompt.size(), stdout);
  const double t0 = cli::now_seconds();
  s.eval(ids);
  const double t_prompt = cli::now_seconds() - t0;
  Sampler sampler(a.sp);
  GenerateOptions go;
  go.max_tokens = a.n_predict < 0 ? 128 : a.n_predict;
  go.stop_ids = stop_ids_for(model, "");
  auto g = generate(s, sampler, go, [](int32_t, const std::string& text) {
    std::fwrite(text.data(), 1, text.size(), stdout);
    std::fflush(stdout);
    return true;
  });
  std::fputc('\n', stdout);
  if (g.finish_reason == "context")
    fmt::print(stderr, "ml_run: the context (--ctx {}) is full; the model allows up to {}\n",
               s.n_ctx(), model.config().max_ctx);
  print_stats(s, int(ids.size()), t_prompt, g);
  return 0;
}

int chat(const Model& model, const Args& a) {
  std::string name = a.chat == "auto" ? model.config().chat_template : a.chat;
  if (name.empty()) throw Error("the model names no chat template; pick one with --chat NAME");
  const ChatTemplate& tmpl = chat_template(name);
  Session s(model, {a.threads, a.ctx, a.batch});
  Sampler sampler(a.sp);
  GenerateOptions go;
  go.max_tokens = a.n_predict;
  go.stop_ids = stop_ids_for(model, name);
  std::vector<ChatMessage> msgs;
  if (!a.system.empty()) msgs.push_back({"system", a.system});
  fmt::print(stderr, "ml_run: chat ({} template, context {} tokens); Ctrl-D to quit\n", name,
             s.n_ctx());
  std::string line;
  for (;;) {
    fmt::print(stderr, "\n> ");
    if (!std::getline(std::cin, line)) break;
    if (line.empty()) continue;
    msgs.push_back({"user", line});
    const std::string prompt = tmpl.render(msgs, true);
    const std::vector<int32_t> ids = model.tokenizer().encode(prompt, false);
    if (int(ids.size()) >= s.n_ctx()) {
      fmt::print(stderr, "ml_run: the conversation ({} tokens) no longer fits in --ctx {}; "
                 "restart with a larger --ctx (the model allows up to {})\n",
                 ids.size(), s.n_ctx(), model.config().max_ctx);
      msgs.pop_back();
      continue;
    }
    const int reused = s.reuse_prefix(ids);
    const double t0 = cli::now_seconds();
    s.eval(std::span<const int32_t>(ids).subspan(reused));
    const double t_prompt = cli::now_seconds() - t0;
    // Qwen3.5's generation prompt opens the think block, so the reply starts with reasoning.
    const bool opened = ThinkFilter::prompt_opens_think(prompt);
    const bool hide = a.think == "hide";
    ThinkFilter filter(opened);
    auto show = [](const std::string& text) {
      std::fwrite(text.data(), 1, text.size(), stdout);
      std::fflush(stdout);
    };
    if (opened && !hide) show("<think>\n");
    std::string reply;
    auto g = generate(s, sampler, go, [&](int32_t, const std::string& text) {
      reply += text;
      show(hide ? filter.push(text) : text);
      return true;
    });
    if (hide) show(filter.flush());
    std::fputc('\n', stdout);
    if (hide && filter.in_think())
      fmt::print(stderr, "ml_run: the reply ended inside its (hidden) think block\n");
    // The whole turn, reasoning included, as the model wrote it: the template decides what of
    // it later prompts keep (Qwen3/3.5 drop the reasoning of turns before the last question).
    msgs.push_back({"assistant", (opened ? "<think>\n" : "") + reply});
    if (g.finish_reason == "context")
      fmt::print(stderr, "ml_run: the context is full ({} tokens); restart with a larger --ctx "
                 "(the model allows up to {})\n", s.n_ctx(), model.config().max_ctx);
    if (a.verbose) print_stats(s, int(ids.size()) - reused, t_prompt, g);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return cli::run_main("ml_run", [&] {
    Args a;
    CLI::App app{"ml_run: run a Krafla model (.mlb)"};
    app.add_option("-m,--model", a.model, "model file (.mlb)")->required();
    app.add_option("-p,--prompt", a.prompt, "prompt text");
    app.add_option("-f,--file", a.prompt_file, "read the prompt from a file (- for stdin)");
    app.add_option("-n,--n-predict", a.n_predict, "tokens to generate (default 128; chat: until the turn ends)");
    cli::add_sampling_options(app, a.sp);
    app.add_option("-t,--threads", a.threads, "threads (default: all cores)");
    app.add_option("--ctx", a.ctx, "context size in tokens (default: the model's, capped at 4096)");
    app.add_option("--batch", a.batch, "prompt tokens per forward step (1..128)")->capture_default_str()->check(CLI::Range(1, 128));
    app.add_option("--chat", a.chat, "interactive chat with a template: auto (the one the model names), llama3, llama2, zephyr, chatml, qwen, qwen3, qwen3-nothink, qwen3.5, qwen3.5-nothink, smollm, smollm3, smollm3-nothink, gemma");
    app.add_option("--system", a.system, "system prompt for --chat");
    app.add_option("--think", a.think, "--chat: show or hide the reply's <think>…</think> reasoning (the history keeps it either way)")->capture_default_str()->check(CLI::IsMember({"show", "hide"}));
    app.add_option("--tokens", a.tokens, "run exactly these token ids (comma-separated) as the prompt");
    app.add_option("--logits", a.logits_out, "with --tokens: write every position's logits to this .npy and exit");
    app.add_flag("-v,--verbose", a.verbose, "print speed after every chat turn");
    cli::add_pack_cache_option(app, a.pack_cache);
    cli::add_version_flag(app, "ml_run");
    if (auto rc = cli::parse(app, argc, argv, "ml_run")) return *rc;
    if (!a.logits_out.empty() && a.tokens.empty()) throw Error("--logits needs --tokens");
    const double t0 = cli::now_seconds();
    auto model = cli::load_model("ml_run", a.model, a.threads, a.pack_cache);
    if (a.verbose)
      fmt::print(stderr, "ml_run: {} ({:.2f} s to load)\n", model->describe(), cli::now_seconds() - t0);
    if (!a.tokens.empty()) {
      if (a.logits_out.empty()) throw Error("--tokens needs --logits OUT.npy");
      return dump_logits(*model, a);
    }
    if (!a.chat.empty()) return chat(*model, a);
    if (a.prompt.empty() && a.prompt_file.empty()) throw Error("give a prompt (-p TEXT or -f FILE) or --chat NAME");
    return complete(*model, a);
  });
}
