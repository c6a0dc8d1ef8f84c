#include "server/http_server.h"

#include <fmt/format.h>
#include <httplib.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <ctime>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#ifdef __GLIBC__
#include <malloc.h>  // malloc_trim
#endif

#include "krafla/error.h"
#include "server/client_socket.h"
#include "server/metrics.h"
#include "server/openai.h"
#include "server/reply.h"

namespace krafla::server {
namespace {

using httplib::Request;
using httplib::Response;

// httplib hands each accepted connection to its task queue, and the task holds a thread for the
// connection's whole life: reading the headers, a request waiting for a slot, a stream. With a
// fixed pool of N threads, N slow or idle clients (slow-loris, a thousand open connections)
// kept every other request, /health included, waiting. This queue starts a thread for each
// connection that finds no idle one, up to `max_threads` (only beyond that do connections
// wait), and a thread idle for a few seconds ends, so the pool shrinks back after a burst.
class ElasticPool final : public httplib::TaskQueue {
 public:
  explicit ElasticPool(size_t max_threads) : max_(max_threads) {}
  ~ElasticPool() override { shutdown(); }

  void enqueue(std::function<void()> fn) override {
    std::lock_guard lk(mu_);
    jobs_.push_back(std::move(fn));
    if (idle_ >= jobs_.size()) {
      work_.notify_one();  // an idle thread for every waiting connection
    } else if (threads_ < max_) {
      ++threads_;
      std::thread([this] { run(); }).detach();
    }
  }

  void shutdown() override {
    std::unique_lock lk(mu_);
    stop_ = true;
    work_.notify_all();
    done_.wait(lk, [&] { return threads_ == 0; });
  }

 private:
  void run() {
    std::unique_lock lk(mu_);
    for (;;) {
      ++idle_;
      work_.wait_for(lk, std::chrono::seconds(5), [&] { return stop_ || !jobs_.empty(); });
      --idle_;
      if (jobs_.empty()) break;  // idle for 5 s, or stopping
      auto fn = std::move(jobs_.front());
      jobs_.pop_front();
      lk.unlock();
      fn();
      lk.lock();
    }
    const bool last = --threads_ == 0;
    if (last) done_.notify_all();
#ifdef __GLIBC__
    // A burst's memory (request bodies, JSON trees, the threads' malloc arenas) is free once
    // the last connection thread ends, but glibc keeps it mapped: give it back then, so the
    // resident size returns to what it was before the burst.
    if (last && !stop_) {
      lk.unlock();
      malloc_trim(0);
    }
#endif
  }

