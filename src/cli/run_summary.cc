#include "cli/run_summary.h"

#include <algorithm>
#include <cstdio>

namespace dsinfer::cli {

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const double at = p / 100.0 * static_cast<double>(v.size() - 1);
  const size_t lo = static_cast<size_t>(at);
  const size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (v[hi] - v[lo]) * (at - static_cast<double>(lo));
}

void RunSummary::Add(const RequestResult& r) {
  ++requests_;
  if (!r.status.ok()) ++failed_;
  prompt_tokens_ += r.prompt_tokens;
  for (const auto& c : r.completions) {
    const auto n = static_cast<int64_t>(c.ids.size());
    output_tokens_ += n;
    if (n == 0) continue;
    ttft_s_.push_back(c.ttft_s);
    if (n > 1) tpot_s_.push_back((c.e2e_s - c.ttft_s) / static_cast<double>(n - 1));
  }
}

nlohmann::json RunSummary::ToJson() const {
  const double wall = std::max(wall_s_, 1e-9);
  nlohmann::json out = {
      {"requests", requests_},
      {"failed", failed_},
      {"prompt_tokens", prompt_tokens_},
      {"output_tokens", output_tokens_},
      {"wall_s", wall_s_},
      {"output_tokens_per_s", output_tokens_ / wall},
      {"total_tokens_per_s", (prompt_tokens_ + output_tokens_) / wall},
      {"ttft_ms",
       {{"p50", Percentile(ttft_s_, 50) * 1e3},
        {"p90", Percentile(ttft_s_, 90) * 1e3},
        {"p99", Percentile(ttft_s_, 99) * 1e3}}},
      {"tpot_ms",
       {{"p50", Percentile(tpot_s_, 50) * 1e3},
        {"p90", Percentile(tpot_s_, 90) * 1e3},
        {"p99", Percentile(tpot_s_, 99) * 1e3}}},
      {"steps", stats_.steps},
      {"preemptions", stats_.preemptions},
      {"forward_tokens", stats_.forward_tokens},
      {"mean_tokens_per_step",
       stats_.steps ? static_cast<double>(stats_.forward_tokens) / stats_.steps : 0.0},
      {"decode_steps", stats_.decode_steps},
      {"mean_decode_batch",
       stats_.decode_steps ? static_cast<double>(stats_.decode_rows) / stats_.decode_steps : 0.0},
      {"mean_decode_context",
       stats_.decode_rows ? static_cast<double>(stats_.decode_context) / stats_.decode_rows : 0.0},
      {"decode_step_ms",
       stats_.decode_steps ? stats_.decode_run_s / stats_.decode_steps * 1e3 : 0.0},
      {"run_s", stats_.run_s},
      {"graph_decode_steps", stats_.graph_decode_steps},
      {"graph_multi_token_steps", stats_.graph_multi_token_steps},
      {"graph_draft_passes", stats_.graph_draft_passes},
      {"overlap", stats_.overlap},
      {"steps_per_s", stats_.steps / wall},
      // The engine thread's own work per step (scheduling, launching, masks, emitting), and its
      // wait for the device's tokens.
      {"host_ms_per_step",
       stats_.steps ? (stats_.step_s - stats_.wait_s) / stats_.steps * 1e3 : 0.0},
      {"wait_ms_per_step", stats_.steps ? stats_.wait_s / stats_.steps * 1e3 : 0.0},
      // Structured output: draws that sat out a step (their grammar mask late), emitted tokens
      // a mask worker applied (the automaton busy at the emit), and the engine thread's wait for
      // masks.
      {"structured_mask_late", stats_.structured_mask_late},
      {"structured_deferred_advances", stats_.structured_deferred_advances},
      {"structured_mask_wait_ms_per_step",
       stats_.steps ? stats_.structured_mask_wait_s / stats_.steps * 1e3 : 0.0}};
  // State memory: its peak in use over the steps (each page once, however many requests or
  // cached states share it) and what copy-on-write sharing saved at its peak.
  out["state_memory"] = {{"bytes_total", stats_.state_bytes_total},
                         {"bytes_peak", stats_.state_bytes_peak},
                         {"bytes_shared_peak", stats_.state_bytes_shared_peak}};
  if (stats_.prefix_queries > 0) {
    const auto& st = stats_;
    out["prefix_cache"] = {{"queries", st.prefix_queries},
                           {"hits", st.prefix_hits},
                           {"hit_rate", static_cast<double>(st.prefix_hits) / st.prefix_queries},
                           {"tokens_reused", st.prefix_tokens_reused},
                           {"checkpoints", st.prefix_checkpoints},
                           {"evictions", st.prefix_evictions},
                           {"entries", st.prefix_cache_entries},
                           {"bytes", st.prefix_cache_bytes}};
    if (st.host_cache_bytes_total > 0) {
      out["prefix_cache"]["host"] = {
          {"offloads", st.host_cache_offloads},   {"restores", st.host_cache_restores},
          {"evictions", st.host_cache_evictions}, {"entries", st.host_cache_entries},
          {"bytes", st.host_cache_bytes},         {"bytes_total", st.host_cache_bytes_total}};
    }
  }
  if (stats_.expert_parallel > 1) {
    const auto& st = stats_;
    out["expert_parallel"] = {{"ranks", st.expert_parallel},
                              {"eplb_rebalances", st.eplb_rebalances},
                              {"eplb_experts_moved", st.eplb_experts_moved},
                              {"eplb_imbalance_before", st.eplb_imbalance_before},
                              {"eplb_imbalance_after", st.eplb_imbalance_after},
                              {"eplb_imbalance_contiguous", st.eplb_imbalance_contiguous},
                              {"eplb_imbalance_measured", st.eplb_imbalance_measured}};
  }
  if (stats_.preemptions > 0) {
    const auto& st = stats_;
    out["preemption"] = {{"preemptions", st.preemptions},
                         {"states_kept", st.preempted_states_kept},
                         {"readmissions", st.preempted_readmissions},
                         {"resumed", st.preempted_resumed},
                         {"tokens_recomputed", st.preempted_tokens_recomputed}};
  }
  if (spec_.method != SpeculativeOptions::Method::kNone) {
    const auto& st = stats_;
    out["speculative"] = {
        {"method", SpeculativeMethodName(spec_.method)},
        {"num_speculative_tokens", st.spec_num_tokens},
        {"adaptive", spec_.adaptive},
        {"verify_steps", st.spec_verify_rows},
        {"draft_tokens", st.spec_draft_tokens},
        {"accepted_tokens", st.spec_accepted_tokens},
        {"acceptance_rate",
         st.spec_draft_tokens ? static_cast<double>(st.spec_accepted_tokens) / st.spec_draft_tokens
                              : 0.0},
        // Tokens a verify step yields: its accepted drafts and the drawn token after them.
        {"mean_accepted_length",
         st.spec_verify_rows
             ? 1.0 + static_cast<double>(st.spec_accepted_tokens) / st.spec_verify_rows
             : 0.0}};
  }
  return out;
}

