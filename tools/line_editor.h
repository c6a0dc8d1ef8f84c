// The line editor of ml_run's chat prompt: editing keys and a history, like the prompts of
// llama.cpp and Ollama.
//
// Why our own (a few hundred lines over termios raw mode) rather than a library: GNU readline is
// GPL, and our binaries link statically, so they would become GPL; a static libedit drags in
// libbsd, libmd and libtinfo with their terminfo lookups; and neither gives exact control over
// Ctrl-C, which in ml_run must interrupt a reply, not kill the process. Here Ctrl-C is just a byte
// (raw mode turns ISIG off) and read() returns kInterrupt. Every terminal we target speaks the same
// few VT100 sequences, so no terminfo is needed. Windows (not ported yet) reads plain lines, where
// the console's own cooked mode already gives arrows and history.
//
// Known limits: every code point counts as one column, so wide CJK characters and emoji put the
// cursor left of where it belongs (a width table would fix it), and a prompt holding escape codes
// or newlines is measured wrongly. A line wider than the terminal scrolls horizontally inside one
// row instead of wrapping. A terminal resize is picked up at the next keystroke's redraw.
#pragma once
#include <cstddef>
#include <string>
#include <vector>

namespace krafla::cli {

class LineEditor {
 public:
  enum class Result { kLine, kEof, kInterrupt };
  static constexpr size_t kMaxHistory = 1000;

  // "" = no history file; otherwise the file is loaded (if it exists) and each added entry is
  // appended to it. One entry a line, with backslash and newline escaped (\\, \n).
  explicit LineEditor(std::string history_path = "");

  // Prints `prompt` and reads one line into `line`. The prompt and the echo go to stderr, so
  // `ml_run --chat … > reply.txt` keeps only the replies. stdout is flushed first.
  // Not interactive(): std::getline with no editing; kEof at the end of input.
  // Interactive: raw mode for this call only (restored on every exit path); Enter gives kLine,
  // Ctrl-C gives kInterrupt with the discarded text in `line` (not history), Ctrl-D on an empty
  // line gives kEof.
  Result read(const std::string& prompt, std::string& line);

  // Skips empty lines and a repeat of the newest entry; keeps the newest kMaxHistory.
  void add_history(const std::string& line);
  const std::vector<std::string>& history() const { return history_; }

  // stdin and stderr are both terminals.
  bool interactive() const;

 private:
  Result read_plain(const std::string& prompt, std::string& line);
  Result read_raw(const std::string& prompt, std::string& line);

  std::string history_path_;
  std::vector<std::string> history_;
};

}  // namespace krafla::cli
