// `dsinfer generate` end to end: JSONL in and out, bad lines get error lines while the others run,
// seeded output is reproducible, --summary-json has the figures.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <nlohmann/json.hpp>
#include <sstream>

#include "io/deepseek_v41_config.h"
#include "io/model_config.h"
#include "io/npy.h"
#include "model_test_util.h"

namespace dsinfer {
namespace {

using json = nlohmann::json;

struct Result {
  int exit_code = -1;
  std::string out, err;
};

// `dsinfer <command_and_args>`: its exit code, stdout and stderr.
Result RunCli(const std::string& command_and_args) {
  const std::string dir = testing::ScratchDir("generate_cli_run");
  const std::string cmd = "timeout 120 " + std::string(DSINFER_BINARY_DIR) + "/bin/dsinfer " +
                          command_and_args + " > " + dir + "/out 2> " + dir + "/err";
  const int rc = std::system(cmd.c_str());
  return {WIFEXITED(rc) ? WEXITSTATUS(rc) : -1, testing::ReadFile(dir + "/out"), testing::ReadFile(dir + "/err")};
}

Result Generate(const std::string& args) { return RunCli("generate " + args); }

std::vector<json> Lines(const std::string& text) {
  std::vector<json> lines;
  std::stringstream ss(text);
  std::string line;
  while (std::getline(ss, line)) lines.push_back(json::parse(line));
  return lines;
}

class GenerateCliTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    model_ = new std::string(testing::SmallModelDir(model::deepseek_v4::WeightFormat::kBf16, "generate_cli"));
  }
  static void TearDownTestSuite() { delete model_; }
  static std::string* model_;
};
std::string* GenerateCliTest::model_ = nullptr;

// Issue 20's request cases, in the schema the server shares: invalid UTF-8 with its byte offset,
// seed -1, and a prompt that fits with a max_tokens that does not (the numbers in the message).
TEST_F(GenerateCliTest, JsonlRefusesBadBytesSeedAndOversizedMaxTokens) {
  const std::string dir = testing::ScratchDir("generate_cli_jsonl_refusals");
  testing::WriteFile(dir + "/in.jsonl",
                     "{\"prompt_ids\": [1, 2], \"user\": \"a\xff\"}\n"
                     "{\"prompt_ids\": [1, 2], \"seed\": -1}\n"
                     "{\"prompt_ids\": [1, 2, 3], \"max_tokens\": 1000000}\n"
                     "{\"model\": \"x\", \"stream\": true, \"prompt_ids\": [1, 2], "
                     "\"max_tokens\": 2, \"seed\": 5, \"ignore_eos\": true}\n");
  const Result r = Generate("--model " + *model_ + " --input " + dir + "/in.jsonl --output " + dir +
                            "/out.jsonl --threads 1 --quiet");
  EXPECT_EQ(r.exit_code, 1) << r.err;
  const auto lines = Lines(testing::ReadFile(dir + "/out.jsonl"));
  ASSERT_EQ(lines.size(), 4u);
  EXPECT_EQ(lines[0]["error"]["message"], "line 1: invalid UTF-8 at byte offset 33");
  EXPECT_EQ(lines[1]["error"]["message"], "line 2: \"seed\" must be >= 0, got -1");
  const std::string over = lines[2]["error"]["message"].get<std::string>();
  EXPECT_NE(over.find("but 1000003 were requested (3 in the prompt, max_tokens 1000000)"),
            std::string::npos)
      << over;
  EXPECT_EQ(lines[2]["error"]["code"], "OUT_OF_RANGE");
  ASSERT_TRUE(lines[3].contains("choices"))
      << lines[3];  // an OpenAI body's extra keys are accepted
  EXPECT_EQ(lines[3]["choices"][0]["ids"].size(), 2u);
}

