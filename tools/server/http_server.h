// The HTTP face of the server: routes, API-key check, CORS, body limit, JSON and SSE
// responses, on cpp-httplib. Knows nothing about models beyond the Engine interface.
#pragma once
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "server/client_socket.h"
#include "server/engine.h"

namespace httplib {
class Server;
struct Request;
struct Response;
}  // namespace httplib

namespace krafla::server {

struct HttpOptions {
  std::string host = "127.0.0.1";
  int port = 8080;             // 0: any free port
  std::string api_key;         // "": no authentication
  std::string cors_origin;     // "": no CORS headers (same-origin only)
  size_t max_body = 2u << 20;  // bytes; larger request bodies get 413
  int http_threads = 1024;     // connections served at once, a thread each (started as needed)
  bool log_requests = true;
  RequestDefaults defaults;  // sampling for fields a request leaves out (--temp, --seed, …)
};

class HttpServer {
 public:
  HttpServer(Engine& engine, HttpOptions opts);
  ~HttpServer();

  // Binds the socket and returns the port; throws krafla::Error when it cannot.
  int bind();
  // Serves until stop(); returns false if the server failed.
  bool listen();
  // Thread-safe; ends the running generation too.
  void stop();
  bool running() const;

 private:
  void routes();
  void hooks();
  void completion(const httplib::Request& req, httplib::Response& res, Endpoint ep);
  void fail(const httplib::Request& req, httplib::Response& res, const ApiError& e) const;
  Engine& engine_;
  HttpOptions opts_;
  std::unique_ptr<httplib::Server> svr_;
  ClientSocket listener_ = kNoSocket;  // the listening socket, seen in set_socket_options
  int64_t created_;                    // reported as the model's creation time
  std::atomic<int> open_streams_{0};   // streamed responses not yet destroyed (stop() waits)
};

}  // namespace krafla::server
