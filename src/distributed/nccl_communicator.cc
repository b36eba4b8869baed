#include "distributed/nccl_communicator.h"

#ifdef DSINFER_HAVE_NCCL
#include <cuda_runtime.h>
#include <nccl.h>

#include <cstring>
#include <mutex>
#include <string>
#include <utility>
#endif

namespace dsinfer::distributed {

#ifndef DSINFER_HAVE_NCCL

bool NcclAvailable() { return false; }

StatusOr<std::vector<std::unique_ptr<Communicator>>> MakeNcclGroup(const std::vector<int>&) {
  return Unimplemented("this build has no NCCL (a CUDA build with NCCL found has)");
}

#else

namespace {

Status CudaStatus(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return Status::Ok();
  return Internal(std::string(what) + ": " + cudaGetErrorString(e));
}
Status NcclStatus(ncclResult_t r, const char* what) {
  if (r == ncclSuccess) return Status::Ok();
  return Internal(std::string(what) + ": " + ncclGetErrorString(r));
}

// What the ranks share: their NCCL communicators (for Abort) and the group's status.
struct NcclGroup {
  std::vector<ncclComm_t> comms;
  std::mutex mu;
  Status status = Status::Ok();
};

class NcclCommunicator final : public Communicator {
 public:
  NcclCommunicator(std::shared_ptr<NcclGroup> group, int rank, int device)
      : group_(std::move(group)), rank_(rank), device_(device) {}
  ~NcclCommunicator() override {
    cudaSetDevice(device_);
    if (buf_ != nullptr) cudaFree(buf_);
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
    // Each rank's NCCL communicator is its own to destroy, unless an abort freed it already.
    if (GroupStatus().ok()) ncclCommDestroy(group_->comms[rank_]);
  }

  int rank() const override { return rank_; }
  int size() const override { return static_cast<int>(group_->comms.size()); }

  StatusOr<std::vector<Bytes>> AllToAll(std::vector<Bytes> send) override {
    DSINFER_RETURN_IF_ERROR(GroupStatus());
    const int n = size();
    if (static_cast<int>(send.size()) != n) {
      const Status why = InvalidArgument("AllToAll: " + std::to_string(send.size()) +
                                         " buffers for a group of " + std::to_string(n));
      Abort(why);
      return why;
    }
    Status st = Exchange(send);
    if (!st.ok()) {
      Abort(st);
      return GroupStatus();
    }
    return std::move(recv_);
  }

  Status Barrier() override {
    DSINFER_ASSIGN_OR_RETURN(auto unused, AllToAll(std::vector<Bytes>(size())));
    (void)unused;
    return Status::Ok();
  }

  void Abort(const Status& why) override {
    std::lock_guard<std::mutex> lock(group_->mu);
    if (!group_->status.ok()) return;
    group_->status = why.ok() ? Internal("the group was aborted") : why;
    for (ncclComm_t c : group_->comms) ncclCommAbort(c);
  }

 private:
  Status GroupStatus() {
    std::lock_guard<std::mutex> lock(group_->mu);
    return group_->status;
  }

  // The device buffer, grown to `bytes`.
  Status Reserve(size_t bytes) {
    if (bytes <= cap_) return Status::Ok();
    if (buf_ != nullptr) DSINFER_RETURN_IF_ERROR(CudaStatus(cudaFree(buf_), "cudaFree"));
    buf_ = nullptr;
    DSINFER_RETURN_IF_ERROR(CudaStatus(cudaMalloc(&buf_, bytes), "cudaMalloc"));
    cap_ = bytes;
    return Status::Ok();
  }

