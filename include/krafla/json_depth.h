// A bound on how deeply JSON from outside may nest. nlohmann's parser itself is iterative, but
// copying, dumping and comparing a parsed value recurse once per level: a request whose
// "content" was an array nested a million levels deep (2 MB of brackets) overflowed a
// connection thread's stack and killed ml_server (found by the abuse test under ASan, where
// stack frames are larger). Every JSON text Krafla reads from a request or a file is checked
// with json_depth_ok before it is parsed.
#pragma once
#include <string_view>

namespace krafla {

// Far deeper than any tokenizer.json, model metadata, chat request or JSON schema nests, and
// far shallower than a thread's stack allows.
constexpr int kMaxJsonDepth = 512;

// Whether the arrays and objects of `text` nest at most kMaxJsonDepth levels deep (brackets
// inside strings do not count). The text need not be valid JSON: the parser judges that.
bool json_depth_ok(std::string_view text);

}  // namespace krafla
