// StopStringMatcher: stop strings split across deltas, held-back prefixes, include/exclude.
#include <gtest/gtest.h>

#include "response/stop_string_matcher.h"

namespace dsinfer::response {
namespace {

std::string Feed(StopStringMatcher& m, const std::vector<std::string>& deltas, bool* stopped) {
  std::string out;
  *stopped = false;
  for (const auto& d : deltas) {
    auto r = m.Push(d);
    out += r.text;
    if (r.stopped) {
      *stopped = true;
      return out;
    }
  }
  return out + m.Flush();
}

TEST(StopStringMatcherTest, FindsStopsAcrossTokenBoundaries) {
  bool stopped = false;
  StopStringMatcher m({"END"}, false);
  EXPECT_EQ(Feed(m, {"hello E", "N", "D more"}, &stopped), "hello ");
  EXPECT_TRUE(stopped);
  StopStringMatcher inc({"END"}, true);
  EXPECT_EQ(Feed(inc, {"ab", "cE", "ND"}, &stopped), "abcEND");
  EXPECT_TRUE(stopped);
}

TEST(StopStringMatcherTest, HoldsBackOnlyPossiblePrefixes) {
  StopStringMatcher m({"\n\nUser:"}, false);
  auto r = m.Push("text\n");
  EXPECT_EQ(r.text, "text");  // "\n" may start the stop
  r = m.Push("\nUs");
  EXPECT_EQ(r.text, "");
  r = m.Push("e!");  // "\n\nUse!" is not a prefix any more
  EXPECT_EQ(r.text, "\n\nUse!");
  EXPECT_FALSE(r.stopped);
  EXPECT_EQ(m.Flush(), "");
}

TEST(StopStringMatcherTest, EarliestStopWinsAndFlushReleases) {
  bool stopped = false;
  StopStringMatcher m({"cd", "bcde"}, false);
  EXPECT_EQ(Feed(m, {"a", "b", "c", "d", "e"}, &stopped), "ab");
  EXPECT_TRUE(stopped);
  StopStringMatcher tail({"xyz"}, false);
  EXPECT_EQ(Feed(tail, {"abc", "xy"}, &stopped), "abcxy");
  EXPECT_FALSE(stopped);
  StopStringMatcher none;
  EXPECT_EQ(Feed(none, {"a", "b"}, &stopped), "ab");
}

}  // namespace
}  // namespace dsinfer::response
