// Forced tool calls (structured/tool_call_grammar.h): the DSML block grammar accepts well-formed
// calls of the allowed tools and nothing else, the ｜DSML｜ special token is allowed exactly at the
// markup, and random walks through the token masks always parse (recipe/streaming_parser.h) into
// tool calls whose arguments follow the schemas.
#include "structured/tool_call_grammar.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "recipe/streaming_parser.h"
#include "structured/constraint_compiler.h"
#include "structured/matcher.h"

namespace dsinfer {
namespace {

using nlohmann::ordered_json;
using structured::ConstraintSpec;

const std::string kDsml =
    "\xEF\xBD\x9C"
    "DSML\xEF\xBD\x9C";

// Ids 0..255: single bytes; then DSML-ish pieces, the spelling of ｜DSML｜ as an ordinary token,
// the ｜DSML｜ special token (kDsmlId) and EOS (the last id).
struct TestVocab {
  std::shared_ptr<const structured::Vocabulary> vocab;
  int32_t dsml = -1;
  int32_t eos = -1;
};

const TestVocab& Vocab() {
  static const TestVocab v = [] {
    std::vector<std::string> bytes;
    for (int b = 0; b < 256; ++b) bytes.push_back(std::string(1, static_cast<char>(b)));
    for (const char* piece : {"\n\n<", "tool_calls", ">\n", "invoke", " name=\"", "\">\n", "</",
                              "parameter", "\" string=\"true\">", "\" string=\"false\">", "Paris",
                              "12", "true", "\"}", "\xEF\xBD\x9C", "DSML"}) {
      bytes.push_back(piece);
    }
    bytes.push_back(kDsml);  // the markup's spelling in ordinary tokens: never the markup
    TestVocab t;
    t.dsml = static_cast<int32_t>(bytes.size());
    bytes.push_back("");  // ｜DSML｜ (special: no bytes of its own)
    t.eos = static_cast<int32_t>(bytes.size());
    bytes.push_back("");
    t.vocab = structured::Vocabulary::Create(bytes, static_cast<int64_t>(bytes.size()) + 5, t.eos,
                                             {t.dsml});
    return t;
  }();
  return v;
}

// `text` as ids: each "｜DSML｜" the special token, everything else single bytes.
std::vector<int32_t> Ids(const std::string& text) {
  std::vector<int32_t> ids;
  for (size_t i = 0; i < text.size();) {
    if (text.compare(i, kDsml.size(), kDsml) == 0) {
      ids.push_back(Vocab().dsml);
      i += kDsml.size();
    } else {
      ids.push_back(static_cast<uint8_t>(text[i++]));
    }
  }
  return ids;
}

const char* kTools = R"([
  {"type": "function", "function": {"name": "get_weather", "description": "Weather of a city",
   "parameters": {"type": "object", "properties": {
     "city": {"type": "string", "maxLength": 6},
     "days": {"type": "integer", "minimum": 1, "maximum": 14},
     "unit": {"enum": ["c", "f"]},
     "detailed": {"type": "boolean"}},
    "required": ["city", "days"]}}},
  {"type": "function", "function": {"name": "ping"}}
])";

std::shared_ptr<structured::TokenAutomaton> Compile(const std::string& name = "",
                                                    bool parallel = true) {
  auto spec = structured::ToolCallSpec(ordered_json::parse(kTools), name, parallel);
  EXPECT_TRUE(spec.ok()) << spec.status().ToString();
  auto a = structured::CompileConstraint(*spec, Vocab().vocab);
  EXPECT_TRUE(a.ok()) << a.status().ToString();
  return *a;
}

// Whether the matcher takes every id of `text` and is then complete.
bool Accepts(const std::shared_ptr<structured::TokenAutomaton>& a, const std::string& text) {
  structured::Matcher m(a);
  for (int32_t id : Ids(text)) {
    if (!m.Advance(id).ok()) return false;
  }
  return m.IsCompleted();
}

std::string Invoke(const std::string& name, const std::vector<std::string>& params) {
  std::string s = "<" + kDsml + "invoke name=\"" + name + "\">\n";
  for (size_t i = 0; i < params.size(); ++i) s += (i ? "\n" : "") + params[i];
  return s + "\n</" + kDsml + "invoke>";
}

std::string Param(const std::string& key, bool raw, const std::string& value) {
  return "<" + kDsml + "parameter name=\"" + key + "\" string=\"" + (raw ? "true" : "false") +
         "\">" + value + "</" + kDsml + "parameter>";
}

