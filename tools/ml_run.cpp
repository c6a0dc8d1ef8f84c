// ml_run: generate text from a prompt, chat interactively, or dump logits for tests.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <CLI/CLI.hpp>
#include <cstdlib>
#include <filesystem>

#include "cli_common.h"
#include "draft.h"
#include "interrupt.h"
#include "krafla/chat.h"
#include "krafla/error.h"
#include "krafla/generate.h"
#include "krafla/imatrix.h"
#include "krafla/model.h"
#include "krafla/path.h"
#include "krafla/sampler.h"
#include "krafla/session.h"
#include "model_info.h"
#include "run_chat.h"
#include "run_perplexity.h"
#include "stop_filter.h"

using namespace krafla;

namespace {

struct Args {
  std::string model, prompt, prompt_file, tokens, logits_out, chat, system, think = "show";
  int n_predict = -1, threads = 0, ctx = 0, batch = 128, lookup = 0, delta_chunk = 0;
  SamplerParams sp;
  std::vector<std::string> stops;
  bool verbose = false, quiet = false, ignore_eos = false, no_display_prompt = false;
  std::string pack_cache, history, info;
  std::string imatrix_path;
  KvType kv = KvType::F32;
  Imatrix* imatrix = nullptr;  // with --imatrix: what this run adds to
  bool json = false, profile = false;
  cli::PerplexityArgs ppl;
  cli::DraftArgs draft;
  const Model* draft_model = nullptr;  // loaded from draft.path
};

void print_stats(const Session& s, int n_prompt, double t_prompt, const GenerateResult& g) {
  fmt::print(stderr,
             "\nprompt: {} tokens in {:.2f} s ({:.1f} tok/s); generated: {} tokens in "
             "{:.2f} s ({:.1f} tok/s); {} threads\n",
             n_prompt, t_prompt, t_prompt > 0 ? n_prompt / t_prompt : 0.0, g.n_tokens, g.seconds,
             g.seconds > 0 ? g.n_tokens / g.seconds : 0.0, s.n_threads());
  if (const std::string line = cli::speculative_line(g); !line.empty())
    fmt::print(stderr, "{}\n", line);
}

// The session of a -p/-f run and of a chat.
SessionOptions session_options(const Args& a) {
  return {.n_threads = a.threads,
          .n_ctx = a.ctx,
          .n_batch = a.batch,
          .kv_type = a.kv,
          .delta_chunk = a.delta_chunk};
}

int dump_logits(const Model& model, const Args& a) {
  const std::vector<int32_t> ids = cli::parse_ids(a.tokens);
  if (ids.empty()) throw Error("--tokens: no token ids given");
  SessionOptions so = session_options(a);  // --kv and --delta-chunk included
  if (so.n_ctx <= 0) so.n_ctx = std::max<int>(int(ids.size()), 1);
  if (so.n_ctx > model.config().max_ctx) so.n_ctx = model.config().max_ctx;
  Session s(model, so);
  std::vector<float> logits;
  s.eval(ids, &logits);
  cli::write_npy(a.logits_out, logits.data(), {int64_t(ids.size()), model.config().n_vocab});
  fmt::print(stderr, "ml_run: wrote logits [{}, {}] to {}\n", ids.size(), model.config().n_vocab,
             a.logits_out);
  return 0;
}

std::string prompt_text(const Args& a) {
  return a.prompt_file.empty() ? a.prompt : cli::read_file_or_stdin(a.prompt_file);
}

// One-shot completion: the prompt, then up to -n tokens. Ctrl-C stops the generation, prints
// the speed line and exits 130.
int complete(const Model& model, const Args& a) {
  const std::string prompt = prompt_text(a);
  std::vector<int32_t> ids = model.tokenizer().encode(prompt, true);
  if (ids.empty()) throw Error("the prompt is empty (give -p TEXT)");
  Session s(model, session_options(a));
  if (int(ids.size()) >= s.n_ctx())
    throw Error(fmt::format("the prompt has {} tokens but --ctx is {}; raise --ctx (up to {})",
                            ids.size(), s.n_ctx(), model.config().max_ctx));
  if (!a.no_display_prompt) std::fwrite(prompt.data(), 1, prompt.size(), stdout);
  cli::Busy busy;
  Profile prof;
  if (a.profile) s.set_profile(&prof);
  s.set_imatrix(a.imatrix);
  const double t0 = cli::now_seconds();
  s.eval(ids);
  const double t_prompt = cli::now_seconds() - t0;
  Sampler sampler(a.sp);
  if (a.lookup > 0 && model.config().has_linear())
    fmt::print(stderr,
               "ml_run: --lookup is off for this model: its DeltaNet state cannot be cut "
               "back past a rejected draft\n");
  GenerateOptions go;
  go.max_tokens = a.n_predict;
  go.lookup = a.lookup;
  cli::Drafting drafting(a.draft_model, a.draft, s, a.sp);
  drafting.apply(go);
  if (!a.ignore_eos) go.stop_ids = stop_ids_for(model, "");
  cli::StopFilter stops(a.stops);
  auto show = [](const std::string& text) {
    std::fwrite(text.data(), 1, text.size(), stdout);
    std::fflush(stdout);
  };
  GenerateResult g;
  if (!cli::interrupted())
    g = generate(s, sampler, go, [&](int32_t, const std::string& text) {
      show(stops.push(text));
      return !stops.hit() && !cli::interrupted();
    });
  if (!stops.hit()) show(stops.flush());
  std::fputc('\n', stdout);
  if (g.finish_reason == "context")
    fmt::print(stderr, "ml_run: the context (--ctx {}) is full; the model allows up to {}\n",
               s.n_ctx(), model.config().max_ctx);
  print_stats(s, int(ids.size()), t_prompt, g);
  if (a.profile) fmt::print(stderr, "\n{}", prof.table(t_prompt + g.seconds));
  return cli::interrupted() ? cli::kExitInterrupted : 0;
}

// After a run with --imatrix: write the accumulated statistics (also after Ctrl-C: what was
// evaluated is valid data).
int save_imatrix(const Args& a, int rc) {
  if (!a.imatrix) return rc;
  a.imatrix->save(a.imatrix_path);
  fmt::print(stderr, "ml_run: imatrix of {} matrices, {} tokens in all, written to {}\n",
             a.imatrix->entries().size(), a.imatrix->tokens(), a.imatrix_path);
  return rc;
}

cli::ChatOptions chat_options(const Model& model, const Args& a) {
  cli::ChatOptions o;
  o.template_name = a.chat == "auto" ? model.config().chat_template : a.chat;
  if (o.template_name.empty())
    throw Error("the model names no chat template; pick one with --chat NAME");
  chat_template(o.template_name);  // an unknown name is refused before anything else
  o.system = a.system;
  o.hide_think = a.think == "hide";
  o.n_predict = a.n_predict;
  o.sampling = a.sp;
  o.stops = a.stops;
  o.ignore_eos = a.ignore_eos;
  o.lookup = a.lookup;
  o.draft = a.draft_model;
  o.draft_args = a.draft;
  o.verbose = a.verbose;
  o.history_path = a.history;
  return o;
}

std::string default_history_path() {
  const char* home = std::getenv("HOME");
  if (!home || !*home) home = std::getenv("USERPROFILE");  // Windows
  return home && *home ? std::string(home) + "/.krafla_history" : "";
}

}  // namespace