TEST_F(GenerateCliTest, JsonlWithBadLinesKeepsGoing) {
  const std::string dir = testing::ScratchDir("generate_cli_jsonl");
  testing::WriteFile(dir + "/in.jsonl",
                     "{\"id\": \"a\", \"prompt_ids\": [1, 2, 3], \"max_tokens\": 5, \"seed\": 1, \"ignore_eos\": true}\n"
                     "this is not json\n"
                     "\n"
                     "{\"prompt_ids\": [4, 5], \"temperature\": -3}\n"
                     "{\"prompt_ids\": [4, 5], \"max_tokenz\": 3}\n"
                     "{\"prompt\": \"hello\"}\n"
                     "{\"prompt_ids\": [7, 8, 9], \"max_tokens\": 4, \"n\": 2, \"seed\": 3, \"logprobs\": true, "
                     "\"top_logprobs\": 2, \"ignore_eos\": true}\n");
  const Result r = Generate("--model " + *model_ + " --input " + dir + "/in.jsonl --output " + dir +
                            "/out.jsonl --summary-json " + dir + "/summary.json --threads 1");
  EXPECT_EQ(r.exit_code, 1) << r.err;  // some requests failed
  const auto lines = Lines(testing::ReadFile(dir + "/out.jsonl"));
  ASSERT_EQ(lines.size(), 6u) << "one line per non-empty input line";
  EXPECT_EQ(lines[0]["id"], "a");
  EXPECT_EQ(lines[0]["choices"][0]["ids"].size(), 5u);
  EXPECT_EQ(lines[0]["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(lines[1]["id"], 2);
  EXPECT_NE(lines[1]["error"]["message"].get<std::string>().find("line 2: not valid JSON"),
            std::string::npos);
  EXPECT_EQ(lines[2]["error"]["code"], "INVALID_ARGUMENT");
  EXPECT_NE(lines[2]["error"]["message"].get<std::string>().find("temperature"), std::string::npos);
  EXPECT_NE(lines[3]["error"]["message"].get<std::string>().find(
                "\"max_tokenz\" is not a known request key"),
            std::string::npos);
  EXPECT_NE(lines[4]["error"]["message"].get<std::string>().find("tokenizer"), std::string::npos);
  ASSERT_EQ(lines[5]["choices"].size(), 2u);
  EXPECT_EQ(lines[5]["choices"][1]["logprobs"].size(), 4u);
  EXPECT_EQ(lines[5]["choices"][1]["logprobs"][0]["top"].size(), 2u);
  EXPECT_EQ(lines[5]["usage"]["completion_tokens"], 8);
  const auto summary = json::parse(testing::ReadFile(dir + "/summary.json"));
  EXPECT_EQ(summary["requests"], 6);
  EXPECT_EQ(summary["failed"], 4);
  EXPECT_EQ(summary["output_tokens"], 13);
  EXPECT_GT(summary["ttft_ms"]["p50"].get<double>(), 0);

  // Seeded output does not change when the same request runs alone.
  const Result alone = Generate("--model " + *model_ + " --prompt-ids 1,2,3 --max-tokens 5 --seed 1 "
                                "--ignore-eos --quiet --threads 1");
  EXPECT_EQ(alone.exit_code, 0) << alone.err;
  EXPECT_EQ(Lines(alone.out).at(0)["choices"][0]["ids"], lines[0]["choices"][0]["ids"]);
}

// --expert-parallel end to end: the routed experts over 3 ranks (with replicas, EPLB every 2
// steps, MTP speculation) give the single model's output; the summary has the ranks and EPLB's
// figures; bad combinations are usage errors, and the CUDA backend refuses it.
TEST_F(GenerateCliTest, ExpertParallelGivesTheSameOutput) {
  const std::string dir = testing::ScratchDir("generate_cli_expert_parallel");
  testing::WriteFile(
      dir + "/in.jsonl",
      "{\"prompt_ids\": [5, 17, 200, 9, 5, 17], \"max_tokens\": 10, \"seed\": 3, "
      "\"temperature\": 0.8, \"n\": 2}\n"
      "{\"prompt_ids\": [1, 2, 3], \"max_tokens\": 12, \"temperature\": 0}\n"
      "{\"prompt_ids\": [44], \"max_tokens\": 6, \"seed\": 9, \"logprobs\": true}\n");
  const std::string args = "--model " + *model_ + " --input " + dir +
                           "/in.jsonl --threads 2 --quiet --ignore-eos --speculative-method mtp "
                           "--num-speculative-tokens 2";
  const Result one = Generate(args);
  ASSERT_EQ(one.exit_code, 0) << one.err;
  const Result split = Generate(args + " --expert-parallel 3 --eplb-redundant-experts 2 " +
                                "--eplb-interval 2 --summary-json " + dir + "/summary.json");
  ASSERT_EQ(split.exit_code, 0) << split.err;
  const auto a = Lines(one.out), b = Lines(split.out);
  ASSERT_EQ(a.size(), 3u);
  ASSERT_EQ(b.size(), 3u);
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i]["choices"], b[i]["choices"]) << "line " << i;
  }
  const auto summary = json::parse(testing::ReadFile(dir + "/summary.json"));
  ASSERT_TRUE(summary.contains("expert_parallel")) << summary;
  EXPECT_EQ(summary["expert_parallel"]["ranks"], 3);
  EXPECT_GE(summary["expert_parallel"]["eplb_rebalances"].get<int64_t>(), 1) << summary;
  EXPECT_GE(summary["expert_parallel"]["eplb_imbalance_after"].get<double>(), 1.0) << summary;

  EXPECT_EQ(Generate("--model " + *model_ + " --prompt-ids 1 --expert-parallel 0").exit_code, 2);
  EXPECT_EQ(Generate("--model " + *model_ + " --prompt-ids 1 --eplb-interval 4").exit_code, 2);
  const Result cuda =
      Generate("--model " + *model_ + " --prompt-ids 1 --expert-parallel 2 --device cuda");
  EXPECT_EQ(cuda.exit_code, 1);
  EXPECT_NE(cuda.err.find("expert parallelism"), std::string::npos) << cuda.err;
}

