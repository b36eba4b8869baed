#!/usr/bin/env python3
"""Golden prompts for the DeepSeek-V4.1 chat encoding (recipe Dialect::kV41), made with vLLM's encoder.

The oracle is vLLM's V4.1 encoder, the public reference for the V4.1 dialect (recipe-v4.md §3.10):

    vllm/tokenizers/deepseek_v41_encoding.py   the encoder proper (encode_messages, render_message)
    vllm/tokenizers/deepseek_v41.py            its serving wrapper (apply_chat_template: content
                                               parts joined by "\\n\\n", "reasoning" alias, request
                                               tools attached to the first system message)

from github.com/vllm-project/vllm at the commits in REFERENCE below. Neither file is committed here
(third-party source stays out of the repository); get them verbatim from those commits and pass
their paths. The script execs them as they are: the encoder needs only the standard library, the
wrapper gets small stand-ins for its vLLM / transformers imports (a tokenizer class with no
vocabulary; tokenize=False is always passed, so no tokenizer is ever called).

Each case renders one conversation through apply_chat_template(messages, tools=..., tokenize=False,
thinking=..., reasoning_effort=..., drop_thinking=...) ("via": "apply_chat_template"), or, for what
the wrapper refuses but the encoder handles (the latest_reminder role), through encode_messages
itself ("via": "encode_messages"), and records the prompt string, or, when the reference raises,
the exception (the C++ test then expects an error). The output JSON
(tests/data/recipe_v41_goldens.json) is read by tests/unit/recipe_v41_golden_test.cc.

Usage:
    python3 tools/recipe/make_v41_goldens.py \\
        --encoding /path/to/vllm/tokenizers/deepseek_v41_encoding.py \\
        --serving /path/to/vllm/tokenizers/deepseek_v41.py \\
        [--out tests/data/recipe_v41_goldens.json]
"""
import argparse
import hashlib
import importlib.util
import json
import os
import sys
import types

REFERENCE = {
    "repository": "github.com/vllm-project/vllm",
    "files": {
        "encoding": {"path": "vllm/tokenizers/deepseek_v41_encoding.py",
                     "commit": "6394ab4d1ab21fad703c6f9163612b5c7f9a2512"},
        "serving": {"path": "vllm/tokenizers/deepseek_v41.py",
                    "commit": "9c5b71639542eda95a0a3fa92e6802e4b4ecbdae"},
    },
}

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_OUT = os.path.join(HERE, "..", "..", "tests", "data", "recipe_v41_goldens.json")


def load_reference(encoding_path, serving_path):
    """Execs the two reference files as the package `vllm.tokenizers`, with stand-in imports."""
    def module(name, **attrs):
        m = types.ModuleType(name)
        m.__dict__.update(attrs)
        sys.modules[name] = m
        return m

    class TokenizersBackend:  # transformers' class; only subclassed, never used to tokenize
        def get_added_vocab(self):
            return {}

    module("transformers", TokenizersBackend=TokenizersBackend)
    module("vllm", __path__=[])
    module("vllm.entrypoints", __path__=[])
    module("vllm.entrypoints.chat_utils", ChatCompletionMessageParam=dict)
    pkg = module("vllm.tokenizers", __path__=[])
    module("vllm.tokenizers.hf", HfTokenizer=TokenizersBackend, get_cached_tokenizer=lambda t: t)
    module("vllm.tokenizers.protocol", TokenizerLike=object)

    loaded = {}
    for short, path in (("deepseek_v41_encoding", encoding_path), ("deepseek_v41", serving_path)):
        name = "vllm.tokenizers." + short
        spec = importlib.util.spec_from_file_location(name, path)
        mod = importlib.util.module_from_spec(spec)
        sys.modules[name] = mod
        setattr(pkg, short, mod)
        spec.loader.exec_module(mod)
        loaded[short] = mod
    return loaded["deepseek_v41"].get_deepseek_v41_tokenizer(TokenizersBackend())


# ---------------------------------------------------------------------------------------------
# The conversations.

SYS = {"role": "system", "content": "You are a helpful assistant."}
HELLO = [SYS, {"role": "user", "content": "Hello"}]

WEATHER_TOOLS = [{"type": "function", "function": {
    "name": "get_weather", "description": "Weather for a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"},
                                                    "days": {"type": "integer"}},
                   "required": ["city"]}}},
    {"type": "function", "function": {
        "name": "get_time", "description": "Local time (UTC offset)",
        "parameters": {"type": "object", "properties": {"tz": {"type": "string"}}}}}]