int main(int argc, char** argv) {
  cli::install_interrupt_handler();
  return cli::run_main("ml_run", [&] {
    Args a;
    a.history = default_history_path();
    CLI::App app{"ml_run: run a Krafla model (.mlb): complete a prompt, or chat"};
    auto* info = app.add_option(
        "--info", a.info, "print a model file's format, config, tokenizer and tensors, and exit");
    app.add_flag("--json", a.json, "with --info or --perplexity: as JSON");
    app.add_option("-m,--model", a.model, "model file (.mlb)")->excludes(info);
    auto* prompt = app.add_option("-p,--prompt", a.prompt,
                                  "prompt text (with --chat: one message, one reply)");
    auto* file =
        app.add_option("-f,--file", a.prompt_file, "read the prompt from a file (- for stdin)")
            ->excludes(prompt);
    app.add_option("-n,--n-predict", a.n_predict,
                   "tokens to generate (-1: until the end of the text or a full context)")
        ->capture_default_str()
        ->check(CLI::Range(-1, 1 << 30));
    cli::add_sampling_options(app, a.sp);
    cli::add_threads_option(app, a.threads);
    app.add_option("-c,--ctx", a.ctx,
                   "context size in tokens (default: the model's, capped at 4096)")
        ->check(CLI::Range(0, 1 << 24));
    app.add_option("--lookup", a.lookup,
                   "speculative decoding by prompt lookup: draft up to N tokens that followed the "
                   "context's last words where they stood before, checked in one pass (the same "
                   "text, faster when it repeats; not for Qwen3.5; 0: off)")
        ->capture_default_str()
        ->check(CLI::Range(0, 64));
    cli::add_draft_options(app, a.draft);
    app.get_option("--lookup")->excludes("--draft");
    app.add_option("-b,--batch", a.batch, "prompt tokens per forward step (1..128)")
        ->capture_default_str()
        ->check(CLI::Range(1, 128));
    cli::add_delta_chunk_option(app, a.delta_chunk);
    auto* chat =
        app.add_option("--chat", a.chat,
                       fmt::format("chat with a template: auto (the one the model names), {}",
                                   fmt::join(chat_template_names(), ", ")));
    app.add_option("--system", a.system, "system prompt (with --chat)")->needs(chat);
    app.add_option("--think", a.think,
                   "--chat: show or hide the reply's <think>…</think> reasoning (the history keeps "
                   "it either way)")
        ->capture_default_str()
        ->check(CLI::IsMember({"show", "hide"}))
        ->needs(chat);
    app.add_option("-r,--reverse-prompt,--stop", a.stops,
                   "stop generating at this text (repeatable)");
    app.add_flag("--ignore-eos", a.ignore_eos, "keep generating past the end-of-text token");
    app.add_flag("--no-display-prompt", a.no_display_prompt, "do not echo the prompt");
    app.add_option("--history", a.history, "--chat: the line-editing history file (\"\" for none)")
        ->capture_default_str();
    auto* tokens = app.add_option("--tokens", a.tokens,
                                  "run exactly these token ids (comma-separated) as the prompt")
                       ->excludes(prompt)
                       ->excludes(file)
                       ->excludes(chat);
    app.add_option("--logits", a.logits_out,
                   "with --tokens: write every position's logits to this .npy and exit")
        ->needs(tokens);
    auto* ppl = app.add_option("--perplexity", a.ppl.text_path,
                               "score this text's perplexity in chunks of --ctx tokens (default "
                               "512) and exit")
                    ->excludes(prompt)
                    ->excludes(file)
                    ->excludes(chat)
                    ->excludes(tokens);
    app.add_option("--ppl-scoring", a.ppl.scoring,
                   "--perplexity: all (every prediction of a chunk) or llama (the second half "
                   "of each chunk, as llama-perplexity scores)")
        ->capture_default_str()
        ->check(CLI::IsMember({"all", "llama"}))
        ->needs(ppl);
    app.add_option("--chunks", a.ppl.chunks, "--perplexity: score at most this many chunks")
        ->check(CLI::Range(1, 1 << 30))
        ->needs(ppl);
    auto* kl_base = app.add_option("--kl-divergence-base", a.ppl.kl_base,
                                   "--perplexity: write this model's log-probabilities to FILE "
                                   "(or, with --kl-divergence, compare with FILE)")
                        ->needs(ppl);
    app.add_flag("--kl-divergence", a.ppl.kl,
                 "--perplexity: KL divergence to the base file's model, top-1 agreement")
        ->needs(kl_base);
    cli::add_kv_option(app, a.kv);
    app.add_option("--imatrix", a.imatrix_path,
                   "add every weight matrix's input statistics of a -p/-f run or --perplexity "
                   "to FILE (created, or accumulated when it exists) for tools/convert.py "
                   "--imatrix")
        ->excludes(chat);
    app.add_flag("--profile", a.profile,
                 "print where the time went (per step of the forward pass, and sampling) after "
                 "a -p/-f run or --perplexity")
        ->excludes(chat);
    app.add_flag("-v,--verbose", a.verbose, "print the seed, and the speed after every chat turn");
    app.add_flag("-q,--quiet", a.quiet, "do not print which model was loaded");
    cli::add_pack_cache_option(app, a.pack_cache);
    if (auto rc = cli::parse(app, argc, argv, "ml_run")) return *rc;
    if (!a.info.empty()) return cli::print_model_info(a.info, a.json);
    if (a.model.empty()) throw Error("--model is required (or --info FILE)");
    if (!a.tokens.empty() && a.logits_out.empty()) throw Error("--tokens needs --logits OUT.npy");
    if (a.json && a.info.empty() && a.ppl.text_path.empty())
      throw Error("--json goes with --info or --perplexity");
    if (a.chat.empty() && a.prompt.empty() && a.prompt_file.empty() && a.tokens.empty() &&
        a.ppl.text_path.empty())
      throw Error("give a prompt (-p TEXT or -f FILE), --chat NAME or --perplexity FILE");
    if (!a.chat.empty() && a.chat != "auto")
      chat_template(a.chat);  // refuse a bad name before loading
    // Read the prompt before the (slow) load, so a bad -f fails at once.
    if (!a.prompt_file.empty()) {
      a.prompt = cli::read_file_or_stdin(a.prompt_file);
      a.prompt_file.clear();
    }
    if (!a.ppl.text_path.empty()) a.ppl.text = cli::read_file_or_stdin(a.ppl.text_path);
    Imatrix imatrix;  // read before the load too: a bad file fails at once
    if (!a.imatrix_path.empty()) {
      if (!a.tokens.empty()) throw Error("--imatrix goes with -p, -f or --perplexity");
      if (std::filesystem::exists(fs_path(a.imatrix_path))) imatrix.merge_file(a.imatrix_path);
      a.imatrix = &imatrix;
    }
    const double t0 = cli::now_seconds();
    auto model = cli::load_model("ml_run", a.model, a.threads, a.pack_cache);
    if (!a.quiet)
      fmt::print(stderr, "ml_run: loaded {} in {:.2f} s: {}\n", a.model, cli::now_seconds() - t0,
                 model->describe());
    const auto draft = cli::load_draft("ml_run", a.draft, *model, a.threads, a.pack_cache);
    a.draft_model = draft.get();
    if (draft && !a.quiet)
      fmt::print(stderr, "ml_run: draft model {}: {}\n", a.draft.path, draft->describe());
    if (a.verbose) fmt::print(stderr, "ml_run: seed {}\n", a.sp.seed);
    if (!a.tokens.empty()) return dump_logits(*model, a);
    if (!a.ppl.text_path.empty()) {
      a.ppl.n_ctx = a.ctx, a.ppl.n_threads = a.threads, a.ppl.n_batch = a.batch,
      a.ppl.json = a.json, a.ppl.profile = a.profile, a.ppl.imatrix = a.imatrix, a.ppl.kv = a.kv;
      a.ppl.delta_chunk = a.delta_chunk;
      return save_imatrix(a, cli::run_perplexity(*model, a.ppl));
    }
    if (a.chat.empty()) return save_imatrix(a, complete(*model, a));
    const cli::ChatOptions co = chat_options(*model, a);
    const SessionOptions so = session_options(a);
    if (!a.quiet)
      fmt::print(stderr, "ml_run: chat with the {} template; context {} tokens\n", co.template_name,
                 so.n_ctx > 0 ? so.n_ctx : std::min(model->config().max_ctx, 4096));
    if (!a.prompt.empty()) return cli::chat_once(*model, so, co, a.prompt);
    return cli::chat_interactive(*model, so, co);
  });
}
