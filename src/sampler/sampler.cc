#include "sampler/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "base/check.h"
#include "sampler/philox.h"

namespace dsinfer::sampler {

namespace {

using backend::SampleEdit;

constexpr float kMasked = -std::numeric_limits<float>::infinity();

// 2^-shift as a double (exact).
double FixedUnit(int shift) { return std::ldexp(1.0, -shift); }

}  // namespace

RowDraw MakeRowDraw(const SampleInput& in, int64_t vocab) {
  DSINFER_CHECK(in.params != nullptr && vocab > 0);
  const SamplingParams& p = *in.params;
  RowDraw d;
  if (in.forced >= 0) {  // scoring: the model's logprob of a given token
    DSINFER_CHECK(in.forced < vocab);
    d.forced = in.forced;
    d.greedy = true;
    d.logprobs = true;
    d.top_logprobs = static_cast<int>(std::min<int64_t>(in.forced_top, vocab));
    return d;
  }
  d.allowed = in.allowed;
  d.greedy = p.greedy();
  d.inv_temperature = d.greedy ? 1.0f : 1.0f / p.temperature;
  d.top_k = p.top_k > 0 && p.top_k < vocab ? p.top_k : 0;
  d.top_p = p.top_p;
  d.min_p = p.min_p;
  d.uniform = UniformBitsAt(in.seed, in.position, in.sample_index);
  d.logprobs = p.logprobs || p.top_logprobs > 0;
  d.top_logprobs = static_cast<int>(std::min<int64_t>(p.top_logprobs, vocab));
  // One record per touched id: each source sets its own field, then records of one id merge.
  auto& e = d.edits;
  auto in_vocab = [vocab](int32_t id) { return id >= 0 && id < vocab; };
  for (const auto& [id, bias] : p.logit_bias) {
    if (in_vocab(id)) e.push_back({.id = id, .bias = bias});
  }
  if (in.refused != nullptr) {
    for (int32_t id : *in.refused) {
      if (in_vocab(id)) e.push_back({.id = id, .mask = 1});
    }
  }
  const int generated = (in.history ? in.history->num_output() : 0) + in.num_pending;
  if (generated < p.min_tokens) {
    if (in_vocab(in.eos_id)) e.push_back({.id = in.eos_id, .mask = 1});
    for (int32_t id : p.stop_token_ids) {
      if (in_vocab(id)) e.push_back({.id = id, .mask = 1});
    }
  }
  // The output counts: the history's, plus the pending outputs (ids of the pending ones that
  // the history has not seen yet get their own records).
  std::vector<std::pair<int32_t, int>> pending;
  for (int i = 0; i < in.num_pending; ++i) {
    const int32_t id = in.pending[i];
    if (!in_vocab(id)) continue;
    auto it =
        std::find_if(pending.begin(), pending.end(), [id](const auto& c) { return c.first == id; });
    if (it == pending.end()) {
      pending.push_back({id, 1});
    } else {
      ++it->second;
    }
  }
  auto pending_count = [&pending](int32_t id) {
    for (const auto& [pid, n] : pending) {
      if (pid == id) return n;
    }
    return 0;
  };
  std::vector<std::pair<int32_t, int>> outputs;
  if (in.history) {
    for (const auto& [id, count] : in.history->output_counts())
      outputs.push_back({id, count + pending_count(id)});
  }
  for (const auto& [id, n] : pending) {
    if (!in.history || !in.history->output_counts().count(id)) outputs.push_back({id, n});
  }
  if (in.history || !outputs.empty()) {
    if (p.repetition_penalty != 1.0f) {
      if (in.history) {
        for (int32_t id : in.history->prompt())
          e.push_back({.id = id, .repetition = p.repetition_penalty});
      }
      for (const auto& [id, count] : outputs)
        e.push_back({.id = id, .repetition = p.repetition_penalty});
    }
    if (p.presence_penalty != 0.0f || p.frequency_penalty != 0.0f) {
      for (const auto& [id, count] : outputs) {
        e.push_back(
            {.id = id,
             .subtract = p.presence_penalty + p.frequency_penalty * static_cast<float>(count)});
      }
    }
  }
  std::sort(e.begin(), e.end(),
            [](const SampleEdit& a, const SampleEdit& b) { return a.id < b.id; });
  size_t out = 0;
  for (size_t i = 0; i < e.size(); ++i) {
    if (out > 0 && e[out - 1].id == e[i].id) {
      SampleEdit& m = e[out - 1];
      m.mask |= e[i].mask;
      if (e[i].bias != 0.0f) m.bias = e[i].bias;
      if (e[i].repetition != 1.0f) m.repetition = e[i].repetition;
      if (e[i].subtract != 0.0f) m.subtract = e[i].subtract;
    } else {
      e[out++] = e[i];
    }
  }
  e.resize(out);
  return d;
}

void Sampler::Process(const float* logits, int64_t vocab, const RowDraw& d) {
  scratch_.assign(logits, logits + vocab);
  if (d.allowed) {
    for (int64_t w = 0; w * 64 < vocab; ++w) {
      const uint64_t bits = d.allowed[w];
      if (bits == ~uint64_t{0}) continue;
      const int64_t end = std::min<int64_t>(vocab, w * 64 + 64);
      for (int64_t i = w * 64; i < end; ++i) {
        if (!((bits >> (i - w * 64)) & 1)) scratch_[i] = kMasked;
      }
    }
  }
  for (const SampleEdit& e : d.edits) scratch_[e.id] = backend::ApplySampleEdit(scratch_[e.id], e);
  if (!d.greedy) {
    for (auto& v : scratch_) v = v * d.inv_temperature;
  }
}

int32_t Sampler::Argmax() const {
  return static_cast<int32_t>(std::max_element(scratch_.begin(), scratch_.end()) -
                              scratch_.begin());
}

void Sampler::Truncate(int64_t vocab, const RowDraw& d) {
  const float* x = scratch_.data();
  const float m = *std::max_element(scratch_.begin(), scratch_.end());
  const int shift = backend::SampleFixedShift(vocab);
  auto w = [&](int32_t i) { return backend::SampleExp(x[i] - m); };
  auto W = [&](int32_t i) { return backend::SampleFixed(w(i), shift); };
  auto more_likely = [x](int32_t a, int32_t b) {
    return backend::SampleKey(x[a], a) > backend::SampleKey(x[b], b);
  };
  kept_.clear();
  int64_t pool_total = 0;  // the weight of every id (top-p without top-k)
  if (d.top_k > 0) {
    order_.resize(static_cast<size_t>(vocab));
    std::iota(order_.begin(), order_.end(), 0);
    std::partial_sort(order_.begin(), order_.begin() + d.top_k, order_.end(), more_likely);
    order_.resize(static_cast<size_t>(d.top_k));
  } else if (d.top_p < 1.0f) {
    // Bucket ids by x (width 1/8 logit below the max; a last bucket collects everything below),
    // take whole buckets from the top until they hold the threshold, and sort only those: the
    // buckets are monotone in x, so the sorted prefix is the key-ordered prefix of every id.
    constexpr int kBuckets = 512;
    constexpr float kPerLogit = 8.0f;
    auto bucket_of = [&](int64_t i) {
      const float b = (m - x[i]) * kPerLogit;
      return b < kBuckets - 1 ? static_cast<int>(b) : kBuckets - 1;  // also -inf and NaN rows
    };
    bucket_mass_.assign(kBuckets, 0);
    for (int32_t i = 0; i < vocab; ++i) {
      const int64_t wi = W(i);
      bucket_mass_[bucket_of(i)] += wi;
      pool_total += wi;
    }
    const int64_t threshold = backend::SampleTopPThreshold(d.top_p, pool_total);
    int last = 0;
    for (int64_t cum = 0; last < kBuckets - 1; ++last) {
      cum += bucket_mass_[last];
      if (cum >= threshold) break;
    }
    order_.clear();
    for (int32_t i = 0; i < vocab; ++i) {
      if (bucket_of(i) <= last) order_.push_back(i);
    }
    std::sort(order_.begin(), order_.end(), more_likely);
  } else {
    order_.resize(static_cast<size_t>(vocab));  // every id
    std::iota(order_.begin(), order_.end(), 0);
  }
  // top-p: the shortest key-ordered prefix whose weight reaches the threshold.
  if (d.top_p < 1.0f) {
    int64_t total = pool_total;
    if (d.top_k > 0) {
      for (int32_t i : order_) total += W(i);
    }
    const int64_t threshold = backend::SampleTopPThreshold(d.top_p, total);
    int64_t cum = 0;
    size_t keep = order_.size();
    for (size_t k = 0; k < order_.size(); ++k) {
      cum += W(order_[k]);
      if (cum >= threshold) {
        keep = k + 1;
        break;
      }
    }
    order_.resize(keep);
  }
  // min-p: p_i >= min_p * p_max, and w = 1 at the max.
  for (int32_t i : order_) {
    if (d.min_p <= 0.0f || w(i) >= d.min_p) kept_.push_back(i);
  }
  std::sort(kept_.begin(), kept_.end());
  weight_.clear();
  for (int32_t i : kept_) weight_.push_back(W(i));
}

SampledToken Sampler::Draw(const float* logits, int64_t vocab, const RowDraw& d) {
  DSINFER_CHECK(vocab > 0);
  SampledToken out;
  if (d.forced >= 0) {
    out.id = d.forced;
  } else {
    Process(logits, vocab, d);
    out.id = Argmax();  // greedy, and the draw's fallback when no candidate has weight
  }
  if (!d.greedy && d.forced < 0) {
    Truncate(vocab, d);
    uint64_t total = 0;
    for (int64_t w : weight_) total += static_cast<uint64_t>(w);
    if (total > 0) {
      const uint64_t target = backend::SampleTarget(d.uniform, total);
      uint64_t cum = 0;
      for (size_t i = 0; i < kept_.size(); ++i) {
        cum += static_cast<uint64_t>(weight_[i]);
        if (cum > target) {
          out.id = kept_[i];
          break;
        }
      }
    }
  }
  if (d.logprobs) {
    const float m = *std::max_element(logits, logits + vocab);
    const int shift = backend::SampleFixedShift(vocab);
    int64_t sum = 0;
    for (int64_t i = 0; i < vocab; ++i)
      sum += backend::SampleFixed(backend::SampleExp(logits[i] - m), shift);
    const double lse =
        static_cast<double>(m) + std::log(static_cast<double>(sum) * FixedUnit(shift));
    out.logprob = static_cast<float>(static_cast<double>(logits[out.id]) - lse);
    if (d.top_logprobs > 0) {
      order_.resize(static_cast<size_t>(vocab));
      std::iota(order_.begin(), order_.end(), 0);
      std::partial_sort(order_.begin(), order_.begin() + d.top_logprobs, order_.end(),
                        [logits](int32_t a, int32_t b) {
                          return backend::SampleKey(logits[a], a) >
                                 backend::SampleKey(logits[b], b);
                        });
      for (int i = 0; i < d.top_logprobs; ++i) {
        out.top.push_back(
            {order_[i], static_cast<float>(static_cast<double>(logits[order_[i]]) - lse)});
      }
    }
  }
  return out;
}

std::vector<double> Sampler::Probabilities(const float* logits, int64_t vocab, const SampleInput& in) {
  const RowDraw d = MakeRowDraw(in, vocab);
  Process(logits, vocab, d);
  std::vector<double> probs(static_cast<size_t>(vocab), 0.0);
  if (!d.greedy) {
    Truncate(vocab, d);
    double total = 0;
    for (int64_t w : weight_) total += static_cast<double>(w);
    if (total > 0) {
      for (size_t i = 0; i < kept_.size(); ++i)
        probs[kept_[i]] = static_cast<double>(weight_[i]) / total;
      return probs;
    }
  }
  probs[Argmax()] = 1.0;
  return probs;
}

}  // namespace dsinfer::sampler
