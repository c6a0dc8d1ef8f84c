#include "run_chat.h"

#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>

#include "cli_common.h"
#include "interrupt.h"
#include "krafla/chat.h"
#include "krafla/error.h"
#include "krafla/generate.h"
#include "line_editor.h"
#include "stop_filter.h"

namespace krafla::cli {
namespace {

constexpr const char* kHelp =
    "  /help                  this list\n"
    "  /clear                 forget the conversation (the system prompt stays)\n"
    "  /show                  settings and how full the context is\n"
    "  /set temp|top-k|top-p|min-p|repeat-penalty|repeat-last-n|seed VALUE\n"
    "  /set n N               tokens per reply (-1: until the reply ends)\n"
    "  /set system TEXT       replace the system prompt (and forget the conversation)\n"
    "  /set think show|hide   show or hide the <think> reasoning of replies\n"
    "  /bye                   quit (also Ctrl-D, or Ctrl-C at an empty prompt)\n"
    "  \"\"\"                    begin and end a message of several lines\n"
    "  Ctrl-C during a reply stops it; the conversation keeps what was said.\n";

void show(const std::string& text) {
  std::fwrite(text.data(), 1, text.size(), stdout);
  std::fflush(stdout);
}

enum class TurnEnd { kDone, kInterrupted, kRefused };

class Chat {
 public:
  Chat(const Model& model, const SessionOptions& so, ChatOptions opts)
      : model_(model),
        opts_(std::move(opts)),
        tmpl_(chat_template(opts_.template_name)),
        session_(model, so),
        sampler_(opts_.sampling),
        drafting_(opts_.draft, opts_.draft_args, session_, opts_.sampling) {
    if (!opts_.system.empty()) msgs_.push_back({"system", opts_.system});
  }

  int n_ctx() const { return session_.n_ctx(); }

  // One user message and the reply to it, streamed to stdout.
  TurnEnd turn(const std::string& text);

  // A line starting with '/'. Returns false to quit.
  bool command(const std::string& line);

 private:
  // The conversation rendered with the generation prompt, and its tokens.
  struct Prompt {
    std::string text;
    std::vector<int32_t> ids;
  };
  Prompt render() const {
    std::string text = tmpl_.render(msgs_, true);
    std::vector<int32_t> ids = model_.tokenizer().encode(text, false);
    return {std::move(text), std::move(ids)};
  }
  Prompt fit_context();
  bool eval_prompt(std::span<const int32_t> ids);
  void set(const std::string& key, const std::string& value);
  void print_settings() const;

