// The V4.1 chat encoding (Dialect::kV41) against golden prompts rendered by vLLM's reference
// encoder (tests/data/recipe_v41_goldens.json, made by tools/recipe/make_v41_goldens.py; the
// reference's repository, paths and commits are in the file). Every golden case is rendered; where
// dsinfer deliberately differs (an unsupported feature), kDeliberate says how and why.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <sstream>
#include <string>

#include "recipe/chat_encoder.h"

namespace dsinfer::recipe {
namespace {

Json LoadGoldens() {
  std::ifstream in(std::string(DSINFER_SOURCE_DIR) + "/tests/data/recipe_v41_goldens.json");
  std::stringstream ss;
  ss << in.rdbuf();
  return Json::parse(ss.str(), nullptr, /*allow_exceptions=*/false);
}

// Cases where dsinfer deliberately gives an error although the reference renders a prompt.
const std::map<std::string, std::string> kDeliberateErrors = {
    {"content_part_image",
     "images are not supported (no vision encoder): the reference writes <｜deepseek_image｜>, "
     "dsinfer rejects the image part"},
};

// Cases where dsinfer deliberately renders another prompt; the check says what it renders instead.
const std::map<std::string, std::string> kDeliberateDifferences = {
    {"tools_with_mid_system_only",
     "request-level tools: vLLM's serving wrapper attaches them to the first system message, here "
     "a "
     "mid-conversation one; dsinfer attaches them to a leading system/developer message (a new "
     "empty "
     "system message when there is none), so the tool list is always at the head of the prompt, as "
     "for every dialect (recipe-v4.md §5: where request tools go is the serving layer's choice)"},
};

StatusOr<Prompt> RenderCase(const Json& c) {
  EncodeOptions o;
  o.dialect = Dialect::kV41;
  o.thinking = c["thinking"].get<bool>() ? ThinkingMode::kThinking : ThinkingMode::kChat;
  const Json& effort = c["reasoning_effort"];
  if (effort.is_number_integer()) o.reasoning_effort = std::to_string(effort.get<int64_t>());
  if (effort.is_string()) o.reasoning_effort = effort.get<std::string>();
  o.drop_thinking = c["drop_thinking"].get<bool>();
  o.tools = c["tools"];
  return EncodeMessages(c["messages"], o);
}

TEST(RecipeV41GoldenTest, ReferenceFileIsRecorded) {
  const Json g = LoadGoldens();
  ASSERT_FALSE(g.is_discarded()) << "tests/data/recipe_v41_goldens.json missing or not JSON";
  EXPECT_EQ(g["reference"]["repository"], "github.com/vllm-project/vllm");
  EXPECT_EQ(g["reference"]["files"]["encoding"]["path"],
            "vllm/tokenizers/deepseek_v41_encoding.py");
  EXPECT_GE(g["cases"].size(), 50u);
}

TEST(RecipeV41GoldenTest, EveryCaseMatchesTheReference) {
  const Json g = LoadGoldens();
  ASSERT_FALSE(g.is_discarded());
  int prompts = 0;
  int errors = 0;
  for (const Json& c : g["cases"]) {
    const std::string name = c["name"].get<std::string>();
    SCOPED_TRACE("case " + name);
    const StatusOr<Prompt> p = RenderCase(c);
    auto deliberate = kDeliberateErrors.find(name);
    auto differs = kDeliberateDifferences.find(name);
    if (differs != kDeliberateDifferences.end()) {
      ASSERT_TRUE(c.contains("prompt"));
      ASSERT_TRUE(p.ok()) << p.status().ToString();
      EXPECT_NE(p->Text(), c["prompt"].get<std::string>())
          << "no longer differs: " << differs->second;
      EXPECT_EQ(p->Text().rfind(std::string(kBos) + std::string(kSystem) + "\n\n## Tools\n\n", 0),
                0u)
          << differs->second;
      ++prompts;
    } else if (deliberate != kDeliberateErrors.end()) {
      ASSERT_TRUE(c.contains("prompt"));  // the reference renders it; dsinfer refuses
      EXPECT_FALSE(p.ok()) << deliberate->second;
      if (!p.ok()) {
        EXPECT_EQ(p.status().code(), StatusCode::kInvalidArgument);
      }
      ++errors;
    } else if (c.contains("error")) {
      EXPECT_FALSE(p.ok()) << "the reference fails with " << c["error"].get<std::string>()
                           << "; dsinfer rendered: " << (p.ok() ? p->Text() : "");
      if (!p.ok()) {
        EXPECT_EQ(p.status().code(), StatusCode::kInvalidArgument);
      }
      ++errors;
    } else {
      ASSERT_TRUE(p.ok()) << p.status().ToString();
      EXPECT_EQ(p->Text(), c["prompt"].get<std::string>());
      ++prompts;
    }
  }
  EXPECT_EQ(prompts + errors, static_cast<int>(g["cases"].size()));
}

}  // namespace
}  // namespace dsinfer::recipe
