#include "engine/mask_workers.h"

#include <algorithm>

#include "base/check.h"

namespace dsinfer::engine {

void MaskJob::Run(int32_t think_end_id, const std::function<void(int row)>& before_row) {
  structured::Matcher& m = request_.matcher;
  if (!request_.behind.empty()) {
    for (int32_t t : request_.behind) {
      behind_status_ = m.Advance(t);
      if (!behind_status_.ok()) return;
    }
    after_behind_ = m;
    completed_ = m.IsCompleted();
    if (completed_) return;
  }
  bool active = request_.active;
  masks_.resize(request_.drafts.size() + 1);
  for (size_t row = 0;; ++row) {
    if (row > 0 && cancelled_.load(std::memory_order_relaxed)) return;
    if (before_row) before_row(static_cast<int>(row));
    if (active) masks_[row] = m.Mask();
    rows_ready_.store(static_cast<int>(row) + 1, std::memory_order_release);
    if (row == request_.drafts.size()) break;
    const int32_t t = request_.drafts[row];
    if (active) {
      DSINFER_CHECK(m.Advance(t).ok());  // the engine kept only drafts the constraint allows
    } else if (t == think_end_id) {
      active = true;
    }
  }
}

MaskWorkers::MaskWorkers(int num_threads, int32_t think_end_id, Hook hook)
    : think_end_id_(think_end_id), hook_(std::move(hook)), queue_(num_threads) {}

std::shared_ptr<MaskJob> MaskWorkers::Start(MaskRequest request) {
  auto job = std::make_shared<MaskJob>(std::move(request));
  queue_.Submit([this, job] {
    std::function<void(int)> before_row;
    if (hook_) {
      before_row = [this, &job](int row) {
        const MaskRequest& r = job->request_;
        r.matcher.automaton().RunExclusive([&] { hook_(r.request, r.index, r.position + row); });
      };
    }
    job->Run(think_end_id_, before_row);
    {
      std::lock_guard<std::mutex> lock(mu_);
      job->done_.store(true, std::memory_order_release);
    }
    done_cv_.notify_all();
  });
  return job;
}

bool MaskWorkers::Wait(const std::vector<const MaskJob*>& jobs,
                       std::optional<Clock::time_point> until) {
  const auto all_done = [&] {
    return std::all_of(jobs.begin(), jobs.end(), [](const MaskJob* j) { return j->done(); });
  };
  std::unique_lock<std::mutex> lock(mu_);
  if (!until) {
    done_cv_.wait(lock, all_done);
    return true;
  }
  return done_cv_.wait_until(lock, *until, all_done);
}

}  // namespace dsinfer::engine