  const Model& model_;
  ChatOptions opts_;
  const ChatTemplate& tmpl_;
  Session session_;
  Sampler sampler_;
  Drafting drafting_;
  std::vector<ChatMessage> msgs_;  // msgs_[0] is the system prompt when there is one
};

// The conversation's tokens, made to fit: when it would leave less than a quarter of the
// context (or -n tokens, if fewer) for the reply, the oldest exchanges after the system
// prompt are dropped until it takes at most half, so that the next turns do not drop again
// at once (llama.cpp's context shift also frees half). Models with linear-attention layers
// then recompute the conversation: their state cannot forget a turn.
Chat::Prompt Chat::fit_context() {
  const int n_ctx = session_.n_ctx();
  Prompt p = render();
  const std::vector<int32_t>& ids = p.ids;  // follows p through the re-renders below
  const int reply_room =
      std::max(1, opts_.n_predict > 0 ? std::min(opts_.n_predict, n_ctx / 4) : n_ctx / 4);
  if (int(ids.size()) + reply_room <= n_ctx) return p;
  const size_t first = (!msgs_.empty() && msgs_[0].role == "system") ? 1 : 0;
  int dropped = 0;
  const size_t before = ids.size();
  while (int(ids.size()) > n_ctx / 2 && msgs_.size() > first + 1) {
    // An exchange: a user message and the replies up to the next user message.
    size_t end = first + 1;
    while (end < msgs_.size() - 1 && msgs_[end].role != "user") ++end;
    msgs_.erase(msgs_.begin() + long(first), msgs_.begin() + long(end));
    ++dropped;
    p = render();
  }
  if (int(ids.size()) + 1 > n_ctx) {
    fmt::print(stderr,
               "ml_run: this message needs {} tokens{} but the context has {}; "
               "send a shorter one or restart with a larger --ctx (the model allows up to {})\n",
               ids.size(), first ? " with the system prompt" : "", n_ctx, model_.config().max_ctx);
    return {};
  }
  if (dropped > 0)
    fmt::print(stderr,
               "ml_run: the context ({} tokens) was full: dropped the {} oldest "
               "exchange{} ({} -> {} tokens){}\n",
               n_ctx, dropped, dropped > 1 ? "s" : "", before, ids.size(),
               first ? ", kept the system prompt" : "");
  return p;
}

// Evaluates the prompt in --batch sized steps so that Ctrl-C is noticed between them.
bool Chat::eval_prompt(std::span<const int32_t> ids) {
  const size_t step = 128;
  for (size_t i = 0; i < ids.size(); i += step) {
    if (interrupted()) return false;
    session_.eval(ids.subspan(i, std::min(step, ids.size() - i)));
  }
  return true;
}

TurnEnd Chat::turn(const std::string& text) {
  msgs_.push_back({"user", text});
  const Prompt prompt = fit_context();
  const std::vector<int32_t>& ids = prompt.ids;
  if (ids.empty()) {
    msgs_.pop_back();
    return TurnEnd::kRefused;
  }
  Busy busy;  // from here Ctrl-C stops the turn instead of the program
  const int reused = session_.reuse_prefix(ids);
  const double t0 = now_seconds();
  if (!eval_prompt(std::span<const int32_t>(ids).subspan(reused))) {
    fmt::print(stderr, "\nml_run: interrupted while reading the prompt; the message is dropped\n");
    msgs_.pop_back();
    return TurnEnd::kInterrupted;
  }
  const double t_prompt = now_seconds() - t0;
  // Qwen3.5's generation prompt opens the think block, so the reply starts with reasoning.
  const bool opened = ThinkFilter::prompt_opens_think(prompt.text);
  ThinkFilter think(opened);
  StopFilter stops(opts_.stops);
  if (opened && !opts_.hide_think) show("<think>\n");
  std::string reply;
  GenerateOptions go;
  go.max_tokens = opts_.n_predict;
  go.lookup = opts_.lookup;
  drafting_.apply(go);
  if (!opts_.ignore_eos) go.stop_ids = stop_ids_for(model_, tmpl_.name);
  auto take = [&](const std::string& piece) {
    reply += piece;
    show(opts_.hide_think ? think.push(piece) : piece);
  };
  const GenerateResult g = generate(session_, sampler_, go, [&](int32_t, const std::string& t) {
    take(stops.push(t));
    return !stops.hit() && !interrupted();
  });
  if (!stops.hit()) take(stops.flush());
  if (opts_.hide_think) show(think.flush());
  std::fputc('\n', stdout);
  std::fflush(stdout);
  const bool cut = interrupted();
  if (cut) fmt::print(stderr, "ml_run: reply interrupted\n");
  if (opts_.hide_think && think.in_think() && !cut)
    fmt::print(stderr, "ml_run: the reply ended inside its (hidden) think block\n");
  // The whole turn, reasoning included, as the model wrote it: the template decides what of it
  // later prompts keep (Qwen3/3.5 drop the reasoning of turns before the last question).
  msgs_.push_back({"assistant", (opened ? "<think>\n" : "") + reply});
  if (g.finish_reason == "context")
    fmt::print(stderr,
               "ml_run: the context ({} tokens) is full: the reply was cut; the oldest "
               "exchanges make room for the next turn\n",
               session_.n_ctx());
  if (opts_.verbose)
    fmt::print(stderr,
               "prompt: {} tokens ({} cached) in {:.2f} s ({:.1f} tok/s); generated: "
               "{} tokens in {:.2f} s ({:.1f} tok/s); {} threads\n",
               ids.size() - reused, reused, t_prompt,
               t_prompt > 0 ? (ids.size() - reused) / t_prompt : 0.0, g.n_tokens, g.seconds,
               g.seconds > 0 ? g.n_tokens / g.seconds : 0.0, session_.n_threads());
  if (const std::string line = speculative_line(g); opts_.verbose && !line.empty())
    fmt::print(stderr, "{}\n", line);
  return cut ? TurnEnd::kInterrupted : TurnEnd::kDone;
}

// /set KEY VALUE for a sampling option goes through the command line's own options, so the
// chat accepts exactly the values and ranges that ml_run's flags accept.
void Chat::set(const std::string& key, const std::string& value) {
  if (key == "system") {
    opts_.system = value;
    msgs_.clear();
    if (!value.empty()) msgs_.push_back({"system", value});
    fmt::print(stderr, "system prompt set; conversation cleared\n");
    return;
  }
  if (key == "think") {
    if (value != "show" && value != "hide") throw Error("/set think: show or hide");
    opts_.hide_think = value == "hide";
    return;
  }
  CLI::App app{"/set"};
  SamplerParams p = opts_.sampling;
  add_sampling_options(app, p);
  p.seed = opts_.sampling.seed;
  int n = opts_.n_predict;
  app.add_option("--n", n)->check(CLI::Range(-1, 1 << 30));
  if (!app.get_option_no_throw("--" + key))
    throw Error(fmt::format("/set: unknown setting '{}'; /help lists them", key));
  std::vector<std::string> args = {value, "--" + key};  // CLI11 parses a reversed vector
  try {
    app.parse(args);
  } catch (const CLI::ParseError& e) {
    throw Error(fmt::format("/set {}: {}", key, e.what()));
  }
  opts_.sampling = p;
  opts_.n_predict = n;
  sampler_ = Sampler(p);
}

void Chat::print_settings() const {
  const SamplerParams& p = opts_.sampling;
  fmt::print(stderr,
             "template {}; context {} of {} tokens used\ntemp {} top-k {} top-p {} min-p {} "
             "repeat-penalty {} repeat-last-n {} seed {}; n {}; think {}\nsystem: {}\n",
             tmpl_.name, session_.n_past(), session_.n_ctx(), p.temperature, p.top_k, p.top_p,
             p.min_p, p.repeat_penalty, p.repeat_last_n, p.seed, opts_.n_predict,
             opts_.hide_think ? "hide" : "show", opts_.system.empty() ? "(none)" : opts_.system);
}

bool Chat::command(const std::string& line) {
  const size_t sp = line.find(' ');
  const std::string cmd = line.substr(0, sp);
  std::string rest = sp == std::string::npos ? "" : line.substr(sp + 1);
  if (cmd == "/bye" || cmd == "/exit" || cmd == "/quit") return false;
  if (cmd == "/help" || cmd == "/?") {
    fmt::print(stderr, "{}", kHelp);
  } else if (cmd == "/clear") {
    msgs_.erase(std::remove_if(msgs_.begin(), msgs_.end(),
                               [](const ChatMessage& m) { return m.role != "system"; }),
                msgs_.end());
    fmt::print(stderr, "conversation cleared\n");
  } else if (cmd == "/show") {
    print_settings();
  } else if (cmd == "/set") {
    const size_t k = rest.find(' ');
    if (rest.empty() || k == std::string::npos) {
      fmt::print(stderr, "usage: /set KEY VALUE (/help lists the keys)\n");
      return true;
    }
    try {
      set(rest.substr(0, k), rest.substr(k + 1));
    } catch (const Error& e) {
      fmt::print(stderr, "ml_run: {}\n", e.what());
    }
  } else {
    fmt::print(stderr, "ml_run: unknown command {}; /help lists them\n", cmd);
  }
  return true;
}

// A message: one line, or the lines from one starting with """ to the next that ends with """.
// Ctrl-C inside such a block drops the block (out is then non-empty, so it does not quit).
LineEditor::Result read_message(LineEditor& ed, std::string& out) {
  constexpr std::string_view kQuotes = "\"\"\"";
  std::string line;
  LineEditor::Result r = ed.read("> ", line);
  out = line;
  if (r != LineEditor::Result::kLine || !line.starts_with(kQuotes)) return r;
  std::vector<std::string> lines;
  if (line.size() > kQuotes.size()) lines.push_back(line.substr(kQuotes.size()));
  while (lines.empty() || lines.back().size() < kQuotes.size() ||
         !lines.back().ends_with(kQuotes)) {
    r = ed.read("... ", line);
    if (r != LineEditor::Result::kLine) return r;
    lines.push_back(line);
  }
  lines.back().resize(lines.back().size() - kQuotes.size());
  out.clear();
  for (size_t i = 0; i < lines.size(); ++i) out += (i ? "\n" : "") + lines[i];
  return LineEditor::Result::kLine;
}

}  // namespace

int chat_interactive(const Model& model, const SessionOptions& so, ChatOptions opts) {
  LineEditor editor(opts.history_path);
  Chat chat(model, so, std::move(opts));
  if (editor.interactive())
    fmt::print(stderr, "ml_run: type a message; /help for commands, Ctrl-D or /bye to quit\n");
  std::string text;
  for (;;) {
    const LineEditor::Result r = read_message(editor, text);
    if (r == LineEditor::Result::kEof) break;
    if (r == LineEditor::Result::kInterrupt) {
      if (text.empty()) return kExitInterrupted;  // Ctrl-C at an empty prompt quits
      continue;                                   // else it only cleared the line
    }
    if (text.find_first_not_of(" \t") == std::string::npos) continue;
    const bool one_line = text.find('\n') == std::string::npos;
    if (one_line) editor.add_history(text);
    if (text[0] == '/' && one_line) {
      if (!chat.command(text)) break;
      continue;
    }
    chat.turn(text);
  }
  return 0;
}

int chat_once(const Model& model, const SessionOptions& so, ChatOptions opts,
              const std::string& text) {
  Chat chat(model, so, std::move(opts));
  switch (chat.turn(text)) {
    case TurnEnd::kDone:
      return 0;
    case TurnEnd::kInterrupted:
      return kExitInterrupted;
    case TurnEnd::kRefused:
      break;
  }
  return kExitBadInput;
}

}  // namespace krafla::cli