std::string Block(const std::vector<std::string>& invokes) {
  std::string s = "\n\n<" + kDsml + "tool_calls>\n";
  for (size_t i = 0; i < invokes.size(); ++i) s += (i ? "\n" : "") + invokes[i];
  return s + "\n</" + kDsml + "tool_calls>";
}

TEST(ToolCallGrammarTest, AcceptsWellFormedCallsOfTheTools) {
  auto a = Compile();
  const std::string weather =
      Invoke("get_weather", {Param("city", true, "Paris"), Param("days", false, "2")});
  EXPECT_TRUE(Accepts(a, Block({weather})));
  EXPECT_TRUE(Accepts(a, Block({Invoke("ping", {})})));
  EXPECT_TRUE(Accepts(a, Block({weather, Invoke("ping", {}), weather})));
  EXPECT_TRUE(
      Accepts(a, Block({Invoke("get_weather",
                               {Param("city", true, "a<b\"x"), Param("days", false, "14"),
                                Param("unit", true, "f"), Param("detailed", false, "false")})})));
  EXPECT_TRUE(
      Accepts(a, Block({Invoke("get_weather", {Param("city", true, ""), Param("days", false, "1"),
                                               Param("detailed", false, "true")})})));
  // The recipe parses them.
  const auto parsed = recipe::ParseCompletion(Block({weather, Invoke("ping", {})}),
                                              recipe::Dialect::kV4, /*thinking=*/false);
  ASSERT_EQ(parsed.tool_calls.size(), 2u);
  EXPECT_EQ(parsed.tool_calls[0].name, "get_weather");
  EXPECT_EQ(parsed.tool_calls[0].arguments, R"({"city": "Paris", "days": 2})");
  EXPECT_EQ(parsed.tool_calls[1].arguments, "{}");
  EXPECT_EQ(parsed.content, "");
}

TEST(ToolCallGrammarTest, RejectsOtherToolsBadArgumentsAndBadMarkup) {
  auto a = Compile();
  auto weather = [](const std::vector<std::string>& params) {
    return Block({Invoke("get_weather", params)});
  };
  const std::string city = Param("city", true, "Paris");
  const std::string days = Param("days", false, "2");
  EXPECT_FALSE(Accepts(a, Block({Invoke("get_time", {})})));               // not a tool
  EXPECT_FALSE(Accepts(a, weather({city, Param("days", false, "x")})));    // not JSON
  EXPECT_FALSE(Accepts(a, weather({city, Param("days", false, "0")})));    // below the minimum
  EXPECT_FALSE(Accepts(a, weather({city, Param("days", false, "2.5")})));  // not an integer
  EXPECT_FALSE(Accepts(a, weather({city, Param("days", true, "2")})));     // integers are JSON
  EXPECT_FALSE(Accepts(a, weather({Param("city", false, "\"Paris\""), days})));  // raw strings
  EXPECT_FALSE(Accepts(a, weather({Param("city", true, "Lisbon1"), days})));     // maxLength
  EXPECT_FALSE(Accepts(a, weather({days})));                                     // city required
  EXPECT_FALSE(Accepts(a, weather({days, city})));                               // schema order
  EXPECT_FALSE(Accepts(a, weather({city, days, Param("x", true, "")})));      // unknown parameter
  EXPECT_FALSE(Accepts(a, weather({city, days, Param("unit", true, "k")})));  // not in the enum
  EXPECT_FALSE(Accepts(a, weather({Param("city", true, "a\xEF\xBD\x9C"), days})));  // a bar
  EXPECT_FALSE(Accepts(a, "Sure." + weather({city, days})));                        // content first
  EXPECT_FALSE(Accepts(a, Block({})));                                              // no call
  EXPECT_FALSE(Accepts(a, weather({city, days}).substr(1)));  // one newline only

  // ｜DSML｜ spelled by ordinary tokens is not the markup.
  structured::Matcher m(a);
  for (char c : std::string("\n\n<")) ASSERT_TRUE(m.Advance(static_cast<uint8_t>(c)).ok());
  EXPECT_FALSE(m.Advance(Vocab().dsml - 1).ok());  // the ordinary spelling (one id)
  EXPECT_FALSE(m.Advance(0xEF).ok());              // its first byte
  EXPECT_TRUE(m.Advance(Vocab().dsml).ok());
}

