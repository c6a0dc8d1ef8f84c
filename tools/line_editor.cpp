// Raw-mode line editing over VT100 sequences; see line_editor.h for why it is ours.
#include "line_editor.h"

#include <cstdio>
#include <fstream>
#include <iostream>
#include <string_view>
#include <utility>

#ifdef _WIN32
#include <io.h>
#else
#include <poll.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

#include <cerrno>
#endif

namespace krafla::cli {
namespace {

// History file lines: a pasted multi-line entry must stay one line.
std::string escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '\\')
      out += "\\\\";
    else if (c == '\n')
      out += "\\n";
    else
      out += c;
  }
  return out;
}

std::string unescape(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\\' && i + 1 < s.size() && (s[i + 1] == '\\' || s[i + 1] == 'n')) {
      out += s[++i] == 'n' ? '\n' : '\\';
    } else {
      out += s[i];
    }
  }
  return out;
}

}  // namespace

LineEditor::LineEditor(std::string history_path) : history_path_(std::move(history_path)) {
  if (history_path_.empty()) return;
  std::ifstream in(history_path_);
  size_t lines = 0;
  for (std::string s; std::getline(in, s); ++lines) {
    if (!s.empty()) history_.push_back(unescape(s));
  }
  if (history_.size() > kMaxHistory) {
    history_.erase(history_.begin(), history_.end() - kMaxHistory);
  }
  // The file only grows by appends; compact it once it holds twice what we keep.
  if (lines > 2 * kMaxHistory) {
    std::ofstream out(history_path_, std::ios::trunc);
    for (const std::string& h : history_) out << escape(h) << '\n';
  }
}

void LineEditor::add_history(const std::string& line) {
  if (line.empty() || (!history_.empty() && history_.back() == line)) return;
  history_.push_back(line);
  if (history_.size() > kMaxHistory) history_.erase(history_.begin());
  // Best effort: an unwritable history file must not disturb the chat.
  if (!history_path_.empty()) std::ofstream(history_path_, std::ios::app) << escape(line) << '\n';
}

LineEditor::Result LineEditor::read_plain(const std::string& prompt, std::string& line) {
  std::fputs(prompt.c_str(), stderr);
  std::fflush(stderr);
  if (!std::getline(std::cin, line)) {
    line.clear();
    return Result::kEof;
  }
  if (!line.empty() && line.back() == '\r') line.pop_back();
  return Result::kLine;
}

LineEditor::Result LineEditor::read(const std::string& prompt, std::string& line) {
  std::cout.flush();  // a reply still in stdout's buffer must show before the prompt
  std::fflush(stdout);
  return interactive() ? read_raw(prompt, line) : read_plain(prompt, line);
}

#ifdef _WIN32

bool LineEditor::interactive() const { return _isatty(0) && _isatty(2); }

LineEditor::Result LineEditor::read_raw(const std::string& prompt, std::string& line) {
  return read_plain(prompt, line);
}

#else

bool LineEditor::interactive() const { return isatty(0) && isatty(2); }