  const size_t max_;
  std::mutex mu_;
  std::condition_variable work_, done_;
  std::deque<std::function<void()>> jobs_;
  size_t threads_ = 0, idle_ = 0;
  bool stop_ = false;
};

void send_json(Response& res, const Json& j, int status = 200) {
  res.status = status;
  res.set_content(dump(j), "application/json");
}

// The body httplib's own refusals (unknown route, oversized body, unparsable request) get, so
// that every 4xx carries an OpenAI error object.
ApiError status_error(int status, const Request& req, size_t max_body) {
  switch (status) {
    case 404:
      return ApiError(404, fmt::format("Unknown request URL: {} {}.", req.method, req.path),
                      "invalid_request_error", "", "unknown_url");
    case 413:
      return ApiError(413,
                      fmt::format("The request body is larger than {} bytes (ml_server "
                                  "--max-body).",
                                  max_body),
                      "invalid_request_error", "", "request_too_large");
    case 400:
      return ApiError::invalid("The HTTP request is malformed.", "", "bad_request");
    default:
      return ApiError(status, fmt::format("HTTP error {}.", status),
                      status >= 500 ? "server_error" : "invalid_request_error");
  }
}

// Compares in time independent of where the strings differ, so response timing does not leak
// how much of a guessed key was right.
bool same_key(const std::string& a, const std::string& b) {
  unsigned char diff = a.size() != b.size();
  for (size_t i = 0; i < a.size(); ++i) diff |= uint8_t(a[i]) ^ uint8_t(i < b.size() ? b[i] : 0);
  return diff == 0;
}

void check_api_key(const Request& req, const std::string& key) {
  if (key.empty()) return;
  const std::string auth = req.get_header_value("Authorization");
  constexpr std::string_view kBearer = "Bearer ";
  if (auth.empty())
    throw ApiError(401, "You didn't provide an API key. Send it as 'Authorization: Bearer KEY'.",
                   "invalid_request_error", "", "invalid_api_key");
  if (auth.compare(0, kBearer.size(), kBearer) != 0 || !same_key(auth.substr(kBearer.size()), key))
    throw ApiError(401, "Incorrect API key provided.", "invalid_request_error", "",
                   "invalid_api_key");
}

void log_run(const std::string& method, const std::string& path, bool stream,
             const std::vector<RunResult>& rs) {
  for (const RunResult& r : rs)
    fmt::print(stderr,
               "ml_server: {} {}{}: prompt {} tokens ({} cached), {} generated, {}, "
               "{:.3f} s (+{:.3f} s queued)\n",
               method, path, stream ? " (stream)" : "", r.usage.prompt_tokens,
               r.usage.cached_tokens, r.usage.completion_tokens, r.finish_reason, r.seconds,
               r.queued);
}

// Keeps each log line one line, whatever the client sent (paths and messages quote it).
std::string one_line(std::string s) {
  for (char& c : s)
    if (uint8_t(c) < 0x20 || c == 0x7f) c = ' ';  // also keeps terminal escapes out of the log
  size_t cut = 300;
  if (s.size() <= cut) return s;
  while (cut > 0 && (uint8_t(s[cut]) & 0xC0) == 0x80) --cut;  // not inside a UTF-8 character
  return s.substr(0, cut) + "…";
}

void log_error(const std::string& method, const std::string& path, int status,
               const std::string& message) {
  fmt::print(stderr, "ml_server: {} {} -> {}: {}\n", method, one_line(path), status,
             one_line(message));
}

ApiError shutdown_error(const RunResult& rr) {
  return ApiError(503,
                  fmt::format("The server is shutting down; the reply was cut after {} tokens.",
                              rr.usage.completion_tokens),
                  "server_error");
}

// The usage of all choices: the prompt once, every choice's tokens.
Usage total_usage(const std::vector<RunResult>& rs) {
  Usage u = rs.at(0).usage;
  u.completion_tokens = 0;
  for (const RunResult& r : rs) u.completion_tokens += r.usage.completion_tokens;
  return u;
}

// The first result that ended the whole request (cancelled or shutdown), if any.
const RunResult* cut_short(const std::vector<RunResult>& rs) {
  for (const RunResult& r : rs)
    if (r.finish_reason == "cancelled" || r.finish_reason == "shutdown") return &r;
  return nullptr;
}

// The socket of the connection `req` arrived on, or kNoSocket (client_socket.h).
ClientSocket request_socket(const Request& req) {
  return client_socket(req.remote_addr, req.remote_port, req.local_port);
}

// One streamed request: everything the content provider needs after the handler returned.
struct StreamJob {
  CompletionRequest request;
  Prepared prompt;
  ResponseMeta meta;
  std::string method, path;
  bool log = true;
  ClientSocket socket = kNoSocket;  // the client's connection (request_socket)
};

}  // namespace

HttpServer::HttpServer(Engine& engine, HttpOptions opts)
    : engine_(engine),
      opts_(std::move(opts)),
      svr_(std::make_unique<httplib::Server>()),
      created_(int64_t(std::time(nullptr))) {
  const int n = std::max(opts_.http_threads, 2);
  svr_->new_task_queue = [n] { return new ElasticPool(size_t(n)); };
  svr_->set_payload_max_length(opts_.max_body);
  svr_->set_keep_alive_max_count(1000);
  // httplib waits out an idle keep-alive connection before stop() returns; a short timeout
  // keeps Ctrl-C prompt (clients simply reconnect).
  svr_->set_keep_alive_timeout(2);
  // One listener per port, never httplib's SO_REUSEPORT (client_socket.h says why).
  svr_->set_socket_options([this](socket_t sock) {
    set_listen_options(ClientSocket(sock));
    listener_ = ClientSocket(sock);  // the last one offered is the one that bound
  });
  routes();
}

HttpServer::~HttpServer() = default;

int HttpServer::bind() {
  int port = opts_.port;
  clear_socket_error();
  if (port == 0)
    port = svr_->bind_to_any_port(opts_.host);
  else if (!svr_->bind_to_port(opts_.host, port))
    port = -1;
  if (port <= 0) {
    const std::string err = socket_error_text();
    throw Error(fmt::format("cannot listen on {}:{}: {}", opts_.host, opts_.port,
                            err.empty() ? "not an address of this machine?" : err));
  }
  widen_backlog(listener_);
  return port;
}

bool HttpServer::listen() { return svr_->listen_after_bind(); }

bool HttpServer::running() const { return svr_->is_running(); }

void HttpServer::stop() {
  engine_.shut_down();
  // Once the listener is closed, httplib's chunked writer no longer calls a content provider
  // it has not called yet: a stream whose status line had gone out just before would end
  // without its error event, [DONE] or last chunk. The engine now refuses or cuts every run at
  // once, so the open streams end within milliseconds; wait for them (a client that stopped
  // reading holds its writer up to httplib's 5 s write timeout), then close the listener.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (open_streams_.load() > 0 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  svr_->stop();
}

namespace {

// Runs one streamed request, writing server-sent events to the sink; stops generating as soon
// as a write fails (the client went away). Once the status line is sent, an error can only be
// an event: {"error": {…}} (OpenAI's SDKs raise it as an APIError), then [DONE] so that a raw
// client sees the stream end rather than a silent cut.
void stream_completion(Engine& engine, const StreamJob& job, httplib::DataSink& sink) {
  const CompletionRequest& r = job.request;
  const bool chat = r.endpoint == Endpoint::kChat;
  bool alive = true;
  auto write = [&](const std::string& s) {
    alive = alive && sink.write(s.data(), s.size());
    return alive;
  };
  auto fail = [&](const ApiError& e) {
    if (job.log) log_error(job.method, job.path + " (stream)", e.status, e.what());
    write(sse_event(error_json(e)));
    write(kSseDone);
  };
  std::vector<ChoiceBuilder> choices;
  for (int i = 0; i < r.n; ++i)
    choices.emplace_back(r, engine.tokenizer(), chat ? engine.chat_name() : "",
                         job.prompt.reply_prefix, i);
  // The role comes first, before any content, as in OpenAI's streams.
  if (chat)
    for (int i = 0; i < r.n; ++i) {
      Choice c;
      c.index = i;
      write(sse_event(chunk_json(job.meta, c, true, r.include_usage)));
    }
  if (!alive) return;
  std::vector<RunResult> rr;
  try {
    rr = engine.run(
        r, job.prompt,
        [&](int i, const Piece& p) {
          if (auto c = choices[i].push(p))
            write(sse_event(chunk_json(job.meta, *c, false, r.include_usage)));
          return alive;
        },
        [&] { return client_alive(job.socket); });
  } catch (const ApiError& e) {
    return fail(e);
  } catch (const std::exception& e) {
    return fail(ApiError(500, e.what(), "server_error"));
  }
  if (job.log) log_run(job.method, job.path, true, rr);
  if (const RunResult* cut = cut_short(rr)) {
    if (cut->finish_reason == "shutdown") fail(shutdown_error(*cut));
    return;
  }
  for (int i = 0; i < r.n; ++i)
    write(sse_event(chunk_json(job.meta, choices[i].finish(rr[i]), false, r.include_usage)));
  if (r.include_usage) write(sse_event(usage_chunk_json(job.meta, total_usage(rr))));
  write(kSseDone);
}

}  // namespace

void HttpServer::completion(const httplib::Request& req, httplib::Response& res, Endpoint ep) {
  CompletionRequest r = parse_request(req.body, ep, opts_.defaults);
  Prepared prompt = engine_.prepare(r);
  ResponseMeta meta = new_meta(ep, engine_.model_id());
  if (r.stream) {
    // Counted while httplib holds it (stop() waits for the count to drop to 0): counted once
    // made, and the deleter, which uncounts it, owns it from then on (also if the shared_ptr's
    // own allocation throws).
    auto made = std::make_unique<StreamJob>(StreamJob{std::move(r), std::move(prompt),
                                                      std::move(meta), req.method, req.path,
                                                      opts_.log_requests, request_socket(req)});
    ++open_streams_;
    const std::shared_ptr<StreamJob> job(made.release(), [this](StreamJob* j) {
      delete j;
      --open_streams_;
    });
    res.set_header("Cache-Control", "no-cache");
    res.set_header("X-Accel-Buffering", "no");  // proxies: pass events through at once
    res.set_chunked_content_provider("text/event-stream",
                                     [this, job](size_t, httplib::DataSink& sink) {
                                       stream_completion(engine_, *job, sink);
                                       sink.done();
                                       return true;
                                     });
    return;
  }
  std::vector<ChoiceBuilder> choices;
  for (int i = 0; i < r.n; ++i)
    choices.emplace_back(r, engine_.tokenizer(), ep == Endpoint::kChat ? engine_.chat_name() : "",
                         prompt.reply_prefix, i);
  const ClientSocket socket = request_socket(req);
  const std::vector<RunResult> rr = engine_.run(
      r, prompt,
      [&](int i, const Piece& p) {
        choices[i].push(p);
        return true;
      },
      [&] { return client_alive(socket); });
  if (opts_.log_requests) log_run(req.method, req.path, false, rr);
  if (const RunResult* cut = cut_short(rr)) {
    if (cut->finish_reason == "cancelled") return;  // nobody is there to read a reply
    throw shutdown_error(*cut);
  }
  std::vector<Choice> out;
  for (int i = 0; i < r.n; ++i) out.push_back(choices[i].finish(rr[i]));
  send_json(res, completion_json(meta, out, total_usage(rr)));
}

void HttpServer::routes() {
  httplib::Server& s = *svr_;
  // Wraps a handler with the API-key check and the exception-to-error-object rule. The key is
  // checked here, after httplib has read the body, so a refused request leaves the connection
  // in a clean state for the next one.
  auto guarded = [this](std::function<void(const Request&, Response&)> h) {
    return [this, h](const Request& req, Response& res) {
      try {
        check_api_key(req, opts_.api_key);
        h(req, res);
      } catch (const ApiError& e) {
        fail(req, res, e);
      } catch (const Error& e) {
        fail(req, res, ApiError::invalid(e.what()));
      } catch (const std::exception& e) {
        fail(req, res, ApiError(500, e.what(), "server_error"));
      }
    };
  };
  auto chat = [this](const Request& q, Response& r) { completion(q, r, Endpoint::kChat); };
  auto text = [this](const Request& q, Response& r) { completion(q, r, Endpoint::kCompletion); };
  auto models = [this](const Request&, Response& res) {
    send_json(res, models_json(engine_.model_id(), created_));
  };
  auto model = [this](const Request& req, Response& res) {
    const std::string id = req.matches[1];
    if (id != engine_.model_id())
      throw ApiError(404,
                     fmt::format("The model '{}' does not exist; this server serves '{}'.", id,
                                 engine_.model_id()),
                     "invalid_request_error", "model", "model_not_found");
    send_json(res, model_json(engine_.model_id(), created_));
  };
  for (const std::string prefix : {"/v1", ""}) {
    s.Post(prefix + "/chat/completions", guarded(chat));
    s.Post(prefix + "/completions", guarded(text));
    s.Get(prefix + "/models", guarded(models));
    s.Get(prefix + "/models/(.+)", guarded(model));  // ids may hold '/', as HF names do
  }
  // What a browser or curl sees at the bare address: which server, which model, where to go.
  s.Get("/", guarded([this](const Request&, Response& res) {
          send_json(res, server_info_json(engine_.model_id()));
        }));
  s.Get("/metrics", guarded([this](const Request&, Response& res) {
          res.set_content(metrics_text(engine_.stats(), engine_.model_id()),
                          "text/plain; version=0.0.4; charset=utf-8");
        }));
  s.Get("/health", [](const Request&, Response& res) { send_json(res, Json{{"status", "ok"}}); });
  s.Options(".*", [](const Request& req, Response& res) {
    res.status = 204;
    res.set_header("Access-Control-Allow-Methods", "GET, POST, OPTIONS");
    const std::string asked = req.get_header_value("Access-Control-Request-Headers");
    res.set_header("Access-Control-Allow-Headers",
                   asked.empty() ? std::string("Authorization, Content-Type") : asked);
    res.set_header("Access-Control-Max-Age", "86400");
  });
  hooks();
}

// Sends the error object and logs it. The log line is written here, where the message is
// known, and not in httplib's logger: by then the body may be gzip-compressed for the client.
void HttpServer::fail(const Request& req, Response& res, const ApiError& e) const {
  send_json(res, error_json(e), e.status);
  if (opts_.log_requests) log_error(req.method, req.path, e.status, e.what());
}

// Everything that is not a route: error bodies for httplib's own refusals, CORS headers on
// every response.
void HttpServer::hooks() {
  httplib::Server& s = *svr_;
  using HandlerResponse = httplib::Server::HandlerResponse;
  s.set_error_handler(
      httplib::Server::HandlerWithResponse([this](const Request& req, Response& res) {
        if (!res.body.empty()) return HandlerResponse::Unhandled;  // already an error object
        fail(req, res, status_error(res.status, req, opts_.max_body));
        return HandlerResponse::Handled;
      }));
  s.set_exception_handler([this](const Request& req, Response& res, std::exception_ptr ep) {
    std::string what = "internal error";
    try {
      std::rethrow_exception(ep);
    } catch (const std::exception& e) {
      what = e.what();
    } catch (...) {
    }
    fail(req, res, ApiError(500, what, "server_error"));
  });
  s.set_post_routing_handler([this](const Request&, Response& res) {
    if (opts_.cors_origin.empty()) return;
    res.set_header("Access-Control-Allow-Origin", opts_.cors_origin);
    if (opts_.cors_origin != "*") res.set_header("Vary", "Origin");
  });
}

}  // namespace krafla::server
