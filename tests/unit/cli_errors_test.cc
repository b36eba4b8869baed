// Damaged inputs to `dsinfer logits` give one clear error line and a non-zero exit, never a crash
// or a hang. Runs the real binary on real (damaged) files.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <tuple>
#include <vector>

#include "model_test_util.h"

namespace dsinfer {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

struct Result {
  int exit_code = -1;
  bool signaled = false;
  std::string err;
};

Result RunDsinfer(const std::string& args) {
  const std::string err_path = testing::ScratchDir("cli_err_out") + "/stderr.txt";
  const std::string cmd = "timeout 120 " + std::string(DSINFER_BINARY_DIR) + "/bin/dsinfer " +
                          args + " > /dev/null 2> " + err_path;
  const int rc = std::system(cmd.c_str());
  Result r;
  r.signaled = WIFSIGNALED(rc);
  r.exit_code = WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
  r.err = testing::ReadFile(err_path);
  return r;
}

class CliErrorsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    good_ = new std::string(
        testing::SmallModelDir(model::deepseek_v4::WeightFormat::kBf16, "cli_good"));
    ids_ = new std::string(*good_ + "/ids.json");
    testing::WriteFile(*ids_, R"({"ids": [1, 2, 3, 4, 5]})");
  }
  static void TearDownTestSuite() {
    delete good_;
    delete ids_;
  }

  // A copy of the good model dir.
  static std::string Copy(const std::string& name) {
    const std::string dir = testing::ScratchDir("cli_" + name);
    fs::copy(*good_, dir, fs::copy_options::recursive | fs::copy_options::overwrite_existing);
    return dir;
  }

  // Rewrites the safetensors header of <dir>/model.safetensors through `edit`.
  static void EditHeader(const std::string& dir, const std::function<void(json&)>& edit) {
    const std::string path = dir + "/model.safetensors";
    std::string bytes = testing::ReadFile(path);
    uint64_t n;
    std::memcpy(&n, bytes.data(), 8);
    json h = json::parse(bytes.substr(8, n));
    edit(h);
    std::string text = h.dump();
    uint64_t m = text.size();
    std::string out(8, '\0');
    std::memcpy(out.data(), &m, 8);
    testing::WriteFile(path, out + text + bytes.substr(8 + n));
  }

  static void ExpectCleanError(const Result& r, const std::string& needle) {
    EXPECT_FALSE(r.signaled) << r.err;
    EXPECT_TRUE(r.exit_code == 1 || r.exit_code == 2) << r.exit_code << " " << r.err;
    EXPECT_NE(r.err.find(needle), std::string::npos) << "stderr: " << r.err;
    // One line.
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  }

  static Result Logits(const std::string& dir, const std::string& ids = "") {
    return RunDsinfer("logits --model " + dir + " --ids-file " + (ids.empty() ? *ids_ : ids) +
                      " --out " + dir + "/out.npy");
  }

  static std::string* good_;
  static std::string* ids_;
};
std::string* CliErrorsTest::good_ = nullptr;
std::string* CliErrorsTest::ids_ = nullptr;

TEST_F(CliErrorsTest, GoodModelWorks) {
  auto r = Logits(*good_);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(fs::exists(*good_ + "/out.npy"));
}

// --fp8-mma (the FP8-instruction numerics mode): runs on the CPU (this model has no FP8 / FP4
// tensors: the same logits), refused on CUDA and for DeepSeek-V4.1 with one clear line.
TEST_F(CliErrorsTest, Fp8MmaFlag) {
  const std::string run = "logits --ids-file " + *ids_ + " --fp8-mma --model ";
  auto r = RunDsinfer(run + *good_ + " --out " + *good_ + "/mma.npy");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  r = RunDsinfer("logits --ids-file " + *ids_ + " --model " + *good_ + " --out " + *good_ +
                 "/exact.npy");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(testing::ReadFile(*good_ + "/mma.npy"), testing::ReadFile(*good_ + "/exact.npy"));
  ExpectCleanError(RunDsinfer(run + std::string(DSINFER_SOURCE_DIR) +
                              "/tests/data/golden_v41/A --out /tmp/x.npy"),
                   "DeepSeek-V4 only");
}

TEST_F(CliErrorsTest, TruncatedFile) {
  const std::string dir = Copy("truncated");
  fs::resize_file(dir + "/model.safetensors", fs::file_size(dir + "/model.safetensors") / 2);
  ExpectCleanError(Logits(dir), "outside the data section");
}

