#include "model/deepseek_v4/state.h"

#include <gtest/gtest.h>

#include <map>

namespace dsinfer::model::deepseek_v4 {
namespace {

// Pages of `rows` rows x `floats` floats per component, counting how many were asked for.
class TestPages : public StatePages {
 public:
  TestPages(int64_t rows, int64_t floats) : rows_(rows), floats_(floats) {}
  int64_t rows_per_page(int) const override { return rows_; }
  float* Page(int component, int64_t index) override {
    auto& page = pages_[{component, index}];
    if (page.empty()) page.resize(static_cast<size_t>(rows_ * floats_));
    return page.data();
  }
  size_t pages() const { return pages_.size(); }

 private:
  int64_t rows_, floats_;
  std::map<std::pair<int, int64_t>, std::vector<float>> pages_;
};

TEST(PositionRingTest, KeepsNewestRowsByPosition) {
  TestPages pages(3, 2);
  PositionRing ring(PagedRows(&pages, 0, 0, 2), 3);
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
  EXPECT_EQ(pages.pages(), 1u);  // a ring is one page
}

TEST(EntryListTest, AppendTruncateAcrossPages) {
  // Two members share each row of the component: offsets 0 (width 2) and 2 (width 1).
  TestPages pages(4, 3);
  EntryList a(PagedRows(&pages, 0, 0, 2)), b(PagedRows(&pages, 0, 2, 1));
  for (int i = 0; i < 10; ++i) {
    float ra[2] = {float(i), float(10 + i)}, rb[1] = {float(100 + i)};
    a.Append(ra);
    b.Append(rb);
  }
  EXPECT_EQ(pages.pages(), 3u);  // 10 rows at 4 per page
  for (int i = 0; i < 10; ++i) {
    EXPECT_EQ(a.Row(i)[0], float(i));
    EXPECT_EQ(a.Row(i)[1], float(10 + i));
    EXPECT_EQ(b.Row(i)[0], float(100 + i));
  }
  a.Truncate(4);
  EXPECT_EQ(a.count(), 4);
  EntryList c(PagedRows(&pages, 1, 0, 2));
  c.CopyFrom(a);
  EXPECT_EQ(c.count(), 4);
  EXPECT_EQ(c.Row(3)[1], 13.0f);
}

}  // namespace
}  // namespace dsinfer::model::deepseek_v4
