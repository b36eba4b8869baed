// The Communicator over NCCL (CUDA builds with NCCL; DSINFER_HAVE_NCCL): one rank per GPU in this
// process, a thread per rank, as issue 30's multi-GPU layout runs them. AllToAll takes and returns
// host bytes like the in-process group: the sizes are exchanged first (one int64 per pair), then
// the bytes, each through a device buffer of the rank's GPU with grouped ncclSend / ncclRecv on the
// rank's own stream. Abort aborts every rank's NCCL communicator (ncclCommAbort), so a rank
// waiting in an exchange returns the abort status instead of waiting for a rank that failed.
#pragma once

#include <memory>
#include <vector>

#include "base/status.h"
#include "distributed/communicator.h"

namespace dsinfer::distributed {

// Whether this build has the NCCL communicator.
bool NcclAvailable();
// One rank per device of `devices` (CUDA ordinals, distinct), rank i on devices[i].
StatusOr<std::vector<std::unique_ptr<Communicator>>> MakeNcclGroup(const std::vector<int>& devices);

}  // namespace dsinfer::distributed
