// `dsinfer generate` with chat requests end to end on the tiny preset and the V4 tokenizer: the
// engine's prompt is exactly the recipe's rendering (tools, historical tool calls, tool results,
// thinking), each choice carries the parsed assistant message, and bad chat input is a per-line
// error while the other requests run.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <sstream>

#include "../unit/test_util.h"
#include "model/deepseek_v4/init_presets.h"

namespace dsinfer {
namespace {

using json = nlohmann::json;
namespace fs = std::filesystem;

std::string RunDsinfer(const std::string& args, int* exit_code) {
  const std::string dir = testing::ScratchDir("chat_generate_run");
  const std::string cmd = "timeout 300 " + std::string(DSINFER_BINARY_DIR) + "/bin/dsinfer " + args +
                          " > " + dir + "/out 2> " + dir + "/err";
  const int rc = std::system(cmd.c_str());
  *exit_code = WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
  return testing::ReadFile(dir + "/out") + testing::ReadFile(dir + "/err");
}

TEST(ChatGenerateTest, PromptIsTheRecipeRenderingAndRepliesAreParsed) {
  const std::string model = testing::ScratchDir("chat_generate_model");
  auto config = model::deepseek_v4::PresetConfig("tiny");
  ASSERT_TRUE(config.ok());
  ASSERT_TRUE(model::deepseek_v4::WriteRandomModel(*config, model, 0, model::deepseek_v4::WeightFormat::kBf16).ok());
  for (const char* f : {"tokenizer.json", "tokenizer_config.json"}) {
    fs::copy_file(std::string(DSINFER_BINARY_DIR) + "/tokenizer_v4/" + f, model + "/" + f);
  }
  const json tools = json::parse(R"([{"type": "function", "function": {"name": "get_weather",
      "description": "Weather of a city", "parameters": {"type": "object",
      "properties": {"city": {"type": "string"}}, "required": ["city"]}}}])");
  const json messages = json::parse(R"([{"role": "user", "content": "Weather in Paris?"},
      {"role": "assistant", "content": "", "tool_calls": [{"type": "function",
       "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}}]},
      {"role": "tool", "content": "{\"temp\": 21}"}])");
  const std::string dir = testing::ScratchDir("chat_generate_io");
  testing::WriteFile(dir + "/messages.json", messages.dump());
  testing::WriteFile(dir + "/tools.json", tools.dump());
  json with_tools = {{"id", "tools"}, {"messages", messages}, {"tools", tools}, {"max_tokens", 6},
                     {"thinking", true}, {"seed", 1}};
  json plain = {{"id", "plain"}, {"messages", {{{"role", "user"}, {"content", "Hi"}}}}, {"max_tokens", 4}};
  testing::WriteFile(dir + "/in.jsonl", with_tools.dump() + "\n" + plain.dump() + "\n" +
                                            R"({"id": "bad", "messages": [{"role": "wizard", "content": "x"}]})" "\n");
  int rc = 0;
  const std::string log = RunDsinfer("generate --model " + model + " --input " + dir + "/in.jsonl --output " + dir +
                                  "/out.jsonl --quiet --threads 1",
                              &rc);
  EXPECT_EQ(rc, 1) << log;  // the bad line fails, the others run
  std::vector<json> lines;
  std::stringstream ss(testing::ReadFile(dir + "/out.jsonl"));
  for (std::string line; std::getline(ss, line);) lines.push_back(json::parse(line));
  ASSERT_EQ(lines.size(), 3u) << log;

  // The engine's prompt has exactly as many tokens as `dsinfer render` of the same conversation.
  const std::string rendered = RunDsinfer("render --messages-file " + dir + "/messages.json --tools-file " + dir +
                                       "/tools.json --thinking thinking --model " + model,
                                   &rc);
  ASSERT_EQ(rc, 0) << rendered;
  const json render = json::parse(rendered);
  EXPECT_EQ(lines[0]["prompt_tokens"].get<size_t>(), render["ids"].size());
  EXPECT_NE(render["prompt"].get<std::string>().find("get_weather"), std::string::npos);

  for (int i : {0, 1}) {
    ASSERT_TRUE(lines[i].contains("choices")) << lines[i];
    const json& msg = lines[i]["choices"][0]["message"];
    EXPECT_EQ(msg["role"], "assistant");
    // Nothing is dropped: reasoning + content together hold the generated text.
    const std::string text = lines[i]["choices"][0]["text"].get<std::string>();
    const std::string parsed = msg.value("reasoning_content", std::string()) + msg["content"].get<std::string>();
    EXPECT_FALSE(parsed.empty() && !text.empty()) << lines[i];
  }
  EXPECT_TRUE(lines[0]["choices"][0]["message"].contains("reasoning_content") ||
              lines[0]["choices"][0]["finish_reason"] != "length")
      << "thinking mode: an unfinished reply is reasoning";
  EXPECT_TRUE(lines[2].contains("error"));
  EXPECT_NE(lines[2]["error"]["message"].get<std::string>().find("unknown role"), std::string::npos);
}

}  // namespace
}  // namespace dsinfer
