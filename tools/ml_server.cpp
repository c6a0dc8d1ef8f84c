// ml_server: an OpenAI-compatible HTTP server (chat and text completions, SSE streaming) over
// one model. The work is in tools/server/; this file parses arguments and owns the process:
// loading, binding, and the shutdown on Ctrl-C or SIGTERM (server/stop_signal.h).
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <string>
#include <thread>

#include "cli_common.h"
#include "draft.h"
#include "krafla/error.h"
#include "krafla/model.h"
#include "krafla/path.h"
#include "server/engine.h"
#include "server/http_server.h"
#include "server/stop_signal.h"

using namespace krafla;

namespace {

struct Args {
  std::string model, chat, alias, pack_cache;
  server::HttpOptions http;
  int threads = 0, ctx = 0, batch = 128, parallel = 4;
  KvType kv = KvType::F32;
  server::EngineOptions engine;
  cli::DraftArgs draft;
};

int serve(const Args& a) {
  const double t0 = cli::now_seconds();
  auto model = cli::load_model("ml_server", a.model, a.threads, a.pack_cache);
  const auto draft = cli::load_draft("ml_server", a.draft, *model, a.threads, a.pack_cache);
  server::EngineOptions eo = a.engine;
  eo.draft_model = draft.get();
  eo.draft_max = a.draft.n_draft;
  eo.draft_p_min = a.draft.p_min;
  const std::string id = a.alias.empty() ? utf8_string(fs_path(a.model).stem()) : a.alias;
  server::Engine engine(*model, {a.threads, a.ctx, a.batch, a.kv, a.parallel}, id, a.chat, eo);
  server::HttpServer http(engine, a.http);
  const int port = http.bind();
  fmt::print(stderr,
             "ml_server: {} loaded in {:.2f} s; {} slots of {} tokens (KV cache up to {:.0f} MiB, "
             "used as filled); chat template {}\n",
             model->describe(), cli::now_seconds() - t0, engine.n_slots(), engine.n_ctx(),
             double(engine.kv_bytes()) / (1 << 20),
             engine.chat_name().empty() ? "none" : engine.chat_name());
  const SamplerParams& d = a.http.defaults.sampler;
  fmt::print(stderr,
             "ml_server: sampling defaults: temperature {} top_k {} top_p {} min_p {} "
             "repeat_penalty {} repeat_last_n {} seed {}\n",
             d.temperature, d.top_k, d.top_p, d.min_p, d.repeat_penalty, d.repeat_last_n,
             a.http.defaults.seed ? std::to_string(*a.http.defaults.seed) : "random");
  if (engine.speculative() == "lookup")
    fmt::print(stderr, "ml_server: speculative decoding by prompt lookup, up to {} tokens\n",
               eo.lookup);
  else if (engine.speculative() == "draft")
    fmt::print(stderr,
               "ml_server: speculative decoding with the draft model {} ({}), up to {} tokens, "
               "p-min {}\n",
               a.draft.path, draft->describe(), eo.draft_max, eo.draft_p_min);
  fmt::print(stderr, "ml_server: serving model '{}' on http://{}:{}{}\n", id, a.http.host, port,
             a.http.api_key.empty() ? "" : " (API key required)");

  std::atomic<bool> listen_returned{false};
  bool ok = false;
  {
    server::StopSignal stop_signal([&] {
      fmt::print(stderr, "ml_server: shutting down\n");
      // A signal that came during loading must not reach stop() before listen() runs, or it
      // would be lost.
      while (!http.running() && !listen_returned)
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
      http.stop();
    });
    ok = http.listen();
    listen_returned = true;
    // listen() also returns when the server fails: stop_signal's end stops its wait.
  }
  if (!ok) throw Error("the HTTP server stopped unexpectedly");
  fmt::print(stderr, "ml_server: stopped\n");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  server::prepare_stop_signals();
  return cli::run_main("ml_server", [&] {
    Args a;
    CLI::App app{"ml_server: OpenAI-compatible HTTP server for a Krafla model (.mlb)"};
    app.add_option("-m,--model", a.model, "model file (.mlb)")->required();
    app.add_option("--host", a.http.host, "address to listen on")->capture_default_str();
    app.add_option("--port", a.http.port, "TCP port (0: any free port)")
        ->capture_default_str()
        ->check(CLI::Range(0, 65535));
    app.add_option("--chat", a.chat, "chat template (default: the model's own)");
    app.add_option("--alias", a.alias, "model name clients use (default: the file name stem)");
    app.add_option("--api-key", a.http.api_key, "require 'Authorization: Bearer KEY'")
        ->envname("KRAFLA_API_KEY");
    app.add_option("--cors", a.http.cors_origin, "allow browser requests from this origin (or *)");
    cli::add_threads_option(app, a.threads);
    cli::add_kv_option(app, a.kv);
    app.add_option("-c,--ctx", a.ctx,
                   "context size in tokens (default: the model's, capped at 4096)")
        ->check(CLI::NonNegativeNumber);
    app.add_option("-b,--batch", a.batch, "prompt tokens per forward step (1..128)")
        ->capture_default_str()
        ->check(CLI::Range(1, 128));
    app.add_option("--parallel", a.parallel,
                   "requests decoded together, each in its own slot of --ctx tokens")
        ->capture_default_str()
        ->check(CLI::Range(1, 256));
    app.add_option("--timeout", a.engine.timeout,
                   "seconds a request may take, queueing included (0: no limit)")
        ->capture_default_str()
        ->check(CLI::NonNegativeNumber);
    app.add_option("--lookup", a.engine.lookup,
                   "speculative decoding by prompt lookup: draft up to N tokens that followed the "
                   "context's last words where they stood before, checked in the same step (the "
                   "same text, faster when the reply repeats the prompt; not for Qwen3.5 or "
                   "response_format; 0: off)")
        ->capture_default_str()
        ->check(CLI::Range(0, 64));
    cli::add_draft_options(app, a.draft);
    app.get_option("--lookup")->excludes("--draft");
    app.add_option("--max-body", a.http.max_body, "largest request body in bytes")
        ->capture_default_str()
        ->check(CLI::Range(size_t(1024), size_t(1) << 30));
    app.add_option("--http-threads", a.http.http_threads,
                   "connections served at once (a thread each, started as needed)")
        ->capture_default_str()
        ->check(CLI::Range(2, 65536));
    // The sampling defaults for fields a request leaves out; OpenAI's unless given here.
    a.http.defaults.sampler = server::openai_sampler_defaults();
    cli::add_sampling_options(app, a.http.defaults.sampler);
    bool quiet = false;
    app.add_flag("-q,--quiet", quiet, "do not log requests");
    cli::add_pack_cache_option(app, a.pack_cache);
    if (auto rc = cli::parse(app, argc, argv, "ml_server")) return *rc;
    a.http.log_requests = !quiet;
    if (app.count("--seed")) a.http.defaults.seed = a.http.defaults.sampler.seed;
    return serve(a);
  });
}
