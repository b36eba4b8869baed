#include "model/deepseek_v4/expert_exchange.h"

#include <cstring>
#include <string>

namespace dsinfer::model::deepseek_v4 {

namespace {

void Put(distributed::Bytes& b, const void* p, size_t bytes) {
  const auto* c = static_cast<const uint8_t*>(p);
  b.insert(b.end(), c, c + bytes);
}

}  // namespace

ExpertDispatch PackExpertDispatch(const distributed::ExpertPlacement& placement, int me,
                                  const int32_t* sel, int64_t pairs, int64_t K, const float* x,
                                  int64_t D) {
  const int ranks = placement.ranks();
  ExpertDispatch d;
  d.send.resize(static_cast<size_t>(ranks));
  d.sent.resize(static_cast<size_t>(ranks));
  const size_t row_bytes = static_cast<size_t>(D) * sizeof(float);
  // This rank's rows of each expert so far: a replicated expert's rows take its holders in turn.
  std::vector<int64_t> nth(static_cast<size_t>(placement.experts()), 0);
  for (int64_t p = 0; p < pairs; ++p) {
    const int32_t e = sel[p];
    const int dest = placement.RankFor(e, me, nth[e]++);
    d.sent[dest].push_back(p);
    Put(d.send[dest], &e, sizeof(e));
    Put(d.send[dest], x + (p / K) * D, row_bytes);
  }
  return d;
}

StatusOr<ExpertWork> GroupExpertWork(const std::vector<distributed::Bytes>& recv, int E, int64_t D,
                                     int me, const std::function<bool(int)>& holds) {
  const size_t row_bytes = static_cast<size_t>(D) * sizeof(float);
  const size_t record = sizeof(int32_t) + row_bytes;
  std::vector<std::vector<std::pair<int, int64_t>>> by_expert(static_cast<size_t>(E));
  ExpertWork w;
  w.received.assign(recv.size(), 0);
  for (size_t from = 0; from < recv.size(); ++from) {
    const distributed::Bytes& m = recv[from];
    if (m.size() % record != 0) return Internal("expert parallelism: a malformed dispatch message");
    const int64_t count = static_cast<int64_t>(m.size() / record);
    w.received[from] = count;
    for (int64_t i = 0; i < count; ++i) {
      int32_t e;
      std::memcpy(&e, m.data() + i * record, sizeof(e));
      if (e < 0 || e >= E || !holds(e)) {
        return Internal("expert parallelism: rank " + std::to_string(me) +
                        " was sent rows of expert " + std::to_string(e) +
                        ", which it does not hold");
      }
      by_expert[e].emplace_back(static_cast<int>(from), i);
    }
  }
  w.offsets.push_back(0);
  for (int e = 0; e < E; ++e) {
    if (by_expert[e].empty()) continue;
    w.experts.push_back(e);
    w.origin.insert(w.origin.end(), by_expert[e].begin(), by_expert[e].end());
    w.offsets.push_back(static_cast<int64_t>(w.origin.size()));
  }
  w.rows.resize(w.origin.size() * static_cast<size_t>(D));
  for (size_t r = 0; r < w.origin.size(); ++r) {
    const auto [from, index] = w.origin[r];
    std::memcpy(w.rows.data() + r * D, recv[from].data() + index * record + sizeof(int32_t),
                row_bytes);
  }
  return w;
}

std::vector<distributed::Bytes> PackExpertReplies(const ExpertWork& work, const float* outputs,
                                                  int64_t D, int ranks) {
  const size_t row_bytes = static_cast<size_t>(D) * sizeof(float);
  std::vector<distributed::Bytes> reply(static_cast<size_t>(ranks));
  for (int from = 0; from < ranks; ++from) {
    reply[from].resize(static_cast<size_t>(work.received[from]) * row_bytes);
  }
  for (int64_t r = 0; r < work.total(); ++r) {
    const auto [from, index] = work.origin[r];
    std::memcpy(reply[from].data() + index * row_bytes, outputs + r * D, row_bytes);
  }
  return reply;
}

Status ScatterExpertReplies(const std::vector<distributed::Bytes>& back,
                            const ExpertDispatch& dispatch, int64_t D, float* y) {
  const size_t row_bytes = static_cast<size_t>(D) * sizeof(float);
  for (size_t dest = 0; dest < back.size(); ++dest) {
    const std::vector<int64_t>& sent = dispatch.sent[dest];
    if (back[dest].size() != sent.size() * row_bytes) {
      return Internal("expert parallelism: a malformed combine message");
    }
    for (size_t i = 0; i < sent.size(); ++i) {
      std::memcpy(y + sent[i] * D, back[dest].data() + i * row_bytes, row_bytes);
    }
  }
  return Status::Ok();
}

}  // namespace dsinfer::model::deepseek_v4
