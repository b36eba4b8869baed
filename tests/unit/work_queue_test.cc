#include "base/work_queue.h"

#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <vector>

namespace dsinfer {
namespace {

// Waits until `n` tasks have counted themselves.
struct Counter {
  std::mutex mu;
  std::condition_variable cv;
  int done = 0;
  void Add() {
    std::lock_guard<std::mutex> lock(mu);
    ++done;
    cv.notify_all();
  }
  void WaitFor(int n) {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return done >= n; });
  }
};

TEST(WorkQueueTest, OneWorkerRunsTasksInSubmissionOrder) {
  Counter counter;
  std::vector<int> order;  // written by the one worker only
  WorkQueue queue(1);
  for (int i = 0; i < 50; ++i) {
    queue.Submit([&, i] {
      order.push_back(i);
      counter.Add();
    });
  }
  counter.WaitFor(50);
  ASSERT_EQ(order.size(), 50u);
  for (int i = 0; i < 50; ++i) EXPECT_EQ(order[i], i);
}

TEST(WorkQueueTest, TasksRunBesideABlockedOne) {
  // One task blocks a worker; the other worker still runs every later task, and Submit never
  // waits for either.
  std::mutex mu;
  std::condition_variable cv;
  bool release = false;
  Counter counter;
  std::atomic<int> sum{0};
  {
    WorkQueue queue(2);
    queue.Submit([&] {
      std::unique_lock<std::mutex> lock(mu);
      cv.wait(lock, [&] { return release; });
      counter.Add();
    });
    for (int i = 1; i <= 20; ++i) {
      queue.Submit([&, i] {
        sum += i;
        counter.Add();
      });
    }
    counter.WaitFor(20);
    EXPECT_EQ(sum.load(), 210);
    {
      std::lock_guard<std::mutex> lock(mu);
      release = true;
    }
    cv.notify_all();
    counter.WaitFor(21);
  }  // the destructor joins idle workers
  EXPECT_EQ(counter.done, 21);
}

}  // namespace
}  // namespace dsinfer
