// The request schema (request/): the OpenAI chat and completions bodies and the JSONL lines of
// `dsinfer generate` parse into one Request; unknown keys, wrong types, seed -1, invalid UTF-8
// (with its byte offset), deep nesting and output constraints are refused with messages that
// name the key.
#include <gtest/gtest.h>

#include "request/json_text.h"
#include "request/output_constraint.h"
#include "request/request_parser.h"

namespace dsinfer::request {
namespace {

using json = nlohmann::json;

StatusOr<Request> Chat(const std::string& body) {
  auto j = ParseJsonText(body);
  if (!j.ok()) return j.status();
  return ParseRequest(*j, Kind::kChat, Request{});
}

StatusOr<Request> Completion(const std::string& body) {
  auto j = ParseJsonText(body);
  if (!j.ok()) return j.status();
  return ParseRequest(*j, Kind::kCompletion, Request{});
}

StatusOr<Request> Jsonl(const std::string& body) {
  auto j = ParseJsonText(body);
  if (!j.ok()) return j.status();
  return ParseRequest(*j, Kind::kJsonl, Request{});
}

void ExpectError(const StatusOr<Request>& r, const std::string& fragment) {
  ASSERT_FALSE(r.ok()) << "expected an error containing " << fragment;
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find(fragment), std::string::npos) << r.status().message();
}

TEST(RequestSchemaTest, ChatBodyWithEverything) {
  auto r = Chat(R"({"model": "tiny", "messages": [{"role": "system", "content": "Be brief."},
      {"role": "user", "content": [{"type": "text", "text": "Hi"}]}],
      "tools": [{"type": "function", "function": {"name": "f", "parameters": {}}}],
      "tool_choice": "auto", "parallel_tool_calls": false, "reasoning_effort": "max",
      "chat_template_kwargs": {"thinking": true}, "max_completion_tokens": 7, "n": 2,
      "temperature": 0.5, "top_p": 0.9, "top_k": 5, "min_p": 0.1, "seed": 3, "stop": ["x", "y"],
      "logprobs": true, "top_logprobs": 2, "presence_penalty": 0.5, "frequency_penalty": 0.25,
      "repetition_penalty": 1.1, "logit_bias": {"12": -5}, "ignore_eos": true, "stream": true,
      "stream_options": {"include_usage": true}, "user": "u", "metadata": {"k": "v"},
      "response_format": {"type": "text"}})");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->kind, Kind::kChat);
  EXPECT_EQ(r->messages.size(), 2u);
  EXPECT_EQ(r->model, "tiny");
  EXPECT_FALSE(r->tools_json.empty());
  EXPECT_FALSE(r->parallel_tool_calls);
  EXPECT_TRUE(r->thinking);
  EXPECT_EQ(r->reasoning_effort, "max");
  EXPECT_TRUE(r->max_tokens_given);
  EXPECT_EQ(r->sampling.max_tokens, 7);
  EXPECT_EQ(r->sampling.n, 2);
  EXPECT_FLOAT_EQ(r->sampling.temperature, 0.5f);
  EXPECT_EQ(r->sampling.top_k, 5);
  EXPECT_EQ(*r->sampling.seed, 3u);
  EXPECT_EQ(r->sampling.stop, (std::vector<std::string>{"x", "y"}));
  EXPECT_TRUE(r->sampling.logprobs);
  EXPECT_EQ(r->sampling.top_logprobs, 2);
  EXPECT_FLOAT_EQ(r->sampling.logit_bias.at(12), -5.0f);
  EXPECT_TRUE(r->sampling.ignore_eos);
  EXPECT_TRUE(r->stream);
  EXPECT_TRUE(r->include_usage);
}

TEST(RequestSchemaTest, DefaultsFillWhatTheBodyLeavesOut) {
  Request defaults;
  defaults.sampling.max_tokens = 16;
  defaults.sampling.temperature = 0;
  auto r = ParseRequest(json::parse(R"({"messages": [{"role": "user", "content": "Hi"}]})"),
                        Kind::kChat, defaults);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->sampling.max_tokens, 16);
  EXPECT_FALSE(r->max_tokens_given);
  EXPECT_EQ(r->sampling.temperature, 0.0f);
  EXPECT_FALSE(r->sampling.seed.has_value());
  // null means "not given".
  auto n = Chat(R"({"messages": [{"role": "user", "content": "Hi"}], "seed": null,
                    "max_tokens": null, "stop": null, "tools": null})");
  ASSERT_TRUE(n.ok()) << n.status().ToString();
  EXPECT_FALSE(n->max_tokens_given);
}