std::string RunSummary::ToText() const {
  const double wall = std::max(wall_s_, 1e-9);
  char buf[640];
  std::snprintf(buf, sizeof(buf),
                "requests: %lld (%lld failed)   prompt tokens: %lld   output tokens: %lld   "
                "time: %.2f s\n"
                "throughput: %.1f output tok/s, %.1f total tok/s   steps: %lld   preemptions: %lld\n"
                "TTFT ms: p50 %.1f  p90 %.1f  p99 %.1f   TPOT ms: p50 %.2f  p90 %.2f  p99 %.2f\n",
                static_cast<long long>(requests_), static_cast<long long>(failed_),
                static_cast<long long>(prompt_tokens_), static_cast<long long>(output_tokens_), wall_s_,
                output_tokens_ / wall, (prompt_tokens_ + output_tokens_) / wall,
                static_cast<long long>(stats_.steps), static_cast<long long>(stats_.preemptions),
                Percentile(ttft_s_, 50) * 1e3, Percentile(ttft_s_, 90) * 1e3, Percentile(ttft_s_, 99) * 1e3,
                Percentile(tpot_s_, 50) * 1e3, Percentile(tpot_s_, 90) * 1e3, Percentile(tpot_s_, 99) * 1e3);
  std::string text = buf;
  if (stats_.prefix_queries > 0) {
    std::snprintf(
        buf, sizeof(buf), "prefix cache: %lld of %lld admissions hit, %lld prompt tokens reused\n",
        static_cast<long long>(stats_.prefix_hits), static_cast<long long>(stats_.prefix_queries),
        static_cast<long long>(stats_.prefix_tokens_reused));
    text += buf;
  }
  if (spec_.method != SpeculativeOptions::Method::kNone) {
    const auto& st = stats_;
    std::snprintf(
        buf, sizeof(buf),
        "speculative (%s, %d tokens%s): %lld drafts, %lld accepted (%.1f%%), %.2f tokens per "
        "verify step\n",
        SpeculativeMethodName(spec_.method), st.spec_num_tokens, spec_.adaptive ? ", adaptive" : "",
        static_cast<long long>(st.spec_draft_tokens),
        static_cast<long long>(st.spec_accepted_tokens),
        st.spec_draft_tokens ? 100.0 * st.spec_accepted_tokens / st.spec_draft_tokens : 0.0,
        st.spec_verify_rows
            ? 1.0 + static_cast<double>(st.spec_accepted_tokens) / st.spec_verify_rows
            : 0.0);
    text += buf;
  }
  return text;
}

}  // namespace dsinfer::cli
