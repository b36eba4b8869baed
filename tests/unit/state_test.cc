#include "model/deepseek_v4/state.h"

#include <gtest/gtest.h>

namespace dsinfer::model::deepseek_v4 {
namespace {

TEST(PositionRingTest, KeepsNewestRowsByPosition) {
  PositionRing ring(3, 2);
  for (int p = 0; p < 5; ++p) {
    float row[2] = {float(p), float(-p)};
    ring.Append(row);
  }
  EXPECT_EQ(ring.end(), 5);
  EXPECT_EQ(ring.oldest(), 2);
  EXPECT_EQ(ring.Row(2)[0], 2.0f);
  EXPECT_EQ(ring.Row(4)[1], -4.0f);
  ring.Truncate(3);
  EXPECT_EQ(ring.end(), 3);
  float row[2] = {9, 9};
  ring.Append(row);
  EXPECT_EQ(ring.Row(3)[0], 9.0f);
  EXPECT_EQ(ring.Row(2)[0], 2.0f);
}

TEST(EntryListTest, AppendTruncate) {
  EntryList list;
  list.width = 2;
  float a[2] = {1, 2}, b[2] = {3, 4};
  list.Append(a);
  list.Append(b);
  EXPECT_EQ(list.count(), 2);
  EXPECT_EQ(list.Row(1)[0], 3.0f);
  list.Truncate(1);
  EXPECT_EQ(list.count(), 1);
}

}  // namespace
}  // namespace dsinfer::model::deepseek_v4
