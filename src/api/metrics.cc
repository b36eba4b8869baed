#include "api/metrics.h"

#include <cstdio>

namespace dsinfer::api {

namespace {

std::string Num(double x) {
  char buf[48];
  if (x == static_cast<double>(static_cast<int64_t>(x)) && x < 1e15 && x > -1e15) {
    std::snprintf(buf, sizeof(buf), "%lld", static_cast<long long>(x));
  } else {
    std::snprintf(buf, sizeof(buf), "%.9g", x);
  }
  return buf;
}

void Header(const std::string& name, const char* type, const std::string& help, std::string* out) {
  *out += "# HELP " + name + " " + help + "\n# TYPE " + name + " " + type + "\n";
}

void Gauge(const std::string& name, const char* type, const std::string& help, double value,
           std::string* out) {
  Header(name, type, help, out);
  *out += name + " " + Num(value) + "\n";
}

}  // namespace

void ServerMetrics::Histogram::Observe(double x) {
  for (size_t i = 0; i < kBounds.size(); ++i) {
    if (x <= kBounds[i]) ++counts[i];
  }
  ++count;
  sum += x;
}

void ServerMetrics::Histogram::Render(const std::string& name, const std::string& help,
                                      std::string* out) const {
  Header(name, "histogram", help, out);
  for (size_t i = 0; i < kBounds.size(); ++i) {
    *out += name + "_bucket{le=\"" + Num(kBounds[i]) + "\"} " + std::to_string(counts[i]) + "\n";
  }
  *out += name + "_bucket{le=\"+Inf\"} " + std::to_string(count) + "\n";
  *out += name + "_sum " + Num(sum) + "\n" + name + "_count " + std::to_string(count) + "\n";
}

void ServerMetrics::CountRequest(const std::string& endpoint, int status) {
  std::lock_guard<std::mutex> lock(mu_);
  ++requests_[{endpoint, status}];
}

void ServerMetrics::CountCompletion(int64_t prompt_tokens, int64_t completion_tokens, double ttft_s,
                                    double e2e_s) {
  std::lock_guard<std::mutex> lock(mu_);
  prompt_tokens_ += prompt_tokens;
  generation_tokens_ += completion_tokens;
  if (completion_tokens > 0) ttft_.Observe(ttft_s);
  if (completion_tokens > 1) {
    tpot_.Observe((e2e_s - ttft_s) / static_cast<double>(completion_tokens - 1));
  }
  e2e_.Observe(e2e_s);
}

void ServerMetrics::CountAbort() {
  std::lock_guard<std::mutex> lock(mu_);
  ++aborts_;
}

std::string ServerMetrics::Render(const EngineStats* engine, int64_t open_requests) const {
  std::lock_guard<std::mutex> lock(mu_);
  std::string out;
  Header("dsinfer_requests_total", "counter", "HTTP requests by endpoint and status code.", &out);
  for (const auto& [key, n] : requests_) {
    out += "dsinfer_requests_total{endpoint=\"" + key.first + "\",status=\"" +
           std::to_string(key.second) + "\"} " + std::to_string(n) + "\n";
  }
  Gauge("dsinfer_prompt_tokens_total", "counter", "Prompt tokens of finished completions.",
        static_cast<double>(prompt_tokens_), &out);
  Gauge("dsinfer_generation_tokens_total", "counter", "Generated tokens of finished completions.",
        static_cast<double>(generation_tokens_), &out);
  Gauge("dsinfer_client_aborts_total", "counter", "Requests aborted by a client disconnect.",
        static_cast<double>(aborts_), &out);
  ttft_.Render("dsinfer_time_to_first_token_seconds", "Arrival to first token.", &out);
  tpot_.Render("dsinfer_time_per_output_token_seconds", "Mean time per token after the first.",
               &out);
  e2e_.Render("dsinfer_e2e_request_latency_seconds", "Arrival to the last token.", &out);
  Gauge("dsinfer_http_requests_open", "gauge", "Generation requests the server holds.",
        static_cast<double>(open_requests), &out);
  if (engine) {
    Gauge("dsinfer_requests_running", "gauge", "Sequences in the running batch.",
          static_cast<double>(engine->requests_running), &out);
    Gauge("dsinfer_requests_waiting", "gauge", "Sequences waiting for admission.",
          static_cast<double>(engine->requests_waiting), &out);
    Gauge("dsinfer_state_memory_used_bytes", "gauge", "Per-request model state in use.",
          static_cast<double>(engine->state_bytes_used), &out);
    Gauge("dsinfer_state_memory_total_bytes", "gauge", "The state memory budget.",
          static_cast<double>(engine->state_bytes_total), &out);
    Gauge("dsinfer_state_memory_shared_bytes", "gauge",
          "State memory copy-on-write sharing saves now (pages held by several states).",
          static_cast<double>(engine->state_bytes_shared), &out);
    Gauge("dsinfer_preemptions_total", "counter",
          "Sequences preempted (restored or recomputed later).",
          static_cast<double>(engine->preemptions), &out);
    Gauge("dsinfer_engine_steps_total", "counter", "Engine steps.",
          static_cast<double>(engine->steps), &out);
    if (engine->expert_parallel > 1) {
      Gauge("dsinfer_expert_parallel_ranks", "gauge", "Ranks the routed experts are sharded over.",
            engine->expert_parallel, &out);
      Gauge("dsinfer_eplb_rebalances_total", "counter", "Expert placements EPLB installed.",
            static_cast<double>(engine->eplb_rebalances), &out);
      Gauge("dsinfer_eplb_experts_moved_total", "counter",
            "Expert weights EPLB copied to a rank that did not hold them.",
            static_cast<double>(engine->eplb_experts_moved), &out);
      Gauge("dsinfer_eplb_imbalance", "gauge",
            "The busiest rank's expected MoE load over the mean under the installed placement, "
            "for the rows its plan counted (1: balanced).",
            engine->eplb_imbalance_after, &out);
      Gauge("dsinfer_eplb_imbalance_measured", "gauge",
            "The rows the busiest rank's experts computed over the mean, in the last window.",
            engine->eplb_imbalance_measured, &out);
    }
    // Speculative decoding (vLLM's spec_decode counters) and the prefix cache.
    Gauge("dsinfer_spec_decode_num_drafts_total", "counter",
          "Verify steps of sequences with drafts.", static_cast<double>(engine->spec_verify_rows),
          &out);
    Gauge("dsinfer_spec_decode_num_draft_tokens_total", "counter", "Draft tokens verified.",
          static_cast<double>(engine->spec_draft_tokens), &out);
    Gauge("dsinfer_spec_decode_num_accepted_tokens_total", "counter", "Draft tokens accepted.",
          static_cast<double>(engine->spec_accepted_tokens), &out);
    Gauge("dsinfer_prefix_cache_queries_total", "counter",
          "Admissions that looked up a cached prefix state.",
          static_cast<double>(engine->prefix_queries), &out);
    Gauge("dsinfer_prefix_cache_hits_total", "counter",
          "Admissions that restored a cached prefix state.",
          static_cast<double>(engine->prefix_hits), &out);
    Gauge("dsinfer_prefix_cache_reused_tokens_total", "counter",
          "Prompt tokens restored instead of computed.",
          static_cast<double>(engine->prefix_tokens_reused), &out);
    Gauge("dsinfer_prefix_cache_evictions_total", "counter", "Cached prefix states evicted.",
          static_cast<double>(engine->prefix_evictions), &out);
    Gauge("dsinfer_prefix_cache_entries", "gauge", "Cached prefix states held.",
          static_cast<double>(engine->prefix_cache_entries), &out);
    Gauge("dsinfer_prefix_cache_bytes", "gauge", "State memory of the cached prefix states.",
          static_cast<double>(engine->prefix_cache_bytes), &out);
    Gauge("dsinfer_prefix_cache_host_offloads_total", "counter",
          "Cached states moved from state memory to the host tier.",
          static_cast<double>(engine->host_cache_offloads), &out);
    Gauge("dsinfer_prefix_cache_host_restores_total", "counter",
          "Prefix cache hits restored from the host tier.",
          static_cast<double>(engine->host_cache_restores), &out);
    Gauge("dsinfer_prefix_cache_host_evictions_total", "counter",
          "Cached states dropped from the host tier.",
          static_cast<double>(engine->host_cache_evictions), &out);
    Gauge("dsinfer_prefix_cache_host_entries", "gauge", "Cached states in the host tier.",
          static_cast<double>(engine->host_cache_entries), &out);
    Gauge("dsinfer_prefix_cache_host_bytes", "gauge", "Host memory of the host tier's states.",
          static_cast<double>(engine->host_cache_bytes), &out);
    Gauge("dsinfer_prefix_cache_host_bytes_total", "gauge", "The host tier's budget.",
          static_cast<double>(engine->host_cache_bytes_total), &out);
    Gauge("dsinfer_preempted_states_kept_total", "counter",
          "Preempted sequences whose state was kept as a cached state.",
          static_cast<double>(engine->preempted_states_kept), &out);
    Gauge("dsinfer_preempted_resumed_total", "counter",
          "Readmissions of preempted sequences that restored the state they had.",
          static_cast<double>(engine->preempted_resumed), &out);
    Gauge("dsinfer_preempted_recomputed_tokens_total", "counter",
          "Tokens readmitted preempted sequences computed again.",
          static_cast<double>(engine->preempted_tokens_recomputed), &out);
    Gauge("dsinfer_structured_mask_late_total", "counter",
          "Structured-output draws that sat out a step because their grammar mask was late.",
          static_cast<double>(engine->structured_mask_late), &out);
  }
  return out;
}

}  // namespace dsinfer::api
