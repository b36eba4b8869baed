// Expert parallelism in the CUDA model (CudaModel::SetExpertParallel): each MoE layer's routed
// experts through the group, staged on the host. The pairs and rows go out and the outputs come
// back through the communicator's all-to-alls (expert_exchange.h, the CPU model's messages); this
// rank's experts run over the rows it received with the same expert kernels, grouped by expert as
// the route's grouping would, so every row gets the bits it gets in the single model.
#include <string>
#include <utility>
#include <vector>

#include "distributed/communicator.h"
#include "distributed/expert_placement.h"
#include "model/deepseek_v4/cuda/cuda_model_impl.h"
#include "model/deepseek_v4/expert_exchange.h"

namespace dsinfer::model::deepseek_v4::cuda {

void CudaModel::Impl::RunReceivedExperts(const BlockW& w, const std::vector<float>& rows,
                                         const std::vector<int32_t>& experts,
                                         const std::vector<int64_t>& starts, float* out) {
  const int64_t D = c.hidden_size, I = c.moe_intermediate_size;
  const int64_t R = static_cast<int64_t>(starts.back());
  const int slots = static_cast<int>(experts.size());
  const int64_t E = w.moe_experts > 0 ? w.moe_experts : c.n_routed_experts;
  if (R > ep_rows) {
    ep_x = gpu::DeviceBuffer(static_cast<size_t>(R * D) * 4);
    ep_y = gpu::DeviceBuffer(static_cast<size_t>(R * D) * 4);
    ep_g = gpu::DeviceBuffer(static_cast<size_t>(R * I) * 4);
    ep_u = gpu::DeviceBuffer(static_cast<size_t>(R * I) * 4);
    ep_meta = gpu::DeviceBuffer(static_cast<size_t>(R + 2 * E + 2) * 4);
    ep_rows = R;
  }
  // The grouping as LaunchMoeGroup leaves it: the active experts, their count, each one's start
  // in the pair list, and the pair list (the rows are grouped already: row r is pair r).
  std::vector<int32_t> meta;
  meta.reserve(static_cast<size_t>(2 * slots + 2 + R));
  meta.insert(meta.end(), experts.begin(), experts.end());
  meta.push_back(slots);
  for (const int64_t start : starts) meta.push_back(static_cast<int32_t>(start));
  for (int64_t r = 0; r < R; ++r) meta.push_back(static_cast<int32_t>(r));
  const gpu::StreamHandle s = cur_stream();
  gpu::CopyToDevice(ep_x.get(), rows.data(), static_cast<size_t>(R * D) * 4, s);
  gpu::CopyToDevice(ep_meta.get(), meta.data(), meta.size() * 4, s);
  const int32_t* m = ep_meta.as<int32_t>();
  const ExpertsW& ex = w.experts;
  auto params = [&](const WeightRef& shape, const void** data, const void** scale, const float* x,
                    int64_t ldx, float* yout, int64_t ldy) {
    gpu::ExpertLinearParams p;
    p.shape = shape;
    p.data = data;
    p.scale = scale;
    p.x = x;
    p.ldx = ldx;
    p.x_row_div = 1;
    p.y = yout;
    p.ldy = ldy;
    p.active = m;
    p.num_active = m + slots;
    p.offsets = m + slots + 1;
    p.pairs = m + 2 * slots + 2;
    p.max_slots = slots;
    p.total_pairs = R;
    p.aq = Aq();
    return p;
  };
  gpu::LaunchExpertLinearSwiglu(
      params(ex.w1, ex.w1_data, ex.w1_scale, ep_x.as<float>(), D, ep_g.as<float>(), I), ex.w3_data,
      ex.w3_scale, ep_u.as<float>(), static_cast<float>(c.swiglu_limit), s);
  gpu::LaunchExpertLinear(
      params(ex.w2, ex.w2_data, ex.w2_scale, ep_g.as<float>(), I, ep_y.as<float>(), D), s);
  gpu::CopyToHost(out, ep_y.get(), static_cast<size_t>(R * D) * 4, s);
  gpu::SynchronizeStream(s);
}

void CudaModel::Impl::ExchangeExperts(const BlockW& w, int layer, int64_t n) {
  if (!ep_status.ok()) return;  // the group failed earlier in this forward
  const int64_t D = c.hidden_size;
  const int64_t E = w.moe_experts > 0 ? w.moe_experts : c.n_routed_experts;
  const int64_t K = w.moe_topk > 0 ? w.moe_topk : c.num_experts_per_tok;
  const int64_t P = n * K;
  const distributed::ExpertPlacement& place = (*ep_rank.placements)[static_cast<size_t>(layer)];
  distributed::Communicator& comm = *ep_rank.comm;
  const int me = comm.rank();
  const gpu::StreamHandle s = cur_stream();
  std::vector<int32_t> pair_expert(static_cast<size_t>(P));
  std::vector<float> x(static_cast<size_t>(n * D));
  if (n > 0) {  // the route and the normalized rows (the main stream's work so far)
    gpu::CopyToHost(pair_expert.data(), rsel, pair_expert.size() * 4, s);
    gpu::CopyToHost(x.data(), xn, x.size() * 4, s);
    gpu::SynchronizeStream(s);
  }
  auto fail = [&](Status why) {
    comm.Abort(why);
    ep_status = std::move(why);
  };
  ExpertDispatch dispatch = PackExpertDispatch(place, me, pair_expert.data(), P, K, x.data(), D);
  StatusOr<std::vector<distributed::Bytes>> recv = comm.AllToAll(std::move(dispatch.send));
  if (!recv.ok()) return fail(recv.status());
  StatusOr<ExpertWork> work = GroupExpertWork(*recv, static_cast<int>(E), D, me, [&](int e) {
    return place.Holds(me, e) && ep_holds(layer, e);
  });
  if (!work.ok()) return fail(work.status());
  recv->clear();
  std::vector<float> out(work->rows.size());
  if (work->total() > 0)
    RunReceivedExperts(w, work->rows, work->experts, work->offsets, out.data());
  StatusOr<std::vector<distributed::Bytes>> back =
      comm.AllToAll(PackExpertReplies(*work, out.data(), D, comm.size()));
  if (!back.ok()) return fail(back.status());
  std::vector<float> answers(static_cast<size_t>(P * D));
  if (Status st = ScatterExpertReplies(*back, dispatch, D, answers.data()); !st.ok()) {
    return fail(st);
  }
  if (P > 0) {  // where the routed experts' outputs go (the combine in the mHC post reads them)
    gpu::CopyToDevice(ys, answers.data(), answers.size() * 4, s);
    gpu::SynchronizeStream(s);
  }
}

Status CudaModel::SetExpertParallel(const ExpertParallelRank& rank) {
  Impl& m = *impl_;
  if (rank.comm == nullptr || rank.placements == nullptr) {
    return InvalidArgument("expert parallelism: a group and the layers' placements are required");
  }
  if (m.v41 != nullptr) return Unimplemented("expert parallelism on the GPU runs DeepSeek-V4 only");
  if (m.opt.paged || m.has_mtp) {
    return Unimplemented("expert parallelism on the GPU runs slot-mode forwards (no engine yet)");
  }
  if (!m.ep_holds) {
    return InvalidArgument("expert parallelism: load the rank's model with its expert filter");
  }
  const int r = rank.comm->rank();
  if (static_cast<int64_t>(rank.placements->size()) != m.c.num_layers) {
    return InvalidArgument("expert parallelism: " + std::to_string(rank.placements->size()) +
                           " placements for " + std::to_string(m.c.num_layers) + " layers");
  }
  for (int l = 0; l < m.c.num_layers; ++l) {
    const distributed::ExpertPlacement& p = (*rank.placements)[static_cast<size_t>(l)];
    if (p.ranks() != rank.comm->size() || p.experts() != m.c.n_routed_experts) {
      return InvalidArgument("expert parallelism: layer " + std::to_string(l) +
                             "'s placement is not of this group and model");
    }
    for (const int32_t e : p.ExpertsOf(r)) {
      if (!m.ep_holds(l, e)) {
        return InvalidArgument("expert parallelism: rank " + std::to_string(r) +
                               " did not load expert " + std::to_string(e) + " of layer " +
                               std::to_string(l) + ", which its placement gives it");
      }
    }
  }
  m.ep_rank = rank;
  m.ep_status = Status::Ok();
  return Status::Ok();
}

Status CudaModel::ForwardIdle() {
  Impl& m = *impl_;
  if (m.ep_rank.comm == nullptr) return InvalidArgument("ForwardIdle: no expert parallelism set");
  m.ep_status = Status::Ok();
  for (int l = 0; l < m.c.num_layers; ++l) m.ExchangeExperts(m.layers[l], l, 0);
  return std::exchange(m.ep_status, Status::Ok());
}

}  // namespace dsinfer::model::deepseek_v4::cuda