TEST(RequestSchemaTest, UnknownKeysAreNamed) {
  ExpectError(Chat(R"({"messages": [{"role": "user", "content": "Hi"}], "temprature": 1})"),
              "\"temprature\" is not a known request key");
  // Completions-only keys are unknown to chat and the other way round.
  ExpectError(Chat(R"({"messages": [{"role": "user", "content": "Hi"}], "echo": true})"),
              "\"echo\"");
  ExpectError(Completion(R"({"prompt": "Hi", "messages": []})"), "\"messages\"");
  ExpectError(Chat(R"({"messages": [{"role": "user", "content": "Hi"}],
                       "stream": true, "stream_options": {"include_usage": true, "x": 1}})"),
              "\"stream_options.x\"");
  ExpectError(Chat(R"({"messages": [{"role": "user", "content": "Hi"}],
                       "chat_template_kwargs": {"thinkin": true}})"),
              "\"chat_template_kwargs.thinkin\"");
}

TEST(RequestSchemaTest, WrongTypesAndRanges) {
  const std::string m = R"("messages": [{"role": "user", "content": "Hi"}])";
  ExpectError(Chat("{" + m + R"(, "n": "2"})"), "\"n\" must be an integer");
  ExpectError(Chat("{" + m + R"(, "temperature": "hot"})"), "\"temperature\" must be a number");
  ExpectError(Chat("{" + m + R"(, "max_tokens": 0})"), "\"max_tokens\" must be >= 1, got 0");
  ExpectError(Chat("{" + m + R"(, "max_tokens": -3})"), "got -3");
  ExpectError(Chat("{" + m + R"(, "logprobs": 3})"), "\"logprobs\" must be true or false");
  ExpectError(Chat("{" + m + R"(, "stop": [1]})"), "\"stop\"");
  ExpectError(Chat("{" + m + R"(, "logit_bias": {"abc": 1}})"), "\"logit_bias\" keys");
  ExpectError(Chat("{" + m + R"(, "n": 1000})"), "n must be in [1, 128]");
  ExpectError(Chat("{" + m + R"(, "stream_options": {"include_usage": true}})"),
              "\"stream_options\" is only allowed with \"stream\": true");
  ExpectError(Chat(R"({"messages": []})"), "\"messages\" must be a non-empty array");
  ExpectError(Chat(R"({"model": "x"})"), "\"messages\" is required");
  ExpectError(Chat(R"({"messages": [{"content": "no role"}]})"), "\"role\"");
}

TEST(RequestSchemaTest, SeedMinusOneIsRefusedEverywhere) {
  ExpectError(Chat(R"({"messages": [{"role": "user", "content": "Hi"}], "seed": -1})"),
              "\"seed\" must be >= 0, got -1");
  ExpectError(Completion(R"({"prompt": "Hi", "seed": -1})"), "\"seed\" must be >= 0, got -1");
  ExpectError(Jsonl(R"({"prompt_ids": [1, 2], "seed": -1})"), "\"seed\" must be >= 0, got -1");
  ExpectError(Jsonl(R"({"prompt_ids": [1, 2], "seed": 18446744073709551615})"), "\"seed\"");
}

TEST(RequestSchemaTest, CompletionPrompts) {
  auto text = Completion(R"({"prompt": "Hello", "echo": true, "logprobs": 2})");
  ASSERT_TRUE(text.ok()) << text.status().ToString();
  EXPECT_EQ(text->prompt, "Hello");
  EXPECT_TRUE(text->echo);
  EXPECT_TRUE(text->sampling.logprobs);
  EXPECT_EQ(text->sampling.top_logprobs, 2);
  auto ids = Completion(R"({"prompt": [1, 2, 3]})");
  ASSERT_TRUE(ids.ok());
  EXPECT_EQ(ids->prompt_ids, (std::vector<int32_t>{1, 2, 3}));
  auto one = Completion(R"({"prompt": ["Hi"]})");
  ASSERT_TRUE(one.ok());
  EXPECT_EQ(one->prompt, "Hi");
  EXPECT_EQ(text->sampling.prompt_logprobs, 2);  // echo + logprobs scores the prompt
  auto scored = Completion(R"({"prompt": "Hi", "prompt_logprobs": 1})");
  ASSERT_TRUE(scored.ok());
  EXPECT_EQ(scored->sampling.prompt_logprobs, 1);
  ExpectError(Completion(R"({"prompt": "Hi", "prompt_logprobs": 21})"), "\"prompt_logprobs\"");
  ExpectError(Completion(R"({"prompt": "Hi", "prompt_logprobs": 1, "stream": true})"),
              "non-streaming requests only");
  ExpectError(Completion(R"({"prompt": "Hi", "suffix": "x"})"), "\"suffix\"");
  ExpectError(Completion(R"({"prompt": ""})"), "\"prompt\" is empty");
  ExpectError(Completion(R"({"prompt": "Hi", "logprobs": 21})"), "\"logprobs\" must be <= 20");
}

