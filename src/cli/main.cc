// dsinfer: the command-line entry point. Dispatches to the subcommands in commands.h.
#include <cstdio>
#include <cstring>

#include "cli/commands.h"

namespace dsinfer::cli {

const std::vector<Command>& AllCommands() {
  static const std::vector<Command> kCommands = {
      {"generate", "offline generation: prompts (text, ids or JSONL) in, completions out",
       RunGenerate},
      {"logits", "run the model on ids and write the logits of every position (.npy)", RunLogits},
      {"init-model", "write a model dir with deterministic random weights", RunInitModel},
      {"tokenize", "text to token ids (Hugging Face-exact)", RunTokenize},
      {"detokenize", "token ids to text", RunDetokenize},
      {"render", "chat messages to the DeepSeek-V4 prompt (and ids)", RunRender},
      {"serve", "the OpenAI-compatible HTTP server", RunServe},
#ifdef DSINFER_HAVE_CUDA
      {"bench", "benchmark the CUDA model on this GPU (JSON lines)", RunBench},
#endif
  };
  return kCommands;
}

}  // namespace dsinfer::cli

int main(int argc, char** argv) {
  using dsinfer::cli::AllCommands;
  if (argc < 2 || !std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h")) {
    std::printf("Usage: dsinfer <command> [flags]   (dsinfer <command> --help for its flags)\n\n");
    for (const auto& c : AllCommands()) std::printf("  %-12s %s\n", c.name.c_str(), c.summary.c_str());
    return argc < 2 ? 2 : 0;
  }
  for (const auto& c : AllCommands()) {
    if (c.name == argv[1]) return c.run(argc, argv);
  }
  std::fprintf(stderr, "dsinfer: unknown command '%s' (see dsinfer --help)\n", argv[1]);
  return 2;
}
