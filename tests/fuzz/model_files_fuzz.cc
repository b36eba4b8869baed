// libFuzzer target for the model-dir files a user hands us: the first byte picks a mode.
//   mode 0: the rest is a config.json; ParseDeepseekV4Config must return a config or a Status,
//           and an accepted config must pass its own Validate() and survive a round trip through
//           DeepseekV4ConfigToJson;
//   mode 1: the rest is a .safetensors file; ParseSafetensors must return tensors or a Status,
//           and every tensor it returns must lie inside the input with its dtype's byte count.
// Built with clang (-fsanitize=fuzzer,address,undefined) by scripts/fuzz_model_files.sh, which CI
// runs for a bounded time.
#include <cstdint>
#include <cstdlib>
#include <string>

#include "io/model_config.h"
#include "io/safetensors.h"

namespace {

void CheckConfig(const std::string& text) {
  auto c = dsinfer::io::ParseDeepseekV4Config(text);
  if (!c.ok()) return;
  if (!c->Validate().ok()) std::abort();  // accepted, yet invalid
  auto again = dsinfer::io::ParseDeepseekV4Config(dsinfer::io::DeepseekV4ConfigToJson(*c));
  if (!again.ok()) std::abort();  // our own writer's output must load
  if (again->num_layers != c->num_layers || again->compress_ratios != c->compress_ratios ||
      again->hash_layers != c->hash_layers || again->vocab_size != c->vocab_size) {
    std::abort();
  }
}

void CheckSafetensors(const uint8_t* data, size_t size) {
  auto t = dsinfer::io::ParseSafetensors(data, size, "fuzz.safetensors");
  if (!t.ok()) return;
  for (const auto& [name, view] : *t) {
    if (view.data < data || view.data + view.nbytes > data + size) std::abort();
    if (static_cast<uint64_t>(view.numel()) * dsinfer::DTypeSize(view.dtype) != view.nbytes) {
      std::abort();
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  if (data[0] % 2 == 0) {
    CheckConfig(std::string(reinterpret_cast<const char*>(data + 1), size - 1));
  } else {
    CheckSafetensors(data + 1, size - 1);
  }
  return 0;
}
