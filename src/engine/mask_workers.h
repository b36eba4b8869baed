// MaskWorkers: the grammar masks of a step's constrained draws, computed on worker threads while
// the step's forward runs — a step's masks depend on the tokens drawn just before it, so they
// cannot be made earlier (issue 24). A MaskJob is one completion's masks for one step, one per
// row it draws at (its next token's and, in a speculative verify chunk, each draft's after the
// drafts before it), computed from a snapshot of the completion's matcher, so the engine thread
// goes on advancing the matcher itself meanwhile. A job may first apply emitted tokens that the
// engine thread did not (the automaton was busy computing a mask when they were emitted): it then
// reports the states and whether the constraint failed or completed there, and the engine takes
// them over (Matcher::Append). The engine keeps a job until its masks are used:
// a draw that sits out a step because its mask was late finds the same job (done, or still
// running) when its row runs again. A job publishes its rows' masks one by one (rows_ready), so a
// verify chunk whose later rows are late can still draw at the rows that are ready. The engine
// thread starts jobs and waits for them; the workers run them. Start and Wait are called from one
// thread (the engine's); MaskJob::done, rows_ready and Cancel from any.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "base/work_queue.h"
#include "structured/matcher.h"

namespace dsinfer::engine {

// What one job computes masks for.
struct MaskRequest {
  uint64_t request = 0;  // the completion (for the test hook)
  int index = 0;
  int64_t position = 0;         // of the first row's draw
  structured::Matcher matcher;  // a snapshot at the first row's state (Matcher::Snapshot)
  bool active = true;           // false: reasoning; the constraint starts after </think>
  std::vector<int32_t> drafts;  // rows = drafts + 1; row k's mask is after drafts[0, k)
  std::vector<int32_t> behind;  // emitted tokens to apply to `matcher` first
};

class MaskJob {
 public:
  explicit MaskJob(MaskRequest request)
      : request_(std::move(request)), after_behind_(request_.matcher) {}
  MaskJob(const MaskJob&) = delete;
  MaskJob& operator=(const MaskJob&) = delete;

  int64_t position() const { return request_.position; }
  const std::vector<int32_t>& drafts() const { return request_.drafts; }
  int rows() const { return static_cast<int>(request_.drafts.size()) + 1; }
  bool done() const { return done_.load(std::memory_order_acquire); }
  // The rows whose masks are computed: masks()[0, rows_ready()) may be read before done() (the
  // `behind` tokens, if any, were applied without error and did not complete the constraint).
  int rows_ready() const { return rows_ready_.load(std::memory_order_acquire); }
  // Once done(): a mask per row, null where the constraint is not active yet; none when the
  // `behind` tokens failed or completed the constraint. (Before: see rows_ready.)
  const std::vector<std::shared_ptr<const structured::TokenMask>>& masks() const { return masks_; }
  // Its remaining rows are not needed (a verify chunk drew without them): the worker stops before
  // the next row, so the automaton is free for other jobs sooner. done() still comes.
  void Cancel() { cancelled_.store(true, std::memory_order_relaxed); }
  // Once done(), for the `behind` tokens: their outcome (an error, or the constraint completed),
  // and the matcher after them.
  int num_behind() const { return static_cast<int>(request_.behind.size()); }
  const Status& behind_status() const { return behind_status_; }
  bool completed() const { return completed_; }
  const structured::Matcher& after_behind() const { return after_behind_; }

 private:
  friend class MaskWorkers;
  // Computes the masks (on a worker). `think_end_id`: the token that activates the constraint;
  // `before_row(row)`: the test hook, run before each row's mask holding the automaton.
  void Run(int32_t think_end_id, const std::function<void(int row)>& before_row);

  MaskRequest request_;
  structured::Matcher after_behind_;  // request_.matcher after the behind tokens
  Status behind_status_;
  bool completed_ = false;
  std::vector<std::shared_ptr<const structured::TokenMask>> masks_;  // [rows()] once running
  std::atomic<int> rows_ready_{0};
  std::atomic<bool> cancelled_{false};
  std::atomic<bool> done_{false};
};

class MaskWorkers {
 public:
  using Clock = std::chrono::steady_clock;
  // Tests: runs on the worker before each row's mask, with the job's completion and the row's
  // position (a verify chunk's job: one call per row), holding the job's automaton as a mask
  // computation does (a test delays or blocks a mask deterministically this way, as a slow mask
  // would). Never set in production.
  using Hook = std::function<void(uint64_t request, int index, int64_t position)>;

  // `think_end_id`: "</think>" (-1: none), which starts the constraint of a thinking chat.
  MaskWorkers(int num_threads, int32_t think_end_id, Hook hook);
  // Waits for the jobs running (a blocked test hook must be released first); drops queued ones.
  ~MaskWorkers() = default;

  std::shared_ptr<MaskJob> Start(MaskRequest request);
  // Blocks until every one of `jobs` is done, or `until` has come (nullopt: no limit); returns
  // whether all are done.
  bool Wait(const std::vector<const MaskJob*>& jobs, std::optional<Clock::time_point> until);

 private:
  int32_t think_end_id_;
  Hook hook_;
  std::mutex mu_;
  std::condition_variable done_cv_;  // a job finished
  WorkQueue queue_;                  // last: its workers are joined before the members above go
};

}  // namespace dsinfer::engine
