// Ctrl-C for the interactive executables: while work is running (a prompt being read in, a
// reply being generated) the first Ctrl-C asks it to stop and the work polls interrupted();
// a Ctrl-C while nothing runs, or a second one before the first was noticed, ends the process
// with exit code 130 as a shell expects.
#pragma once

namespace krafla::cli {

constexpr int kExitInterrupted = 130;

void install_interrupt_handler();

// While a Busy is alive, Ctrl-C sets the flag instead of ending the process. It clears the
// flag when it starts, so each piece of work sees only its own Ctrl-C.
class Busy {
 public:
  Busy();
  ~Busy();
  Busy(const Busy&) = delete;
  Busy& operator=(const Busy&) = delete;
};

bool interrupted();

}  // namespace krafla::cli
