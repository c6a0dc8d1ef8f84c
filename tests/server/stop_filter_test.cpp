// StopFilter: stop strings cut the text, also when they straddle pieces; nothing that could
// still become a stop string is released early, and nothing else is held back at the end.
#include "stop_filter.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace krafla::cli {
namespace {

std::string run(const std::vector<std::string>& stops, const std::vector<std::string>& pieces,
                bool* hit = nullptr) {
  StopFilter f(stops);
  std::string out;
  for (const auto& p : pieces) out += f.push(p);
  out += f.flush();
  if (hit) *hit = f.hit();
  return out;
}

TEST(StopFilter, NoStopsPassesEverythingAtOnce) {
  StopFilter f({});
  EXPECT_EQ(f.push("hello"), "hello");
  EXPECT_EQ(f.push(" world"), " world");
  EXPECT_EQ(f.flush(), "");
  EXPECT_FALSE(f.hit());
}

TEST(StopFilter, CutsInsideOnePiece) {
  bool hit = false;
  EXPECT_EQ(run({"STOP"}, {"abcSTOPdef"}, &hit), "abc");
  EXPECT_TRUE(hit);
}

TEST(StopFilter, CutsAcrossPieces) {
  StopFilter f({"lo W"});
  EXPECT_EQ(f.push("Hel"), "He");  // "l" may start "lo W"
  EXPECT_EQ(f.push("lo Wo"), "l");
  EXPECT_TRUE(f.hit());
  EXPECT_EQ(f.push("rld"), "");
  EXPECT_EQ(f.flush(), "");
}

TEST(StopFilter, StopSpreadOverManyPieces) {
  bool hit = false;
  EXPECT_EQ(run({"<end>"}, {"x", "<", "e", "n", "d", ">", "y"}, &hit), "x");
  EXPECT_TRUE(hit);
}

TEST(StopFilter, FalseAlarmIsReleased) {
  StopFilter f({"abc"});
  EXPECT_EQ(f.push("xab"), "x");
  EXPECT_EQ(f.push("d"), "abd");
  EXPECT_EQ(f.push("ab"), "");
  EXPECT_EQ(f.flush(), "ab");  // generation ended: the held tail is text after all
  EXPECT_FALSE(f.hit());
}

TEST(StopFilter, EarliestOfSeveralStopsWins) {
  EXPECT_EQ(run({"world", "lo"}, {"hello world"}), "hel");
  EXPECT_EQ(run({"lo", "world"}, {"hel", "lo world"}), "hel");
}

TEST(StopFilter, HoldsBackWholeCharactersOnly) {
  StopFilter f({"é!"});
  EXPECT_EQ(f.push("café"), "caf");  // "é" is held whole, never half of its two bytes
  EXPECT_EQ(f.push("?"), "é?");
  bool hit = false;
  EXPECT_EQ(run({"🧊!"}, {"ice 🧊", "!"}, &hit), "ice ");
  EXPECT_TRUE(hit);
}

TEST(StopFilter, RepeatedPrefixCharacters) {
  // "aab" inside "aaab": the match starts one character later than the held run.
  bool hit = false;
  EXPECT_EQ(run({"aab"}, {"a", "a", "a", "b"}, &hit), "a");
  EXPECT_TRUE(hit);
}

}  // namespace
}  // namespace krafla::cli