// The host tier's and preemption's figures are in the summary when they apply.
TEST_F(GenerateCliTest, SummaryHasTheHostTier) {
  const std::string dir = testing::ScratchDir("generate_cli_host_tier");
  const Result r =
      Generate("--model " + *model_ + " --prompt-ids 1,2,3 --max-tokens 3 --seed 1 " +
               "--quiet --threads 1 --host-cache-gb 0.5 --summary-json " + dir + "/summary.json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto summary = json::parse(testing::ReadFile(dir + "/summary.json"));
  EXPECT_EQ(summary["prefix_cache"]["host"]["bytes_total"], int64_t{1} << 29);
  EXPECT_EQ(summary["prefix_cache"]["host"]["restores"], 0);
  EXPECT_FALSE(summary.contains("preemption"));  // nothing was preempted
}

// A line with a list of prompts (the /v1/completions schema) is one output line: choice p * n + j
// is completion j of prompt p, exactly as prompt p alone with the same seed; prompt tokens summed.
// A prompt the engine refuses makes the whole line an error naming the item.
TEST_F(GenerateCliTest, JsonlListOfPromptsIsOneLine) {
  const std::string dir = testing::ScratchDir("generate_cli_jsonl_list");
  const std::string params = R"("max_tokens": 4, "n": 2, "seed": 5, "ignore_eos": true)";
  testing::WriteFile(dir + "/in.jsonl", "{\"prompt\": [[1, 2], [3, 4, 5], [6]], " + params + "}\n" +
                                            "{\"prompt_ids\": [1, 2], " + params + "}\n" +
                                            "{\"prompt_ids\": [3, 4, 5], " + params + "}\n" +
                                            "{\"prompt_ids\": [6], " + params + "}\n" +
                                            "{\"prompt\": [[1, 2], [3, 999999999]], " + params +
                                            "}\n" + "{\"prompt\": [[1, 2], []], " + params + "}\n");
  const Result r = Generate("--model " + *model_ + " --input " + dir + "/in.jsonl --output " + dir +
                            "/out.jsonl --threads 1 --quiet");
  EXPECT_EQ(r.exit_code, 1) << r.err;  // the last two lines fail
  const auto lines = Lines(testing::ReadFile(dir + "/out.jsonl"));
  ASSERT_EQ(lines.size(), 6u);
  ASSERT_TRUE(lines[0].contains("choices")) << lines[0];
  ASSERT_EQ(lines[0]["choices"].size(), 6u);
  int64_t prompt_tokens = 0;
  for (int p = 0; p < 3; ++p) {
    const json& one = lines[1 + p];
    ASSERT_EQ(one["choices"].size(), 2u) << one;
    prompt_tokens += one["prompt_tokens"].get<int64_t>();
    for (int j = 0; j < 2; ++j) {
      const json& ch = lines[0]["choices"][p * 2 + j];
      EXPECT_EQ(ch["index"], p * 2 + j);
      EXPECT_EQ(ch["ids"], one["choices"][j]["ids"]) << "prompt " << p << " completion " << j;
    }
  }
  EXPECT_NE(lines[0]["choices"][0]["ids"], lines[0]["choices"][1]["ids"]);
  EXPECT_EQ(lines[0]["prompt_tokens"], prompt_tokens);
  EXPECT_EQ(prompt_tokens, 6);
  EXPECT_EQ(lines[0]["usage"]["completion_tokens"], 24);
  EXPECT_FALSE(lines[4].contains("choices")) << lines[4];
  EXPECT_NE(lines[4]["error"]["message"].get<std::string>().find(
                "\"prompt\" item 1: prompt token id 999999999 is outside the vocabulary"),
            std::string::npos)
      << lines[4];
  EXPECT_NE(lines[5]["error"]["message"].get<std::string>().find(
                "line 6: \"prompt\" item 1 is an empty array"),
            std::string::npos)
      << lines[5];
}

TEST_F(GenerateCliTest, UsageErrorsAndUnknownModel) {
  EXPECT_EQ(Generate("--model " + *model_).exit_code, 2) << "no prompt";
  EXPECT_EQ(Generate("--model " + *model_ + " --prompt-ids 1,x").exit_code, 2);
  EXPECT_EQ(Generate("--model " + *model_ + " --prompt-ids 1 --top-p 7").exit_code, 2);
  const Result missing = Generate("--model /nonexistent/dir --prompt-ids 1,2");
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_NE(missing.err.find("NOT_FOUND"), std::string::npos) << missing.err;
  const Result too_long = Generate("--model " + *model_ + " --prompt-ids 1,2,3,4 --max-model-len 4 --quiet");
  EXPECT_EQ(too_long.exit_code, 1);
  EXPECT_EQ(Lines(too_long.out).at(0)["error"]["code"], "OUT_OF_RANGE");
}

// A DeepSeek-V4.1 model dir from `init-model --preset v41-tiny-dspark` runs through the same
// commands: generate (seeded output reproducible, n-gram and DSpark speculation giving the same
// output, MTP refused naming DSpark) and logits (every schedule the same logits).
// --kv-cache-dtype fp8 end to end on the CPU: generate runs (the packed state in the engine's
// pages), MTP speculation (rollback over packed rows) gives the same ids, and `logits` under two
// schedules the same bits; the float32 ids come from another forward (they may differ).
TEST_F(GenerateCliTest, Fp8KvCacheGeneratesAndLogitsAreScheduleInvariant) {
  const std::string args = "--model " + *model_ +
                           " --prompt-ids 5,17,200,9,5,17,200,9,5,17,33 --max-tokens 12 --seed 4 "
                           "--temperature 0.8 --threads 2 --quiet --kv-cache-dtype fp8";
  const Result a = Generate(args);
  ASSERT_EQ(a.exit_code, 0) << a.err;
  const auto ids = Lines(a.out).at(0)["choices"][0]["ids"];
  EXPECT_EQ(ids.size(), 12u);
  const Result mtp = Generate(args + " --speculative-method mtp --num-speculative-tokens 2");
  ASSERT_EQ(mtp.exit_code, 0) << mtp.err;
  EXPECT_EQ(Lines(mtp.out).at(0)["choices"][0]["ids"], ids);

  const std::string bin = std::string(DSINFER_BINARY_DIR) + "/bin/dsinfer";
  const std::string dir = testing::ScratchDir("generate_cli_fp8");
  testing::WriteFile(dir + "/ids.json",
                     R"({"ids": [3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8, 9, 7, 9, 3, 2, 3, 8, 4]})");
  std::vector<std::vector<float>> logits;
  for (const std::string schedule :
       {"--kv-cache-dtype fp8", "--kv-cache-dtype fp8 --chunks 7,2", "--kv-cache-dtype float32",
        "--kv-cache-dtype fp8 --chunks 7,2 --expert-parallel 3"}) {
    const std::string out = dir + "/logits.npy";
    ASSERT_EQ(std::system(("timeout 120 " + bin + " logits --threads 2 --model " + *model_ +
                           " --ids-file " + dir + "/ids.json --out " + out + " " + schedule)
                              .c_str()),
              0)
        << schedule;
    auto npy = io::ReadNpyF32(out);
    ASSERT_TRUE(npy.ok()) << npy.status().ToString();
    logits.push_back(npy->data);
  }
  EXPECT_EQ(logits[0], logits[1]) << "fp8: whole prompt vs chunks 7, 2, then decode";
  EXPECT_NE(logits[0], logits[2]) << "fp8 rounds (the index keys at least) where float32 does not";
  EXPECT_EQ(logits[0], logits[3]) << "fp8: the routed experts over 3 ranks";
  const Result bad = Generate("--model " + *model_ + " --prompt-ids 1,2 --kv-cache-dtype bf16");
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("expected auto, float32 or fp8"), std::string::npos) << bad.err;
}

