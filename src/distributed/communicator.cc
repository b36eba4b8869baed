#include "distributed/communicator.h"

#include <condition_variable>
#include <mutex>
#include <utility>

#include "base/check.h"

namespace dsinfer::distributed {

namespace {

// The group's shared mailboxes. A collective has two phases: every rank posts (the last one to
// arrive opens the round), then every rank takes its mail (the last one to leave closes it). A
// rank that starts its next collective early waits until the previous round is closed.
class LocalHub {
 public:
  explicit LocalHub(int size) : size_(size), mail_(size, std::vector<Bytes>(size)) {}

  StatusOr<std::vector<Bytes>> Exchange(int rank, std::vector<Bytes> send) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return !open_ || !status_.ok(); });
    if (!status_.ok()) return status_;
    mail_[rank] = std::move(send);
    const uint64_t round = round_;
    if (++arrived_ == size_) {
      open_ = true;
      ++round_;
      cv_.notify_all();
    } else {
      cv_.wait(lock, [&] { return round_ != round || !status_.ok(); });
      if (!status_.ok()) return status_;
    }
    std::vector<Bytes> recv(static_cast<size_t>(size_));
    for (int r = 0; r < size_; ++r) recv[r] = std::move(mail_[r][rank]);
    if (++left_ == size_) {
      open_ = false;
      arrived_ = left_ = 0;
      cv_.notify_all();
    }
    return recv;
  }

  void Abort(const Status& why) {
    std::lock_guard<std::mutex> lock(mu_);
    if (status_.ok()) status_ = why.ok() ? Internal("the group was aborted") : why;
    cv_.notify_all();
  }

  int size() const { return size_; }

 private:
  const int size_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::vector<Bytes>> mail_;  // [from][to]
  int arrived_ = 0, left_ = 0;
  bool open_ = false;  // every rank posted; some have not taken their mail yet
  uint64_t round_ = 0;
  Status status_ = Status::Ok();
};

class LocalCommunicator final : public Communicator {
 public:
  LocalCommunicator(std::shared_ptr<LocalHub> hub, int rank) : hub_(std::move(hub)), rank_(rank) {}

  int rank() const override { return rank_; }
  int size() const override { return hub_->size(); }
  StatusOr<std::vector<Bytes>> AllToAll(std::vector<Bytes> send) override {
    if (static_cast<int>(send.size()) != size()) {
      const Status why = InvalidArgument("AllToAll: " + std::to_string(send.size()) +
                                         " buffers for a group of " + std::to_string(size()));
      hub_->Abort(why);  // the other ranks would wait for this one forever
      return why;
    }
    return hub_->Exchange(rank_, std::move(send));
  }
  Status Barrier() override {
    DSINFER_ASSIGN_OR_RETURN(auto unused, hub_->Exchange(rank_, std::vector<Bytes>(size())));
    (void)unused;
    return Status::Ok();
  }
  void Abort(const Status& why) override { hub_->Abort(why); }

 private:
  std::shared_ptr<LocalHub> hub_;
  int rank_;
};

}  // namespace

std::vector<std::unique_ptr<Communicator>> MakeLocalGroup(int size) {
  DSINFER_CHECK(size >= 1);
  auto hub = std::make_shared<LocalHub>(size);
  std::vector<std::unique_ptr<Communicator>> group;
  for (int r = 0; r < size; ++r) group.push_back(std::make_unique<LocalCommunicator>(hub, r));
  return group;
}

}  // namespace dsinfer::distributed
