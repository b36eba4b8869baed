// StreamingParser tests: the reference parse (recipe-v4.md §3.8 G), every byte-boundary cut of
// the stream giving the same result, malformed/unterminated DSML kept as content, round trips of
// rendered tool calls, and a bounded deterministic random-input run (the CI twin of the fuzzer).
#include <gtest/gtest.h>

#include <random>

#include "recipe/chat_encoder.h"
#include "recipe/streaming_parser.h"

namespace dsinfer::recipe {
namespace {

const std::string EOS = "<｜end▁of▁sentence｜>";
const std::string kG =
    "Need the tool.</think>\n\n<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"get_weather\">\n<｜DSML｜parameter "
    "name=\"city\" string=\"true\">Paris</｜DSML｜parameter>\n<｜DSML｜parameter name=\"days\" "
    "string=\"false\">2</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜tool_calls>" + EOS;

ParseDelta Stream(const std::string& text, const std::vector<size_t>& cuts, Dialect d, bool thinking) {
  StreamingParser p(d, thinking);
  ParseDelta all;
  size_t prev = 0;
  for (size_t c : cuts) {
    all.Append(p.Push(std::string_view(text).substr(prev, c - prev)));
    prev = c;
  }
  all.Append(p.Push(std::string_view(text).substr(prev)));
  all.Append(p.Finish());
  return all;
}

void ExpectSame(const ParseDelta& a, const ParseDelta& b, const std::string& what) {
  EXPECT_EQ(a.reasoning, b.reasoning) << what;
  EXPECT_EQ(a.content, b.content) << what;
  EXPECT_EQ(a.tool_calls, b.tool_calls) << what;
  EXPECT_EQ(a.done, b.done) << what;
}

// Every single cut and a few multi-cut patterns give the whole-text result.
void ExpectChunkingInvariant(const std::string& text, Dialect d, bool thinking) {
  const ParseDelta whole = ParseCompletion(text, d, thinking);
  for (size_t i = 0; i <= text.size(); ++i) ExpectSame(Stream(text, {i}, d, thinking), whole, "cut at " + std::to_string(i));
  std::vector<size_t> every;
  for (size_t i = 1; i < text.size(); ++i) every.push_back(i);
  ExpectSame(Stream(text, every, d, thinking), whole, "byte by byte");
}

TEST(StreamingParserTest, ExampleG) {
  const ParseDelta r = ParseCompletion(kG, Dialect::kV4, true);
  EXPECT_EQ(r.reasoning, "Need the tool.");
  EXPECT_EQ(r.content, "");
  ASSERT_EQ(r.tool_calls.size(), 1u);
  EXPECT_EQ(r.tool_calls[0].name, "get_weather");
  EXPECT_EQ(r.tool_calls[0].arguments, R"({"city": "Paris", "days": 2})");
  EXPECT_TRUE(r.done);
  ExpectChunkingInvariant(kG, Dialect::kV4, true);
}

TEST(StreamingParserTest, PlainContentAndReasoning) {
  const ParseDelta r = ParseCompletion("think <a</think>Hello\n\n<｜DSML world" + EOS, Dialect::kV4, true);
  EXPECT_EQ(r.reasoning, "think <a");
  EXPECT_EQ(r.content, "Hello\n\n<｜DSML world");
  EXPECT_TRUE(r.done);
  ExpectChunkingInvariant("think <a</think>Hello\n\n<｜DSML world" + EOS, Dialect::kV4, true);
  const ParseDelta c = ParseCompletion("Just text", Dialect::kV4, false);
  EXPECT_EQ(c.content, "Just text");
  EXPECT_FALSE(c.done);
}

TEST(StreamingParserTest, MalformedDsmlStaysContent) {
  const std::vector<std::string> bad = {
      "A\n\n<｜DSML｜tool_calls>\n<｜DSML｜invoke nam=\"f\">\n</｜DSML｜invoke>\n</｜DSML｜tool_calls>" + EOS,
      "A\n\n<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"\">\n</｜DSML｜invoke>\n</｜DSML｜tool_calls>" + EOS,
      "A\n\n<｜DSML｜tool_calls>oops" + EOS,
      "A\n\n<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"f\">\n<｜DSML｜parameter name=\"x\" string=\"maybe\">1"
      "</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜tool_calls>" + EOS,
      "A\n\n<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"f\">\n<｜DSML｜parameter name=\"x\" string=\"true\">1",
      "A\n\n<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"f\">\n<｜DSML｜parameter name=\"x\" string=\"true\">1"
      "</｜DSML｜parameter>\n<｜DSML｜parameter name=\"x\" string=\"true\">2</｜DSML｜parameter>\n</｜DSML｜invoke>\n",
  };
  for (const std::string& text : bad) {
    const ParseDelta r = ParseCompletion(text, Dialect::kV4, false);
    EXPECT_TRUE(r.tool_calls.empty()) << text;
    std::string expect = text;
    if (expect.size() >= EOS.size() && expect.compare(expect.size() - EOS.size(), EOS.size(), EOS) == 0) {
      expect.resize(expect.size() - EOS.size());
    }
    EXPECT_EQ(r.content, expect) << "no text may be dropped";
    ExpectChunkingInvariant(text, Dialect::kV4, false);
  }
}

TEST(StreamingParserTest, ValidCallsThenGarbageKeepsGarbage) {
  const std::string text = "\n\n<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"f\">\n\n</｜DSML｜invoke>\n<｜DSML｜inv0ke";
  const ParseDelta r = ParseCompletion(text, Dialect::kV4, false);
  ASSERT_EQ(r.tool_calls.size(), 1u);
  EXPECT_EQ(r.tool_calls[0].arguments, "{}");
  EXPECT_EQ(r.content, ">\n<｜DSML｜inv0ke");
  ExpectChunkingInvariant(text, Dialect::kV4, false);
}

TEST(StreamingParserTest, RenderedToolCallsRoundTrip) {
  const char* calls[] = {
      R"([{"function":{"name":"get_weather","arguments":"{\"city\": \"Paris\", \"days\": 2}"}}])",
      R"([{"function":{"name":"a","arguments":"{}"}},{"function":{"name":"b","arguments":"{\"q\": \"x\\ny \\\"z\\\" é😀\", \"n\": [1, {\"k\": null}], \"f\": 1.5, \"t\": true}"}}])",
      R"([{"function":{"name":"raw","arguments":"not json"}}])",
  };
  for (Dialect d : {Dialect::kV4, Dialect::kV4Flash0731, Dialect::kV41}) {
    for (const char* c : calls) {
      const Json tool_calls = Json::parse(c);
      const std::string text = "Sure." + RenderToolCalls(tool_calls, d).Text() + EOS;
      const ParseDelta r = ParseCompletion(text, d, false);
      EXPECT_EQ(r.content, "Sure.");
      ASSERT_EQ(r.tool_calls.size(), tool_calls.size()) << text;
      for (size_t i = 0; i < tool_calls.size(); ++i) {
        const std::string raw = tool_calls[i]["function"]["arguments"].get<std::string>();
        Json want = Json::parse(raw, nullptr, false);
        if (want.is_discarded()) want = Json{{"arguments", raw}};
        EXPECT_EQ(r.tool_calls[i].name, tool_calls[i]["function"]["name"].get<std::string>());
        EXPECT_EQ(Json::parse(r.tool_calls[i].arguments), want);
      }
      ExpectChunkingInvariant(text, d, false);
    }
  }
}

