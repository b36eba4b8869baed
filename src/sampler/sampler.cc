#include "sampler/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "base/check.h"
#include "sampler/philox.h"

namespace dsinfer::sampler {

namespace {

constexpr float kMasked = -std::numeric_limits<float>::infinity();

}  // namespace

void Sampler::Process(const float* logits, int64_t vocab, const SampleInput& in) {
  const SamplingParams& p = *in.params;
  scratch_.assign(logits, logits + vocab);
  if (in.allowed) {
    for (int64_t w = 0; w * 64 < vocab; ++w) {
      const uint64_t bits = in.allowed[w];
      if (bits == ~uint64_t{0}) continue;
      const int64_t end = std::min<int64_t>(vocab, w * 64 + 64);
      for (int64_t i = w * 64; i < end; ++i) {
        if (!((bits >> (i - w * 64)) & 1)) scratch_[i] = kMasked;
      }
    }
  }
  for (const auto& [id, bias] : p.logit_bias) {
    if (id >= 0 && id < vocab) scratch_[id] += bias;
  }
  const int generated = in.history ? in.history->num_output() : 0;
  if (generated < p.min_tokens) {
    if (in.eos_id >= 0 && in.eos_id < vocab) scratch_[in.eos_id] = kMasked;
    for (int32_t id : p.stop_token_ids) {
      if (id >= 0 && id < vocab) scratch_[id] = kMasked;
    }
  }
  if (!in.history) return;
  if (p.repetition_penalty != 1.0f) {
    auto penalize = [&](int32_t id) {
      float& x = scratch_[id];
      x = x > 0 ? x / p.repetition_penalty : x * p.repetition_penalty;
    };
    for (int32_t id : in.history->prompt()) penalize(id);
    for (const auto& [id, count] : in.history->output_counts()) {
      if (!in.history->prompt().count(id)) penalize(id);
    }
  }
  if (p.presence_penalty != 0.0f || p.frequency_penalty != 0.0f) {
    for (const auto& [id, count] : in.history->output_counts()) {
      scratch_[id] -= p.presence_penalty + p.frequency_penalty * static_cast<float>(count);
    }
  }
}

void Sampler::Truncate(int64_t vocab, const SamplingParams& p) {
  // scratch_ holds x = processed logits / temperature. Weights are exp(x - max) in float; masses
  // are summed in double in a fixed order, so the result is a pure function of the logits.
  const float* x = scratch_.data();
  auto more_likely = [x](int32_t a, int32_t b) { return x[a] > x[b] || (x[a] == x[b] && a < b); };
  const float m = *std::max_element(scratch_.begin(), scratch_.end());
  const bool top_k = p.top_k > 0 && p.top_k < vocab;
  expw_.resize(static_cast<size_t>(vocab));
  double mass = 0;  // of every id (top_k: of the top k)
  if (!top_k && (p.top_p < 1.0f || p.min_p <= 0.0f)) {  // needs every weight
    for (int64_t i = 0; i < vocab; ++i) {
      expw_[i] = std::exp(x[i] - m);
      mass += expw_[i];
    }
  }
  cand_.clear();
  weight_.clear();
  if (!top_k && p.top_p >= 1.0f && p.min_p <= 0.0f) {
    cand_.resize(static_cast<size_t>(vocab));  // every id, in id order
    std::iota(cand_.begin(), cand_.end(), 0);
    weight_.assign(expw_.begin(), expw_.end());
    return;
  }
  if (top_k) {
    order_.resize(static_cast<size_t>(vocab));
    std::iota(order_.begin(), order_.end(), 0);
    std::partial_sort(order_.begin(), order_.begin() + p.top_k, order_.end(), more_likely);
    cand_.assign(order_.begin(), order_.begin() + p.top_k);
    for (int32_t id : cand_) {
      expw_[id] = std::exp(x[id] - m);
      mass += expw_[id];
    }
  } else if (p.top_p < 1.0f) {
    // Bucket ids by x (width 1/8 logit below the max); take whole buckets from the top until they
    // hold top_p of the mass, then sort only those. A last bucket collects everything below.
    constexpr int kBuckets = 512;
    constexpr float kPerLogit = 8.0f;
    auto bucket_of = [&](int64_t i) {
      return static_cast<int>(std::min<float>((m - x[i]) * kPerLogit, kBuckets - 1));
    };
    bucket_mass_.assign(kBuckets, 0.0);
    for (int64_t i = 0; i < vocab; ++i) bucket_mass_[bucket_of(i)] += expw_[i];
    int last = 0;
    for (double cum = 0; last < kBuckets; ++last) {
      cum += bucket_mass_[last];
      if (cum >= p.top_p * mass) break;
    }
    for (;; ++last) {  // one more bucket if rounding left the sorted prefix short
      last = std::min(last, kBuckets - 1);
      cand_.clear();
      for (int64_t i = 0; i < vocab; ++i) {
        if (bucket_of(i) <= last) cand_.push_back(static_cast<int32_t>(i));
      }
      std::sort(cand_.begin(), cand_.end(), more_likely);
      double cum = 0;
      for (int32_t id : cand_) cum += expw_[id];
      if (cum >= p.top_p * mass || last == kBuckets - 1) break;
    }
  } else {
    const double floor = m + std::log(static_cast<double>(p.min_p));  // min_p only
    for (int64_t i = 0; i < vocab; ++i) {
      if (x[i] >= floor) cand_.push_back(static_cast<int32_t>(i));
    }
    std::sort(cand_.begin(), cand_.end(), more_likely);
    for (int32_t id : cand_) expw_[id] = std::exp(x[id] - m);
  }
  // top-p: the shortest most-likely prefix with at least top_p of the mass.
  size_t keep = cand_.size();
  if (p.top_p < 1.0f) {
    double cum = 0;
    for (size_t i = 0; i < cand_.size(); ++i) {
      cum += expw_[cand_[i]];
      if (cum >= p.top_p * mass) {
        keep = i + 1;
        break;
      }
    }
  }
  cand_.resize(keep);
  // min-p: p_i >= min_p * p_max, invariant under renormalization; cand_[0] is the most likely.
  if (p.min_p > 0.0f && !cand_.empty()) {
    const double floor = x[cand_[0]] + std::log(static_cast<double>(p.min_p));
    size_t n = 0;
    while (n < cand_.size() && x[cand_[n]] >= floor) ++n;
    cand_.resize(std::max<size_t>(n, 1));
  }
  for (int32_t id : cand_) weight_.push_back(expw_[id]);
}

SampledToken Sampler::Sample(const float* logits, int64_t vocab, const SampleInput& in) {
  DSINFER_CHECK(in.params != nullptr && vocab > 0);
  const SamplingParams& p = *in.params;
  Process(logits, vocab, in);
  SampledToken out;
  if (p.greedy()) {
    out.id = static_cast<int32_t>(std::max_element(scratch_.begin(), scratch_.end()) - scratch_.begin());
  } else {
    const float inv_t = 1.0f / p.temperature;
    for (auto& v : scratch_) v *= inv_t;
    Truncate(vocab, p);
    double total = 0;
    for (double w : weight_) total += w;
    const double target = UniformAt(in.seed, in.position, in.sample_index) * total;
    double cum = 0;
    out.id = cand_.back();
    for (size_t i = cand_.size(); i-- > 0;) {  // rounding fallback: the last id with weight
      if (weight_[i] > 0) {
        out.id = cand_[i];
        break;
      }
    }
    for (size_t i = 0; i < cand_.size(); ++i) {
      cum += weight_[i];
      if (cum > target) {
        out.id = cand_[i];
        break;
      }
    }
  }
  if (p.logprobs || p.top_logprobs > 0) {
    const float m = *std::max_element(logits, logits + vocab);
    double sum = 0;
    for (int64_t i = 0; i < vocab; ++i) sum += std::exp(logits[i] - m);
    const double lse = m + std::log(sum);
    out.logprob = static_cast<float>(logits[out.id] - lse);
    if (p.top_logprobs > 0) {
      const int k = static_cast<int>(std::min<int64_t>(p.top_logprobs, vocab));
      order_.resize(static_cast<size_t>(vocab));
      std::iota(order_.begin(), order_.end(), 0);
      std::partial_sort(order_.begin(), order_.begin() + k, order_.end(), [logits](int32_t a, int32_t b) {
        return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
      });
      for (int i = 0; i < k; ++i) {
        out.top.push_back({order_[i], static_cast<float>(logits[order_[i]] - lse)});
      }
    }
  }
  return out;
}

std::vector<double> Sampler::Probabilities(const float* logits, int64_t vocab, const SampleInput& in) {
  const SamplingParams& p = *in.params;
  Process(logits, vocab, in);
  std::vector<double> probs(static_cast<size_t>(vocab), 0.0);
  if (p.greedy()) {
    probs[std::max_element(scratch_.begin(), scratch_.end()) - scratch_.begin()] = 1.0;
    return probs;
  }
  for (auto& v : scratch_) v *= 1.0f / p.temperature;
  Truncate(vocab, p);
  double total = 0;
  for (double w : weight_) total += w;
  for (size_t i = 0; i < cand_.size(); ++i) probs[cand_[i]] = weight_[i] / total;
  return probs;
}

}  // namespace dsinfer::sampler