namespace {

constexpr int kEscTimeoutMs = 100;  // a lone Esc key vs. the start of a sequence
constexpr std::string_view kPasteOn = "\x1b[?2004h", kPasteOff = "\x1b[?2004l";
constexpr std::string_view kPasteEnd = "\x1b[201~";

void write_all(std::string_view s) {
  while (!s.empty()) {
    ssize_t n = ::write(2, s.data(), s.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    s.remove_prefix(static_cast<size_t>(n));
  }
}

// One byte of stdin; a signal (SIGWINCH, a caller's SIGINT handler) must not end the read, so
// EINTR is retried. timeout_ms < 0 waits for ever. false on end of input, error or timeout.
bool read_byte(unsigned char& c, int timeout_ms = -1) {
  for (;;) {
    if (timeout_ms >= 0) {
      pollfd p{0, POLLIN, 0};
      int r = ::poll(&p, 1, timeout_ms);
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) return false;
    }
    ssize_t n = ::read(0, &c, 1);
    if (n == 1) return true;
    if (n < 0 && errno == EINTR) continue;
    return false;
  }
}

// Raw mode and bracketed paste for one read(), undone by the destructor on every exit path.
// Output processing (OPOST) stays on, so "\n" still starts a fresh line.
class RawMode {
 public:
  RawMode() {
    if (tcgetattr(0, &saved_) != 0) return;
    termios raw = saved_;
    raw.c_iflag &= ~(BRKINT | ICRNL | INPCK | ISTRIP | IXON);
    raw.c_cflag |= CS8;
    raw.c_lflag &= ~(ECHO | ICANON | IEXTEN | ISIG);  // no ISIG: Ctrl-C and Ctrl-Z are bytes
    raw.c_cc[VMIN] = 1;
    raw.c_cc[VTIME] = 0;
    // TCSADRAIN, not TCSAFLUSH: keys typed ahead while a reply was printing are kept.
    ok_ = tcsetattr(0, TCSADRAIN, &raw) == 0;
    if (ok_) write_all(kPasteOn);
  }
  ~RawMode() {
    if (!ok_) return;
    write_all(kPasteOff);
    tcsetattr(0, TCSADRAIN, &saved_);
  }
  RawMode(const RawMode&) = delete;
  RawMode& operator=(const RawMode&) = delete;
  bool ok() const { return ok_; }

 private:
  termios saved_{};
  bool ok_ = false;
};

bool is_cont(char b) { return (static_cast<unsigned char>(b) & 0xC0) == 0x80; }
bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n'; }

// Code points, each taken as one column (the known limit for wide characters).
size_t columns(std::string_view s) {
  size_t n = 0;
  for (char c : s) n += !is_cont(c);
  return n;
}

// The byte offset of code point `cp` (or the end).
size_t byte_of(const std::string& s, size_t cp) {
  size_t i = 0;
  for (; i < s.size(); ++i) {
    if (!is_cont(s[i]) && cp-- == 0) break;
  }
  return i;
}

// Pasted control characters must not reach the terminal as such: one visible column each.
std::string displayed(std::string_view s) {
  std::string out;
  for (char c : s) {
    if (c == '\n')
      out += "\u21b5";  // ↵
    else if (c == '\t')
      out += ' ';
    else if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f)
      out += '?';
    else
      out += c;
  }
  return out;
}

