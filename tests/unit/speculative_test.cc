// The n-gram drafter and the adaptive draft length (speculative/).
#include <gtest/gtest.h>

#include "speculative/draft_length.h"
#include "speculative/ngram.h"

namespace dsinfer::speculative {
namespace {

TEST(NgramTest, ProposesWhatFollowedTheLatestLongestMatch) {
  const NgramOptions o{1, 3};
  // Suffix "1 2 3" occurred at 0 (followed by 4 5 6) and "2 3" at 7 (followed by 9): the longest
  // match wins.
  EXPECT_EQ(ProposeNgram({1, 2, 3, 4, 5, 6, 0, 2, 3, 9, 1, 2, 3}, 3, o),
            (std::vector<int32_t>{4, 5, 6}));
  // Two earlier occurrences of "7 8": the latest one's continuation.
  EXPECT_EQ(ProposeNgram({7, 8, 1, 7, 8, 2, 7, 8}, 2, o), (std::vector<int32_t>{2, 7}));
  // k bounds the draft, the list's end bounds the continuation.
  EXPECT_EQ(ProposeNgram({5, 6, 5}, 4, o), (std::vector<int32_t>{6, 5}));
  EXPECT_EQ(ProposeNgram({1, 2, 3, 4}, 3, o), std::vector<int32_t>{});  // nothing recurs
  EXPECT_EQ(ProposeNgram({1, 1}, 0, o), std::vector<int32_t>{});
  // min_n: a single-token match is not enough at 2.
  EXPECT_EQ(ProposeNgram({4, 9, 1, 4}, 2, {2, 3}), std::vector<int32_t>{});
  EXPECT_EQ(ProposeNgram({4, 9, 1, 4}, 2, {1, 3}), (std::vector<int32_t>{9, 1}));
}

TEST(DraftLengthTest, AdaptsToAcceptance) {
  DraftLength fixed(5, false);
  fixed.Observe(5, 0);
  EXPECT_EQ(fixed.Next(), 5);
  DraftLength d(5, true);
  for (int i = 0; i < 10; ++i) d.Observe(5, 5);
  EXPECT_EQ(d.Next(), 5) << "every draft accepted: draft the most";
  for (int i = 0; i < 10; ++i) d.Observe(d.Next(), 0);
  EXPECT_EQ(d.Next(), 1) << "every draft rejected: draft one, to keep measuring";
  for (int i = 0; i < 20; ++i) d.Observe(d.Next(), d.Next());
  EXPECT_GT(d.Next(), 1) << "acceptance recovered";
  EXPECT_EQ(DraftLength().Next(), 0);
}

}  // namespace
}  // namespace dsinfer::speculative
