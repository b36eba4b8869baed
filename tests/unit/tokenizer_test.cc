// Tokenizer unit tests on a small synthetic tokenizer.json: UTF-8 repair, the byte-level alphabet,
// pre-tokenizer regex translation, BPE merges, added tokens, the incremental detokenizer and stop
// strings. (HF parity on real data is the tokenizer_hf_oracle test.)
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <random>

#include "tokenizer/byte_level.h"
#include "tokenizer/incremental_detokenizer.h"
#include "tokenizer/pre_tokenizer.h"
#include "tokenizer/stop_string_matcher.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"

namespace dsinfer::tokenizer {
namespace {

// Bytes are ids 0..255; merges "h e" -> 256, "l l" -> 257, "he ll" -> 258, "Ġ w" -> 259;
// added tokens <|end|> = 300 (special) and <x> = 301.
std::string TinyTokenizerJson() {
  nlohmann::json vocab = nlohmann::json::object();
  for (int b = 0; b < 256; ++b) vocab[BytesToByteLevel(std::string(1, static_cast<char>(b)))] = b;
  vocab["he"] = 256;
  vocab["ll"] = 257;
  vocab["hell"] = 258;
  vocab[BytesToByteLevel(" w")] = 259;
  nlohmann::json j;
  j["model"] = {{"type", "BPE"}, {"vocab", vocab},
                {"merges", {"h e", "l l", "he ll", BytesToByteLevel(" ") + " w"}}};
  j["pre_tokenizer"] = {
      {"type", "Sequence"},
      {"pretokenizers",
       {{{"type", "Split"}, {"pattern", {{"Regex", "\\p{N}{1,3}"}}}, {"behavior", "Isolated"}, {"invert", false}},
        {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", true}}}}};
  j["added_tokens"] = {{{"id", 300}, {"content", "<|end|>"}, {"special", true}},
                       {{"id", 301}, {"content", "<x>"}, {"special", false}}};
  return j.dump();
}

std::unique_ptr<Tokenizer> Tiny() {
  auto t = Tokenizer::FromJson(TinyTokenizerJson());
  EXPECT_TRUE(t.ok()) << t.status().ToString();
  return std::move(t).value();
}

TEST(Utf8Test, RepairReplacesMaximalSubparts) {
  EXPECT_TRUE(IsValidUtf8("h\xC3\xA9llo \xF0\x9F\x98\x80"));
  EXPECT_EQ(RepairUtf8("a\x80" "b"), "a\xEF\xBF\xBD" "b");
  EXPECT_EQ(RepairUtf8("\xE2\x82"), "\xEF\xBF\xBD");                        // truncated: one U+FFFD
  EXPECT_EQ(RepairUtf8("\xED\xA0\x80"), "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");  // surrogate
  EXPECT_EQ(RepairUtf8("\xF0\x9F\x98x"), "\xEF\xBF\xBDx");
  EXPECT_EQ(FindInvalidUtf8("abcdefghij\xFF"), 10u);
}

TEST(ByteLevelTest, Gpt2Alphabet) {
  EXPECT_EQ(BytesToByteLevel(" \n"), "\xC4\xA0\xC4\x8A");  // ĠĊ
  EXPECT_EQ(ByteLevelToBytes("\xC4\xA0" "a"), " a");
  EXPECT_FALSE(ByteLevelToBytes("\xEF\xBD\x9C").has_value());  // ｜ is not in the alphabet
  for (int b = 0; b < 256; ++b) EXPECT_EQ(CodePointToByte(ByteToCodePoint(static_cast<uint8_t>(b))), b);
}

TEST(PreTokenizerTest, WhitespaceMeansUnicodeWhiteSpace) {
  EXPECT_EQ(PreTokenizer::TranslateRegex(R"(\s+(?!\S)|\\s)"), R"(\p{White_Space}+(?!\P{White_Space})|\\s)");
  // \p{L} gains the Unicode 16 additions, inside and outside classes.
  EXPECT_NE(PreTokenizer::TranslateRegex(R"(\p{L}+)").find("[\\p{L}\\x{"), std::string::npos);
  EXPECT_NE(PreTokenizer::TranslateRegex(R"([^\p{L}])").find("[^\\p{L}\\x{"), std::string::npos);
}

TEST(TokenizerTest, MergesAndAddedTokens) {
  auto t = Tiny();
  EXPECT_EQ(t->Encode("hello", true), (std::vector<int32_t>{258, 'o'}));
  EXPECT_EQ(t->Encode("hello world", true), (std::vector<int32_t>{258, 'o', 259, 'o', 'r', 'l', 'd'}));
  EXPECT_EQ(t->Encode("a<|end|>b<x>", true), (std::vector<int32_t>{'a', 300, 'b', 301}));
  // Plain mode never produces added-token ids.
  const auto plain = t->Encode("a<|end|>b", false);
  EXPECT_EQ(std::count(plain.begin(), plain.end(), 300), 0);
  EXPECT_EQ(t->Decode(plain), "a<|end|>b");
  EXPECT_EQ(t->Decode({'a', 300, 'b'}, /*skip_special=*/true), "ab");
  EXPECT_EQ(t->Decode({'a', 300, 'b'}), "a<|end|>b");
  EXPECT_EQ(t->Encode("12345", true), (std::vector<int32_t>{'1', '2', '3', '4', '5'}));
  EXPECT_EQ(t->TokenToId("<|end|>"), 300);
  EXPECT_FALSE(t->IsKnownId(299));
}

TEST(TokenizerTest, LongPiecesMatchShortPath) {
  auto t = Tiny();
  // 400 'l's: one piece, heap path; must equal 200 x "ll".
  const auto ids = t->Encode(std::string(400, 'l'), true);
  EXPECT_EQ(ids, std::vector<int32_t>(200, 257));
  std::string hell;
  for (int i = 0; i < 100; ++i) hell += "hell";
  EXPECT_EQ(t->Encode(hell, true), std::vector<int32_t>(100, 258));
}

TEST(TokenizerTest, RandomBytesNeverCrashAndRoundTrip) {
  auto t = Tiny();
  std::mt19937 rng(7);
  for (int iter = 0; iter < 2000; ++iter) {
    std::string s(rng() % 64, '\0');
    for (auto& c : s) c = static_cast<char>(rng() % 256);
    const auto ids = t->Encode(s, true);
    EXPECT_EQ(t->Decode(ids), RepairUtf8(s));
  }
}

TEST(TokenizerTest, LoadErrorsAreStatuses) {
  EXPECT_FALSE(Tokenizer::FromJson("{").ok());
  EXPECT_FALSE(Tokenizer::FromJson(R"({"model": {"type": "Unigram"}})").ok());
  EXPECT_EQ(Tokenizer::Load("/nonexistent/dir").status().code(), StatusCode::kNotFound);
}

TEST(IncrementalDetokenizerTest, NeverSplitsACharacter) {
  auto t = Tiny();
  const std::string text = "h\xC3\xA9 \xF0\x9F\x98\x80!<|end|>";
  const auto ids = t->Encode(text, true);
  IncrementalDetokenizer d(t.get());
  std::string all;
  for (int32_t id : ids) {
    const std::string delta = d.Add(id);
    EXPECT_TRUE(IsValidUtf8(delta));
    all += delta;
  }
  all += d.Finish();
  EXPECT_EQ(all, text);
  // A lone lead byte at the end becomes U+FFFD, as a full decode does.
  IncrementalDetokenizer d2(t.get());
  EXPECT_EQ(d2.Add(0xF0), "");
  EXPECT_EQ(d2.pending_bytes(), 1u);
  EXPECT_EQ(d2.Add('a'), "\xEF\xBF\xBD" "a");
  EXPECT_EQ(d2.Add(0xE2), "");
  EXPECT_EQ(d2.Finish(), "\xEF\xBF\xBD");
}

TEST(StopStringMatcherTest, AcrossDeltas) {
  StopStringMatcher m({"STOP", "</end>"});
  std::string out;
  for (std::string_view d : {"hello S", "TO", "xx </e", "nd> tail"}) {
    auto r = m.Push(d);
    out += r.text;
    if (r.stopped) {
      EXPECT_EQ(r.stop_index, 1);
      break;
    }
  }
  EXPECT_EQ(out, "hello STOxx ");
  EXPECT_TRUE(m.stopped());
  StopStringMatcher m2({"abc"});
  EXPECT_EQ(m2.Push("xxab").text, "xx");
  EXPECT_EQ(m2.Finish(), "ab");
}

}  // namespace
}  // namespace dsinfer::tokenizer