// Random streams built from marker fragments: no crash, chunking-invariant, and without parsed
// tool calls the output loses nothing but the markers it consumed.
TEST(StreamingParserTest, BoundedRandomInputs) {
  const std::vector<std::string> pieces = {
      "a", " ", "\n", "\n\n", "<", ">", ">\n", "\"", "｜", "DSML", "｜DSML｜", "<｜DSML｜tool_calls", "tool_calls",
      "invoke", " name=\"", "f", "\">\n", "<｜DSML｜invoke", "</｜DSML｜invoke", "<｜DSML｜parameter",
      "/｜DSML｜parameter", " string=\"true\">", " string=\"false\">", "</｜DSML｜tool_calls>", "</think>",
      "<think>", EOS, "\xE2\x82", "😀", "\n\n<｜DSML｜tool_calls>\n"};
  std::mt19937 rng(1234);
  for (int iter = 0; iter < 3000; ++iter) {
    std::string text;
    const int n = static_cast<int>(rng() % 24);
    for (int i = 0; i < n; ++i) text += pieces[rng() % pieces.size()];
    const bool thinking = rng() % 2;
    const Dialect d = rng() % 3 == 0 ? Dialect::kV41 : Dialect::kV4;
    const ParseDelta whole = ParseCompletion(text, d, thinking);
    std::vector<size_t> cuts;
    for (size_t i = 1; i < text.size(); ++i) {
      if (rng() % 3 == 0) cuts.push_back(i);
    }
    ExpectSame(Stream(text, cuts, d, thinking), whole, text);
    if (whole.tool_calls.empty() && text.find(EOS) == std::string::npos && text.find("</think>") == std::string::npos &&
        text.find("</｜DSML｜tool_calls>") == std::string::npos) {
      EXPECT_EQ((thinking ? whole.reasoning : whole.content).size() + (thinking ? whole.content.size() : 0),
                text.size()) << text;
    }
  }
}

}  // namespace
}  // namespace dsinfer::recipe
