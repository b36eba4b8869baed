// `dsinfer logits`: runs the model over ids under a prefill/decode schedule and writes the logits
// of every position as float32 .npy [T, vocab]. All schedules must give the same logits.
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>

#include "cli/commands.h"
#include "cli/flags.h"
#include "io/model_family.h"
#include "io/npy.h"
#include "model/model_loader.h"
#include "model/paged_state.h"
#ifdef DSINFER_HAVE_CUDA
#include "cli/cuda_flags.h"
#include "model/deepseek_v4/cuda/cuda_expert_parallel.h"
#include "model/deepseek_v4/cuda/cuda_model.h"
#endif

namespace dsinfer::cli {

namespace {

std::vector<FlagSpec> Specs() {
  std::vector<FlagSpec> specs = {
      {"model", "model dir (config.json + *.safetensors)"},
      {"ids-file", "JSON file {\"ids\": [...]}"},
      {"out", "output .npy path (float32 [T, vocab])"},
      {"chunks", "prefill in chunks of these sizes (a,b,c), then the rest one token at a time"},
      {"prefill", "N tokens as one prefill, then one token at a time"},
      {"device", "cpu (default) or cuda"},
      {"backend", "alias of --device"},
      {"threads", "CPU threads (default: all)"},
      {"expert-parallel",
       "DeepSeek-V4: the routed experts over N ranks (the same logits; default 1): threads on the "
       "CPU; on CUDA, N models sharing the device, exchanging through the host"},
      {"kv-cache-dtype",
       "float32 (default for DeepSeek-V4: transformers' forward) or fp8 (the official forward's "
       "FP8 / FP4 cache and its rounding)"},
      {"fp8-mma",
       "DeepSeek-V4: the FP8 / FP4 linears round as Hopper's FP8 tensor-core instructions do "
       "(13 bits a k32 step, fp32 promotion per 128 columns or FP4 group; an opt-in numerics "
       "mode: on CUDA those instructions, on the CPU their model)",
       false},
  };
#ifdef DSINFER_HAVE_CUDA
  for (const FlagSpec& f : CudaFlagSpecs()) specs.push_back(f);
#endif
  return specs;
}

StatusOr<std::vector<int32_t>> ReadIds(const std::string& path) {
  std::ifstream in(path);
  if (!in) return NotFound("cannot read ids file " + path);
  std::stringstream ss;
  ss << in.rdbuf();
  auto j = nlohmann::json::parse(ss.str(), nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("ids") || !j["ids"].is_array()) {
    return InvalidArgument(path + ": expected a JSON object {\"ids\": [...]}");
  }
  std::vector<int32_t> ids;
  for (const auto& v : j["ids"]) {
    if (!v.is_number_integer()) return InvalidArgument(path + ": ids must be integers");
    const int64_t x = v.get<int64_t>();
    if (x < 0 || x > INT32_MAX) {
      return InvalidArgument(path + ": token id " + std::to_string(x) + " is out of range");
    }
    ids.push_back(static_cast<int32_t>(x));
  }
  if (ids.empty()) return InvalidArgument(path + ": ids is empty");
  return ids;
}

// The chunk sizes of the schedule: e.g. {5, 3, 1, 1, 1} for --chunks 5,3 over 11 tokens.
StatusOr<std::vector<int64_t>> Schedule(const Flags& flags, int64_t total) {
  std::vector<int64_t> sizes;
  if (flags.Has("chunks") && flags.Has("prefill")) {
    return InvalidArgument("--chunks and --prefill are exclusive");
  }
  if (auto chunks = flags.Get("chunks")) {
    std::stringstream ss(*chunks);
    std::string item;
    while (std::getline(ss, item, ',')) {
      try {
        size_t used = 0;
        const int64_t v = std::stoll(item, &used);
        if (used != item.size() || v <= 0) throw std::invalid_argument("bad");
        sizes.push_back(v);
      } catch (const std::exception&) {
        return InvalidArgument("--chunks needs positive integers separated by commas");
      }
    }
  } else if (flags.Has("prefill")) {
    DSINFER_ASSIGN_OR_RETURN(int64_t n, flags.GetInt("prefill", 0));
    if (n <= 0) return InvalidArgument("--prefill needs a positive count");
    sizes.push_back(n);
  } else {
    sizes.push_back(total);
  }
  int64_t used = 0;
  for (int64_t s : sizes) used += s;
  if (used > total) {
    return InvalidArgument("the schedule covers " + std::to_string(used) +
                           " tokens but there are " + std::to_string(total));
  }
  for (; used < total; ++used) sizes.push_back(1);
  return sizes;
}

Status Run(const Flags& flags) {
  for (const char* f : {"model", "ids-file", "out"}) {
    if (!flags.Has(f)) return InvalidArgument(std::string("--") + f + " is required");
  }
  if (flags.Has("device") && flags.Has("backend")) {
    return InvalidArgument("give --device or its alias --backend, not both");
  }
  const std::string backend = flags.GetOr("device", flags.GetOr("backend", "cpu"));
  if (backend != "cpu" && backend != "cuda") return InvalidArgument("--device must be cpu or cuda");
  DSINFER_ASSIGN_OR_RETURN(std::vector<int32_t> ids, ReadIds(*flags.Get("ids-file")));
  DSINFER_ASSIGN_OR_RETURN(std::vector<int64_t> sizes,
                           Schedule(flags, static_cast<int64_t>(ids.size())));
  DSINFER_ASSIGN_OR_RETURN(const io::KvCacheDtype kv_dtype,
                           io::ParseKvCacheDtype(flags.GetOr("kv-cache-dtype", "auto")));
  DSINFER_ASSIGN_OR_RETURN(int64_t ranks, flags.GetInt("expert-parallel", 1));
  if (ranks < 1 || ranks > 64) return InvalidArgument("--expert-parallel must be in [1, 64]");
  if (backend == "cuda") {
#ifdef DSINFER_HAVE_CUDA
    // Every family (the CUDA model loads DeepSeek-V4 and DeepSeek-V4.1 dirs).
    DSINFER_RETURN_IF_ERROR(io::DetectModelFamily(*flags.Get("model")).status());
    model::deepseek_v4::cuda::CudaModelOptions opt;
    DSINFER_RETURN_IF_ERROR(ApplyCudaFlags(flags, &opt));
    opt.fp8_mma = flags.Has("fp8-mma");
    opt.max_seqs = 1;
    opt.kv_cache_dtype = kv_dtype;
    opt.max_len = static_cast<int64_t>(ids.size());
    opt.max_tokens = *std::max_element(sizes.begin(), sizes.end());
    namespace dc = model::deepseek_v4::cuda;
    // --expert-parallel N: N ranks sharing the device, the sequence on rank 0 (the others serve
    // their experts in every MoE layer).
    std::unique_ptr<dc::CudaExpertParallel> ep;
    std::unique_ptr<dc::CudaModel> single;
    if (ranks > 1) {
      DSINFER_ASSIGN_OR_RETURN(
          ep, dc::CudaExpertParallel::Load(*flags.Get("model"), opt, static_cast<int>(ranks)));
    } else {
      DSINFER_ASSIGN_OR_RETURN(single, dc::CudaModel::Load(*flags.Get("model"), opt));
    }
    dc::CudaModel& cm = ep ? ep->model(0) : *single;
    const int64_t V = cm.config().vocab_size;
    DSINFER_ASSIGN_OR_RETURN(int slot, cm.NewSequence());
    std::vector<float> logits;
    int64_t at = 0;
    for (int64_t size : sizes) {
      dc::CudaModel::Chunk chunk{slot,
                                 std::vector<int32_t>(ids.begin() + at, ids.begin() + at + size)};
      std::vector<float> out;
      if (ep) {
        std::vector<std::vector<dc::CudaModel::Chunk>> per_rank(static_cast<size_t>(ranks));
        per_rank[0] = {chunk};
        DSINFER_ASSIGN_OR_RETURN(auto all,
                                 ep->Forward(per_rank, model::deepseek_v4::LogitsRows::kAll));
        out = std::move(all[0]);
      } else {
        DSINFER_ASSIGN_OR_RETURN(out, cm.Forward({chunk}, model::deepseek_v4::LogitsRows::kAll));
      }
      logits.insert(logits.end(), out.begin(), out.end());
      at += size;
    }
    return io::WriteNpyF32(*flags.Get("out"), {static_cast<int64_t>(ids.size()), V}, logits.data());
#else
    return Unimplemented(
        "--device cuda: this build has no CUDA backend (configure with --preset cuda-release)");
#endif
  }
  DSINFER_ASSIGN_OR_RETURN(int64_t threads, flags.GetInt("threads", 0));
  // Any family, through the family seam (model/language_model.h), its state on heap pages.
  model::LoadOptions lo;
  lo.num_threads = static_cast<int>(threads);
  lo.kv_cache_dtype = kv_dtype;
  lo.expert_parallel = static_cast<int>(ranks);
  lo.fp8_mma = flags.Has("fp8-mma");
  DSINFER_ASSIGN_OR_RETURN(auto model, model::LoadLanguageModel(*flags.Get("model"), lo));
  const int64_t V = model->info().vocab_size;
  for (int32_t id : ids) {
    if (id >= V) {
      return InvalidArgument("token id " + std::to_string(id) + " is outside the vocabulary [0, " +
                             std::to_string(V) + ")");
    }
  }
  const cache::StateLayout layout = model->StateLayoutFor(/*rollback_slack=*/0);
  model::HeapStatePages pages(layout);
  auto seq = model->NewSequence(0, layout, &pages);
  std::vector<float> logits;
  logits.reserve(ids.size() * V);
  int64_t at = 0;
  for (int64_t size : sizes) {
    model::ModelChunk chunk{seq.get(),
                            std::vector<int32_t>(ids.begin() + at, ids.begin() + at + size), size};
    DSINFER_ASSIGN_OR_RETURN(auto out, model->Forward({chunk}, /*keep_streams=*/false));
    logits.insert(logits.end(), out.logits.begin(), out.logits.end());
    at += size;
  }
  return io::WriteNpyF32(*flags.Get("out"), {static_cast<int64_t>(ids.size()), V}, logits.data());
}

}  // namespace

int RunLogits(int argc, char** argv) {
  return RunSubcommand(argc, argv, "logits",
                       "Writes the logits after every position as float32 .npy.", Specs(), Run);
}

}  // namespace dsinfer::cli
