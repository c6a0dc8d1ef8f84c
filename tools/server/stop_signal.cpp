#include "server/stop_signal.h"

#include <utility>

#ifdef _WIN32
#include <windows.h>

#include <condition_variable>
#include <mutex>
#else
#include <pthread.h>

#include <csignal>
#endif

namespace krafla::server {

#ifdef _WIN32
namespace {

// What the console handler (on a thread Windows starts per event) tells the waiter.
struct Requests {
  std::mutex m;
  std::condition_variable cv;
  bool stop = false, done = false;
};
Requests g_requests;

BOOL WINAPI on_console_event(DWORD event) {
  if (event != CTRL_C_EVENT && event != CTRL_BREAK_EVENT && event != CTRL_CLOSE_EVENT) return FALSE;
  {
    std::lock_guard lock(g_requests.m);
    g_requests.stop = true;
  }
  g_requests.cv.notify_all();
  return TRUE;
}

}  // namespace

void prepare_stop_signals() {}

StopSignal::StopSignal(std::function<void()> on_stop) {
  SetConsoleCtrlHandler(on_console_event, TRUE);
  waiter_ = std::thread([on_stop = std::move(on_stop)] {
    std::unique_lock lock(g_requests.m);
    g_requests.cv.wait(lock, [] { return g_requests.stop || g_requests.done; });
    if (!g_requests.stop) return;
    lock.unlock();
    on_stop();
  });
}

StopSignal::~StopSignal() {
  {
    std::lock_guard lock(g_requests.m);
    g_requests.done = true;
  }
  g_requests.cv.notify_all();
  waiter_.join();
  SetConsoleCtrlHandler(on_console_event, FALSE);
}

#else
namespace {

// SIGUSR1 is how the destructor wakes the waiter when no request came.
sigset_t waited_signals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGUSR1);
  return set;
}

}  // namespace

void prepare_stop_signals() {
  std::signal(SIGPIPE, SIG_IGN);
  const sigset_t set = waited_signals();
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
}

StopSignal::StopSignal(std::function<void()> on_stop) {
  waiter_ = std::thread([on_stop = std::move(on_stop)] {
    const sigset_t set = waited_signals();
    int sig = 0;
    sigwait(&set, &sig);
    if (sig != SIGUSR1) on_stop();
  });
}

StopSignal::~StopSignal() {
  // The waiter may have returned already (after on_stop): its id stays valid until the join.
  pthread_kill(waiter_.native_handle(), SIGUSR1);
  waiter_.join();
}

#endif

}  // namespace krafla::server