WEATHER_CHAT = [
    {"role": "system", "content": "You are helpful."},
    {"role": "user", "content": "Weather in Paris?"},
    {"role": "assistant", "reasoning_content": "Need the tool.", "content": "",
     "tool_calls": [{"id": "c1", "type": "function", "function": {
         "name": "get_weather", "arguments": "{\"city\": \"Paris\", \"days\": 2}"}}]},
    {"role": "tool", "tool_call_id": "c1", "content": "{\"temp\": 21}"},
    {"role": "assistant", "reasoning_content": "Got it.", "content": "It is 21°C."},
    {"role": "user", "content": "Thanks"},
]

PARALLEL_CALLS = [
    {"role": "user", "content": "Weather and time in Tokyo?"},
    {"role": "assistant", "content": "Checking both.", "tool_calls": [
        {"id": "a", "type": "function", "function": {"name": "get_weather",
                                                     "arguments": "{\"city\": \"Tokyo\"}"}},
        {"id": "b", "type": "function", "function": {"name": "get_time",
                                                     "arguments": "{\"tz\": \"Asia/Tokyo\"}"}}]},
    {"role": "tool", "tool_call_id": "b", "content": "09:00"},
    {"role": "tool", "tool_call_id": "a", "content": [{"type": "text", "text": "sunny"},
                                                      {"type": "text", "text": "25°C"}]},
    {"role": "user", "content": "And tomorrow?"},
]

MULTI_TURN = [
    SYS,
    {"role": "user", "content": "Hello"},
    {"role": "assistant", "content": "Hi there! How can I help you?", "reasoning_content": "Greeting."},
    {"role": "user", "content": "What is the capital of France?"},
    {"role": "assistant", "reasoning_content": "It is Paris.", "content": "The capital of France is Paris."},
    {"role": "user", "content": "And of Italy?"},
]

MID_SYSTEM = [
    SYS,
    {"role": "user", "content": "Hello"},
    {"role": "assistant", "content": "Hi!", "reasoning_content": "Greeting."},
    {"role": "system", "content": "From now on, answer in French."},
    {"role": "user", "content": "How are you?"},
]


def case(name, messages, thinking=False, effort=None, tools=None, drop_thinking=True, note="",
         via="apply_chat_template"):
    c = {"name": name, "via": via, "messages": messages, "tools": tools, "thinking": thinking,
         "reasoning_effort": effort, "drop_thinking": drop_thinking}
    if note:
        c["note"] = note
    return c


