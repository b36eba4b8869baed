#include "model/deepseek_v41/state.h"

namespace dsinfer::model::deepseek_v41 {

SequenceState::SequenceState(const io::DeepseekV41Config& config) : layers_(config.num_layers) {
  for (auto& l : layers_) {
    l.window.assign(static_cast<size_t>(config.sliding_window) * config.head_dim, 0.0f);
  }
}

}  // namespace dsinfer::model::deepseek_v41