TEST(GenerateCliV41Test, InitModelThenGenerateAndLogits) {
  const std::string bin = std::string(DSINFER_BINARY_DIR) + "/bin/dsinfer";
  const std::string dir = testing::ScratchDir("generate_cli_v41");
  ASSERT_EQ(std::system(("timeout 120 " + bin +
                         " init-model --preset v41-tiny-dspark --weights bf16 --out " + dir +
                         "/model > /dev/null")
                            .c_str()),
            0);
  const std::string model = dir + "/model";
  const std::string args = "--model " + model +
                           " --prompt-ids 5,17,300,9,5,17,300,9,5,17 --max-tokens 8 --seed 4 "
                           "--temperature 0.8 --threads 2 --quiet";
  const Result a = Generate(args), b = Generate(args);
  ASSERT_EQ(a.exit_code, 0) << a.err;
  const auto ids = Lines(a.out).at(0)["choices"][0]["ids"];
  EXPECT_EQ(ids.size(), 8u);
  EXPECT_EQ(Lines(b.out).at(0)["choices"][0]["ids"], ids);
  const Result spec = Generate(args + " --speculative-method ngram --num-speculative-tokens 3");
  ASSERT_EQ(spec.exit_code, 0) << spec.err;
  EXPECT_EQ(Lines(spec.out).at(0)["choices"][0]["ids"], ids);
  const Result mtp = Generate(args + " --speculative-method mtp");
  EXPECT_EQ(mtp.exit_code, 2) << "a usage error: the model has no MTP layer";
  EXPECT_NE(mtp.err.find("DSpark"), std::string::npos) << mtp.err;
  const Result dspark = Generate(args + " --speculative-method dspark --speculative-adaptive");
  ASSERT_EQ(dspark.exit_code, 0) << dspark.err;
  EXPECT_EQ(Lines(dspark.out).at(0)["choices"][0]["ids"], ids);
  EXPECT_GT(Lines(dspark.out).at(0)["choices"][0]["speculative"]["draft_tokens"].get<int>(), 0);
  // A V4.1 model without draft layers: DSpark refused as a usage error, naming why.
  const Result none = Generate("--model " + std::string(DSINFER_SOURCE_DIR) +
                               "/tests/data/golden_v41/A --prompt-ids 1,2,3 --max-tokens 2 "
                               "--speculative-method dspark --quiet");
  EXPECT_EQ(none.exit_code, 2);
  EXPECT_NE(none.err.find("no DSpark draft layers"), std::string::npos) << none.err;

  testing::WriteFile(dir + "/ids.json", R"({"ids": [3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8, 9, 7]})");
  std::vector<std::vector<float>> logits;
  for (const std::string schedule : {"", "--chunks 5,3", "--prefill 1"}) {
    const std::string out = dir + "/logits.npy";
    ASSERT_EQ(std::system(("timeout 120 " + bin + " logits --threads 2 --model " + model +
                           " --ids-file " + dir + "/ids.json --out " + out + " " + schedule)
                              .c_str()),
              0)
        << schedule;
    auto npy = io::ReadNpyF32(out);
    ASSERT_TRUE(npy.ok()) << npy.status().ToString();
    EXPECT_EQ(npy->shape, (std::vector<int64_t>{14, 129280}));
    logits.push_back(npy->data);
  }
  EXPECT_EQ(logits[1], logits[0]) << "--chunks 5,3";
  EXPECT_EQ(logits[2], logits[0]) << "--prefill 1";
}

