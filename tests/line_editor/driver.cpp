// Test driver for LineEditor: reads lines with the prompt "> " and prints one JSON object per
// read on stdout, {"result": "line"|"eof"|"interrupt", "text": …}, adding each line to the
// history. Exits after eof, or after --max N reads.
//   line_editor_driver [--max N] [HISTORY_FILE]
#include <signal.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "line_editor.h"

namespace {

std::string json_string(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + "\"";
}

void on_winch(int) {}

}  // namespace

int main(int argc, char** argv) {
  long max_reads = -1;
  std::string history;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--max") == 0 && i + 1 < argc)
      max_reads = std::atol(argv[++i]);
    else
      history = argv[i];
  }
  // A SIGWINCH handler without SA_RESTART, so a resize makes read() fail with EINTR, which the
  // editor must retry.
  struct sigaction sa {};
  sa.sa_handler = on_winch;
  sigaction(SIGWINCH, &sa, nullptr);

  using krafla::cli::LineEditor;
  LineEditor editor(history);
  for (long n = 0; max_reads < 0 || n < max_reads; ++n) {
    std::string line = "unchanged";
    LineEditor::Result r = editor.read("> ", line);
    const char* name = r == LineEditor::Result::kLine  ? "line"
                       : r == LineEditor::Result::kEof ? "eof"
                                                       : "interrupt";
    std::printf("{\"result\": \"%s\", \"text\": %s}\n", name, json_string(line).c_str());
    std::fflush(stdout);
    if (r == LineEditor::Result::kEof) break;
    if (r == LineEditor::Result::kLine) editor.add_history(line);
  }
  return 0;
}