CASES = [
    # System prompt, user, generation prompt, thinking modes and efforts.
    case("system_user_chat", HELLO),
    case("system_user_thinking_default_effort", HELLO, thinking=True),
    case("user_only_chat", [{"role": "user", "content": "Hello"}]),
    case("user_only_thinking", [{"role": "user", "content": "Hello"}], thinking=True,
         note="the effort prompt alone opens <｜System｜>"),
    case("effort_low", HELLO, thinking=True, effort="low"),
    case("effort_high", HELLO, thinking=True, effort="high"),
    case("effort_xhigh", HELLO, thinking=True, effort="xhigh"),
    case("effort_max", HELLO, thinking=True, effort="max"),
    case("effort_numeric_1", HELLO, thinking=True, effort=1),
    case("effort_numeric_37", HELLO, thinking=True, effort=37),
    case("effort_numeric_100", HELLO, thinking=True, effort=100),
    case("effort_max_chat_mode", [{"role": "user", "content": "Hello"}], effort="max",
         note="chat mode: no effort prompt, so no <｜System｜>"),
    case("effort_invalid_word", HELLO, thinking=True, effort="extreme"),
    case("effort_numeric_0", HELLO, thinking=True, effort=0),
    case("effort_numeric_101", HELLO, thinking=True, effort=101),
    case("empty_system_content", [{"role": "system", "content": ""}, {"role": "user", "content": "x"}]),
    case("system_only", [SYS], thinking=True,
         note="a first system message is not a user turn: no generation prompt follows it"),
    # Multi-turn, dropped reasoning.
    case("multi_turn_chat", MULTI_TURN),
    case("multi_turn_thinking_drops_reasoning", MULTI_TURN, thinking=True),
    case("multi_turn_thinking_keep_reasoning", MULTI_TURN, thinking=True, drop_thinking=False),
    case("ends_with_assistant_thinking", MULTI_TURN[:5], thinking=True,
         note="a conversation ending in an assistant turn gets no generation prompt"),
    case("ends_with_assistant_chat", MULTI_TURN[:5]),
    case("reasoning_alias", [{"role": "user", "content": "a"},
                             {"role": "assistant", "content": "b", "reasoning": "r"},
                             {"role": "user", "content": "c"}], thinking=True, drop_thinking=False),
    case("assistant_null_content_and_reasoning",
         [{"role": "user", "content": "a"}, {"role": "assistant", "content": None},
          {"role": "user", "content": "c"}], thinking=True, drop_thinking=False),
    case("developer_dropped_before_last_user",
         [SYS, {"role": "developer", "content": "Be brief."}, {"role": "assistant", "content": "Yes."},
          {"role": "user", "content": "Hi"}], thinking=True),
    case("developer_last", [SYS, {"role": "developer", "content": "Be brief."}], thinking=True),
    case("developer_empty", [{"role": "developer", "content": ""}, {"role": "user", "content": "x"}]),
    # Mid-conversation system messages.
    case("mid_system_chat", MID_SYSTEM),
    case("mid_system_thinking", MID_SYSTEM, thinking=True),
    case("mid_system_thinking_keep_reasoning", MID_SYSTEM, thinking=True, drop_thinking=False),
    case("mid_system_last_thinking", MID_SYSTEM[:4], thinking=True,
         note="a mid-conversation system message is the last user turn: it opens the answer"),
    case("mid_system_last_chat", MID_SYSTEM[:4]),
    case("mid_system_then_assistant",
         [{"role": "user", "content": "q"}, {"role": "system", "content": "S2"},
          {"role": "assistant", "content": "a", "reasoning_content": "r"}], thinking=True),
    case("no_first_system_mid_system",
         [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"},
          {"role": "system", "content": "S2"}, {"role": "user", "content": "q2"}], thinking=True),
    # Merged user turns and content parts.
    case("consecutive_users_merge", [{"role": "user", "content": "One"}, {"role": "user", "content": "Two"}]),
    case("content_parts_text", [{"role": "system", "content": [{"type": "text", "text": "S1"},
                                                               {"type": "text", "text": "S2"}]},
                                {"role": "user", "content": [{"type": "text", "text": "a"},
                                                             {"type": "text", "text": "b"}]}]),
    case("content_part_image", [{"role": "user", "content": [
        {"type": "text", "text": "What is this?"},
        {"type": "image_url", "image_url": {"url": "http://x/y.png"}}]}],
        note="images are not supported by dsinfer (the reference writes <｜deepseek_image｜>)"),
    case("unknown_role", [{"role": "wizard", "content": "x"}]),
    case("latest_reminder", [SYS, {"role": "latest_reminder", "content": "2026-08-11, London"},
                             {"role": "user", "content": "Hello"}], thinking=True,
         via="encode_messages", note="not an OpenAI role (the wrapper rejects it): the encoder itself"),
    # Tools.
    case("tools_round_trip_thinking", WEATHER_CHAT, thinking=True, tools=WEATHER_TOOLS),
    case("tools_round_trip_chat", WEATHER_CHAT, tools=WEATHER_TOOLS),
    case("tools_without_system", [{"role": "user", "content": "hi"}], thinking=True, effort="max",
         tools=WEATHER_TOOLS, note="a new system message carries the tools, after the effort prompt"),
    case("tools_parallel_calls_results_sorted", PARALLEL_CALLS, thinking=True, tools=WEATHER_TOOLS),
    case("tools_results_then_user_text_merge",
         [{"role": "user", "content": "q"},
          {"role": "assistant", "content": "", "tool_calls": [
              {"id": "x", "type": "function", "function": {"name": "get_time", "arguments": "{}"}}]},
          {"role": "tool", "tool_call_id": "x", "content": "noon"},
          {"role": "user", "content": "thanks"}], tools=WEATHER_TOOLS),
    case("tool_call_arguments_variants",
         [{"role": "user", "content": "q"},
          {"role": "assistant", "content": "", "tool_calls": [
              {"id": "1", "type": "function", "function": {
                  "name": "f", "arguments": "{\"s\": \"é\\n<x>\", \"n\": 1.5, \"b\": true, \"z\": null, "
                                            "\"l\": [1, \"a\"], \"o\": {\"k\": \"v\"}}"}},
              {"id": "2", "type": "function", "function": {"name": "g", "arguments": "{}"}},
              {"id": "3", "type": "function", "function": {
                  "name": "h", "arguments": json.dumps(json.dumps({"q": "double"}))}},
              {"id": "4", "type": "function", "function": {"name": "k", "arguments": "not json"}},
              {"id": "5", "type": "function", "function": {"name": "m", "arguments": "[1, 2]"}}]},
          {"role": "user", "content": "ok"}],
         note="typed values, empty, double-encoded, non-JSON and non-object arguments"),
    case("tool_result_parts_unsupported",
         [{"role": "user", "content": "q"},
          {"role": "assistant", "content": "", "tool_calls": [
              {"id": "1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
          {"role": "tool", "tool_call_id": "1", "content": [{"type": "text", "text": "a"},
                                                            {"type": "audio", "data": "..."}]}],
         via="encode_messages",
         note="the wrapper rejects an audio part; the encoder itself writes [Unsupported audio]"),
    case("tools_with_mid_system_only",
         [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"},
          {"role": "system", "content": "S2"}, {"role": "user", "content": "q2"}], tools=WEATHER_TOOLS[1:],
         note="request tools go to the first system message, here a mid-conversation one"),
    case("system_response_format",
         [{"role": "system", "content": "S", "response_format": {
             "type": "json_schema", "json_schema": {"name": "r", "schema": {"type": "object"}}}},
          {"role": "user", "content": "q"}]),
    case("developer_with_tools_field",
         [{"role": "developer", "content": "D", "tools": WEATHER_TOOLS[:1]},
          {"role": "user", "content": "q"}], thinking=True,
         note="message-level tools on a developer message"),
    # Quick-instruction tasks and prefill.
    case("task_action_thinking", [{"role": "user", "content": "Weather?", "task": "action"}], thinking=True),
    case("task_query", [{"role": "user", "content": "Weather?", "task": "query"}]),
    case("task_title_after_assistant",
         [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello!", "task": "title"}]),
    case("task_then_assistant_no_thinking",
         [{"role": "user", "content": "Weather?", "task": "action"},
          {"role": "assistant", "content": "search", "reasoning_content": "r"}], thinking=True),
    case("assistant_wo_eos_prefill",
         [{"role": "user", "content": "Count"}, {"role": "assistant", "content": "1, 2,", "wo_eos": True}],
         note="wo_eos: the last assistant turn stays open"),
]


def render(tok, c):
    if c["via"] == "encode_messages":  # the encoder proper, on messages as they are
        enc = sys.modules["vllm.tokenizers.deepseek_v41_encoding"]
        try:
            return {"prompt": enc.encode_messages(
                c["messages"], thinking_mode="thinking" if c["thinking"] else "chat",
                drop_thinking=c["drop_thinking"], reasoning_effort=c["reasoning_effort"])}
        except Exception as e:
            return {"error": type(e).__name__ + ": " + str(e)}
    kwargs = {"tokenize": False, "thinking": c["thinking"], "drop_thinking": c["drop_thinking"]}
    if c["reasoning_effort"] is not None:
        kwargs["reasoning_effort"] = c["reasoning_effort"]
    try:
        return {"prompt": tok.apply_chat_template(c["messages"], tools=c["tools"], **kwargs)}
    except Exception as e:  # the reference's own error: recorded, the C++ side must fail too
        return {"error": type(e).__name__ + ": " + str(e)}


def sha256(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--encoding", required=True, help="path of vllm/tokenizers/deepseek_v41_encoding.py")
    ap.add_argument("--serving", required=True, help="path of vllm/tokenizers/deepseek_v41.py")
    ap.add_argument("--out", default=DEFAULT_OUT)
    args = ap.parse_args()

    tok = load_reference(args.encoding, args.serving)
    ref = json.loads(json.dumps(REFERENCE))
    for key, path in (("encoding", args.encoding), ("serving", args.serving)):
        with open(path, encoding="utf-8") as f:
            ref["files"][key]["characters"] = len(f.read())
        ref["files"][key]["sha256"] = sha256(path)
    cases = []
    for c in CASES:
        out = dict(c)
        out.update(render(tok, c))
        cases.append(out)
    doc = {
        "description": "DeepSeek-V4.1 chat prompts rendered by vLLM's reference encoder "
                       "(apply_chat_template, tokenize=False); made by tools/recipe/make_v41_goldens.py",
        "reference": ref,
        "cases": cases,
    }
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump(doc, f, ensure_ascii=False, indent=1)
        f.write("\n")
    n_err = sum("error" in c for c in cases)
    print(f"wrote {len(cases)} cases ({n_err} reference errors) to {os.path.relpath(args.out)}")


if __name__ == "__main__":
    main()
