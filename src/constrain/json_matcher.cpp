// The pushdown matcher: one frame per open value, each a small state machine over bytes.
// Frame fields by kind (json_grammar.h names them):
//   Root        mode
//   Object      a = next property (those before it are written or skipped), b = the key
//               candidate (a property whose key starts with the bytes matched), off = bytes
//               of its key matched
//   FreeObject  mode only (the key is a String frame of kKeyNode)
//   Array       a = items so far
//   String      a = code points so far; Escape/Hex: n = \u digits read, b = their value,
//               off = 1 while reading the low half of a surrogate pair; Utf8: n = continuation
//               bytes still due, b = the range the next one must be in (lo | hi << 8)
//   Number      n = digits in the current part
//   Enum        [a, b) = the candidate texts (sorted: they share the first off bytes)
// Numbers and enum texts that may go on (12 → 123) are ended by the first byte they cannot
// take, which is then offered to the frame below (Result::Pop).
#include <algorithm>

#include "constrain/json_grammar.h"

namespace krafla::json_detail {
namespace {

enum Mode : uint8_t {
  // Root
  kStart = 0,
  kFinished,
  // Object, FreeObject, Array
  kOpen = 0,    // after '{' or '['
  kKey,         // inside a key
  kColon,       // after a key
  kValue,       // after ':' (and while the value's frame is above)
  kAfterValue,  // after a value
  kComma,       // after ','
  // String
  kChars = 0,
  kEscape,
  kHex,
  kLowBackslash,  // a high surrogate escape was read: "\uDC00".."\uDFFF" must follow
  kLowU,
  kUtf8,
  // Number
  kSign = 0,
  kZero,
  kInt,
  kDot,
  kFrac,
  kExp,
  kExpSign,
  kExpDigits,
};

enum class Result { Ok, Reject, Pop };

constexpr int kMaxIntDigits = 16;
constexpr int kMaxFracDigits = 16;
constexpr int kMaxExpDigits = 2;  // 1e999 overflows a double: nlohmann refuses it

using Stack = std::vector<Frame>;

bool is_ws(uint8_t c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }
bool is_digit(uint8_t c) { return c >= '0' && c <= '9'; }

int hex_value(uint8_t c) {
  if (is_digit(c)) return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Whitespace where the frame's grammar allows it: counts the run, refuses it past the bound.
Result take_ws(Frame& f, uint8_t c) {
  if (!is_ws(c) || f.ws >= kMaxWhitespace) return Result::Reject;
  ++f.ws;
  return Result::Ok;
}

bool number_complete(const Frame& f) {
  return f.mode == kZero || f.mode == kInt || f.mode == kFrac || f.mode == kExpDigits;
}

bool enum_complete(const Node& n, const Frame& f) { return n.texts[f.a].size() == f.off; }

// A value ended: the frame below moves past it. (Its mode says which: kKey for a FreeObject's
// key string, kValue for a container's value, kStart for the root's.)
void value_done(Stack& s) {
  Frame& f = s.back();
  f.ws = 0;
  switch (f.mode) {
    case kKey:
      f.mode = kColon;
      return;
    case kValue:
      f.mode = kAfterValue;
      ++f.a;  // Array: one more item; Object: the property after the one written
      return;
    default:
      f.mode = kFinished;
  }
}

void end_value(Stack& s) {
  s.pop_back();
  value_done(s);
}

// [lo, hi) narrowed to the texts whose byte at `off` is c (they are sorted and share the first
// off bytes, so these are contiguous); false when none is.
bool narrow(const std::vector<std::string>& texts, uint32_t& lo, uint32_t& hi, uint32_t off,
            uint8_t c) {
  auto key = [off](const std::string& t) { return t.size() > off ? int(uint8_t(t[off])) : -1; };
  auto first = texts.begin() + lo, last = texts.begin() + hi;
  auto b = std::partition_point(first, last, [&](const std::string& t) { return key(t) < c; });
  auto e = std::partition_point(b, last, [&](const std::string& t) { return key(t) <= c; });
  if (b == e) return false;
  lo = uint32_t(b - texts.begin());
  hi = uint32_t(e - texts.begin());
  return true;
}

// An enum frame whose only candidate is complete cannot go on: it ends at once, so a string,
// true or null closes its parent's value without waiting for the next byte.
void end_if_exhausted(const Grammar& g, Stack& s) {
  const Frame& f = s.back();
  if (f.b - f.a == 1 && enum_complete(g.nodes[f.node], f)) end_value(s);
}

bool start_value(const Grammar& g, Stack& s, uint32_t id, uint8_t c) {
  const Node& n = g.nodes[id];
  Frame f;
  f.node = id;
  switch (n.kind) {
    case Kind::Union:
      return n.pick[c] != kNone && start_value(g, s, n.pick[c], c);
    case Kind::Object:
    case Kind::FreeObject:
    case Kind::Array:
      if (c != (n.kind == Kind::Array ? '[' : '{')) return false;
      if (n.capped && s.size() > size_t(kMaxDepth)) return false;  // the root is a frame too
      f.mode = kOpen;
      break;
    case Kind::String:
      if (c != '"') return false;
      f.mode = kChars;
      break;
    case Kind::Number:
      if (c == '-') {
        f.mode = kSign;
      } else if (is_digit(c)) {
        f.mode = c == '0' ? kZero : kInt;
        f.n = 1;
      } else {
        return false;
      }
      break;
    case Kind::Enum:
      f.a = 0;
      f.b = uint32_t(n.texts.size());
      if (!narrow(n.texts, f.a, f.b, 0, c)) return false;
      f.off = 1;
      s.push_back(f);
      end_if_exhausted(g, s);
      return true;
    case Kind::Root:
      return false;
  }
  s.push_back(f);
  return true;
}

Result step_root(const Grammar& g, Stack& s, uint8_t c) {
  Frame& f = s.back();
  if (f.mode == kFinished) return Result::Reject;
  if (is_ws(c)) return take_ws(f, c);
  return start_value(g, s, g.nodes[f.node].child, c) ? Result::Ok : Result::Reject;
}

// Object keys: the properties a key may name at f.a are the optional ones up to the next
// required one (schema order); a byte keeps the key candidate if one with the same prefix takes it.
Result step_key(const Node& n, Frame& f, uint8_t c) {
  const uint32_t last = std::min(n.required_from[f.a], uint32_t(n.props.size()) - 1);
  const std::string& cur = n.props[f.b].key;
  for (uint32_t j = f.b; j <= last; ++j) {
    const std::string& k = n.props[j].key;
    if (k.size() > f.off && uint8_t(k[f.off]) == c && k.compare(0, f.off, cur, 0, f.off) == 0) {
      f.b = j;
      if (++f.off == k.size()) f.mode = kColon;  // keys end at their only unescaped '"'
      return Result::Ok;
    }
  }
  return Result::Reject;
}

Result step_object(const Grammar& g, Stack& s, uint8_t c) {
  Frame& f = s.back();
  const Node& n = g.nodes[f.node];
  const uint32_t n_props = uint32_t(n.props.size());
  switch (f.mode) {
    case kKey:
      return step_key(n, f, c);
    case kColon:
      if (c != ':') return take_ws(f, c);
      f.mode = kValue;
      f.ws = 0;
      return Result::Ok;
    case kValue: {
      if (is_ws(c)) return take_ws(f, c);
      f.ws = 0;
      f.a = f.b;  // value_done moves a past this property
      const uint32_t child = n.props[f.b].node;
      return start_value(g, s, child, c) ? Result::Ok : Result::Reject;
    }
    case kAfterValue:
      if (c == ',' && f.a < n_props) {
        f.mode = kComma;
        f.ws = 0;
        return Result::Ok;
      }
      [[fallthrough]];
    default:  // kOpen, kComma
      if (c == '}' && f.mode != kComma && n.required_from[f.a] == n_props) {
        end_value(s);
        return Result::Ok;
      }
      if (c == '"' && f.mode != kAfterValue && f.a < n_props) {
        f.mode = kKey;
        f.b = f.a;
        f.off = 1;
        f.ws = 0;
        return Result::Ok;
      }
      return take_ws(f, c);
  }
}

Result step_free_object(const Grammar& g, Stack& s, uint8_t c) {
  Frame& f = s.back();
  switch (f.mode) {
    case kColon:
      if (c != ':') return take_ws(f, c);
      f.mode = kValue;
      f.ws = 0;
      return Result::Ok;
    case kValue:
      if (is_ws(c)) return take_ws(f, c);
      f.ws = 0;
      return start_value(g, s, g.nodes[f.node].child, c) ? Result::Ok : Result::Reject;
    default:  // kOpen, kAfterValue, kComma
      if (c == '}' && f.mode != kComma) {
        end_value(s);
        return Result::Ok;
      }
      if (c == ',' && f.mode == kAfterValue) {
        f.mode = kComma;
        f.ws = 0;
        return Result::Ok;
      }
      if (c == '"' && f.mode != kAfterValue) {
        f.mode = kKey;
        f.ws = 0;
        s.push_back(Frame{kKeyNode, kChars});
        return Result::Ok;
      }
      return take_ws(f, c);
  }
}

Result step_array(const Grammar& g, Stack& s, uint8_t c) {
  Frame& f = s.back();
  const Node& n = g.nodes[f.node];
  if (c == ']' && f.mode != kComma && f.a >= n.min) {
    end_value(s);
    return Result::Ok;
  }
  if (c == ',' && f.mode == kAfterValue && f.a < n.max) {
    f.mode = kComma;
    f.ws = 0;
    return Result::Ok;
  }
  if (is_ws(c)) return take_ws(f, c);
  if (f.mode == kAfterValue || f.a >= n.max) return Result::Reject;
  f.mode = kValue;
  f.ws = 0;
  return start_value(g, s, n.child, c) ? Result::Ok : Result::Reject;
}

Result string_char(const Node& n, Frame& f, uint8_t c) {
  if (c < 0x20) return Result::Reject;
  if (f.a >= n.max) return Result::Reject;  // a character starts: is there room?
  if (c == '\\') {
    f.mode = kEscape;
  } else if (c >= 0x80) {
    uint8_t lo, hi;
    const int more = utf8_lead(c, lo, hi);
    if (more == 0) return Result::Reject;
    f.mode = kUtf8;
    f.n = uint16_t(more);
    f.b = lo | uint32_t(hi) << 8;
  }
  ++f.a;
  return Result::Ok;
}

// One \u digit; surrogates are refused at the first digit that tells: a lone low half at its
// second digit, a missing low half at the byte after the high one.
Result string_hex(Frame& f, uint8_t c) {
  const int h = hex_value(c);
  if (h < 0) return Result::Reject;
  f.b = f.b << 4 | uint32_t(h);
  ++f.n;
  const bool low = f.off == 1;
  if (f.n == 1 && low && h != 0xD) return Result::Reject;
  if (f.n == 2 && (f.b >= 0xDC && f.b <= 0xDF) != low) return Result::Reject;
  if (f.n < 4) return Result::Ok;
  f.mode = !low && f.b >= 0xD800 && f.b <= 0xDBFF ? kLowBackslash : kChars;
  f.off = 0;
  return Result::Ok;
}

Result step_string(const Grammar& g, Stack& s, uint8_t c) {
  Frame& f = s.back();
  const Node& n = g.nodes[f.node];
  switch (f.mode) {
    case kChars:
      if (c != '"') return string_char(n, f, c);
      if (f.a < n.min) return Result::Reject;
      end_value(s);
      return Result::Ok;
    case kEscape:
      if (c == 'u') {
        f.mode = kHex;
        f.n = 0;
        f.b = 0;
        return Result::Ok;
      }
      if (c != '"' && c != '\\' && c != '/' && c != 'b' && c != 'f' && c != 'n' && c != 'r' &&
          c != 't')
        return Result::Reject;
      f.mode = kChars;
      return Result::Ok;
    case kHex:
      return string_hex(f, c);
    case kLowBackslash:
      if (c != '\\') return Result::Reject;
      f.mode = kLowU;
      return Result::Ok;
    case kLowU:
      if (c != 'u') return Result::Reject;
      f.mode = kHex;
      f.n = 0;
      f.b = 0;
      f.off = 1;
      return Result::Ok;
    default: {  // kUtf8
      if (c < (f.b & 0xFF) || c > (f.b >> 8)) return Result::Reject;
      f.b = 0x80 | 0xBF << 8;
      if (--f.n == 0) f.mode = kChars;
      return Result::Ok;
    }
  }
}

Result step_number(const Node& n, Frame& f, uint8_t c) {
  const bool digit = is_digit(c);
  const bool more = !n.integer;
  switch (f.mode) {
    case kSign:
      if (!digit) return Result::Reject;
      f.mode = c == '0' ? kZero : kInt;
      f.n = 1;
      return Result::Ok;
    case kInt:
      if (digit && f.n < kMaxIntDigits) {
        ++f.n;
        return Result::Ok;
      }
      [[fallthrough]];
    case kZero:
      if (more && c == '.') {
        f.mode = kDot;
        return Result::Ok;
      }
      [[fallthrough]];
    case kFrac:
      if (f.mode == kFrac && digit && f.n < kMaxFracDigits) {
        ++f.n;
        return Result::Ok;
      }
      if (more && (c == 'e' || c == 'E')) {
        f.mode = kExp;
        return Result::Ok;
      }
      return Result::Pop;
    case kDot:
    case kExp:
    case kExpSign:
      if (f.mode == kExp && (c == '+' || c == '-')) {
        f.mode = kExpSign;
        return Result::Ok;
      }
      if (!digit) return Result::Reject;
      f.mode = f.mode == kDot ? kFrac : kExpDigits;
      f.n = 1;
      return Result::Ok;
    default:  // kExpDigits
      if (digit && f.n < kMaxExpDigits) {
        ++f.n;
        return Result::Ok;
      }
      return Result::Pop;
  }
}

Result step_enum(const Grammar& g, Stack& s, uint8_t c) {
  Frame& f = s.back();
  const Node& n = g.nodes[f.node];
  if (!narrow(n.texts, f.a, f.b, f.off, c))
    return enum_complete(n, f) ? Result::Pop : Result::Reject;
  ++f.off;
  end_if_exhausted(g, s);
  return Result::Ok;
}

Result step_frame(const Grammar& g, Stack& s, uint8_t c) {
  const Node& n = g.nodes[s.back().node];
  switch (n.kind) {
    case Kind::Root:
      return step_root(g, s, c);
    case Kind::Object:
      return step_object(g, s, c);
    case Kind::FreeObject:
      return step_free_object(g, s, c);
    case Kind::Array:
      return step_array(g, s, c);
    case Kind::String:
      return step_string(g, s, c);
    case Kind::Number:
      return step_number(n, s.back(), c);
    case Kind::Enum:
      return step_enum(g, s, c);
    case Kind::Union:
      break;  // never a frame: start_value picks an alternative
  }
  return Result::Reject;
}

bool frame_complete(const Grammar& g, const Frame& f) {
  const Node& n = g.nodes[f.node];
  if (n.kind == Kind::Number) return number_complete(f);
  if (n.kind == Kind::Enum) return enum_complete(n, f);
  return false;
}

}  // namespace

bool step(const Grammar& g, Stack& stack, uint8_t byte) {
  for (;;) {
    switch (step_frame(g, stack, byte)) {
      case Result::Ok:
        return true;
      case Result::Reject:
        return false;
      case Result::Pop:
        end_value(stack);
        break;  // offer the byte to the frame below
    }
  }
}

bool complete(const Grammar& g, const Stack& stack) {
  if (stack.size() == 1) return stack[0].mode == kFinished;
  return stack.size() == 2 && frame_complete(g, stack[1]);
}

bool in_plain_string(const Grammar& g, const Stack& stack, uint32_t* room) {
  const Frame& f = stack.back();
  const Node& n = g.nodes[f.node];
  if (n.kind != Kind::String || f.mode != kChars) return false;
  *room = n.max == kNone ? kNone : n.max - f.a;
  return true;
}

}  // namespace krafla::json_detail

namespace krafla {

using json_detail::Frame;

JsonMatcher::JsonMatcher(const JsonSchema& schema) : g_(schema.g_) {
  stack_.reserve(16);
  stack_.push_back(Frame{json_detail::kRootNode});
}

bool JsonMatcher::accept(std::string_view bytes) {
  std::vector<Frame> s = stack_;
  for (char c : bytes)
    if (!json_detail::step(*g_, s, uint8_t(c))) return false;
  stack_ = std::move(s);
  return true;
}

bool JsonMatcher::can_accept(std::string_view bytes) const {
  std::vector<Frame> s = stack_;
  for (char c : bytes)
    if (!json_detail::step(*g_, s, uint8_t(c))) return false;
  return true;
}

bool JsonMatcher::done() const { return json_detail::complete(*g_, stack_); }

}  // namespace krafla