TEST(RequestSchemaTest, CompletionListOfPrompts) {
  auto texts = Completion(R"({"prompt": ["a", "b c", "d"], "n": 2, "seed": 7, "echo": true})");
  ASSERT_TRUE(texts.ok()) << texts.status().ToString();
  EXPECT_TRUE(texts->prompt.empty());
  EXPECT_TRUE(texts->prompt_ids.empty());
  ASSERT_EQ(texts->prompts.size(), 3u);
  EXPECT_EQ(texts->prompts[1].text, "b c");
  auto split = SplitPrompts(*texts);
  ASSERT_EQ(split.size(), 3u);
  for (size_t i = 0; i < split.size(); ++i) {
    EXPECT_TRUE(split[i].prompts.empty());
    EXPECT_EQ(split[i].prompt, texts->prompts[i].text);
    EXPECT_EQ(split[i].sampling.n, 2);
    EXPECT_EQ(split[i].sampling.seed, std::optional<uint64_t>(7));
    EXPECT_TRUE(split[i].echo);
  }
  auto ids = Completion(R"({"prompt": [[1, 2], [3], [4, 5, 6]]})");
  ASSERT_TRUE(ids.ok()) << ids.status().ToString();
  ASSERT_EQ(ids->prompts.size(), 3u);
  EXPECT_EQ(ids->prompts[2].ids, (std::vector<int32_t>{4, 5, 6}));
  EXPECT_TRUE(ids->prompts[2].text.empty());
  auto mixed = Completion(R"({"prompt": ["x", [9]]})");
  ASSERT_TRUE(mixed.ok()) << mixed.status().ToString();
  EXPECT_EQ(mixed->prompts[1].ids, (std::vector<int32_t>{9}));
  auto one_ids = Completion(R"({"prompt": [[1, 2]]})");
  ASSERT_TRUE(one_ids.ok());
  EXPECT_TRUE(one_ids->prompts.empty());
  EXPECT_EQ(one_ids->prompt_ids, (std::vector<int32_t>{1, 2}));
  EXPECT_EQ(SplitPrompts(*one_ids).size(), 1u);
  // JSONL lines take the same forms.
  auto jsonl = Jsonl(R"({"prompt": ["a", "b"]})");
  ASSERT_TRUE(jsonl.ok()) << jsonl.status().ToString();
  EXPECT_EQ(jsonl->prompts.size(), 2u);

  ExpectError(Completion(R"({"prompt": []})"), "\"prompt\" is an empty list");
  ExpectError(Completion(R"({"prompt": ["a", ""]})"), "\"prompt\" item 1 is an empty string");
  ExpectError(Completion(R"({"prompt": [[1], []]})"), "\"prompt\" item 1 is an empty array");
  ExpectError(Completion(R"({"prompt": [[1], [[2]]]})"),
              "\"prompt\" item 1 must be an array of token ids");
  ExpectError(Completion(R"({"prompt": [[1], ["a"]]})"),
              "\"prompt\" item 1 must be an array of token ids");
  ExpectError(Completion(R"({"prompt": [[1, -2]]})"),
              "\"prompt\" item 0 must be an array of token ids");
  ExpectError(Completion(R"({"prompt": [[1, 2.5]]})"),
              "\"prompt\" item 0 must be an array of token ids");
  ExpectError(Completion(R"({"prompt": [[1, 4294967296]]})"),
              "\"prompt\" item 0 must be an array of token ids");
  ExpectError(Completion(R"({"prompt": ["a", 3]})"), "\"prompt\" item 1 must be a string");
  ExpectError(Completion(R"({"prompt": ["a", {"x": 1}]})"), "\"prompt\" item 1 must be a string");
  ExpectError(Completion(R"({"prompt": [1, "a"]})"), "\"prompt\" must be an integer");
  ExpectError(Completion(R"({"prompt": {"a": 1}})"), "\"prompt\" must be a string");
  ExpectError(Completion(R"({"prompt": 5})"), "\"prompt\" must be a string");
}

