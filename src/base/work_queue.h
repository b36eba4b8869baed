// WorkQueue: a fixed set of worker threads that run submitted tasks, first submitted first
// started. Unlike ThreadPool's ParallelFor, Submit does not wait: the submitter learns of a task's
// end through whatever the task itself signals. Submit is thread-safe. The destructor drops the
// tasks not started yet and waits for the running ones (a task must not wait for its queue's
// owner).
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace dsinfer {

class WorkQueue {
 public:
  explicit WorkQueue(int num_threads);  // >= 1
  ~WorkQueue();
  WorkQueue(const WorkQueue&) = delete;
  WorkQueue& operator=(const WorkQueue&) = delete;

  void Submit(std::function<void()> task);

 private:
  void WorkerLoop();

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> tasks_;
  bool stop_ = false;
  std::vector<std::thread> workers_;  // last: started after, joined before the members above go
};

}  // namespace dsinfer