TEST_F(CliErrorsTest, HeaderPastEndOfFile) {
  const std::string dir = Copy("header_past_end");
  std::string bytes = testing::ReadFile(dir + "/model.safetensors");
  uint64_t huge = uint64_t{1} << 40;
  std::memcpy(bytes.data(), &huge, 8);
  testing::WriteFile(dir + "/model.safetensors", bytes);
  ExpectCleanError(Logits(dir), "runs past the end");
}

TEST_F(CliErrorsTest, UnparseableHeader) {
  const std::string dir = Copy("unparseable");
  std::string bytes = testing::ReadFile(dir + "/model.safetensors");
  bytes[8] = '#';
  testing::WriteFile(dir + "/model.safetensors", bytes);
  ExpectCleanError(Logits(dir), "not a valid JSON");
}

TEST_F(CliErrorsTest, MissingTensor) {
  const std::string dir = Copy("missing_tensor");
  EditHeader(dir, [](json& h) { h.erase("layers.1.attn.wkv.weight"); });
  ExpectCleanError(Logits(dir), "missing tensor 'layers.1.attn.wkv.weight'");
}

TEST_F(CliErrorsTest, WrongShape) {
  const std::string dir = Copy("wrong_shape");
  EditHeader(dir, [](json& h) {
    auto& t = h["layers.0.attn.wkv.weight"];
    auto shape = t["shape"];
    t["shape"] = {shape[1], shape[0]};
  });
  ExpectCleanError(Logits(dir), "layers.0.attn.wkv.weight' has shape");
}

TEST_F(CliErrorsTest, UnknownDtype) {
  const std::string dir = Copy("unknown_dtype");
  EditHeader(dir, [](json& h) { h["norm.weight"]["dtype"] = "Q4_K"; });
  ExpectCleanError(Logits(dir), "unknown dtype Q4_K");
}

TEST_F(CliErrorsTest, BrokenAndMissingConfig) {
  const std::string dir = Copy("broken_config");
  testing::WriteFile(dir + "/config.json", "{\"vocab_size\": 300,");
  ExpectCleanError(Logits(dir), "config.json is not valid JSON");
  EXPECT_EQ(Logits(dir).exit_code, 1);  // a data error of the model dir, not a usage error
  fs::remove(dir + "/config.json");
  ExpectCleanError(Logits(dir), "cannot read");
}

TEST_F(CliErrorsTest, TokenIdOutOfRange) {
  const std::string ids = *good_ + "/bad_ids.json";
  testing::WriteFile(ids, R"({"ids": [1, 2, 300]})");
  ExpectCleanError(Logits(*good_, ids), "outside the vocabulary");
  testing::WriteFile(ids, R"({"ids": [1, "x"]})");
  ExpectCleanError(Logits(*good_, ids), "ids must be integers");
}

TEST_F(CliErrorsTest, BadUsage) {
  ExpectCleanError(RunDsinfer("logits --model"), "needs a value");
  ExpectCleanError(RunDsinfer("logits --bogus 1"), "unknown flag --bogus");
  ExpectCleanError(RunDsinfer("nosuchcommand"), "unknown command");
  ExpectCleanError(
      RunDsinfer("logits --model /nonexistent --ids-file " + *ids_ + " --out /tmp/x.npy"),
      "cannot read");
}

// A config.json that describes another model is refused with the key and value (exit 1).
TEST_F(CliErrorsTest, ConfigOfAnotherModel) {
  const std::string good_config = testing::ReadFile(*good_ + "/config.json");
  for (const auto& [key, value, needle] : std::vector<std::tuple<std::string, json, std::string>>{
           {"hidden_act", "gelu", "hidden_act"},
           {"attention_bias", true, "attention_bias"},
           {"num_key_value_heads", 4, "num_key_value_heads"},
           {"quantization_config", json{{"quant_method", "gptq"}}, "quant_method"},
           {"rms_norm_eps", -1.0, "rms_norm_eps"},
           {"eos_token_id", 100000, "eos_token_id"}}) {
    const std::string dir = Copy("other_model");
    json j = json::parse(good_config);
    j[key] = value;
    testing::WriteFile(dir + "/config.json", j.dump());
    const Result r = Logits(dir);
    ExpectCleanError(r, needle);
    EXPECT_EQ(r.exit_code, 1) << key;
  }
}