TEST(RequestSchemaTest, JsonlTakesAnOpenAiBodyAndTheCliKeys) {
  auto r = Jsonl(R"({"id": "req-7", "model": "tiny", "stream": false, "user": "u",
      "metadata": {}, "messages": [{"role": "user", "content": "Hi"}], "thinking": true,
      "chat_template_kwargs": {"enable_thinking": true}, "max_tokens": 4})");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->id, "req-7");
  EXPECT_TRUE(r->thinking);
  ExpectError(Jsonl(R"({"messages": [{"role": "user", "content": "Hi"}], "thinking": true,
                        "chat_template_kwargs": {"thinking": false}})"),
              "\"chat_template_kwargs\" disagrees");
  ExpectError(Chat(R"({"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 3,
                       "max_completion_tokens": 4})"),
              "\"max_completion_tokens\" disagrees");
  auto ids = Jsonl(R"({"prompt_ids": [5, 6], "priority": -1, "logprobs": true})");
  ASSERT_TRUE(ids.ok());
  EXPECT_EQ(ids->priority, -1);
  ExpectError(Jsonl(R"({"prompt": "a", "prompt_ids": [1]})"), "exactly one of");
  ExpectError(Jsonl(R"({"prompt": "a", "tools": [{"type": "function"}]})"),
              "\"tools\" needs \"messages\"");
  ExpectError(Jsonl(R"({"prompt": "a", "thinking": true})"), "needs \"messages\"");
}

TEST(RequestSchemaTest, InvalidUtf8NamesItsByteOffset) {
  const std::string body = std::string(R"({"prompt": "ab)") + "\xC3\x28" + R"("})";
  auto r = ParseJsonText(body);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "invalid UTF-8 at byte offset 14");
  auto truncated = ParseJsonText(std::string(R"({"prompt": ")") + "\xE2\x82");
  ASSERT_FALSE(truncated.ok());
  EXPECT_NE(truncated.status().message().find("invalid UTF-8 at byte offset 12"),
            std::string::npos);
}

TEST(RequestSchemaTest, MalformedAndDeepJson) {
  auto bad = ParseJsonText(R"({"prompt": )");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("not valid JSON"), std::string::npos);
  auto deep = ParseJsonText(std::string(100000, '[') + std::string(100000, ']'));
  ASSERT_FALSE(deep.ok());
  EXPECT_NE(deep.status().message().find("nested deeper than 64"), std::string::npos);
  // Brackets inside strings do not count.
  EXPECT_TRUE(ParseJsonText("{\"prompt\": \"" + std::string(1000, '[') + "\"}").ok());
}