// `init-model --config`: random weights for any DeepSeek-V4 config.json (here the tiny preset
// with 8 heads of 256) or V4.1 one, the same bytes as WriteRandomModel of that config with the
// seed, a model dir that loads with that config; a config the parser refuses is a usage error
// naming the key, a missing file an error, and --config with --preset a usage error.
TEST(InitModelCliTest, ConfigGivesThatShapesRandomModel) {
  const std::string dir = testing::ScratchDir("init_model_config");
  io::DeepseekV4Config c = testing::SmallFp8CacheConfig();
  c.num_heads = 8;
  c.head_dim = 256;
  testing::WriteFile(dir + "/config.json", io::DeepseekV4ConfigToJson(c));
  const auto init = [](const std::string& args) { return RunCli("init-model " + args); };
  const Result v4 =
      init("--config " + dir + "/config.json --seed 7 --weights f32 --out " + dir + "/cli");
  ASSERT_EQ(v4.exit_code, 0) << v4.err;
  ASSERT_TRUE(model::deepseek_v4::WriteRandomModel(c, dir + "/api", 7,
                                                   model::deepseek_v4::WeightFormat::kF32)
                  .ok());
  const std::string weights = testing::ReadFile(dir + "/cli/model.safetensors");
  EXPECT_FALSE(weights.empty());
  EXPECT_TRUE(weights == testing::ReadFile(dir + "/api/model.safetensors"));
  auto loaded = io::LoadDeepseekV4Config(dir + "/cli");
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  EXPECT_EQ(loaded->num_heads, 8);
  EXPECT_EQ(loaded->head_dim, 256);

  // A DeepSeek-V4.1 config (the family read from the file): the V4.1 writer's bytes.
  const std::string v41_config =
      std::string(DSINFER_SOURCE_DIR) + "/tests/data/golden_v41/A/config.json";
  const Result v41 =
      init("--config " + v41_config + " --seed 7 --weights f32 --out " + dir + "/cli41");
  ASSERT_EQ(v41.exit_code, 0) << v41.err;
  auto c41 = io::ParseDeepseekV41Config(testing::ReadFile(v41_config));
  ASSERT_TRUE(c41.ok()) << c41.status().ToString();
  ASSERT_TRUE(model::deepseek_v41::WriteRandomModel(*c41, dir + "/api41", 7,
                                                    model::deepseek_v4::WeightFormat::kF32)
                  .ok());
  const std::string weights41 = testing::ReadFile(dir + "/cli41/model.safetensors");
  EXPECT_FALSE(weights41.empty());
  EXPECT_TRUE(weights41 == testing::ReadFile(dir + "/api41/model.safetensors"));

  testing::WriteFile(dir + "/bad.json", R"({"model_type": "deepseek_v4", "hidden_size": 64})");
  const Result bad = init("--config " + dir + "/bad.json --out " + dir + "/bad");
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("vocab_size"), std::string::npos) << bad.err;
  const Result missing = init("--config " + dir + "/missing.json --out " + dir + "/missing");
  EXPECT_NE(missing.exit_code, 0);
  EXPECT_NE(missing.err.find("missing.json"), std::string::npos) << missing.err;
  EXPECT_EQ(init("--config " + dir + "/config.json --preset tiny --out " + dir + "/both").exit_code,
            2);
}

}  // namespace
}  // namespace dsinfer
