#include "executor/cuda_sampler.h"

#include <algorithm>
#include <cstring>

#include "backend/cuda/sample.cuh"
#include "base/check.h"

namespace dsinfer::executor {

namespace {

namespace gpu = backend::cuda;

size_t Align16(size_t bytes) { return (bytes + 15) / 16 * 16; }

// Grows a buffer to at least `bytes` (by half again, so a slowly growing batch reallocates rarely).
template <gpu::MemoryKind K>
void Reserve(gpu::Buffer<K>& buffer, size_t bytes) {
  if (buffer.bytes() < bytes) buffer = gpu::Buffer<K>(std::max(bytes, buffer.bytes() * 3 / 2));
}

}  // namespace

CudaSampler::CudaSampler(int64_t vocab, int64_t max_draws)
    : vocab_(vocab), max_draws_(std::max<int64_t>(max_draws, 1)) {
  // Output layout: [n ids][n logprobs][n x 20 top ids][n x 20 top logprobs]; sized once, so that
  // the ids stay where device_ids() says.
  const size_t out_bytes = max_draws_ * 8 + max_draws_ * gpu::kMaxTopLogprobs * 8;
  out_host_ = gpu::PinnedBuffer(out_bytes);
  out_dev_ = gpu::DeviceBuffer(out_bytes);
}

std::vector<sampler::SampledToken> CudaSampler::Sample(const float* logits,
                                                       const std::vector<RunDraw>& draws,
                                                       gpu::StreamHandle stream) {
  Enqueue(logits, draws, stream);
  return Collect();
}

void CudaSampler::Enqueue(const float* logits, const std::vector<RunDraw>& draws,
                          gpu::StreamHandle stream) {
  DSINFER_CHECK(pending_ < 0);  // the last Enqueue was collected
  const int64_t n = static_cast<int64_t>(draws.size());
  DSINFER_CHECK(n <= max_draws_);
  pending_ = n;
  logprobs_.assign(static_cast<size_t>(n), 0);
  top_.assign(static_cast<size_t>(n), 0);
  if (n == 0) return;
  const int64_t mask_words = (vocab_ + 63) / 64;
  std::vector<sampler::RowDraw> rows;
  rows.reserve(draws.size());
  size_t edits = 0, masks = 0;
  for (const RunDraw& d : draws) {
    rows.push_back(sampler::MakeRowDraw(d.input, vocab_));
    edits += rows.back().edits.size();
    masks += rows.back().allowed ? 1 : 0;
  }
  // Upload layout: [n SampleRow][edits SampleEdit][masks x mask_words uint64].
  const size_t rows_bytes = Align16(n * sizeof(gpu::SampleRow));
  const size_t edits_bytes = Align16(edits * sizeof(backend::SampleEdit));
  const size_t in_bytes = rows_bytes + edits_bytes + masks * mask_words * sizeof(uint64_t);
  Reserve(in_host_, in_bytes);
  Reserve(in_dev_, in_bytes);
  auto* host = in_host_.as<char>();
  auto* row_out = reinterpret_cast<gpu::SampleRow*>(host);
  auto* edit_out = reinterpret_cast<backend::SampleEdit*>(host + rows_bytes);
  auto* mask_out = reinterpret_cast<uint64_t*>(host + rows_bytes + edits_bytes);
  int32_t edit_at = 0;
  int64_t mask_at = 0;
  for (int64_t r = 0; r < n; ++r) {
    const sampler::RowDraw& d = rows[r];
    gpu::SampleRow& g = row_out[r];
    g = gpu::SampleRow{};
    g.logits_row = draws[r].chunk;
    g.greedy = d.greedy ? 1 : 0;
    g.inv_temperature = d.inv_temperature;
    g.top_k = d.top_k;
    g.top_p = d.top_p;
    g.min_p = d.min_p;
    g.uniform = d.uniform;
    g.edit_begin = edit_at;
    g.edit_count = static_cast<int32_t>(d.edits.size());
    std::copy(d.edits.begin(), d.edits.end(), edit_out + edit_at);
    edit_at += g.edit_count;
    if (d.allowed) {
      std::memcpy(mask_out + mask_at, d.allowed, mask_words * sizeof(uint64_t));
      g.mask_word = mask_at;
      mask_at += mask_words;
    }
    g.forced = d.forced;
    g.logprobs = d.logprobs ? 1 : 0;
    g.top_logprobs = std::min(d.top_logprobs, gpu::kMaxTopLogprobs);
    logprobs_[r] = d.logprobs ? 1 : 0;
    top_[r] = g.top_logprobs;
  }
  const size_t out_bytes = n * 8 + n * gpu::kMaxTopLogprobs * 8;
  Reserve(scratch_, static_cast<size_t>(n * vocab_) * sizeof(float));
  gpu::CopyToDevice(in_dev_.get(), host, in_bytes, stream);

  gpu::SampleRowsParams p;
  char* dev = in_dev_.as<char>();
  char* out = out_dev_.as<char>();
  p.logits = logits;
  p.vocab = vocab_;
  p.num_rows = n;
  p.rows = reinterpret_cast<const gpu::SampleRow*>(dev);
  p.edits = reinterpret_cast<const backend::SampleEdit*>(dev + rows_bytes);
  p.masks = reinterpret_cast<const uint64_t*>(dev + rows_bytes + edits_bytes);
  p.scratch = scratch_.as<float>();
  p.out_id = reinterpret_cast<int32_t*>(out);
  p.out_logprob = reinterpret_cast<float*>(out + n * 4);
  p.out_top_id = reinterpret_cast<int32_t*>(out + n * 8);
  p.out_top_logprob = reinterpret_cast<float*>(out + n * 8 + n * gpu::kMaxTopLogprobs * 4);
  p.plain_greedy = std::all_of(rows.begin(), rows.end(), [](const sampler::RowDraw& d) {
    return d.greedy && d.edits.empty() && d.allowed == nullptr && !d.logprobs && d.forced < 0;
  });
  gpu::LaunchSampleRows(p, stream);
  // The ids and logprobs; the alternatives only when some draw wants them.
  const bool tops = std::any_of(top_.begin(), top_.end(), [](int k) { return k > 0; });
  gpu::CopyToHost(out_host_.get(), out_dev_.get(), tops ? out_bytes : n * 8, stream);
  done_.Record(stream);
}

std::vector<sampler::SampledToken> CudaSampler::Collect() {
  DSINFER_CHECK(pending_ >= 0);
  const int64_t n = pending_;
  pending_ = -1;
  if (n == 0) return {};
  done_.Synchronize();
  const char* back = out_host_.as<char>();
  const auto* ids = reinterpret_cast<const int32_t*>(back);
  const auto* lps = reinterpret_cast<const float*>(back + n * 4);
  const auto* top_ids = reinterpret_cast<const int32_t*>(back + n * 8);
  const auto* top_lps = reinterpret_cast<const float*>(back + n * 8 + n * gpu::kMaxTopLogprobs * 4);
  std::vector<sampler::SampledToken> tokens(static_cast<size_t>(n));
  for (int64_t r = 0; r < n; ++r) {
    tokens[r].id = ids[r];
    if (!logprobs_[r]) continue;
    tokens[r].logprob = lps[r];
    for (int k = 0; k < top_[r]; ++k) {
      tokens[r].top.push_back(
          {top_ids[r * gpu::kMaxTopLogprobs + k], top_lps[r * gpu::kMaxTopLogprobs + k]});
    }
  }
  return tokens;
}

}  // namespace dsinfer::executor
