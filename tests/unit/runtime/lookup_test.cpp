// lookup_draft (krafla/generate.h): prompt lookup's draft is what followed the latest earlier
// occurrence of the longest matching tail (up to max_ngram tokens), at most n_draft tokens.
#include <gtest/gtest.h>

#include <vector>

#include "krafla/generate.h"

namespace krafla {
namespace {

using V = std::vector<int32_t>;

TEST(LookupDraft, TakesWhatFollowedTheLatestMatchOfTheLongestTail) {
  // tail "2 3" stood at 1 (followed by 4 5 6) and at 6 (followed by 9): the latest wins
  EXPECT_EQ(lookup_draft(V{1, 2, 3, 4, 5, 6, 2, 3, 9, 7, 2, 3}, 3, 8), (V{9, 7, 2, 3}));
  // a 3-token tail beats a 2-token one even when the 2-token match is later
  EXPECT_EQ(lookup_draft(V{8, 2, 3, 4, 5, 1, 2, 3, 6, 8, 2, 3}, 3, 2), (V{4, 5}));
  // n_draft caps the draft; max_ngram caps the tail
  EXPECT_EQ(lookup_draft(V{5, 6, 7, 8, 9, 5}, 3, 2), (V{6, 7}));
  EXPECT_EQ(lookup_draft(V{8, 2, 3, 4, 5, 1, 2, 3, 6, 8, 2, 3}, 1, 2), (V{6, 8}));
}

TEST(LookupDraft, NothingWithoutAnEarlierOccurrence) {
  EXPECT_EQ(lookup_draft(V{}, 3, 4), V{});
  EXPECT_EQ(lookup_draft(V{1}, 3, 4), V{});
  EXPECT_EQ(lookup_draft(V{1, 2, 3, 4}, 3, 4), V{});
  EXPECT_EQ(lookup_draft(V{1, 2, 1}, 3, 0), V{});
  // a match right before the tail still has a token after it: the tail's own first token
  EXPECT_EQ(lookup_draft(V{4, 4}, 3, 4), (V{4}));
}

}  // namespace
}  // namespace krafla
