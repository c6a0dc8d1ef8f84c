// The platform file for Ctrl-C: a SIGINT handler on POSIX, a console control handler on Windows
// (whose C runtime resets a signal() handler after the first Ctrl-C, so the second would end
// the process with its own exit code instead of 130).
#include "interrupt.h"

#include <atomic>
#include <cstdlib>

#ifdef _WIN32
#include <windows.h>
#else
#include <csignal>
#endif

namespace krafla::cli {
namespace {

std::atomic<bool> g_busy{false};
std::atomic<bool> g_interrupted{false};

// Only async-signal-safe work here: atomics and _Exit.
void on_interrupt() {
  if (!g_busy.load() || g_interrupted.exchange(true)) std::_Exit(kExitInterrupted);
}

#ifdef _WIN32
// Runs on a thread Windows starts for the event. Ctrl-Break and closing the window end the
// process as before (not handled here).
BOOL WINAPI on_console_event(DWORD event) {
  if (event != CTRL_C_EVENT) return FALSE;
  on_interrupt();
  return TRUE;
}
#else
extern "C" void on_sigint(int) { on_interrupt(); }
#endif

}  // namespace

#ifdef _WIN32
void install_interrupt_handler() { SetConsoleCtrlHandler(on_console_event, TRUE); }
#else
void install_interrupt_handler() { std::signal(SIGINT, on_sigint); }
#endif

Busy::Busy() {
  g_interrupted = false;
  g_busy = true;
}

Busy::~Busy() {
  g_busy = false;
  g_interrupted = false;
}

bool interrupted() { return g_interrupted.load(); }

}  // namespace krafla::cli
