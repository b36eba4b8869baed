#include "cli/progress_bar.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>

namespace dsinfer::cli {

ProgressBar::ProgressBar(Poll poll, std::string unit)
    : poll_(std::move(poll)), unit_(std::move(unit)), enabled_(::isatty(STDERR_FILENO)) {
  if (!enabled_) return;
  thread_ = std::thread([this] {
    while (!stop_.load()) {
      Draw(false);
      for (int i = 0; i < 4 && !stop_.load(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  });
}

ProgressBar::~ProgressBar() { Stop(); }

void ProgressBar::Stop() {
  if (!enabled_ || stop_.exchange(true)) return;
  thread_.join();
  Draw(true);
}

void ProgressBar::Draw(bool final) {
  int64_t done = 0, total = 0;
  std::string extra;
  poll_(&done, &total, &extra);
  if (total == 0 && !drawn_) return;
  drawn_ = true;
  constexpr int kWidth = 30;
  const int fill = total > 0 ? static_cast<int>(kWidth * done / total) : 0;
  std::string bar(static_cast<size_t>(fill), '#');
  bar.append(static_cast<size_t>(kWidth - fill), '.');
  std::fprintf(stderr, "\r[%s] %lld/%lld %s  %s\033[K%s", bar.c_str(), static_cast<long long>(done),
               static_cast<long long>(total), unit_.c_str(), extra.c_str(), final ? "\n" : "");
  std::fflush(stderr);
}

}  // namespace dsinfer::cli
