#include "executor/model_runner.h"

#include <algorithm>

#include "base/check.h"
#include "model/deepseek_v4/init_presets.h"
#include "model/deepseek_v4/language_model.h"
#include "model/deepseek_v41/init_presets.h"
#include "model/deepseek_v41/language_model.h"
#include "model/model_loader.h"

#ifdef DSINFER_HAVE_CUDA
#include "backend/cuda/runtime.h"
#endif

namespace dsinfer::executor {

const char* DeviceName(Device device) {
  switch (device) {
    case Device::kAuto:
      return "auto";
    case Device::kCpu:
      return "cpu";
    case Device::kCuda:
      return "cuda";
  }
  return "?";
}

StatusOr<Device> ResolveDevice(Device device) {
#ifdef DSINFER_HAVE_CUDA
  const bool built = true;
  const bool visible = backend::cuda::DeviceAvailable();
#else
  const bool built = false;
  const bool visible = false;
#endif
  switch (device) {
    case Device::kCpu:
      return Device::kCpu;
    case Device::kAuto:
      return visible ? Device::kCuda : Device::kCpu;
    case Device::kCuda:
      if (!built) {
        return Unimplemented(
            "--device cuda: this build has no CUDA backend (configure with "
            "--preset cuda-release)");
      }
      if (!visible) return NotFound("--device cuda: no CUDA device is visible");
      return Device::kCuda;
  }
  return InvalidArgument("unknown device");
}

namespace {

int64_t DrawRow(int64_t count, const RunDraw& d) {
  const int64_t row = d.row < 0 ? count - 1 : d.row;
  DSINFER_CHECK(row >= 0 && row < count);
  return row;
}

}  // namespace

std::vector<int64_t> DrawTails(const std::vector<RunChunk>& chunks,
                               const std::vector<RunDraw>& draws) {
  std::vector<int64_t> tails(chunks.size(), 0);
  for (const RunDraw& d : draws) {
    const auto count = static_cast<int64_t>(chunks.at(static_cast<size_t>(d.chunk)).tokens.size());
    tails[d.chunk] = std::max(tails[d.chunk], count - DrawRow(count, d));
  }
  return tails;
}

std::vector<int64_t> DrawLogitsRows(const std::vector<int64_t>& counts,
                                    const std::vector<RunDraw>& draws,
                                    const std::vector<int64_t>& tails) {
  DSINFER_CHECK(counts.size() == tails.size());
  std::vector<int64_t> first(counts.size(), 0);
  for (size_t i = 1; i < counts.size(); ++i) first[i] = first[i - 1] + tails[i - 1];
  std::vector<int64_t> rows;
  rows.reserve(draws.size());
  for (const RunDraw& d : draws) {
    const int64_t count = counts.at(static_cast<size_t>(d.chunk));
    const int64_t row = DrawRow(count, d);
    DSINFER_CHECK(row >= count - tails[d.chunk]);  // within the logits the launch kept
    rows.push_back(first[d.chunk] + row - (count - tails[d.chunk]));
  }
  return rows;
}

StatusOr<RunOutput> ModelRunner::Run(const std::vector<RunChunk>& chunks,
                                     const std::vector<RunDraw>& draws) {
  DSINFER_RETURN_IF_ERROR(Launch(chunks, DrawTails(chunks, draws)));
  DSINFER_RETURN_IF_ERROR(Sample(draws));
  return Collect();
}

bool IsV41Preset(const std::string& preset) { return preset.rfind("v41-", 0) == 0; }

StatusOr<io::DeepseekV4Config> LoadRunnerConfig(const RunnerOptions& options) {
  if (!options.random_preset.empty())
    return model::deepseek_v4::PresetConfig(options.random_preset);
  return io::LoadDeepseekV4Config(options.model_dir);
}

StatusOr<model::ModelInfo> LoadRunnerInfo(const RunnerOptions& options) {
  if (IsV41Preset(options.random_preset)) {
    DSINFER_ASSIGN_OR_RETURN(const io::DeepseekV41Config c,
                             model::deepseek_v41::PresetConfig(options.random_preset));
    return model::deepseek_v41::InfoOf(c);
  }
  if (!options.random_preset.empty()) {
    DSINFER_ASSIGN_OR_RETURN(const io::DeepseekV4Config c, LoadRunnerConfig(options));
    return model::deepseek_v4::InfoOf(c);
  }
  return model::ReadModelInfo(options.model_dir);
}

Status CheckExpertParallelDevice(const RunnerOptions& options) {
  if (options.device != Device::kCuda ||
      (options.expert_parallel == 1 && options.eplb_redundant_experts == 0 &&
       options.eplb_interval == 0)) {
    return Status::Ok();
  }
  return Unimplemented(
      "expert parallelism runs on the CPU backend for now (--device cpu): the GPUs' all-to-all "
      "is not built yet");
}

StatusOr<std::unique_ptr<ModelRunner>> CreateModelRunner(const RunnerOptions& options) {
  DSINFER_ASSIGN_OR_RETURN(Device device, ResolveDevice(options.device));
  if (device == Device::kCuda) {
    DSINFER_RETURN_IF_ERROR(CheckExpertParallelDevice(options));
    return CreateCudaModelRunner(options);
  }
  if (!options.random_preset.empty()) {
    return Unimplemented("device-random presets (" + options.random_preset +
                         ") run on the CUDA backend only; write a model dir with "
                         "`dsinfer init-model --preset " +
                         options.random_preset + "` for the CPU");
  }
  return CreateCpuModelRunner(options);
}

#ifndef DSINFER_HAVE_CUDA
StatusOr<std::unique_ptr<ModelRunner>> CreateCudaModelRunner(const RunnerOptions&) {
  return Unimplemented("this build has no CUDA backend");
}
#endif

}  // namespace dsinfer::executor