TEST(ToolCallGrammarTest, MasksAllowTheDsmlTokenOnlyAtTheMarkup) {
  auto a = Compile();
  const TestVocab& v = Vocab();
  structured::Matcher m(a);
  auto has = [&](int32_t id) { return structured::MaskHas(m.Mask()->data(), id); };
  EXPECT_FALSE(has(v.dsml));
  EXPECT_FALSE(has(v.eos));
  for (char c : std::string("\n\n<")) ASSERT_TRUE(m.Advance(static_cast<uint8_t>(c)).ok());
  EXPECT_TRUE(has(v.dsml));
  EXPECT_FALSE(has(v.dsml - 1));  // the ordinary spelling
  EXPECT_FALSE(has(0xFF));        // the byte that stands for the token inside the automaton
  for (int id = 0; id < 256; ++id) EXPECT_FALSE(has(id)) << id;
  ASSERT_TRUE(m.Advance(v.dsml).ok());
  EXPECT_FALSE(has(v.dsml));
  EXPECT_TRUE(has('t'));
}

TEST(ToolCallGrammarTest, NamedFunctionAndSingleCall) {
  auto named = Compile("ping");
  EXPECT_TRUE(Accepts(named, Block({Invoke("ping", {})})));
  EXPECT_TRUE(Accepts(named, Block({Invoke("ping", {}), Invoke("ping", {})})));
  EXPECT_FALSE(Accepts(
      named,
      Block({Invoke("get_weather", {Param("city", true, "a"), Param("days", false, "1")})})));
  auto single = Compile("", /*parallel=*/false);
  EXPECT_TRUE(Accepts(single, Block({Invoke("ping", {})})));
  EXPECT_FALSE(Accepts(single, Block({Invoke("ping", {}), Invoke("ping", {})})));
}

// Strict tools under tool_choice auto: free text (never spelling ｜DSML｜), then optionally the
// block; the strict tool's parameters follow its schema, the others' are free.
TEST(ToolCallGrammarTest, StrictToolsUnderAuto) {
  EXPECT_FALSE(structured::StrictToolCallSpec(ordered_json::parse(kTools), true)->active());
  auto tools = ordered_json::parse(kTools);
  tools[0]["function"]["strict"] = true;
  tools.push_back(ordered_json::parse(R"({"type": "function", "function": {"name": "free",
      "parameters": {"type": "object", "properties": {"n": {"type": "integer"}}}}})"));
  auto spec = structured::StrictToolCallSpec(tools, true);
  ASSERT_TRUE(spec.ok() && spec->active());
  auto a = structured::CompileConstraint(*spec, Vocab().vocab);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  auto accepting = [&](const std::string& text) {
    structured::Matcher m(*a);
    for (int32_t id : Ids(text)) {
      if (!m.Advance(id).ok()) return false;
    }
    return m.IsAccepting();
  };
  const std::string bar = "\xEF\xBD\x9C";
  EXPECT_TRUE(accepting(""));
  EXPECT_TRUE(accepting("It is sunny.\n\n<b> " + bar + "DSM" + bar + " " + bar + "DSML."));
  const std::string weather =
      Invoke("get_weather", {Param("city", true, "Paris"), Param("days", false, "2")});
  EXPECT_TRUE(Accepts(*a, "Let me look." + Block({weather})));
  EXPECT_TRUE(Accepts(*a, Block({weather, Invoke("ping", {Param("x", true, "y")})})));
  EXPECT_TRUE(Accepts(*a, Block({Invoke("free", {Param("n", false, "\"not a number\""),
                                                 Param("other key", true, "a<b")})})));
  EXPECT_FALSE(Accepts(*a, Block({Invoke("get_weather", {Param("days", false, "2")})})));
  EXPECT_FALSE(Accepts(
      *a,
      Block({Invoke("get_weather", {Param("city", true, "Paris"), Param("days", false, "x")})})));
  EXPECT_FALSE(Accepts(*a, Block({Invoke("unknown", {})})));
  EXPECT_FALSE(accepting(Block({weather}) + "more"));  // nothing but EOS after the block
  // The markup spelled by ordinary tokens in the text: refused at its last bar.
  structured::Matcher m(*a);
  for (char c : "x\n\n<" + kDsml.substr(0, kDsml.size() - 1))
    ASSERT_TRUE(m.Advance(static_cast<uint8_t>(c)).ok());
  EXPECT_FALSE(m.Advance(static_cast<uint8_t>(kDsml.back())).ok());
  structured::Matcher one(*a);
  ASSERT_TRUE(one.Advance('x').ok());
  EXPECT_FALSE(one.Advance(Vocab().dsml - 1).ok());  // nor in one token
  EXPECT_TRUE(one.Advance(0xEF).ok());               // a bar may start
}