// The output constraint keys go to one function: structured output reads response_format and
// structured_outputs (property order from the ordered body); a forced tool call is not supported.
TEST(RequestSchemaTest, OutputConstraintsAreOneFunction) {
  const std::string m = R"("messages": [{"role": "user", "content": "Hi"}])";
  auto obj = Chat("{" + m + R"(, "response_format": {"type": "json_object"}})");
  ASSERT_TRUE(obj.ok()) << obj.status().ToString();
  EXPECT_EQ(obj->sampling.structured_outputs.kind, structured::ConstraintKind::kJsonObject);
  auto re = Chat("{" + m + R"(, "structured_outputs": {"regex": "a+"}})");
  ASSERT_TRUE(re.ok()) << re.status().ToString();
  EXPECT_EQ(re->sampling.structured_outputs.kind, structured::ConstraintKind::kRegex);
  EXPECT_EQ(re->sampling.structured_outputs.text, "a+");
  ExpectError(Chat("{" + m + R"(, "response_format": {"type": "yaml"}})"), "response_format");
  // A forced tool call is a tool-call constraint over the tools (kept in the body's own order).
  const std::string tools =
      R"("tools": [{"type": "function", "function": {"name": "f", "parameters": {"type":
         "object", "properties": {"zeta": {"type": "integer"}, "alpha": {"type": "string"}}}}},
         {"type": "function", "function": {"name": "g"}}])";
  const std::string required = "{" + m + ", " + tools + R"(, "tool_choice": "required"})";
  const auto required_ordered = nlohmann::ordered_json::parse(required);
  auto forced = ParseRequest(json::parse(required), Kind::kChat, Request{}, &required_ordered);
  ASSERT_TRUE(forced.ok()) << forced.status().ToString();
  const auto& spec = forced->sampling.structured_outputs;
  EXPECT_EQ(spec.kind, structured::ConstraintKind::kToolCalls);
  EXPECT_LT(spec.text.find("zeta"), spec.text.find("alpha")) << spec.text;
  EXPECT_EQ(json::parse(spec.text)["name"], "");
  EXPECT_EQ(json::parse(spec.text)["parallel"], true);
  auto named = Chat("{" + m + ", " + tools + R"(, "parallel_tool_calls": false,
                    "tool_choice": {"type": "function", "function": {"name": "g"}}})");
  ASSERT_TRUE(named.ok()) << named.status().ToString();
  EXPECT_EQ(json::parse(named->sampling.structured_outputs.text)["name"], "g");
  EXPECT_EQ(json::parse(named->sampling.structured_outputs.text)["parallel"], false);
  // Strict tools under tool_choice auto constrain the answer's calls; not with tool_choice none
  // or another constraint.
  const std::string strict_tools =
      R"("tools": [{"type": "function", "function": {"name": "f", "strict": true}}])";
  auto strict = Chat("{" + m + ", " + strict_tools + "}");
  ASSERT_TRUE(strict.ok()) << strict.status().ToString();
  EXPECT_EQ(strict->sampling.structured_outputs.kind, structured::ConstraintKind::kToolCalls);
  EXPECT_EQ(json::parse(strict->sampling.structured_outputs.text)["optional"], true);
  EXPECT_FALSE(Chat("{" + m + ", " + tools + "}")->sampling.structured_outputs.active());
  EXPECT_FALSE(Chat("{" + m + ", " + strict_tools + R"(, "tool_choice": "none"})")
                   ->sampling.structured_outputs.active());
  EXPECT_EQ(Chat("{" + m + ", " + strict_tools + R"(, "response_format": {"type": "json_object"}})")
                ->sampling.structured_outputs.kind,
            structured::ConstraintKind::kJsonObject);
  // What stays refused: no tools, a name that is not a tool, two constraints, bad tools.
  ExpectError(Chat("{" + m + R"(, "tool_choice": "required"})"), "needs a non-empty \"tools\"");
  ExpectError(Chat("{" + m + R"(, "tools": [], "tool_choice": "required"})"),
              "needs a non-empty \"tools\"");
  ExpectError(Chat("{" + m + ", " + tools + R"(, "tool_choice": {"type": "function",
                                 "function": {"name": "h"}}})"),
              "names the function \"h\", which is not in \"tools\"");
  ExpectError(Chat("{" + m + ", " + tools + R"(, "tool_choice": "required",
                   "response_format": {"type": "json_object"}})"),
              "cannot be combined with another output constraint (json_object)");
  ExpectError(Chat("{" + m + R"(, "tools": [{"type": "function", "function": {}}],
                   "tool_choice": "required"})"),
              "needs a string \"name\"");
  ExpectError(Chat("{" + m + R"(, "tool_choice": {"type": "function", "function": {}}})"),
              "\"tool_choice\" must be");
  ExpectError(Chat("{" + m + R"(, "tool_choice": "sometimes"})"), "\"tool_choice\" must be");
  auto none = Chat("{" + m + R"(, "tool_choice": "none"})");
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(none->tool_choice, ToolChoice::kNone);
  auto c = ParseOutputConstraint(json::parse(R"({"response_format": {"type": "text"}})"));
  ASSERT_TRUE(c.ok());
  EXPECT_FALSE(c->active());
  // The ordered body keeps the schema's property order.
  const std::string body =
      R"({"response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema":
         {"type": "object", "properties": {"zeta": {"type": "integer"}, "alpha": {"type": "integer"}}}}}})";
  const auto ordered = nlohmann::ordered_json::parse(body);
  auto kept = ParseOutputConstraint(json::parse(body), &ordered);
  ASSERT_TRUE(kept.ok()) << kept.status().ToString();
  EXPECT_LT(kept->text.find("zeta"), kept->text.find("alpha")) << kept->text;
}

}  // namespace
}  // namespace dsinfer::request
