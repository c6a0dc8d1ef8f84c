#include "interrupt.h"

#include <atomic>
#include <csignal>
#include <cstdlib>

namespace krafla::cli {
namespace {

std::atomic<bool> g_busy{false};
std::atomic<bool> g_interrupted{false};

// Only async-signal-safe work here: atomics and _Exit.
extern "C" void on_interrupt(int) {
  if (!g_busy.load() || g_interrupted.exchange(true)) std::_Exit(kExitInterrupted);
}

}  // namespace

void install_interrupt_handler() { std::signal(SIGINT, on_interrupt); }

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
