// Collectives between the ranks of a group (expert parallelism's token dispatch and combine). Every
// rank of a group calls each collective, in the same order; a call returns once every rank has
// made it. The in-process group (MakeLocalGroup) joins threads of one process: the CPU backend's
// expert parallelism and the tests' simulated ranks. A rank that fails aborts the group, so the
// others' pending and later calls return its error instead of waiting for it forever.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "base/status.h"

namespace dsinfer::distributed {

using Bytes = std::vector<uint8_t>;

class Communicator {
 public:
  virtual ~Communicator() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;
  // Variable-size all-to-all: send[r] (size() buffers) goes to rank r; returns recv, recv[r] being
  // what rank r sent to this one. The group's abort status once it was aborted.
  virtual StatusOr<std::vector<Bytes>> AllToAll(std::vector<Bytes> send) = 0;
  // Returns once every rank has called it (or the abort status).
  virtual Status Barrier() = 0;
  // Fails the group (a no-op when it failed already): every rank's pending and later collectives
  // return `why`.
  virtual void Abort(const Status& why) = 0;
};

// A group of `size` ranks in this process (size >= 1), one Communicator per rank; each must be used
// by one thread at a time, and the ranks' calls come from different threads.
std::vector<std::unique_ptr<Communicator>> MakeLocalGroup(int size);

}  // namespace dsinfer::distributed
