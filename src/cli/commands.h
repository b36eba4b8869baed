// The dsinfer subcommands (docs/architecture.md §2). Each returns the process exit code: 0 on
// success, 1 for a runtime failure (bad checkpoint, bad input file), 2 for bad usage.
#pragma once

#include <functional>
#include <string>
#include <vector>

namespace dsinfer::cli {

struct Command {
  std::string name;
  std::string summary;
  std::function<int(int argc, char** argv)> run;  // argv[0] = "dsinfer", argv[1] = name
};

// All registered subcommands, in help order.
const std::vector<Command>& AllCommands();

int RunLogits(int argc, char** argv);
int RunInitModel(int argc, char** argv);
int RunGenerate(int argc, char** argv);
int RunTokenize(int argc, char** argv);
int RunDetokenize(int argc, char** argv);
int RunRender(int argc, char** argv);
int RunServe(int argc, char** argv);
#ifdef DSINFER_HAVE_CUDA
int RunBench(int argc, char** argv);
#endif

}  // namespace dsinfer::cli
