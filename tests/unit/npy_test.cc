#include "io/npy.h"

#include <gtest/gtest.h>

#include "test_util.h"

namespace dsinfer::io {
namespace {

TEST(NpyTest, RoundTrip) {
  const std::string path = testing::ScratchDir("npy") + "/a.npy";
  std::vector<float> v = {1, 2, 3, 4, 5, 6};
  ASSERT_TRUE(WriteNpyF32(path, {2, 3}, v.data()).ok());
  auto arr = ReadNpyF32(path);
  ASSERT_TRUE(arr.ok());
  EXPECT_EQ(arr->shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(arr->data, v);
  // The header is 64-byte aligned as numpy writes it.
  EXPECT_EQ(testing::ReadFile(path).size() % 64, (6 * 4) % 64);
}

}  // namespace
}  // namespace dsinfer::io
