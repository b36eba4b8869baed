#include "base/status.h"

#include <gtest/gtest.h>

namespace dsinfer {
namespace {

StatusOr<int> Half(int x) {
  if (x % 2) return InvalidArgument("odd");
  return x / 2;
}

Status UseHalf(int x, int* out) {
  DSINFER_ASSIGN_OR_RETURN(*out, Half(x));
  return Status::Ok();
}

TEST(StatusTest, OkAndErrors) {
  EXPECT_TRUE(Status::Ok().ok());
  Status s = DataLoss("broken");
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.ToString(), "DATA_LOSS: broken");
  int v = 0;
  EXPECT_TRUE(UseHalf(4, &v).ok());
  EXPECT_EQ(v, 2);
  EXPECT_EQ(UseHalf(3, &v).code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace dsinfer