size_t terminal_width() {
  winsize ws{};
  return ioctl(2, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0 ? ws.ws_col : 80;
}

// What a key does. Editing keys first, then what arrives as escape sequences only.
enum class Key {
  kNone,
  kHome,
  kEnd,
  kLeft,
  kRight,
  kUp,
  kDown,
  kBackspace,
  kKillStart,
  kKillEnd,
  kKillWord,
  kClear,
  kWordLeft,
  kWordRight,
  kDelete,
  kPaste
};

// Emacs-style control keys, by the letter whose Ctrl- combination sends the byte.
Key control_key(unsigned char c) {
  // Ctrl-D on an empty line is end of input instead (read_raw).
  constexpr std::pair<char, Key> keys[] = {
      {'A', Key::kHome},
      {'E', Key::kEnd},
      {'B', Key::kLeft},
      {'F', Key::kRight},
      {'P', Key::kUp},
      {'N', Key::kDown},
      {'H', Key::kBackspace},
      {'D', Key::kDelete},
      {'U', Key::kKillStart},
      {'K', Key::kKillEnd},
      {'W', Key::kKillWord},
      {'L', Key::kClear}};  // Ctrl-D on an empty line is end of input instead
  for (auto [letter, key] : keys) {
    if (c == (letter & 0x1f)) return key;
  }
  return c == 0x7f ? Key::kBackspace : Key::kNone;  // 0x7f: the Backspace key of most terminals
}

// The final byte of ESC [ A… or ESC O A…: arrows, Home, End.
Key csi_or_ss3(unsigned char c) {
  constexpr std::string_view finals = "ABCDHF";
  constexpr Key keys[] = {Key::kUp, Key::kDown, Key::kRight, Key::kLeft, Key::kHome, Key::kEnd};
  size_t k = finals.find(static_cast<char>(c));
  return k == std::string_view::npos ? Key::kNone : keys[k];
}

// After an Esc: CSI (ESC [ params final), SS3 (ESC O x) or Alt+key. What we do not know is
// swallowed whole, never inserted.
Key read_escape() {
  unsigned char c;
  if (!read_byte(c, kEscTimeoutMs)) return Key::kNone;  // Esc alone
  if (c == 'b') return Key::kWordLeft;                  // Alt-b, Alt-f
  if (c == 'f') return Key::kWordRight;
  if (c == 'O') return read_byte(c) ? csi_or_ss3(c) : Key::kNone;
  if (c != '[') return Key::kNone;
  std::string params;
  while (read_byte(c) && c >= 0x20 && c < 0x40 && params.size() < 32) params += c;
  if (c == '~') {
    if (params == "1" || params == "7") return Key::kHome;
    if (params == "4" || params == "8") return Key::kEnd;
    if (params == "3") return Key::kDelete;
    return params == "200" ? Key::kPaste : Key::kNone;
  }
  if (c == 'C' || c == 'D') {
    bool word = params.find(';') != std::string::npos;  // 1;5C = Ctrl-Right, 1;3C = Alt-Right
    return c == 'C' ? (word ? Key::kWordRight : Key::kRight) : (word ? Key::kWordLeft : Key::kLeft);
  }
  return csi_or_ss3(c);
}

// The state of one read(): the text, the cursor (a byte offset, always on a code point
// boundary), the first shown code point when the line is wider than the terminal, and a copy of
// the history whose newest entry is the line being edited (so edits never touch the history).
struct Edit {
  const std::string& prompt;
  std::vector<std::string> hist;
  size_t hi;
  std::string text;
  size_t pos = 0, scroll = 0;

  void refresh() {
    size_t pcols = columns(prompt), width = terminal_width();
    size_t room = width > pcols + 2 ? width - pcols - 1 : 1;  // the last column stays free
    size_t cur = columns(std::string_view(text).substr(0, pos)), n = columns(text);
    if (cur < scroll) scroll = cur;
    if (cur >= scroll + room) scroll = cur - room + 1;
    if (n + 1 < scroll + room) scroll = n + 1 > room ? n + 1 - room : 0;  // keep the row full
    size_t b0 = byte_of(text, scroll), b1 = byte_of(text, scroll + room);
    std::string out = "\r" + prompt + displayed(std::string_view(text).substr(b0, b1 - b0));
    out += "\x1b[K\r";
    if (size_t col = pcols + cur - scroll) out += "\x1b[" + std::to_string(col) + "C";
    write_all(out);
  }
  void insert(std::string_view s) {
    text.insert(pos, s);
    pos += s.size();
  }
  size_t prev(size_t i) const {
    do --i;
    while (i > 0 && is_cont(text[i]));
    return i;
  }
  size_t next(size_t i) const {
    do ++i;
    while (i < text.size() && is_cont(text[i]));
    return i;
  }
  // Words are runs of non-space; spaces are ASCII, so these stop on code point boundaries.
  size_t word_left() const {
    size_t i = pos;
    while (i > 0 && is_space(text[i - 1])) --i;
    while (i > 0 && !is_space(text[i - 1])) --i;
    return i;
  }
  size_t word_right() const {
    size_t i = pos;
    while (i < text.size() && is_space(text[i])) ++i;
    while (i < text.size() && !is_space(text[i])) ++i;
    return i;
  }
  void go_history(int dir) {  // -1 older, +1 newer
    if (dir < 0 ? hi == 0 : hi + 1 >= hist.size()) return;
    hist[hi] = std::move(text);
    hi += dir;
    text = hist[hi];
    pos = text.size();
  }
  void erase_to(size_t p) {  // p <= pos
    text.erase(p, pos - p);
    pos = p;
  }
  void key(Key k) {
    switch (k) {
      case Key::kHome:
        pos = 0;
        break;
      case Key::kEnd:
        pos = text.size();
        break;
      case Key::kLeft:
        if (pos > 0) pos = prev(pos);
        break;
      case Key::kRight:
        if (pos < text.size()) pos = next(pos);
        break;
      case Key::kWordLeft:
        pos = word_left();
        break;
      case Key::kWordRight:
        pos = word_right();
        break;
      case Key::kUp:
        go_history(-1);
        break;
      case Key::kDown:
        go_history(+1);
        break;
      case Key::kBackspace:
        if (pos > 0) erase_to(prev(pos));
        break;
      case Key::kDelete:
        if (pos < text.size()) text.erase(pos, next(pos) - pos);
        break;
      case Key::kKillStart:
        erase_to(0);
        break;
      case Key::kKillEnd:
        text.erase(pos);
        break;
      case Key::kKillWord:
        erase_to(word_left());
        break;
      case Key::kClear:
        write_all("\x1b[H\x1b[2J");
        break;
      case Key::kPaste:
        paste();
        break;
      case Key::kNone:
        break;
    }
  }
  // Bracketed paste: everything up to ESC [201~ is text, newlines included (CR or CRLF → LF),
  // so a pasted paragraph is one message rather than one per line.
  void paste() {
    std::string s;
    unsigned char c;
    bool cr = false;
    while (!s.ends_with(kPasteEnd) && read_byte(c)) {
      if (c != '\n' || !cr) s += c == '\r' ? '\n' : static_cast<char>(c);
      cr = c == '\r';
    }
    if (s.ends_with(kPasteEnd)) s.resize(s.size() - kPasteEnd.size());
    insert(s);
  }
};

}  // namespace

