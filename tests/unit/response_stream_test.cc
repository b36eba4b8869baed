// The response side (response/): ChatStream's deltas add up to the message parsed at once for
// every chunking of the text (streamed == unstreamed), tool calls get ids and the "tool_calls"
// finish reason, parallel_tool_calls false keeps the first call, and the OpenAI objects
// (errors, usage, deltas) have their documented shapes.
#include <gtest/gtest.h>

#include "response/chat_stream.h"
#include "response/openai_json.h"

namespace dsinfer::response {
namespace {

using json = nlohmann::json;

const std::string kCall =
    "\n\n<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"get_weather\">\n<｜DSML｜parameter "
    "name=\"city\" string=\"true\">Paris</｜DSML｜parameter>\n</｜DSML｜invoke>\n"
    "<｜DSML｜invoke name=\"get_time\">\n<｜DSML｜parameter name=\"zone\" "
    "string=\"true\">CET</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜tool_calls>";
const std::string kReply = "Let me look.</think>Checking." + kCall;

struct Gathered {
  std::string reasoning, content;
  std::vector<ToolCallDelta> calls;
};

Gathered Feed(ChatStream& s, const std::string& text, size_t step) {
  Gathered g;
  auto add = [&](const ChatDelta& d) {
    g.reasoning += d.reasoning;
    g.content += d.content;
    for (const auto& c : d.tool_calls) g.calls.push_back(c);
  };
  for (size_t i = 0; i < text.size(); i += step) add(s.Push(text.substr(i, step)));
  add(s.Finish());
  return g;
}

TEST(ResponseStreamTest, StreamedDeltasEqualTheWholeMessage) {
  ChatStream whole(recipe::Dialect::kV4, /*thinking=*/true, true, "r");
  const Gathered ref = Feed(whole, kReply, kReply.size());
  EXPECT_EQ(ref.reasoning, "Let me look.");
  EXPECT_EQ(ref.content, "Checking.");
  ASSERT_EQ(ref.calls.size(), 2u);
  EXPECT_EQ(ref.calls[0].name, "get_weather");
  EXPECT_EQ(ref.calls[0].arguments, "{\"city\": \"Paris\"}");
  EXPECT_EQ(ref.calls[0].id, "call_r_0");
  EXPECT_EQ(ref.calls[1].index, 1);
  EXPECT_EQ(whole.FinishReason("stop"), "tool_calls");
  EXPECT_EQ(whole.FinishReason("length"), "length");
  for (size_t step : {1, 2, 3, 5, 7, 13}) {
    ChatStream s(recipe::Dialect::kV4, true, true, "r");
    const Gathered g = Feed(s, kReply, step);
    EXPECT_EQ(g.reasoning, ref.reasoning) << step;
    EXPECT_EQ(g.content, ref.content) << step;
    ASSERT_EQ(g.calls.size(), 2u) << step;
    EXPECT_EQ(g.calls[1].arguments, ref.calls[1].arguments) << step;
    // The accumulated message equals the gathered deltas.
    EXPECT_EQ(s.content(), g.content);
    EXPECT_EQ(s.reasoning(), g.reasoning);
  }
}

TEST(ResponseStreamTest, ParallelToolCallsFalseKeepsTheFirst) {
  ChatStream s(recipe::Dialect::kV4, true, /*parallel_tool_calls=*/false, "r");
  const Gathered g = Feed(s, kReply, 4);
  ASSERT_EQ(g.calls.size(), 1u);
  EXPECT_EQ(s.tool_calls().size(), 1u);
  EXPECT_EQ(g.calls[0].name, "get_weather");
}

TEST(ResponseStreamTest, PlainChatKeepsAllText) {
  ChatStream s(recipe::Dialect::kV4, /*thinking=*/false, true, "r");
  const Gathered g = Feed(s, "Hello </b> world\n\n<｜DS", 3);
  EXPECT_EQ(g.content, "Hello </b> world\n\n<｜DS");  // an unfinished marker is released at the end
  EXPECT_EQ(s.FinishReason("stop"), "stop");
  const json m = ChatMessageJson(s);
  EXPECT_EQ(m["role"], "assistant");
  EXPECT_EQ(m["content"], g.content);
  EXPECT_FALSE(m.contains("tool_calls"));
}

TEST(ResponseStreamTest, ReasoningTokens) {
  EXPECT_EQ(ReasoningTokens({5, 6, 9, 7}, 9, true), 3);
  EXPECT_EQ(ReasoningTokens({5, 6, 7}, 9, true), 3);
  EXPECT_EQ(ReasoningTokens({5, 9, 7}, 9, false), 0);
}

TEST(ResponseStreamTest, OpenAiObjects) {
  const json e = ErrorBody(400, "\"n\" must be an integer", "n");
  EXPECT_EQ(e["error"]["type"], "invalid_request_error");
  EXPECT_EQ(e["error"]["param"], "n");
  EXPECT_EQ(e["error"]["code"], 400);
  EXPECT_TRUE(ErrorBody(429, "full")["error"]["param"].is_null());
  EXPECT_EQ(ErrorBody(401, "key")["error"]["type"], "authentication_error");
  const json u = UsageJson(5, 7, 2);
  EXPECT_EQ(u["total_tokens"], 12);
  EXPECT_EQ(u["completion_tokens_details"]["reasoning_tokens"], 2);
  EXPECT_FALSE(UsageJson(5, 7).contains("completion_tokens_details"));
  ChatDelta d;
  d.content = "x";
  d.tool_calls.push_back({0, "call_a_0", "f", "{}"});
  const json dj = ChatDeltaJson(d);
  EXPECT_EQ(dj["content"], "x");
  EXPECT_FALSE(dj.contains("reasoning_content"));
  EXPECT_EQ(dj["tool_calls"][0]["index"], 0);
  EXPECT_EQ(dj["tool_calls"][0]["function"]["arguments"], "{}");
  EXPECT_NE(NewResponseId("chatcmpl"), NewResponseId("chatcmpl"));
  EXPECT_EQ(NewResponseId("cmpl").rfind("cmpl-", 0), 0u);
}

}  // namespace
}  // namespace dsinfer::response
