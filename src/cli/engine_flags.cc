#include "cli/engine_flags.h"

#include <cstdlib>
#include <filesystem>
#include <string>

#include "io/model_config.h"

namespace dsinfer::cli {

std::vector<FlagSpec> EngineFlagSpecs() {
  return {
      {"device", "auto (default: CUDA when built with it and a GPU is visible), cpu or cuda"},
      {"threads", "CPU threads (default: all)"},
      {"expert-parallel",
       "DeepSeek-V4 on the CPU: shard the routed experts over N ranks (threads; the rest of "
       "the model replicated, each step's requests split among them); the same results "
       "(default 1)"},
      {"eplb-redundant-experts",
       "with --expert-parallel: spare expert slots per MoE layer for replicas of busy experts "
       "(default 0)"},
      {"eplb-interval",
       "with --expert-parallel: re-plan the experts' placement from the rows routed to them "
       "every N forward steps, moving their weights between the ranks (default 0: never)"},
      {"state-memory-mb",
       "state memory budget in MiB (default: 1024 on the CPU; on CUDA what the "
       "model leaves free, see --gpu-memory-utilization)"},
      {"gpu-memory-utilization",
       "share of the GPU's memory the engine may use: weights, "
       "activations and the state pools (default 0.9)"},
      {"kv-cache-dtype",
       "the attention state: float32 (the computed values; transformers' forward) or fp8 (the "
       "official forward's FP8 K=V / FP4 index-key cache, rounded as it rounds; DeepSeek-V4.1 "
       "always); default auto: float32 for DeepSeek-V4"},
      {"max-batch-tokens", "tokens per engine step (default 256 on the CPU, 2048 with CUDA)"},
      {"max-running", "sequences in flight (default 64)"},
      {"max-model-len", "context limit (default: the model's; CUDA: at most 4096)"},
      {"typical-length",
       "the request length (tokens) the state memory plan assumes (default 2048): shorter "
       "admits more requests at once, which longer ones then preempt"},
      {"enforce-eager",
       "CUDA: launch every decode step's kernels instead of replaying CUDA graphs "
       "(debugging, A/B timing; the same results)",
       false},
      {"engram-host-tables",
       "CUDA, DeepSeek-V4.1: the Engram tables in pinned host memory, read over PCIe by the "
       "lookup (the release's tables fit no GPU; the same results)",
       false},
      {"no-overlap",
       "run steps serially instead of scheduling step N+1 while the GPU runs step N (debugging, "
       "A/B timing; the same results)",
       false},
      {"enable-prompt-logprobs",
       "CUDA: keep logits for every row of a step, so that requests may ask for prompt_logprobs "
       "(and completions for echo with logprobs); costs max-batch-tokens rows of the vocabulary",
       false},
      {"overlap",
       "overlap scheduling on the CPU too (off there by default: the CPU is the device; for "
       "tests)",
       false},
      {"random-preset",
       "instead of --model: a preset of init-model (e.g. flash-l8, v41-flash-l8) with weights "
       "generated on the GPU (--device cuda; token ids only; for benchmarks)"},
      {"tokenizer",
       "tokenizer.json (or a dir holding one): with --random-preset, text in and out (e.g. "
       "models/demo/tokenizer.json for the DeepSeek vocabulary); default: the model dir's"},
      {"speculative-method",
       "speculative decoding: ngram (prompt lookup), mtp (DeepSeek-V4's MTP layer) or dspark "
       "(DeepSeek-V4.1's block drafter; CPU for now); outputs are identical with it on and off "
       "(default: off)"},
      {"num-speculative-tokens",
       "drafts verified per step, 1..16 (default 3; dspark: the model's block, "
       "dspark_block_size)"},
      {"speculative-adaptive",
       "each request drafts the number of tokens (0..K) with the least expected time per token, "
       "from its acceptance and the engine's measured step and drafting costs",
       false},
      {"ngram-size", "n-gram drafts: the longest suffix matched, 1..16 (default 4)"},
      {"no-prefix-cache", "do not keep states of token prefixes for later requests", false},
      {"prefix-checkpoint-interval",
       "prefix cache: a state every this many tokens (a multiple of 128; default 512), and at "
       "each prompt's and completion's end"},
      {"prefix-cache-entries",
       "prefix cache: states held at most, with memory set aside for them (default: up to "
       "--max-running, in the memory running requests leave free)"},
      {"host-cache-gb",
       "prefix cache: a host-memory tier of this many GiB (pinned on a GPU) that cached states "
       "evicted from state memory move to, least recently used out first, and come back from on "
       "a hit (default 0: off)"},
      {"no-keep-preempted",
       "prefix cache: a preempted request recomputes from the longest cached state of its "
       "tokens instead of keeping its own state (for A/B measurements)",
       false},
      {"no-share-state-pages",
       "copy every page of a copied state (n > 1 completions, prefix cache states) instead of "
       "sharing the append-only list pages copy-on-write (for A/B measurements)",
       false},
      {"structured-mask-deadline-us",
       "structured output: a draw whose grammar mask is not ready this many microseconds after "
       "the step's logits sits out the step instead of stalling the batch (its token is the "
       "same, a step later); 0: wait for every mask (default 2000)"},
  };
}

StatusOr<EngineOptions> EngineOptionsFromFlags(const Flags& flags) {
  EngineOptions o;
  o.model_dir = flags.GetOr("model", "");
  o.random_preset = flags.GetOr("random-preset", "");
  o.tokenizer_path = flags.GetOr("tokenizer", "");
  if (!o.tokenizer_path.empty() && std::filesystem::is_directory(o.tokenizer_path))
    o.tokenizer_path += "/tokenizer.json";
  o.enforce_eager = flags.Has("enforce-eager");
  o.kv_cache_dtype = flags.GetOr("kv-cache-dtype", "auto");
  DSINFER_RETURN_IF_ERROR(io::ParseKvCacheDtype(o.kv_cache_dtype).status());  // a usage error
  o.engram_host_tables = flags.Has("engram-host-tables");
  if (flags.Has("no-overlap") && flags.Has("overlap"))
    return InvalidArgument("give at most one of --overlap and --no-overlap");
  if (flags.Has("no-overlap")) o.overlap = EngineOptions::Overlap::kOff;
  if (flags.Has("overlap")) o.overlap = EngineOptions::Overlap::kOn;
  o.prompt_logprobs = flags.Has("enable-prompt-logprobs");
  if (o.model_dir.empty() == o.random_preset.empty()) {
    return InvalidArgument("give exactly one of --model and --random-preset");
  }
  const std::string device = flags.GetOr("device", "auto");
  if (device == "auto") {
    o.device = Device::kAuto;
  } else if (device == "cpu") {
    o.device = Device::kCpu;
  } else if (device == "cuda") {
    o.device = Device::kCuda;
  } else {
    return InvalidArgument("--device must be auto, cpu or cuda, not '" + device + "'");
  }
  DSINFER_ASSIGN_OR_RETURN(int64_t threads, flags.GetInt("threads", 0));
  DSINFER_ASSIGN_OR_RETURN(int64_t ep, flags.GetInt("expert-parallel", 1));
  DSINFER_ASSIGN_OR_RETURN(int64_t redundant, flags.GetInt("eplb-redundant-experts", 0));
  DSINFER_ASSIGN_OR_RETURN(o.eplb_interval, flags.GetInt("eplb-interval", 0));
  if (ep < 1 || ep > 64) return InvalidArgument("--expert-parallel must be in [1, 64]");
  if (redundant < 0 || redundant > 65536 || o.eplb_interval < 0) {
    return InvalidArgument(
        "--eplb-redundant-experts must be in [0, 65536] and --eplb-interval not negative");
  }
  if (ep == 1 && (redundant > 0 || o.eplb_interval > 0)) {
    return InvalidArgument(
        "--eplb-redundant-experts and --eplb-interval need --expert-parallel > 1");
  }
  o.expert_parallel = static_cast<int>(ep);
  o.eplb_redundant_experts = static_cast<int>(redundant);
  DSINFER_ASSIGN_OR_RETURN(int64_t mem_mb, flags.GetInt("state-memory-mb", 0));
  if (auto util = flags.Get("gpu-memory-utilization")) {
    char* end = nullptr;
    o.gpu_memory_utilization = std::strtod(util->c_str(), &end);
    if (end == util->c_str() || *end != '\0' || !(o.gpu_memory_utilization > 0) ||
        o.gpu_memory_utilization > 1) {
      return InvalidArgument("--gpu-memory-utilization must be in (0, 1], got '" + *util + "'");
    }
  }
  DSINFER_ASSIGN_OR_RETURN(o.max_batch_tokens, flags.GetInt("max-batch-tokens", 0));
  DSINFER_ASSIGN_OR_RETURN(int64_t running, flags.GetInt("max-running", 64));
  DSINFER_ASSIGN_OR_RETURN(o.max_model_len, flags.GetInt("max-model-len", 0));
  DSINFER_ASSIGN_OR_RETURN(o.typical_length, flags.GetInt("typical-length", 2048));
  if (o.typical_length < 1) return InvalidArgument("--typical-length must be positive");
  if (threads < 0 || mem_mb < 0 || (flags.Has("state-memory-mb") && mem_mb < 1) || running < 1 ||
      running > 100000 || o.max_batch_tokens < 0 ||
      (flags.Has("max-batch-tokens") && o.max_batch_tokens < 1) || o.max_model_len < 0) {
    return InvalidArgument(
        "--threads, --state-memory-mb, --max-running, --max-batch-tokens and "
        "--max-model-len must be positive");
  }
  if (auto method = flags.Get("speculative-method")) {
    using Method = SpeculativeOptions::Method;
    if (*method == "ngram") {
      o.speculative.method = Method::kNgram;
    } else if (*method == "mtp") {
      o.speculative.method = Method::kMtp;
    } else if (*method == "dspark") {
      o.speculative.method = Method::kDSpark;
    } else if (*method != "none") {
      return InvalidArgument("--speculative-method must be ngram, mtp or dspark, not '" + *method +
                             "'");
    }
  }
  DSINFER_ASSIGN_OR_RETURN(int64_t spec_tokens, flags.GetInt("num-speculative-tokens", 3));
  DSINFER_ASSIGN_OR_RETURN(int64_t ngram_size, flags.GetInt("ngram-size", 4));
  if (spec_tokens < 1 || spec_tokens > 16 || ngram_size < 1 || ngram_size > 16) {
    return InvalidArgument("--num-speculative-tokens and --ngram-size must be in [1, 16]");
  }
  if (o.speculative.method == SpeculativeOptions::Method::kNone &&
      (flags.Has("num-speculative-tokens") || flags.Has("speculative-adaptive") ||
       flags.Has("ngram-size"))) {
    return InvalidArgument(
        "--num-speculative-tokens, --speculative-adaptive and --ngram-size need "
        "--speculative-method");
  }
  o.prefix_cache = !flags.Has("no-prefix-cache");
  DSINFER_ASSIGN_OR_RETURN(o.prefix_checkpoint_interval,
                           flags.GetInt("prefix-checkpoint-interval", 512));
  DSINFER_ASSIGN_OR_RETURN(int64_t entries, flags.GetInt("prefix-cache-entries", 0));
  if (o.prefix_checkpoint_interval < 128 || o.prefix_checkpoint_interval % 128 != 0 ||
      entries < 0 || entries > 100000) {
    return InvalidArgument(
        "--prefix-checkpoint-interval must be a positive multiple of 128 and "
        "--prefix-cache-entries in [0, 100000]");
  }
  o.prefix_cache_entries = static_cast<int>(entries);
  o.prefix_keep_preempted = !flags.Has("no-keep-preempted");
  o.share_state_pages = !flags.Has("no-share-state-pages");
  if (auto gb = flags.Get("host-cache-gb")) {
    char* end = nullptr;
    const double v = std::strtod(gb->c_str(), &end);
    if (end == gb->c_str() || *end != '\0' || !(v >= 0) || v > 1e6) {
      return InvalidArgument("--host-cache-gb must be a number of GiB >= 0, got '" + *gb + "'");
    }
    o.host_cache_bytes = static_cast<int64_t>(v * static_cast<double>(int64_t{1} << 30));
    if (o.host_cache_bytes > 0 && !o.prefix_cache) {
      return InvalidArgument("--host-cache-gb needs the prefix cache (drop --no-prefix-cache)");
    }
  }
  DSINFER_ASSIGN_OR_RETURN(o.structured_mask_deadline_us,
                           flags.GetInt("structured-mask-deadline-us", 2000));
  if (o.structured_mask_deadline_us < 0 || o.structured_mask_deadline_us > 10'000'000) {
    return InvalidArgument("--structured-mask-deadline-us must be in [0, 10000000]");
  }
  o.speculative.num_tokens = static_cast<int>(spec_tokens);
  // DSpark drafts a whole block at once: verify all of it by default (0: the model's block).
  if (o.speculative.method == SpeculativeOptions::Method::kDSpark &&
      !flags.Has("num-speculative-tokens")) {
    o.speculative.num_tokens = 0;
  }
  o.speculative.ngram_max = static_cast<int>(ngram_size);
  o.speculative.adaptive = flags.Has("speculative-adaptive");
  o.num_threads = static_cast<int>(threads);
  o.state_memory_bytes = mem_mb << 20;
  o.max_running = static_cast<int>(running);
  return o;
}

}  // namespace dsinfer::cli
