// CudaModel's per-request state: the device pools and the step's page table (paged mode for the
// engine, identity page ranges for the model's own slots), paged forwards and page copies (on the
// device, and to and from the host tier's pinned memory), and synthetic state for benchmarks.
// The forward itself is cuda_model.cc's.
#include "model/deepseek_v4/cuda/cuda_model_impl.h"
#include "model/deepseek_v41/state_layout.h"
#include "model/paged_state.h"

namespace dsinfer::model::deepseek_v4::cuda {

cache::StateLayout CudaModel::StateLayoutFor(const io::DeepseekV4Config& config, bool mtp) {
  // The CPU's row formats: with the FP8 cache, K=V rows as fp8_ds_mla and index keys as e2m1
  // (the kernels decode them, backend/cuda/packed_row.cuh).
  return DeepseekV4StateLayout(config, kRollbackSlack, mtp ? kMtpStreamRows : 0);
}

// DeepSeek-V4.1's state on the GPU: the CPU's streams (deepseek_v41/state_layout.h) with fp32 rows
// (values on their FP8 / FP4 grids): every layer's window ring, each KV source's compressor ring
// (ratio > 1), compressed entries and index keys, and the Engram token ring.
// With the DSpark drafter, each stage's context ring (W + slack rows of head_dim values on the
// FP8 grid, the CPU's kDraftStream rings).
cache::StateLayout V41GpuStateLayout(const io::DeepseekV41Config& c, bool dspark) {
  model::StateLayoutBuilder layout;
  using cache::StateKind;
  auto add = [&](StateKind kind, int64_t ring_rows, int64_t tokens_per_row, int layer, int stream,
                 int64_t width) {
    layout.Add(kind, ring_rows, tokens_per_row, layer, stream, width);
  };
  const int64_t d = c.head_dim;
  for (int l = 0; l < c.num_layers; ++l) {
    add(StateKind::kWindow, c.sliding_window - 1 + kRollbackSlack, 1, l,
        static_cast<int>(StateStream::kWindow), d);
    if (!c.IsKvSource(l)) continue;
    const int r = c.compress_ratios[l];
    if (r > 1) {
      add(StateKind::kCompressor, r + kRollbackSlack, 1, l,
          static_cast<int>(StateStream::kCompressorRows), 2 * d);
    }
    add(StateKind::kCompressed, 0, r, l, static_cast<int>(StateStream::kCompressed), d);
    add(StateKind::kIndexKeys, 0, r, l, static_cast<int>(StateStream::kIndexKeys),
        c.index_head_dim);
  }
  if (!c.engram_layer_ids.empty()) {
    add(StateKind::kWindow, c.engram_max_ngram_size - 1 + kRollbackSlack, 1, 0,
        deepseek_v41::kTokenStream, 1);
  }
  if (dspark) {  // the drafter reads the W positions before its block, after a rollback
    for (int s = 0; s < c.num_nextn_predict_layers; ++s) {
      add(StateKind::kWindow, c.sliding_window + kRollbackSlack, 1, s, deepseek_v41::kDraftStream,
          d);
    }
  }
  return layout.Build();
}

cache::StateLayout CudaModel::Impl::Layout() const {
  return v41 ? V41GpuStateLayout(v41->c, v41->ds != nullptr) : StateLayoutFor(c, MtpOn());
}

cache::StateLayout CudaModel::state_layout() const { return impl_->Layout(); }

void CudaModel::Impl::BuildPools(const cache::MemoryPlan& plan) {
  const int S = opt.max_seqs;
  pools.clear();
  table_cols = 0;
  for (const cache::PoolPlan& pp : plan.pools) {
    // Lists page by a power of two of rows (ListRef's shift); a ring's page is the ring.
    DSINFER_CHECK(pp.component.ring() || (pp.rows_per_page & (pp.rows_per_page - 1)) == 0);
    Pool pool;
    pool.plan = pp;
    pool.data = Alloc<float>(pp.num_pages * (pp.page_bytes() / 4));
    pool.table_offset = table_cols;
    // Entries up to the context: entry w is written at position (w + 1) * rate - 1 < max_len.
    pool.per_seq =
        pp.component.ring()
            ? 1
            : (opt.max_len / pp.component.tokens_per_row + pp.rows_per_page) / pp.rows_per_page;
    table_cols += pool.per_seq;
    pools.push_back(pool);
  }
  table_dev = Alloc<int32_t>(S * table_cols);
  table_host = gpu::PinnedBuffer(static_cast<size_t>(std::max<int64_t>(S * table_cols, 1)) * 4);
  std::memset(table_host.get(), 0, table_host.bytes());
  gpu::CopyToDevice(table_dev, table_host.get(), static_cast<size_t>(S * table_cols) * 4,
                    stream.get());
  state.assign(c.num_layers + 1, LayerState{});
  for (const Pool& pool : pools) {
    const cache::StateComponent& comp = pool.plan.component;
    const int64_t rpp = pool.plan.rows_per_page;
    for (const cache::StateMember& m : comp.members) {
      const bool draft = v41 && m.stream == deepseek_v41::kDraftStream;
      if (m.layer >= c.num_layers && !MtpOn() && !draft) continue;  // the MTP layer's, unused
      LayerState& st = state[draft ? 0 : m.layer];
      const bool tokens = v41 && m.stream == deepseek_v41::kTokenStream;
      gpu::RingRef ring;
      ring.pool = pool.data;
      ring.cap = comp.ring_rows;
      ring.width = m.width;
      ring.page_floats = pool.page_floats();
      ring.member_offset = m.offset * rpp;
      ring.pages = table_dev + pool.table_offset;
      ring.pages_stride = table_cols;
      gpu::ListRef list;
      list.pool = pool.data;
      list.width = m.width;
      list.page_floats = pool.page_floats();
      list.member_offset = m.offset * rpp;
      list.rows_shift = 0;
      while ((int64_t{1} << list.rows_shift) < rpp) ++list.rows_shift;
      list.pages = table_dev + pool.table_offset;
      list.pages_stride = table_cols;
      list.capacity = EntryCapacity(comp.tokens_per_row);
      if (tokens) {
        v41->tokens = ring;
        continue;
      }
      if (draft) {
        DSINFER_CHECK(v41->ds != nullptr && m.layer < static_cast<int>(v41->ds->rings.size()));
        v41->ds->rings[static_cast<size_t>(m.layer)] = ring;
        continue;
      }
      switch (static_cast<StateStream>(m.stream)) {
        case StateStream::kWindow:
          st.window = ring;
          break;
        case StateStream::kCompressorRows:
          st.comp_rows = ring;
          break;
        case StateStream::kIndexRows:
          st.index_rows = ring;
          break;
        case StateStream::kCompressed:
          st.comp_entries = list;
          break;
        case StateStream::kIndexKeys:
          st.index_entries = list;
          break;
        case StateStream::kMtpStreams:
          mtp_streams = ring;
          break;
      }
    }
  }
}

void CudaModel::Impl::AllocateState() {
  const int S = opt.max_seqs;
  cache::MemoryPlan plan;
  plan.max_sequences = S;
  const cache::StateLayout layout = Layout();
  for (const cache::StateComponent& comp : layout.components()) {
    cache::PoolPlan pp;
    pp.component = comp;
    pp.rows_per_page = comp.ring() ? comp.ring_rows : cache::GrowingRowsPerPage(comp, {});
    const int64_t per_seq =
        comp.ring() ? 1 : (opt.max_len / comp.tokens_per_row + pp.rows_per_page) / pp.rows_per_page;
    pp.num_pages = S * per_seq;
    plan.pools.push_back(pp);
  }
  BuildPools(plan);
  int32_t* t = table_host.as<int32_t>();  // identity: slot s owns its own page range
  for (int s = 0; s < S; ++s) {
    for (const Pool& pool : pools) {
      for (int64_t k = 0; k < pool.per_seq; ++k) {
        t[s * table_cols + pool.table_offset + k] = static_cast<int32_t>(s * pool.per_seq + k);
      }
    }
  }
  gpu::CopyToDevice(table_dev, t, static_cast<size_t>(S * table_cols) * 4, stream.get());
  stream.Synchronize();
  lengths.assign(S, 0);
  used.assign(S, false);
}

Status CudaModel::UsePagedState(const cache::MemoryPlan& plan) {
  Impl& m = *impl_;
  if (!m.opt.paged) return Internal("UsePagedState needs CudaModelOptions::paged");
  if (!m.pools.empty()) return Internal("UsePagedState: the pools exist already");
  const cache::StateLayout layout = m.Layout();
  const auto& want = layout.components();
  if (plan.pools.size() != want.size()) {
    return InvalidArgument("the memory plan's pools do not follow the CUDA model's state layout");
  }
  for (size_t i = 0; i < want.size(); ++i) {
    if (plan.pools[i].component.name != want[i].name ||
        plan.pools[i].component.bytes_per_row != want[i].bytes_per_row) {
      return InvalidArgument("memory plan pool " + plan.pools[i].component.name +
                             " does not match the CUDA model's " + want[i].name);
    }
  }
  int64_t bytes = 0;
  for (const cache::PoolPlan& pp : plan.pools) bytes += pp.num_pages * pp.page_bytes();
  const int64_t free = static_cast<int64_t>(gpu::DeviceFreeBytes());
  if (bytes > free - (int64_t{256} << 20)) {
    return ResourceExhausted("the state memory of " + std::to_string(bytes >> 20) +
                             " MiB does not fit the GPU's " + std::to_string(free >> 20) +
                             " MiB free after the model (lower --state-memory-mb or "
                             "--gpu-memory-utilization)");
  }
  m.BuildPools(plan);
  m.stream.Synchronize();
  return Status::Ok();
}

Status CudaModel::Impl::FillTableRow(int64_t i,
                                     const std::vector<const std::vector<int32_t>*>& pages_of,
                                     int64_t end) {
  if (pages_of.size() != pools.size()) return InvalidArgument("one page list per pool");
  int32_t* t = table_host.as<int32_t>();
  for (size_t p = 0; p < pools.size(); ++p) {
    const Pool& pool = pools[p];
    const std::vector<int32_t>& pages = *pages_of[p];
    const int64_t need = pool.plan.PagesAt(end);
    if (static_cast<int64_t>(pages.size()) < need ||
        static_cast<int64_t>(pages.size()) > pool.per_seq) {
      return Internal("pool " + pool.plan.component.name + " holds " +
                      std::to_string(pages.size()) + " pages for " + std::to_string(end) +
                      " tokens (needs " + std::to_string(need) + ")");
    }
    int32_t* row = t + i * table_cols + pool.table_offset;
    for (int64_t k = 0; k < pool.per_seq; ++k) {
      // Columns past the sequence's pages are never read; they repeat its first page.
      row[k] = k < static_cast<int64_t>(pages.size()) ? pages[k] : (pages.empty() ? 0 : pages[0]);
      DSINFER_CHECK(row[k] >= 0 && row[k] < pool.plan.num_pages);
    }
  }
  return Status::Ok();
}

StatusOr<CudaModel::DeviceLogits> CudaModel::ForwardPaged(const std::vector<PagedChunk>& chunks,
                                                          LogitsRows rows) {
  Impl& m = *impl_;
  if (!m.opt.paged || m.pools.empty()) return Internal("ForwardPaged needs UsePagedState");
  if (static_cast<int64_t>(chunks.size()) > m.opt.max_seqs) {
    return OutOfRange(std::to_string(chunks.size()) + " sequences in one step; the CUDA model " +
                      "holds " + std::to_string(m.opt.max_seqs));
  }
  // The host buffers are refilled below: the previous step's uploads must have run (with overlap
  // scheduling, that step may still be running).
  m.uploaded.Synchronize();
  std::vector<Impl::StepSeq> seqs;
  for (size_t i = 0; i < chunks.size(); ++i) {
    const PagedChunk& ch = chunks[i];
    const int64_t end = ch.start + static_cast<int64_t>(ch.ids.size());
    if (end > m.opt.max_len) {
      return OutOfRange("sequence of " + std::to_string(end) + " tokens exceeds the CUDA model's " +
                        "context of " + std::to_string(m.opt.max_len));
    }
    if (ch.feed >= 0 && (m.feed_source == nullptr || ch.ids.empty()))
      return InvalidArgument("ForwardPaged: a fed id needs a feed source and a token");
    DSINFER_RETURN_IF_ERROR(m.FillTableRow(static_cast<int64_t>(i), ch.pages, end));
    seqs.push_back({static_cast<int>(i), ch.start, &ch.ids, ch.logits_tail, ch.feed});
  }
  DSINFER_RETURN_IF_ERROR(m.CheckStep(seqs, rows));
  const int64_t nrows = m.FillMeta(seqs, rows);
  const int64_t n_mtp = m.MtpOn() ? m.FillMtpMeta(seqs) : 0;
  int64_t n = 0;
  for (const PagedChunk& ch : chunks) n += static_cast<int64_t>(ch.ids.size());
  m.Upload(static_cast<int64_t>(chunks.size()), n, n_mtp);
  m.uploaded.Record(m.stream.get());
  m.Mark("embed");
  // A step of at most graph_tokens_per_seq tokens per sequence (decode: one; a speculative verify
  // step: 1 + k) replays a graph captured for its row count. Its kernels' shapes depend on nothing
  // else: they read the uploaded metadata, and the head runs over all n rows (FillMeta names row 0
  // for the rows that draw nothing; nothing reads their logits), so a graph replays any step of n
  // rows whatever its chunks. Larger steps (prefill chunks) launch eagerly.
  // With the MTP layer, a graph's MTP rows are its n rows: no chunk starts at position 0.
  bool small = !chunks.empty() && m.opt.graphs && n <= m.logits_rows &&
               n <= int64_t{m.opt.max_seqs} * m.opt.graph_tokens_per_seq &&
               (!m.MtpOn() || n_mtp == n);
  bool one_per_seq = true;
  for (const PagedChunk& ch : chunks) {
    const auto count = static_cast<int64_t>(ch.ids.size());
    small = small && count >= 1 && count <= m.opt.graph_tokens_per_seq;
    one_per_seq = one_per_seq && count <= 1;
  }
  if (!small) {
    m.Run(n, nrows, one_per_seq, n_mtp);
    return DeviceLogits{m.logits, nrows};
  }
  m.ReplayPaged(n, one_per_seq);
  return DeviceLogits{m.logits, nrows};
}

void CudaModel::Impl::ReplayPaged(int64_t n, bool one_per_seq) {
  auto& graph = paged_graphs[{n, one_per_seq}];
  if (!graph) {
    graph = std::make_unique<gpu::Graph>();
    graph->BeginCapture(stream.get());
    Run(n, n, one_per_seq, MtpOn() ? n : 0);
    graph->EndCapture(stream.get());
  }
  graph->Launch(stream.get());
  ++(one_per_seq ? replays.decode : replays.multi_token);
}

CudaModel::GraphReplays CudaModel::graph_replays() const { return impl_->replays; }

void CudaModel::SetFeedSource(const int32_t* ids) { impl_->feed_source = ids; }

Status CudaModel::CaptureDecodeGraphs() {
  Impl& m = *impl_;
  if (!m.opt.paged || m.pools.empty()) return Internal("CaptureDecodeGraphs needs UsePagedState");
  if (!m.opt.graphs) return Status::Ok();
  // A step of s sequences of t tokens each: s * t rows, each its own logits row (what
  // ReplayPaged captures at a size's first step; the kernels read the metadata uploaded before
  // each replay). t = 1 (decode) and t = graph_tokens_per_seq (a verify step with every draft).
  const int64_t limit = std::min(m.opt.max_tokens, m.logits_rows);
  for (const int64_t t : {int64_t{1}, std::max<int64_t>(1, m.opt.graph_tokens_per_seq)}) {
    for (int64_t s = 1; s <= m.opt.max_seqs && s * t <= limit; ++s) {
      auto& graph = m.paged_graphs[{s * t, t == 1}];
      if (graph) continue;
      graph = std::make_unique<gpu::Graph>();
      graph->BeginCapture(m.stream.get());
      m.Run(s * t, s * t, t == 1, m.MtpOn() ? s * t : 0);
      graph->EndCapture(m.stream.get());
    }
  }
  // The MTP drafts' chains of one level and of k levels, for every batch size.
  if (m.MtpOn()) {
    const int k = static_cast<int>(
        std::clamp<int64_t>(m.opt.graph_tokens_per_seq - 1, 1, CudaModel::kMaxRollback));
    for (int64_t s = 1; s <= std::min<int64_t>(m.opt.max_seqs, m.opt.max_tokens); ++s) {
      m.MtpChainGraph(s, 1);
      m.MtpChainGraph(s, k);
    }
  }
  // DSpark's draft passes, for every number of requests a pass holds.
  if (m.v41 && m.v41->ds) {
    const int64_t per_pass = std::max<int64_t>(1, m.opt.max_tokens / m.v41->c.dspark_block_size);
    for (int64_t r = 1; r <= std::min<int64_t>(m.opt.max_seqs, per_pass); ++r) m.DSparkGraph(r);
  }
  return Status::Ok();
}

void CudaModel::CopyPages(size_t pool, const std::vector<int32_t>& from,
                          const std::vector<int32_t>& to, int64_t count) {
  Impl& m = *impl_;
  DSINFER_CHECK(pool < m.pools.size() && count <= static_cast<int64_t>(from.size()) &&
                count <= static_cast<int64_t>(to.size()));
  const Impl::Pool& p = m.pools[pool];
  const int64_t pf = p.page_floats();
  for (int64_t k = 0; k < count; ++k) {
    gpu::CopyDeviceToDevice(p.data + to[k] * pf, p.data + from[k] * pf,
                            static_cast<size_t>(pf) * sizeof(float), m.stream.get());
  }
}

void CudaModel::CopyPagesToHost(size_t pool, const std::vector<int32_t>& pages, int64_t count,
                                float* host) {
  Impl& m = *impl_;
  DSINFER_CHECK(pool < m.pools.size() && count <= static_cast<int64_t>(pages.size()));
  const Impl::Pool& p = m.pools[pool];
  const int64_t pf = p.page_floats();
  for (int64_t k = 0; k < count;) {
    int64_t run = 1;  // pages k .. k + run - 1 are consecutive ids
    while (k + run < count && pages[k + run] == pages[k] + run) ++run;
    gpu::CopyToHost(host + k * pf, p.data + pages[k] * pf,
                    static_cast<size_t>(run * pf) * sizeof(float), m.stream.get());
    k += run;
  }
}

void CudaModel::CopyPagesFromHost(size_t pool, const float* host, const std::vector<int32_t>& pages,
                                  int64_t count) {
  Impl& m = *impl_;
  DSINFER_CHECK(pool < m.pools.size() && count <= static_cast<int64_t>(pages.size()));
  const Impl::Pool& p = m.pools[pool];
  const int64_t pf = p.page_floats();
  for (int64_t k = 0; k < count;) {
    int64_t run = 1;
    while (k + run < count && pages[k + run] == pages[k] + run) ++run;
    gpu::CopyToDevice(p.data + pages[k] * pf, host + k * pf,
                      static_cast<size_t>(run * pf) * sizeof(float), m.stream.get());
    k += run;
  }
}

Status CudaModel::FillSyntheticState(int slot, int64_t length, uint64_t seed) {
  Impl& m = *impl_;
  if (m.opt.paged) return Internal("synthetic state is for the model's own slots");
  if (slot < 0 || slot >= m.opt.max_seqs || !m.used[slot])
    return InvalidArgument("bad CUDA state slot");
  if (length > m.opt.max_len) return OutOfRange("synthetic length exceeds the state capacity");
  uint64_t k = seed * 7919 + static_cast<uint64_t>(slot) * 104729;
  for (const Impl::Pool& pool : m.pools) {  // the slot's pages of every pool
    const int64_t span = pool.per_seq * pool.page_floats();
    gpu::RandomFillParams f;
    f.data = pool.data + slot * span;
    f.count = span;
    f.kind = gpu::RandomKind::kF32Normal;
    f.seed = k++;
    f.mean = 0;
    f.std = 1;
    gpu::LaunchRandomFill(f, m.stream.get());
    // DeepSeek-V4's packed rows (the FP8 cache): valid codes and scales, as a writer stores them.
    for (const cache::StateMember& mem : pool.plan.component.members) {
      if (m.v41) break;
      const auto stream = static_cast<StateStream>(mem.stream);
      const KvFormat format =
          stream == StateStream::kIndexKeys ? IndexKeyFormat(m.c) : WindowFormat(m.c);
      if (!format.packed() ||
          (stream != StateStream::kWindow && stream != StateStream::kCompressed &&
           stream != StateStream::kIndexKeys)) {
        continue;
      }
      gpu::RandomPackedRowsParams r;
      r.data = static_cast<float*>(f.data) + mem.offset * pool.plan.rows_per_page;
      r.rows = pool.per_seq * pool.plan.rows_per_page;
      r.rows_per_page = pool.plan.rows_per_page;
      r.page_floats = pool.page_floats();
      r.row_floats = mem.width;
      r.format = format.codec();
      r.seed = k++;
      gpu::LaunchRandomPackedRows(r, m.stream.get());
    }
    const gpu::RingRef tokens = m.v41 ? m.v41->tokens : gpu::RingRef{};
    if (tokens.pool == pool.data) {
      // The Engram look-back holds token ids (width-1 rows, wherever its member sits in the
      // pool's pages): token 0, as random floats are no ids.
      gpu::Memset(pool.data + slot * span + tokens.member_offset, 0,
                  static_cast<size_t>(tokens.cap) * sizeof(float), m.stream.get());
    }
  }
  m.stream.Synchronize();
  m.lengths[slot] = length;
  return Status::Ok();
}

}  // namespace dsinfer::model::deepseek_v4::cuda
