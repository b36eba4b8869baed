// ProgressBar: a one-line progress display on stderr for long runs, redrawn by its own thread from
// a polled callback (so the engine never waits for the terminal). Draws only when stderr is a
// terminal. Start/Stop from one thread.
#pragma once

#include <atomic>
#include <functional>
#include <string>
#include <thread>

namespace dsinfer::cli {

class ProgressBar {
 public:
  // `poll` returns (done, total, extra text); called every 200 ms on the bar's thread.
  using Poll = std::function<void(int64_t* done, int64_t* total, std::string* extra)>;
  explicit ProgressBar(Poll poll);
  ~ProgressBar();
  void Stop();

 private:
  void Draw(bool final);
  Poll poll_;
  bool enabled_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace dsinfer::cli