// A DeepSeek-V4.1 config.json (a nested text_config) that the model cannot run is a data error
// naming the field, for logits and generate alike (the family is picked by the config).
TEST_F(CliErrorsTest, BadV41ConfigIsADataError) {
  const std::string dir = testing::ScratchDir("cli_v41_config");
  testing::WriteFile(dir + "/config.json", R"({"model_type": "deepseek_v41", "text_config": {
      "num_hidden_layers": 4, "compress_ratios": [0, 2, 2, 2], "kv_source_layer_ids": [2],
      "index_source_layer_ids": [1, 2]}})");
  for (const Result& r :
       {Logits(dir), RunDsinfer("generate --model " + dir + " --prompt-ids 1,2 --quiet")}) {
    ExpectCleanError(r, "index_source_layer_ids");
    EXPECT_EQ(r.exit_code, 1) << r.err;
  }
  testing::WriteFile(dir + "/config.json", R"({"model_type": "deepseek_v41"})");
  ExpectCleanError(Logits(dir), "text_config");
}

// generate's flags and inputs: the value given in the message, usage errors exit 2.
TEST_F(CliErrorsTest, GenerateRefusesBadFlagsAndInputs) {
  const std::string gen = "generate --model " + *good_ + " ";
  const std::string empty = testing::ScratchDir("cli_inputs") + "/empty.jsonl";
  const std::string blank = testing::ScratchDir("cli_inputs") + "/blank.jsonl";
  testing::WriteFile(empty, "");
  testing::WriteFile(blank, "\n  \n\t\n");
  for (const auto& [args, needle] : std::vector<std::pair<std::string, std::string>>{
           {"--prompt-ids 1,2 --max-tokens -3", "got -3"},
           {"--prompt-ids 1,2 --n -3", "got -3"},
           {"--prompt-ids 1,2 --seed -1", "got -1"},
           {"--prompt ''", "--prompt is empty"},
           {"--input " + empty, "holds no requests"},
           {"--input " + blank, "holds no requests"},
           {"--prompt \"$(printf 'abc\\377')\"", "offset 3"},
           {"--prompt-ids 1,2 --gpu-memory-utilization 1.5", "got '1.5'"},
           {"--prompt-ids 1,2 --gpu-memory-utilization x", "got 'x'"},
           {"--prompt-ids 1,2 --state-memory-mb 0", "must be positive"},
           {"--prompt-ids 1,2 --max-batch-tokens 0", "must be positive"},
           {"--prompt-ids 1,2 --max-batch-tokens -4", "must be positive"},
           {"--prompt-ids 1,2 --kv-cache-dtype fp16", "expected auto, float32 or fp8"},
           {"--prompt-ids 1,2 --typical-length 0", "must be positive"},
           {"--prompt-ids 1,2 --host-cache-gb -1", "got '-1'"},
           {"--prompt-ids 1,2 --host-cache-gb 1 --no-prefix-cache", "needs the prefix cache"},
           {"--prompt-ids 1,2 --random-preset flash-l8",
            "exactly one of --model and --random-preset"}}) {
    const Result r = RunDsinfer(gen + args);
    ExpectCleanError(r, needle);
    EXPECT_EQ(r.exit_code, 2) << args << ": " << r.err;
  }
}

// A device-random preset runs on CUDA only: on the CPU a clear error (exit 1), not a crash.
TEST_F(CliErrorsTest, RandomPresetNeedsCuda) {
  const Result r = RunDsinfer("generate --random-preset tiny --device cpu --prompt-ids 1,2");
  ExpectCleanError(r, "run on the CUDA backend only");
  EXPECT_EQ(r.exit_code, 1) << r.err;
}

// --input - reads the requests from standard input.
TEST_F(CliErrorsTest, GenerateReadsStandardInput) {
  const std::string out = testing::ScratchDir("cli_stdin") + "/out.jsonl";
  const std::string cmd =
      "printf '%s\\n' '{\"prompt_ids\": [1, 2, 3], \"max_tokens\": 2, "
      "\"temperature\": 0}' | timeout 120 " +
      std::string(DSINFER_BINARY_DIR) + "/bin/dsinfer generate --quiet --model " + *good_ +
      " --input - --output " + out;
  ASSERT_EQ(std::system(cmd.c_str()), 0);
  const json line = json::parse(testing::ReadFile(out));
  ASSERT_TRUE(line.contains("choices")) << line.dump();
  EXPECT_EQ(line["usage"]["completion_tokens"], 2) << line.dump();
}

}  // namespace
}  // namespace dsinfer
