// The one model and the one session behind the server. Requests are tokenized and checked
// concurrently, then run strictly one at a time in arrival order (FifoLock is the queue:
// waiting clients block, none are turned away). The session's KV cache outlives each request,
// so a request whose prompt starts like the previous prompt + reply only computes the new tokens.
#pragma once
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include "krafla/model.h"
#include "krafla/session.h"
#include "server/openai.h"
#include "server/request.h"

namespace krafla::server {

struct RunResult {
  Usage usage;
  // stop, length, cancelled (the client went away) or shutdown (SIGINT/SIGTERM cut it short)
  std::string finish_reason;
  double seconds = 0;  // queue wait excluded
};

// A mutex that admits waiters in arrival order (std::mutex promises no order, so under steady
// load one unlucky client could wait indefinitely). Meets BasicLockable for std::lock_guard.
class FifoLock {
 public:
  void lock() {
    std::unique_lock l(m_);
    const uint64_t ticket = next_++;
    cv_.wait(l, [&] { return serving_ == ticket; });
  }
  void unlock() {
    {
      std::lock_guard l(m_);
      ++serving_;
    }
    cv_.notify_all();
  }

 private:
  std::mutex m_;
  std::condition_variable cv_;
  uint64_t next_ = 0, serving_ = 0;
};

class Engine {
 public:
  // `chat_name` overrides the model's own template ("" keeps it; the model may name none).
  Engine(const Model& model, const SessionOptions& opts, std::string model_id,
         std::string chat_name);

  // The prompt's token ids. Throws ApiError: unknown model (404), a template that cannot take
  // the messages, ids outside the vocabulary, or a prompt that leaves no room in the context.
  std::vector<int32_t> prepare(const CompletionRequest& r) const;

  // Waits for its turn, then generates. on_text receives valid UTF-8 pieces with stop strings
  // already cut; returning false cancels (the client disconnected).
  RunResult run(const CompletionRequest& r, const std::vector<int32_t>& prompt,
                const std::function<bool(const std::string&)>& on_text);

  // Ends the running generation and refuses nothing else: called on SIGINT/SIGTERM.
  void shut_down() { stopping_ = true; }

  const std::string& model_id() const { return model_id_; }
  const std::string& chat_name() const { return chat_name_; }
  int n_ctx() const { return n_ctx_; }

 private:
  const Model& model_;
  std::string model_id_;
  std::string chat_name_;
  std::vector<int32_t> chat_stop_ids_, text_stop_ids_;
  FifoLock queue_;  // guards session_: the request queue
  Session session_;
  int n_ctx_;
  std::atomic<bool> stopping_{false};
};

}  // namespace krafla::server
