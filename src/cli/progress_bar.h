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
  // `unit` names what is counted ("requests", "MiB of weights"); nothing is drawn while the
  // total is 0 (unknown yet, or nothing to count).
  explicit ProgressBar(Poll poll, std::string unit = "requests");
  ~ProgressBar();
  void Stop();

 private:
  void Draw(bool final);
  Poll poll_;
  std::string unit_;
  bool enabled_;
  bool drawn_ = false;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace dsinfer::cli
