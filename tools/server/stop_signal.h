// The platform file for ml_server's shutdown requests: SIGINT and SIGTERM on POSIX, the
// console's Ctrl-C, Ctrl-Break and close events on Windows. Either way the request is taken on
// a thread of StopSignal's own, where on_stop may do anything (lock, join, log): the server's
// stop() is not async-signal-safe.
#pragma once
#include <functional>
#include <thread>

namespace krafla::server {

// Call first in main, before any other thread starts. POSIX: blocks the signals in every
// thread (the mask is inherited), so that only StopSignal's waiter takes them, and ignores
// SIGPIPE, so that a client that hangs up makes a write fail instead of ending the process.
// Windows: nothing (no SIGPIPE; Ctrl-C ends the process until a StopSignal exists).
void prepare_stop_signals();

// Waits for the first stop request and calls on_stop on its own thread. A request that came
// before (POSIX: pending while blocked) is taken at once. The destructor ends the wait when no
// request came, and joins.
class StopSignal {
 public:
  explicit StopSignal(std::function<void()> on_stop);
  ~StopSignal();
  StopSignal(const StopSignal&) = delete;
  StopSignal& operator=(const StopSignal&) = delete;

 private:
  std::thread waiter_;
};

}  // namespace krafla::server
