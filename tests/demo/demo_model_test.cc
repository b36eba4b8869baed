// The trained demo model on the CPU (issue 26): its held-out loss (nats/token over four 512-token
// windows of held-out Debian documentation, tests/data/demo_heldout_windows.json) stays under the
// bound of its first training run, and its MTP layer's greedy draft agrees with the main model's
// greedy next-next token (teacher-forced, as tools/demo_model/train.py measures it) as often as
// training measured. The loss goal (5.0) is not met yet: see docs/perf.md.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

#include "model/deepseek_v4/model.h"

namespace dsinfer::model::deepseek_v4 {
namespace {

// The first run: 5.7494 nats/token and agreement 0.4677 on these windows (train.py's own 16
// windows: 5.68 and 0.46).
constexpr double kMaxHeldoutLoss = 5.85;
constexpr double kMinMtpAgreement = 0.40;

std::vector<std::vector<int32_t>> Windows() {
  std::ifstream f(std::string(DSINFER_SOURCE_DIR) + "/tests/data/demo_heldout_windows.json");
  return nlohmann::json::parse(f)["windows"].get<std::vector<std::vector<int32_t>>>();
}

TEST(DemoModelTest, HeldoutLossAndMtpAgreement) {
  auto model = Model::Load(std::string(DSINFER_BINARY_DIR) + "/demo_model", {0});
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  Model& m = **model;
  ASSERT_TRUE(m.has_mtp());
  const int64_t V = m.config().vocab_size;
  double nll = 0;
  int64_t count = 0, agree = 0, pairs = 0;
  for (const auto& w : Windows()) {
    ASSERT_EQ(w.size(), 513u);
    const std::vector<int32_t> in(w.begin(), w.end() - 1);
    auto state = m.NewSequence();
    auto out = m.Forward({{state.get(), in}}, LogitsRows::kAll, /*keep_streams=*/true);
    ASSERT_TRUE(out.ok()) << out.status().ToString();
    std::vector<int32_t> main_next(in.size());
    for (size_t i = 0; i < in.size(); ++i) {
      const float* row = out->logits.data() + static_cast<int64_t>(i) * V;
      const float mx = *std::max_element(row, row + V);
      double sum = 0;
      for (int64_t v = 0; v < V; ++v) sum += std::exp(static_cast<double>(row[v]) - mx);
      nll += std::log(sum) + mx - row[w[i + 1]];
      ++count;
      main_next[i] = static_cast<int32_t>(std::max_element(row, row + V) - row);
    }
    // MTP row i pairs the main streams at i with the true token i + 1 and predicts token i + 2.
    auto mtp_state = m.NewSequence();
    const std::vector<int32_t> next(w.begin() + 1, w.end());
    auto mtp = m.ForwardMtp({{mtp_state.get(), out->streams, next}}, LogitsRows::kAll);
    ASSERT_TRUE(mtp.ok()) << mtp.status().ToString();
    for (size_t i = 0; i + 1 < in.size(); ++i) {
      const float* row = mtp->logits.data() + static_cast<int64_t>(i) * V;
      agree += static_cast<int32_t>(std::max_element(row, row + V) - row) == main_next[i + 1];
      ++pairs;
    }
  }
  const double loss = nll / static_cast<double>(count);
  const double agreement = static_cast<double>(agree) / static_cast<double>(pairs);
  std::printf("held-out loss %.4f nats/token over %lld tokens; MTP agreement %.4f over %lld rows\n", loss,
              static_cast<long long>(count), agreement, static_cast<long long>(pairs));
  EXPECT_LT(loss, kMaxHeldoutLoss);
  EXPECT_GT(agreement, kMinMtpAgreement);
}

}  // namespace
}  // namespace dsinfer::model::deepseek_v4