LineEditor::Result LineEditor::read_raw(const std::string& prompt, std::string& line) {
  RawMode raw;
  if (!raw.ok()) return read_plain(prompt, line);
  Edit e{prompt, history_, history_.size(), ""};
  e.hist.emplace_back();
  e.refresh();
  auto finish = [&](std::string_view tail, Result r) {
    e.pos = e.text.size();
    e.refresh();
    write_all(tail);
    // An interrupted line is handed back too: the caller tells Ctrl-C on a typed line (clear
    // it) from Ctrl-C at an empty prompt (quit).
    line = r == Result::kEof ? std::string() : std::move(e.text);
    return r;
  };
  int pending = -1;  // a byte that cut a UTF-8 sequence short, handled next
  for (;;) {
    unsigned char c;
    if (pending >= 0)
      c = static_cast<unsigned char>(std::exchange(pending, -1));
    else if (!read_byte(c))
      return finish("\n", Result::kEof);  // the terminal hung up
    if (c == '\r' || c == '\n') return finish("\n", Result::kLine);
    if (c == 0x03) return finish("^C\n", Result::kInterrupt);  // Ctrl-C
    if (c == 0x04 && e.text.empty()) return finish("\n", Result::kEof);
    if (c == 0x1b) {
      e.key(read_escape());
    } else if ((c < 0x20 && c != '\t') || c == 0x7f) {
      e.key(control_key(c));  // unbound control keys do nothing
    } else {
      // A code point: its lead byte says how many continuation bytes follow. A stray
      // continuation byte or an invalid lead byte is dropped.
      size_t len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
      std::string cp(1, static_cast<char>(c));
      unsigned char d;
      while (len > 1 && cp.size() < len && read_byte(d)) {
        if (!is_cont(static_cast<char>(d))) {
          pending = d;
          break;
        }
        cp += static_cast<char>(d);
      }
      if (cp.size() == len) e.insert(cp);
    }
    e.refresh();
  }
}

#endif

}  // namespace krafla::cli