  // One grouped round of sends (send[r] of send_bytes[r] at send offsets) and receives into the
  // buffer, all on the rank's stream; then waits for it.
  Status Round(const std::vector<size_t>& send_bytes, const std::vector<size_t>& send_at,
               const std::vector<size_t>& recv_bytes, const std::vector<size_t>& recv_at) {
    ncclComm_t comm = group_->comms[rank_];
    DSINFER_RETURN_IF_ERROR(NcclStatus(ncclGroupStart(), "ncclGroupStart"));
    for (int r = 0; r < size(); ++r) {
      if (send_bytes[r] > 0) {
        DSINFER_RETURN_IF_ERROR(NcclStatus(
            ncclSend(buf_ + send_at[r], send_bytes[r], ncclUint8, r, comm, stream_), "ncclSend"));
      }
      if (recv_bytes[r] > 0) {
        DSINFER_RETURN_IF_ERROR(NcclStatus(
            ncclRecv(buf_ + recv_at[r], recv_bytes[r], ncclUint8, r, comm, stream_), "ncclRecv"));
      }
    }
    DSINFER_RETURN_IF_ERROR(NcclStatus(ncclGroupEnd(), "ncclGroupEnd"));
    return CudaStatus(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
  }

  Status Exchange(const std::vector<Bytes>& send) {
    const int n = size();
    DSINFER_RETURN_IF_ERROR(CudaStatus(cudaSetDevice(device_), "cudaSetDevice"));
    if (stream_ == nullptr) {
      DSINFER_RETURN_IF_ERROR(CudaStatus(cudaStreamCreate(&stream_), "cudaStreamCreate"));
    }
    // Sizes: rank r's int64 to every rank (the send half of the buffer), theirs into the other.
    const size_t word = sizeof(int64_t);
    std::vector<int64_t> sizes(static_cast<size_t>(n));
    for (int r = 0; r < n; ++r) sizes[r] = static_cast<int64_t>(send[r].size());
    DSINFER_RETURN_IF_ERROR(Reserve(2 * n * word));
    DSINFER_RETURN_IF_ERROR(
        CudaStatus(cudaMemcpy(buf_, sizes.data(), n * word, cudaMemcpyHostToDevice), "cudaMemcpy"));
    std::vector<size_t> words(n, word), send_at(n), recv_at(n);
    for (int r = 0; r < n; ++r) {
      send_at[r] = r * word;
      recv_at[r] = (n + r) * word;
    }
    DSINFER_RETURN_IF_ERROR(Round(words, send_at, words, recv_at));
    std::vector<int64_t> incoming(static_cast<size_t>(n));
    DSINFER_RETURN_IF_ERROR(
        CudaStatus(cudaMemcpy(incoming.data(), buf_ + n * word, n * word, cudaMemcpyDeviceToHost),
                   "cudaMemcpy"));
    // The bytes: this rank's sends packed, then its receives.
    std::vector<size_t> send_bytes(n), recv_bytes(n);
    size_t total = 0;
    for (int r = 0; r < n; ++r) {
      send_bytes[r] = send[r].size();
      send_at[r] = total;
      total += send_bytes[r];
    }
    for (int r = 0; r < n; ++r) {
      if (incoming[r] < 0)
        return Internal("AllToAll: a negative size from rank " + std::to_string(r));
      recv_bytes[r] = static_cast<size_t>(incoming[r]);
      recv_at[r] = total;
      total += recv_bytes[r];
    }
    DSINFER_RETURN_IF_ERROR(Reserve(total > 0 ? total : 1));
    for (int r = 0; r < n; ++r) {
      if (send_bytes[r] == 0) continue;
      DSINFER_RETURN_IF_ERROR(CudaStatus(
          cudaMemcpy(buf_ + send_at[r], send[r].data(), send_bytes[r], cudaMemcpyHostToDevice),
          "cudaMemcpy"));
    }
    DSINFER_RETURN_IF_ERROR(Round(send_bytes, send_at, recv_bytes, recv_at));
    recv_.assign(static_cast<size_t>(n), Bytes());
    for (int r = 0; r < n; ++r) {
      recv_[r].resize(recv_bytes[r]);
      if (recv_bytes[r] == 0) continue;
      DSINFER_RETURN_IF_ERROR(CudaStatus(
          cudaMemcpy(recv_[r].data(), buf_ + recv_at[r], recv_bytes[r], cudaMemcpyDeviceToHost),
          "cudaMemcpy"));
    }
    return Status::Ok();
  }

  std::shared_ptr<NcclGroup> group_;
  int rank_, device_;
  cudaStream_t stream_ = nullptr;
  uint8_t* buf_ = nullptr;
  size_t cap_ = 0;
  std::vector<Bytes> recv_;
};

}  // namespace

bool NcclAvailable() { return true; }

StatusOr<std::vector<std::unique_ptr<Communicator>>> MakeNcclGroup(
    const std::vector<int>& devices) {
  int count = 0;
  DSINFER_RETURN_IF_ERROR(CudaStatus(cudaGetDeviceCount(&count), "cudaGetDeviceCount"));
  if (devices.empty()) return InvalidArgument("an NCCL group needs at least one device");
  for (size_t i = 0; i < devices.size(); ++i) {
    if (devices[i] < 0 || devices[i] >= count) {
      return InvalidArgument("device " + std::to_string(devices[i]) + " of " +
                             std::to_string(count));
    }
    for (size_t j = 0; j < i; ++j) {
      if (devices[j] == devices[i]) {
        return InvalidArgument("device " + std::to_string(devices[i]) + " twice in a group");
      }
    }
  }
  auto group = std::make_shared<NcclGroup>();
  group->comms.resize(devices.size());
  DSINFER_RETURN_IF_ERROR(NcclStatus(
      ncclCommInitAll(group->comms.data(), static_cast<int>(devices.size()), devices.data()),
      "ncclCommInitAll"));
  std::vector<std::unique_ptr<Communicator>> out;
  for (size_t i = 0; i < devices.size(); ++i) {
    out.push_back(std::make_unique<NcclCommunicator>(group, static_cast<int>(i), devices[i]));
  }
  return out;
}

#endif

}  // namespace dsinfer::distributed