// V4.1 spells its tags " calls" / " invoke" / " parameter"; the engine passes its dialect's names.
TEST(ToolCallGrammarTest, OtherDialectsTagNames) {
  auto spec = structured::ToolCallSpec(ordered_json::parse(kTools), "get_weather", true);
  ASSERT_TRUE(spec.ok());
  auto a = structured::CompileConstraint(
      structured::WithDsmlNames(*spec, " calls", " invoke", " parameter"), Vocab().vocab);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  const std::string v4 =
      Block({Invoke("get_weather", {Param("city", true, "Oslo"), Param("days", false, "3")})});
  EXPECT_FALSE(Accepts(*a, v4));
  std::string v41 = v4;
  for (const std::string tag : {"tool_calls", "invoke", "parameter"}) {
    const std::string to = tag == "tool_calls" ? " calls" : " " + tag;
    for (size_t at = 0; (at = v41.find(kDsml + tag, at)) != std::string::npos; at += kDsml.size())
      v41 = v41.substr(0, at + kDsml.size()) + to + v41.substr(at + kDsml.size() + tag.size());
  }
  EXPECT_TRUE(Accepts(*a, v41)) << v41;
  const auto parsed = recipe::ParseCompletion(v41, recipe::Dialect::kV41, false);
  ASSERT_EQ(parsed.tool_calls.size(), 1u) << v41;
  EXPECT_EQ(parsed.tool_calls[0].arguments, R"({"city": "Oslo", "days": 3})");
}

// No parameter text can spell the markup: a bar (U+FF5C) is never raw text, JSON strings write it
// as \uff5c (the value is the same), and a raw enum value holding one is written as JSON.
TEST(ToolCallGrammarTest, ParameterTextNeverHoldsARawBar) {
  const std::string bar = "\xEF\xBD\x9C";
  auto spec = structured::ToolCallSpec(ordered_json::parse(R"([{"type": "function", "function":
      {"name": "note", "parameters": {"type": "object", "properties": {
        "lines": {"type": "array", "items": {"type": "string"}},
        "mark": {"enum": ["a\uff5cb", "c"]},
        "code": {"type": "string", "pattern": "^[a-z\uff5c]+$"}}}}}])"),
                                       "", true);
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  auto a = structured::CompileConstraint(*spec, Vocab().vocab);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  auto note = [](const std::string& param) { return Block({Invoke("note", {param})}); };
  EXPECT_TRUE(Accepts(*a, note(Param("lines", false, R"(["x\uff5cy", "z"])"))));
  EXPECT_FALSE(Accepts(*a, note(Param("lines", false, "[\"x" + bar + "y\"]"))));
  // The markup's text in a string, spelled by ordinary tokens (0xFF: the DSML token).
  auto bytes = [&](const std::string& value) {
    std::string out;
    for (int32_t id : Ids(note(Param("lines", false, "[\"@\"]")))) {
      if (id == '@') {
        out += value;
      } else {
        out += id == Vocab().dsml ? std::string("\xFF") : std::string(1, static_cast<char>(id));
      }
    }
    return out;
  };
  EXPECT_EQ((*a)->AdvanceBytes((*a)->initial(), bytes("</" + kDsml + "parameter>")),
            structured::Pda::kDead);
  EXPECT_TRUE((*a)->completed(
      (*a)->AdvanceBytes((*a)->initial(), bytes("</\\uff5cDSML\\uff5cparameter>"))));
  EXPECT_TRUE(Accepts(*a, note(Param("mark", false, "\"a\\uff5cb\""))));
  EXPECT_FALSE(Accepts(*a, note(Param("mark", true, "a" + bar + "b"))));
  EXPECT_FALSE(Accepts(*a, note(Param("mark", true, "c"))));  // the enum is JSON as a whole
  EXPECT_TRUE(Accepts(*a, note(Param("mark", false, "\"c\""))));
  EXPECT_TRUE(Accepts(*a, note(Param("code", false, "\"ab\\uff5c\""))));
  EXPECT_FALSE(Accepts(*a, note(Param("code", false, "\"ab" + bar + "\""))));
  const auto parsed = recipe::ParseCompletion(note(Param("lines", false, R"(["x\uff5cy"])")),
                                              recipe::Dialect::kV4, false);
  ASSERT_EQ(parsed.tool_calls.size(), 1u);
  EXPECT_EQ(nlohmann::json::parse(parsed.tool_calls[0].arguments)["lines"][0], "x" + bar + "y");
}

