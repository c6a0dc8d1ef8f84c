// std::filesystem paths from and to the UTF-8 strings the library passes around. On Linux a
// path's bytes are its string's; MinGW's libstdc++ (Windows) would read a char string byte by
// byte as if Latin-1, so a name such as "café" must go through char8_t both ways there.
#pragma once
#include <filesystem>
#include <string>
#include <string_view>

namespace krafla {

inline std::filesystem::path fs_path(std::string_view utf8) {
  return std::filesystem::path(std::u8string(utf8.begin(), utf8.end()));
}

inline std::string utf8_string(const std::filesystem::path& p) {
  const std::u8string s = p.u8string();
  return std::string(s.begin(), s.end());
}

}  // namespace krafla