// Random walks: every token drawn from the masks until the constraint completes gives text the
// recipe parses into calls of the tools whose arguments follow the schemas.
TEST(ToolCallGrammarTest, RandomWalksParseIntoValidToolCalls) {
  auto a = Compile();
  const TestVocab& v = Vocab();
  int calls = 0;
  for (uint32_t seed = 0; seed < 200; ++seed) {
    std::mt19937 rng(seed);
    structured::Matcher m(a);
    std::string text;
    for (int step = 0; step < 400 && !m.IsCompleted(); ++step) {
      auto mask = m.Mask();
      std::vector<int32_t> allowed;
      for (int32_t id = 0; id < v.vocab->size(); ++id)
        if (structured::MaskHas(mask->data(), id)) allowed.push_back(id);
      ASSERT_FALSE(allowed.empty()) << "seed " << seed << " text " << text;
      int32_t id = allowed[std::uniform_int_distribution<size_t>(0, allowed.size() - 1)(rng)];
      ASSERT_TRUE(m.Advance(id).ok());
      text += id == v.dsml ? kDsml : v.vocab->bytes(id);
    }
    if (!m.IsCompleted()) continue;  // a long number or string; the grammar is still checked
    const auto parsed = recipe::ParseCompletion(text, recipe::Dialect::kV4, false);
    ASSERT_FALSE(parsed.tool_calls.empty()) << text;
    EXPECT_EQ(parsed.content, "") << text;
    for (const auto& call : parsed.tool_calls) {
      ++calls;
      const auto args = nlohmann::json::parse(call.arguments, nullptr, false);
      ASSERT_TRUE(args.is_object()) << call.arguments;
      if (call.name == "ping") {
        EXPECT_TRUE(args.empty());
        continue;
      }
      ASSERT_EQ(call.name, "get_weather");
      ASSERT_TRUE(args.contains("city") && args["city"].is_string()) << call.arguments;
      ASSERT_TRUE(args.contains("days") && args["days"].is_number_integer()) << call.arguments;
      EXPECT_GE(args["days"].get<int>(), 1);
      EXPECT_LE(args["days"].get<int>(), 14);
      if (args.contains("unit")) {
        EXPECT_TRUE(args["unit"] == "c" || args["unit"] == "f");
      }
      if (args.contains("detailed")) {
        EXPECT_TRUE(args["detailed"].is_boolean());
      }
      for (const auto& [k, x] : args.items())
        EXPECT_TRUE(k == "city" || k == "days" || k == "unit" || k == "detailed") << k;
    }
  }
  EXPECT_GT(calls, 50);
}

TEST(ToolCallGrammarTest, SpecAndSchemaErrorsAreClear) {
  const auto tools = ordered_json::parse(kTools);
  auto err = [](const StatusOr<ConstraintSpec>& s) { return s.ok() ? "" : s.status().message(); };
  EXPECT_NE(err(structured::ToolCallSpec(tools, "nope", true)).find("not in \"tools\""),
            std::string::npos);
  EXPECT_FALSE(structured::ToolCallSpec(ordered_json::array(), "", true).ok());
  EXPECT_FALSE(structured::ToolCallSpec(
                   ordered_json::parse(R"([{"type": "function", "function": {"name": "a"}},
                                           {"type": "function", "function": {"name": "a"}}])"),
                   "", true)
                   .ok());
  EXPECT_FALSE(
      structured::ToolCallSpec(
          ordered_json::parse(R"([{"type": "function", "function": {"name": "a\"b"}}])"), "", true)
          .ok());
  auto spec = structured::ToolCallSpec(ordered_json::parse(R"([{"type": "function", "function":
      {"name": "f", "parameters": {"type": "object", "properties": {"x": {"not": {}}}}}}])"),
                                       "", true);
  ASSERT_TRUE(spec.ok());
  auto a = structured::CompileConstraint(*spec, Vocab().vocab);
  ASSERT_FALSE(a.ok());
  EXPECT_NE(a.status().message().find("tool \"f\": parameter \"x\""), std::string::npos)
      << a.status().ToString();
  // A vocabulary without the DSML token cannot force a call.
  auto plain = structured::Vocabulary::Create({"a", "b", ""}, 3, 2);
  auto b = structured::CompileConstraint(*structured::ToolCallSpec(tools, "", true), plain);
  ASSERT_FALSE(b.ok());
  EXPECT_NE(b.status().message().find("DSML"), std::string::npos);
}

}  // namespace
}  // namespace dsinfer
