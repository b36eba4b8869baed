// structured/: the grammar builder, the regex / JSON schema / GBNF compilers, the automaton's
// token masks (checked against a brute-force walk of every token), and the matcher (advance,
// rollback, EOS only where accepting).
#include <gtest/gtest.h>

#include <condition_variable>
#include <mutex>
#include <random>
#include <regex>
#include <thread>

#include "structured/constraint_compiler.h"
#include "structured/grammar.h"
#include "structured/matcher.h"
#include "structured_test_util.h"

namespace dsinfer {
namespace {

using structured::ConstraintKind;
using testing::Compile;
using testing::Matches;
using testing::Spec;

TEST(StructuredRegexTest, FullMatchBasics) {
  auto a = Compile(Spec(ConstraintKind::kRegex, "(ab|cd)*x{2,3}[0-9]?"));
  EXPECT_TRUE(Matches(*a, "xx"));
  EXPECT_TRUE(Matches(*a, "abcdxxx7"));
  EXPECT_FALSE(Matches(*a, "abx"));
  EXPECT_FALSE(Matches(*a, "xxxx"));
  EXPECT_FALSE(Matches(*a, "abcdxx77"));
}

TEST(StructuredRegexTest, ClassesEscapesAndUnicode) {
  auto a = Compile(Spec(ConstraintKind::kRegex, "[^a-c\\d]\\w+\\.\\s日?"));
  EXPECT_TRUE(Matches(*a, "zab_9. "));
  EXPECT_TRUE(Matches(*a, "Zx.\t日"));
  EXPECT_FALSE(Matches(*a, "éx. "));  // a negated class of shorthands matches ASCII only
  EXPECT_FALSE(Matches(*a, "ax. "));
  EXPECT_FALSE(Matches(*a, "5x. "));
}

TEST(StructuredRegexTest, UnsupportedAndBadPatternsAreErrors) {
  for (const char* p :
       {"(a)\\1", "a(?=b)", "\\bword", "a{3,2}", "(ab", "ab)", "[z-a]", "*a", "\\p{L}"}) {
    auto a =
        structured::CompileConstraint(Spec(ConstraintKind::kRegex, p), testing::TestVocabulary());
    EXPECT_FALSE(a.ok()) << p;
  }
  EXPECT_FALSE(structured::CompileConstraint(Spec(ConstraintKind::kRegex, "a{20000}"),
                                             testing::TestVocabulary())
                   .ok());
  // A small grammar with a huge language compiles, and running it hits the state bound: an error
  // for the request, not a hang or an out-of-memory.
  auto big = Compile(Spec(ConstraintKind::kRegex, "((a{1000}){1000}){1000}"));
  structured::Matcher m(big);
  Status st;
  for (int i = 0; i < 70000 && st.ok(); ++i) st = m.Advance('a');
  EXPECT_EQ(st.code(), StatusCode::kResourceExhausted) << st.ToString();
}

// Property test: the automaton agrees with std::regex (ECMAScript) on random strings.
TEST(StructuredRegexTest, AgreesWithStdRegexOnRandomStrings) {
  const std::vector<std::string> patterns = {"a*b+c?",
                                             "(ab|a)(c|bcd)*",
                                             "[a-c]{2,4}d",
                                             "x(y|z){0,2}[^xyz]",
                                             "(a|b|)*c",
                                             "[0-9]+(\\.[0-9]{1,2})?",
                                             "-?(0|[1-9][0-9]*)",
                                             "((ab)?c)+",
                                             "[ab]*a[ab]{2}",
                                             "(a+|b+)*d"};
  std::mt19937 rng(1);
  const std::string alphabet = "abcdxyz019.-";
  for (const auto& p : patterns) {
    auto a = Compile(Spec(ConstraintKind::kRegex, p));
    const std::regex re(p, std::regex::ECMAScript);
    for (int i = 0; i < 400; ++i) {
      std::string s;
      const int len = static_cast<int>(rng() % 8);
      for (int k = 0; k < len; ++k) s += alphabet[rng() % alphabet.size()];
      EXPECT_EQ(Matches(*a, s), std::regex_match(s, re)) << p << " on '" << s << "'";
    }
    // Random walks through the automaton end in strings std::regex accepts.
    for (int i = 0; i < 100; ++i) {
      int32_t c = a->initial();
      std::string s;
      for (int step = 0; step < 12; ++step) {
        if (a->accepting(c) && rng() % 3 == 0) break;
        std::vector<char> next;
        for (char ch : alphabet) {
          if (a->AdvanceBytes(c, std::string(1, ch)) != structured::Pda::kDead) next.push_back(ch);
        }
        if (next.empty()) break;
        const char ch = next[rng() % next.size()];
        s += ch;
        c = a->AdvanceBytes(c, std::string(1, ch));
      }
      if (a->accepting(c)) {
        EXPECT_TRUE(std::regex_match(s, re)) << p << " generated '" << s << "'";
      }
    }
  }
}

// Checks the matcher's mask against advancing a copy of it by every token (EOS: allowed exactly
// when accepting); returns the allowed ids, EOS included.
std::vector<int32_t> AllowedByBruteForce(const structured::Matcher& m,
                                         const structured::Vocabulary& v, const std::string& what) {
  const auto mask = m.Mask();
  std::vector<int32_t> allowed;
  for (int32_t id = 0; id < v.size(); ++id) {
    bool brute = false;
    if (id == v.eos_id()) {
      brute = m.IsAccepting();
    } else if (id < v.num_ids() && !v.bytes(id).empty()) {
      structured::Matcher probe = m;
      brute = probe.Advance(id).ok();
    }
    EXPECT_EQ(structured::MaskHas(mask->data(), id), brute) << what << ": token " << id;
    if (brute) allowed.push_back(id);
  }
  return allowed;
}

TEST(StructuredMaskTest, MaskEqualsBruteForceOverEveryToken) {
  auto a = Compile(Spec(ConstraintKind::kJsonSchema,
                        R"({"type":"object","properties":{"name":{"type":"string","maxLength":3},
                            "ok":{"type":"boolean"}},"required":["name"]})"));
  const auto& v = a->vocab();
  std::mt19937 rng(3);
  structured::Matcher m(a);
  for (int step = 0; step < 40 && !m.IsCompleted(); ++step) {
    const std::vector<int32_t> allowed = AllowedByBruteForce(m, v, "step " + std::to_string(step));
    ASSERT_FALSE(::testing::Test::HasFailure());
    ASSERT_FALSE(allowed.empty());
    ASSERT_TRUE(m.Advance(allowed[rng() % allowed.size()]).ok());
  }
}

// Long bounded repetitions share masks between positions (Pda::Canonical): check every mask of
// random walks through them against every token, long tokens included.
TEST(StructuredMaskTest, BoundedRepetitionMasksEqualBruteForce) {
  const std::vector<std::string> schemas = {
      R"({"type":"array","items":{"type":"string","minLength":20,"maxLength":60},"minItems":2,"maxItems":3})",
      R"({"type":"array","items":{"enum":["a","bb"]},"minItems":19,"maxItems":45})",
      R"({"type":"string","pattern":"^[ab]{30,70}\"?c{0,40}$"})",
  };
  for (const auto& schema : schemas) {
    auto a = Compile(Spec(ConstraintKind::kJsonSchema, schema));
    const auto& v = a->vocab();
    for (uint32_t seed = 0; seed < 6; ++seed) {
      std::mt19937 rng(seed);
      structured::Matcher m(a);
      for (int step = 0; step < 120 && !m.IsCompleted(); ++step) {
        std::vector<int32_t> allowed =
            AllowedByBruteForce(m, v, schema + ": step " + std::to_string(step));
        ASSERT_FALSE(::testing::Test::HasFailure());
        std::erase(allowed, v.eos_id());
        if (allowed.empty()) break;
        // Prefer long tokens half of the time, so the walks cross the window's edge.
        int32_t pick = allowed[rng() % allowed.size()];
        if (rng() % 2) {
          for (int32_t id : allowed) {
            if (v.bytes(id).size() > v.bytes(pick).size()) pick = id;
          }
        }
        ASSERT_TRUE(m.Advance(pick).ok());
      }
    }
  }
}

// A vocabulary rich in the tokens that cross the boundaries the mask shortcuts rely on: every
// byte; words of 1..20 letters (bounded strings' need); quotes, escapes and separators before,
// inside and after text (tokens that leave a string and go on in its context); multi-byte
// characters whole and split.
std::shared_ptr<const structured::Vocabulary> RichVocabulary() {
  static const auto vocab = [] {
    std::vector<std::string> bytes;
    for (int b = 0; b < 256; ++b) bytes.push_back(std::string(1, static_cast<char>(b)));
    for (int n = 2; n <= 20; ++n) {
      bytes.push_back(std::string(static_cast<size_t>(n), 'a'));
      std::string s(static_cast<size_t>(n - 1), 'b');
      bytes.push_back(s.append(1, 'c'));
      s.assign(static_cast<size_t>(n - 1), 'a');
      bytes.push_back(s.append(1, '"'));
      s.assign(1, '"');
      bytes.push_back(s.append(static_cast<size_t>(n - 1), 'c'));
    }
    for (const char* piece : {"ab",      "ba",     "abc",          "aab",
                              "a\",",    "a\"}",   "ab\"]",        "\",\"",
                              "\", \"",  "\":",    "\": \"",       "\":\"",
                              "\"}",     "\"]",    "\"],",         "\"},",
                              "\"}]",    ",\"",    ", \"",         "{\"",
                              "[\"",     "[{\"",   "\"\"",         "\"a\"",
                              "\\n",     "\\\"",   "\\\\",         "\\u00e9",
                              "\\u",     "a\\n",   "x\\\"y",       "12",
                              "123",     "-1",     "0.5",          "e+",
                              "true",    "false",  "null",         "  ",
                              "\n ",     "@",      "a@b",          ".com",
                              "ab.c",    "é",      "éa",           "aé\"",
                              "α",       "αβ",     "αβγ",          "αβγ\"",
                              "\xce",    "\xb1",   "\xce\xb1\xce", "日本",
                              "本\"",    "\x01",   "a\x01",        "label",
                              "\"label", "\":{\"", "children",     "\"children\":[",
                              "x",       "xx",     "xxx",          "+1",
                              "1234567", "-",      "ab-"}) {
      bytes.push_back(piece);
    }
    bytes.push_back("");  // EOS
    const int32_t eos = static_cast<int32_t>(bytes.size() - 1);
    return structured::Vocabulary::Create(bytes, static_cast<int64_t>(bytes.size()), eos);
  }();
  return vocab;
}

// The token classes shared between configurations (local keys, the positions of a bounded
// string, the context check of tokens that close a string) must never change a mask: random
// generations over constraints that exercise each shortcut and the cases where it must not
// apply (ambiguous or non-prefix-free repetitions, minLength, nested and recursive contexts),
// every step's mask checked against advancing by every token. One automaton per constraint
// across the walks, so classes computed in one context serve the others.
// No compile-time precomputation (TokenAutomaton::Precompute): the tests that count walks see
// each one happen where a mask first needs it.
structured::CompileOptions Lazy() {
  structured::CompileOptions o;
  o.precompute_us = 0;
  return o;
}

TEST(StructuredMaskTest, SharedTokenClassesEqualBruteForceOnRandomWalks) {
  struct Case {
    ConstraintKind kind;
    std::string text;
  };
  const std::vector<Case> cases = {
      {ConstraintKind::kJsonSchema,
       R"({"type":"object","properties":{"a":{"type":"string","maxLength":5},
           "b":{"type":"array","items":{"type":"string","minLength":2,"maxLength":12},"maxItems":4},
           "c":{"type":"string"},"d":{"type":"string","maxLength":30}},"required":["a","b"]})"},
      {ConstraintKind::kJsonSchema,
       R"({"$defs":{"n":{"type":"object","properties":{"label":{"type":"string","maxLength":6},
           "children":{"type":"array","items":{"$ref":"#/$defs/n"},"maxItems":2}},"required":["label"],
           "additionalProperties":false}},"$ref":"#/$defs/n"})"},
      {ConstraintKind::kJsonSchema, R"({"type":"string","maxLength":40})"},
      {ConstraintKind::kJsonSchema, R"({"type":"string","minLength":3,"maxLength":25})"},
      {ConstraintKind::kJsonSchema,
       R"({"type":"array","items":{"type":"string","minLength":9,"maxLength":30},"maxItems":3})"},
      {ConstraintKind::kJsonSchema,
       R"({"type":"array","items":{"anyOf":[{"type":"string","maxLength":3},{"type":"string","maxLength":8}]},"maxItems":3})"},
      {ConstraintKind::kJsonSchema, R"({"type":"string","pattern":"^[a-c]{2,30}x?$"})"},
      {ConstraintKind::kJsonSchema, R"({"type":"string","pattern":"^[α-ω]{1,20}$"})"},
      {ConstraintKind::kJsonSchema,
       R"({"type":"object","properties":{"e":{"type":"string","format":"email"},
           "n":{"type":"integer","minimum":-5,"maximum":1234}},"required":["e","n"]})"},
      {ConstraintKind::kJsonSchema,
       R"({"type":"array","items":{"type":"array","items":{"type":"string","maxLength":4},"maxItems":3},"maxItems":3})"},
      {ConstraintKind::kRegex, R"((ab|a){1,12}c)"},  // not prefix-free: "a" starts "ab"
      {ConstraintKind::kRegex, R"((a|aa){0,10}"b)"},
      {ConstraintKind::kRegex, R"("[a-c]{0,6}"(,"[a-c]{0,6}"){0,3})"},
      {ConstraintKind::kRegex, R"(x{3,19}a{0,17})"},
      {ConstraintKind::kRegex, R"((a{0,3}b)*c)"},  // leaves the repetition and comes back
      {ConstraintKind::kRegex, R"(("[a-c]{0,6}")*x)"},
      {ConstraintKind::kRegex, R"([a-c]{0,9}[ab]@[a-c]{1,5})"},  // [a-c]{0,n}[ab]: ambiguous end
      // The same shapes with chains long enough to be families (Pda::kMinFamilyLength).
      {ConstraintKind::kRegex, R"((a{0,9}b)*c)"},
      {ConstraintKind::kRegex, R"(("[a-c]{0,9}")*x)"},
      {ConstraintKind::kRegex, R"("[a-c]{0,8}"(,"[a-c]{0,8}"){0,3})"},
      {ConstraintKind::kRegex,
       R"([a-c]([a-c-]{0,9}[a-c])?(\.[a-c]([a-c-]{0,9}[a-c])?){0,3}\.[a-c]{2,6})"},
      {ConstraintKind::kGrammar,
       "root ::= \"[\" item (\",\" item){0,5} \"]\"\nitem ::= \"\\\"\" [a-c ]{0,10} \"\\\"\"\n"},
      {ConstraintKind::kJsonObject, ""},
      // Keys whose parse reaches its context after a few characters (a two-character string,
      // five digits): the tokens past the key's frames, checked once per context.
      {ConstraintKind::kJsonSchema,
       R"({"type":"array","items":{"type":"object","properties":{"z":{"type":"string","pattern":"^[0-9]{2}$"},
           "k":{"type":"string","minLength":2,"maxLength":2}},"required":["z","k"]},"maxItems":3})"},
  };
  const auto vocab = RichVocabulary();
  for (const Case& c : cases) {
    structured::ConstraintSpec spec = Spec(c.kind, c.text);
    auto compiled = structured::CompileConstraint(spec, vocab);
    ASSERT_TRUE(compiled.ok()) << c.text << ": " << compiled.status().ToString();
    auto a = *compiled;
    for (uint32_t seed = 0; seed < 12; ++seed) {
      std::mt19937 rng(seed);
      structured::Matcher m(a);
      for (int step = 0; step < 80 && !m.IsCompleted(); ++step) {
        std::vector<int32_t> allowed = AllowedByBruteForce(
            m, *vocab, c.text + ": seed " + std::to_string(seed) + " step " + std::to_string(step));
        ASSERT_FALSE(::testing::Test::HasFailure());
        std::erase(allowed, vocab->eos_id());
        if (allowed.empty()) break;
        // Any token, the longest, one with a quote (leaves a string), or one without (stays).
        int32_t pick = allowed[rng() % allowed.size()];
        const uint32_t how = seed % 3 == 0 ? 2 : rng() % 4;  // some walks stay in strings
        std::vector<int32_t> quoted[2];
        for (int32_t id : allowed) {
          const std::string& b = vocab->bytes(id);
          if (how == 1 && b.size() > vocab->bytes(pick).size()) pick = id;
          quoted[b.find('"') != std::string::npos].push_back(id);
        }
        if (how >= 2 && !quoted[how - 2].empty()) {
          pick = quoted[how - 2][rng() % quoted[how - 2].size()];
        }
        ASSERT_TRUE(m.Advance(pick).ok());
      }
    }
  }
}

// The positions of a bounded string share one classification walk (Pda::Family): a walk per
// position would be one whole-trie walk per character.
TEST(StructuredMaskTest, BoundedStringPositionsShareOneWalk) {
  auto compiled = structured::CompileConstraint(
      Spec(
          ConstraintKind::kJsonSchema,
          R"({"type":"array","items":{"type":"string","maxLength":30},"minItems":3,"maxItems":3})"),
      RichVocabulary(), Lazy());
  ASSERT_TRUE(compiled.ok());
  auto a = *compiled;
  const int32_t a_id = 'a';
  structured::Matcher m(a);
  for (char c : std::string("[\"")) ASSERT_TRUE(m.Advance(static_cast<uint8_t>(c)).ok());
  for (int item = 0; item < 3; ++item) {
    for (int i = 0; i < 30; ++i) {
      ASSERT_TRUE(structured::MaskHas(m.Mask()->data(), a_id));
      ASSERT_TRUE(m.Advance(a_id).ok());
    }
    EXPECT_FALSE(structured::MaskHas(m.Mask()->data(), a_id));  // 30 characters: the maximum
    for (char c : std::string(item < 2 ? "\",\"" : "\"]")) {
      ASSERT_TRUE(m.Advance(static_cast<uint8_t>(c)).ok());
    }
  }
  EXPECT_TRUE(m.IsAccepting());
  const auto stats = a->stats();
  EXPECT_GT(stats.mask_misses, 90);
  EXPECT_LE(stats.config_walks + stats.key_walks, 12) << "misses " << stats.mask_misses;
}

// A character class is one byte set (its ranges merged), so a bounded repetition of it is a
// family of positions (Pda::Family) even when the class has several ranges and the repetition
// ends in another class, as in the email format's local part.
TEST(StructuredMaskTest, CharacterClassRepetitionPositionsShareOneWalk) {
  structured::GrammarBuilder b;
  const structured::Element merged = b.Choice(
      {{b.Bytes(structured::ByteSet::Range('a', 'z'))}, {b.Byte('.')}, {b.Byte('-')}}, "class");
  ASSERT_FALSE(merged.is_rule);
  auto compiled = structured::CompileConstraint(
      Spec(ConstraintKind::kJsonSchema,
           R"({"type":"string","pattern":"^[a-z0-9._+-]{0,30}[a-z0-9]@x$"})"),
      RichVocabulary(), Lazy());
  ASSERT_TRUE(compiled.ok());
  auto a = *compiled;
  structured::Matcher m(a);
  ASSERT_TRUE(m.Advance('"').ok());
  for (int i = 0; i < 30; ++i) {
    ASSERT_TRUE(structured::MaskHas(m.Mask()->data(), 'a'));
    ASSERT_TRUE(m.Advance(i % 7 == 3 ? '.' : 'a').ok());
  }
  ASSERT_TRUE(m.Advance('a').ok());
  EXPECT_FALSE(structured::MaskHas(m.Mask()->data(), 'a'));  // 31 characters: the maximum
  for (char c : std::string("@x\"")) ASSERT_TRUE(m.Advance(static_cast<uint8_t>(c)).ok());
  EXPECT_TRUE(m.IsAccepting());
  const auto stats = a->stats();
  EXPECT_GT(stats.mask_misses, 20);
  EXPECT_LE(stats.config_walks + stats.key_walks, 6) << "misses " << stats.mask_misses;
}

// A position inside a repetition nested in another (a hostname label inside (\.label){0,3})
// is a family of the inner repetition: Pda::Family tries each stack's chain, not only the
// first stack's (here the enclosing, not prefix-free one).
TEST(StructuredMaskTest, NestedRepetitionPositionsShareOneWalk) {
  auto compiled = structured::CompileConstraint(
      Spec(ConstraintKind::kJsonSchema, R"({"type":"string","format":"hostname"})"),
      RichVocabulary(), Lazy());
  ASSERT_TRUE(compiled.ok());
  auto a = *compiled;
  structured::Matcher m(a);
  for (char c : std::string("\"ab.")) ASSERT_TRUE(m.Advance(static_cast<uint8_t>(c)).ok());
  const auto before = a->stats();
  for (int i = 0; i < 22; ++i) {
    ASSERT_TRUE(structured::MaskHas(m.Mask()->data(), 'x'));
    ASSERT_TRUE(m.Advance(i % 5 == 2 ? '-' : 'x').ok());
  }
  EXPECT_FALSE(structured::MaskHas(m.Mask()->data(), 'x'));  // 22 characters: the maximum
  for (char c : std::string(".a\"")) ASSERT_TRUE(m.Advance(static_cast<uint8_t>(c)).ok());
  EXPECT_TRUE(m.IsAccepting());
  const auto stats = a->stats();
  EXPECT_GT(stats.mask_misses - before.mask_misses, 20);
  EXPECT_LE(stats.config_walks + stats.key_walks - before.config_walks - before.key_walks, 6)
      << "misses " << stats.mask_misses - before.mask_misses;
}

// The bounded strings of a schema are chains of one element (a JSON character) of different
// lengths, ending in the same closing quote: one family walk (Pda::RepresentativeChain,
// Pda::CanonicalExit) serves all of them, minLength positions included; every mask checked
// against advancing by every token.
TEST(StructuredMaskTest, BoundedStringsOfDifferentLengthsShareOneWalk) {
  auto compiled = structured::CompileConstraint(
      Spec(ConstraintKind::kJsonSchema,
           R"({"type":"object","properties":{"a":{"type":"string","maxLength":9},
               "b":{"type":"string","maxLength":30},"c":{"type":"string","minLength":3,"maxLength":20},
               "d":{"type":"array","items":{"type":"string","maxLength":12},"maxItems":2}},
               "required":["a","b","c","d"],"additionalProperties":false})"),
      RichVocabulary(), Lazy());
  ASSERT_TRUE(compiled.ok());
  auto a = *compiled;
  const auto& v = a->vocab();
  structured::Matcher m(a);
  const std::string text =
      R"({"a":"xxxxxxxxx","b":"xxαxxxxxxxxxxxxxxxxxxxxxxxxxx","c":"xxxxxxxxxxxxxxxxxxx","d":["xxxxxxxxxxxx","xx"]})";
  for (size_t i = 0; i < text.size(); ++i) {
    AllowedByBruteForce(m, v, "byte " + std::to_string(i));
    ASSERT_FALSE(::testing::Test::HasFailure());
    ASSERT_TRUE(m.Advance(static_cast<uint8_t>(text[i])).ok()) << i;
  }
  EXPECT_TRUE(m.IsAccepting());
  EXPECT_EQ(a->stats().family_walks, 1);
}

// The labels of an email's domain are positions of one repetition in different contexts (which
// label of (\.label){0,3} this is, whether a top-level domain parse is alive): the family's
// canonical key holds the exit's frame alone (the context is checked per position), so every
// label shares one walk per chain; every mask checked against advancing by every token.
TEST(StructuredMaskTest, RepetitionPositionsInDifferentContextsShareOneWalk) {
  auto compiled = structured::CompileConstraint(
      Spec(ConstraintKind::kJsonSchema,
           R"({"type":"array","items":{"type":"string","format":"email"},"maxItems":3})"),
      RichVocabulary(), Lazy());
  ASSERT_TRUE(compiled.ok());
  auto a = *compiled;
  const auto& v = a->vocab();
  structured::Matcher m(a);
  for (char c : std::string("[\"ab@")) ASSERT_TRUE(m.Advance(static_cast<uint8_t>(c)).ok());
  int64_t walks = 0;
  for (int item = 0; item < 3; ++item) {
    const std::string domain = item == 0 ? "xxxxxxxxxx.x-xxxxxxxx.xxxxxxxxxx.abc"
                                         : "xxx-xxxxxxxxx.xxxxxxxxxx.xxxxxxxxx.ab";
    for (size_t i = 0; i < domain.size(); ++i) {
      AllowedByBruteForce(m, v, "item " + std::to_string(item) + " byte " + std::to_string(i));
      ASSERT_FALSE(::testing::Test::HasFailure());
      ASSERT_TRUE(m.Advance(static_cast<uint8_t>(domain[i])).ok());
    }
    const auto stats = a->stats();
    if (item == 0) walks = stats.family_walks;
    for (char c : std::string(item < 2 ? "\",\"ab@" : "\"]")) {
      ASSERT_TRUE(m.Advance(static_cast<uint8_t>(c)).ok());
    }
  }
  EXPECT_TRUE(m.IsAccepting());
  // The labels of the second and third addresses reuse the first one's walks.
  EXPECT_EQ(a->stats().family_walks, walks);
  EXPECT_LE(walks, 3);
}

// The positions of a string's mandatory part (minLength) use the classes of its optional part
// (Pda::Mandatory: one walk), with closing quotes allowed only once minLength is reached; every
// mask checked against advancing by every token.
TEST(StructuredMaskTest, MandatoryPartPositionsShareTheChainsWalk) {
  auto compiled = structured::CompileConstraint(
      Spec(
          ConstraintKind::kJsonSchema,
          R"({"type":"array","items":{"type":"string","minLength":12,"maxLength":40},"maxItems":3})"),
      RichVocabulary(), Lazy());
  ASSERT_TRUE(compiled.ok());
  auto a = *compiled;
  const auto& v = a->vocab();
  structured::Matcher m(a);
  for (char c : std::string("[\"")) ASSERT_TRUE(m.Advance(static_cast<uint8_t>(c)).ok());
  for (int item = 0; item < 3; ++item) {
    int chars = 0;
    for (int i = 0; i < 19; ++i) {  // "aαaaαaa...α": 14 characters
      const std::vector<int32_t> allowed =
          AllowedByBruteForce(m, v, "item " + std::to_string(item) + " byte " + std::to_string(i));
      ASSERT_FALSE(::testing::Test::HasFailure());
      const bool inside_alpha = i % 4 == 2;
      EXPECT_EQ(structured::MaskHas(m.Mask()->data(), '"'), chars >= 12 && !inside_alpha) << i;
      ASSERT_TRUE(m.Advance(i % 4 == 1 ? 0xce : inside_alpha ? 0xb1 : 'a').ok());
      chars += i % 4 != 1;
    }
    for (char c : std::string(item < 2 ? "\",\"" : "\"]")) {
      ASSERT_TRUE(m.Advance(static_cast<uint8_t>(c)).ok());
    }
  }
  EXPECT_TRUE(m.IsAccepting());
  const auto stats = a->stats();
  EXPECT_LE(stats.config_walks + stats.key_walks, 8) << "misses " << stats.mask_misses;
}

// Compile time classifies the bounded-string families the automaton can reach (a family's first
// mask is otherwise a whole-vocabulary walk): generating an email and a list of strings then
// walks no family, and every mask is still exact (checked against advancing by every token; the
// domain's labels have the top-level domain's parses beside them, masked stack by stack:
// Pda::StackConfig).
TEST(StructuredMaskTest, PrecomputedFamiliesLeaveNoFamilyWalkToTheMasks) {
  const std::string schema =
      R"({"type":"object","properties":{"e":{"type":"string","format":"email"},
          "t":{"type":"array","items":{"type":"string","maxLength":12},"maxItems":3}},
          "required":["e","t"],"additionalProperties":false})";
  const std::string text =
      R"({"e":"ab.c@xxxxxxxxxx.x-xxxxxxxx.xxxxxxxxxx.abc","t":["xxαxxxxxxxx","x"]})";
  int64_t lazy_walks = 0;
  for (bool precompute : {false, true}) {
    SCOPED_TRACE(precompute ? "precomputed" : "lazy");
    auto compiled =
        structured::CompileConstraint(Spec(ConstraintKind::kJsonSchema, schema), RichVocabulary(),
                                      precompute ? structured::CompileOptions{} : Lazy());
    ASSERT_TRUE(compiled.ok());
    auto a = *compiled;
    const int64_t compiled_walks = a->stats().family_walks;
    structured::Matcher m(a);
    for (size_t i = 0; i < text.size(); ++i) {
      AllowedByBruteForce(m, a->vocab(), "byte " + std::to_string(i));
      ASSERT_FALSE(::testing::Test::HasFailure());
      ASSERT_TRUE(m.Advance(static_cast<uint8_t>(text[i])).ok()) << i;
    }
    EXPECT_TRUE(m.IsAccepting());
    const int64_t mask_walks = a->stats().family_walks - compiled_walks;
    if (!precompute) {
      EXPECT_EQ(compiled_walks, 0);
      lazy_walks = mask_walks;
    } else {
      EXPECT_GE(compiled_walks, lazy_walks);
      EXPECT_EQ(mask_walks, 0);
    }
  }
  EXPECT_GE(lazy_walks, 3);  // the strings, the email's local part, its labels
}

// Compile time also classifies the local key of every class of configurations it meets (the
// short strings, property names and punctuation of an object used in several places: a second
// address, a second array item), with the tokens past the key's frames that each context allows
// (the characters of a two-character string, then its closing quote): generating through two
// items and both addresses then walks the vocabulary once at a mask (below), and every mask is
// still exact. Without the precomputation the same text walks it at most of its first visits.
TEST(StructuredMaskTest, PrecomputedKeysLeaveNoWalkToTheMasks) {
  const std::string schema =
      R"({"$defs":{"a":{"type":"object","properties":{"z":{"type":"string","pattern":"^[0-9]{5}$"},
          "k":{"type":"string","minLength":2,"maxLength":2}},"required":["z","k"],
          "additionalProperties":false}},"type":"object","properties":{"c":{"type":"array",
          "maxItems":3,"items":{"type":"object","properties":{"n":{"type":"string","maxLength":4},
          "h":{"$ref":"#/$defs/a"},"w":{"$ref":"#/$defs/a"}},"required":["n","h"],
          "additionalProperties":false}}},"required":["c"],"additionalProperties":false})";
  const std::string text =
      R"({"c":[{"n":"ab","h":{"z":"12345","k":"xy"},"w":{"z":"54321","k":"éa"}},)"
      R"({"n":"b","h":{"z":"11111","k":"αβ"}}]})";
  int64_t lazy_walks = 0;
  for (bool precompute : {false, true}) {
    SCOPED_TRACE(precompute ? "precomputed" : "lazy");
    auto compiled =
        structured::CompileConstraint(Spec(ConstraintKind::kJsonSchema, schema), RichVocabulary(),
                                      precompute ? structured::CompileOptions{} : Lazy());
    ASSERT_TRUE(compiled.ok());
    auto a = *compiled;
    const auto compiled_stats = a->stats();
    structured::Matcher m(a);
    for (size_t i = 0; i < text.size(); ++i) {
      AllowedByBruteForce(m, a->vocab(), "byte " + std::to_string(i));
      ASSERT_FALSE(::testing::Test::HasFailure());
      ASSERT_TRUE(m.Advance(static_cast<uint8_t>(text[i])).ok()) << i;
    }
    EXPECT_TRUE(m.IsCompleted());
    const auto stats = a->stats();
    const int64_t walks = stats.config_walks + stats.key_walks - compiled_stats.config_walks -
                          compiled_stats.key_walks;
    if (!precompute) {
      lazy_walks = walks;
    } else {
      EXPECT_GT(compiled_stats.key_walks, 20);
      // One: after the second item's first address, a key that holds the array's counter (the
      // item's closing brace is a tail call), met only inside an item the pass did not expand.
      EXPECT_LE(walks, 1) << "misses " << stats.mask_misses;
    }
  }
  EXPECT_GE(lazy_walks, 20);
}

TEST(StructuredMatcherTest, RollbackRestoresMasksAndEosOnlyWhenAccepting) {
  structured::ConstraintSpec spec;
  spec.kind = ConstraintKind::kChoice;
  spec.choices = {"ab", "abc", "12"};
  auto c = Compile(spec);
  const int32_t eos = c->vocab().eos_id();
  structured::Matcher m(c);
  EXPECT_FALSE(structured::MaskHas(m.Mask()->data(), eos));
  const auto initial_mask = *m.Mask();
  ASSERT_TRUE(m.Advance('a').ok());
  EXPECT_FALSE(m.Advance('c').ok());  // state unchanged on a rejected token
  ASSERT_TRUE(m.Advance('b').ok());
  EXPECT_TRUE(m.IsAccepting());
  EXPECT_FALSE(m.IsCompleted());  // "abc" may still follow
  EXPECT_TRUE(structured::MaskHas(m.Mask()->data(), eos));
  ASSERT_TRUE(m.Advance('c').ok());
  EXPECT_TRUE(m.IsCompleted());
  m.Rollback(3);
  EXPECT_EQ(m.num_tokens(), 0);
  EXPECT_EQ(*m.Mask(), initial_mask);
  ASSERT_TRUE(m.Advance(265).ok());  // "abc" as one token
  EXPECT_TRUE(m.IsCompleted());
  m.Rollback(1);
  ASSERT_TRUE(m.Advance(266).ok());  // "12"
  EXPECT_TRUE(m.IsCompleted());
  ASSERT_TRUE(m.Advance(eos).ok());
  EXPECT_FALSE(m.Advance('a').ok());
  m.Rollback(1);
  EXPECT_TRUE(m.IsAccepting());
}

TEST(StructuredMatcherTest, SnapshotHasTheStateButNotTheHistory) {
  structured::ConstraintSpec spec;
  spec.kind = ConstraintKind::kChoice;
  spec.choices = {"ab", "abc", "12"};
  auto c = Compile(spec);
  const int32_t eos = c->vocab().eos_id();
  structured::Matcher m(c);
  ASSERT_TRUE(m.Advance('a').ok());
  ASSERT_TRUE(m.Advance('b').ok());
  structured::Matcher s = m.Snapshot();
  EXPECT_EQ(s.num_tokens(), 0);  // nothing to roll back
  EXPECT_EQ(*s.Mask(), *m.Mask());
  EXPECT_TRUE(s.IsAccepting());
  EXPECT_FALSE(s.IsCompleted());
  // Advancing the snapshot leaves the matcher where it was, and the other way round.
  ASSERT_TRUE(s.Advance('c').ok());
  EXPECT_TRUE(s.IsCompleted());
  EXPECT_FALSE(m.IsCompleted());
  ASSERT_TRUE(m.Advance(eos).ok());
  EXPECT_TRUE(s.Advance(eos).ok());  // "abc" accepts EOS too
  // A snapshot after EOS has ended: no token may follow, its mask is empty.
  structured::Matcher ended = m.Snapshot();
  EXPECT_FALSE(ended.Advance('a').ok());
  EXPECT_FALSE(structured::MaskHas(ended.Mask()->data(), eos));
  EXPECT_FALSE(structured::MaskHas(ended.Mask()->data(), 'c'));
}

TEST(StructuredMatcherTest, TryAdvanceDoesNotWaitForABusyAutomatonAndAppendCatchesUp) {
  structured::ConstraintSpec spec;
  spec.kind = ConstraintKind::kChoice;
  spec.choices = {"ab", "abc", "12"};
  auto c = Compile(spec);
  structured::Matcher m(c);
  EXPECT_EQ(m.TryAdvance('a'), std::optional<bool>(false));
  EXPECT_EQ(m.TryAdvance('x'), std::nullopt);  // not allowed: state unchanged
  EXPECT_EQ(m.num_tokens(), 1);
  // Another thread holds the automaton (a mask being computed): TryAdvance does not wait.
  std::mutex mu;
  std::condition_variable cv;
  bool held = false, release = false;
  std::thread holder([&] {
    c->RunExclusive([&] {
      std::unique_lock<std::mutex> lock(mu);
      held = true;
      cv.notify_all();
      cv.wait(lock, [&] { return release; });
    });
  });
  {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return held; });
  }
  EXPECT_EQ(m.TryAdvance('b'), std::nullopt);
  EXPECT_EQ(m.num_tokens(), 1);
  {
    std::lock_guard<std::mutex> lock(mu);
    release = true;
  }
  cv.notify_all();
  holder.join();
  // A snapshot advanced elsewhere hands its states over.
  structured::Matcher ahead = m.Snapshot();
  ASSERT_TRUE(ahead.Advance('b').ok());
  ASSERT_TRUE(ahead.Advance('c').ok());
  m.Append(ahead, 2);
  EXPECT_EQ(m.num_tokens(), 3);
  EXPECT_TRUE(m.IsCompleted());
  m.Rollback(1);  // the appended states are its own
  EXPECT_TRUE(m.IsAccepting());
  EXPECT_EQ(m.TryAdvance('c'), std::optional<bool>(true));  // "abc" completes the choice
  EXPECT_EQ(m.TryAdvance(c->vocab().eos_id()), std::optional<bool>(true));  // accepting
  EXPECT_EQ(m.TryAdvance('a'), std::nullopt);                               // ended at EOS
}

TEST(StructuredGbnfTest, ArithmeticGrammar) {
  auto a = Compile(Spec(ConstraintKind::kGrammar, R"G(
    root ::= expr
    expr ::= term (("+" | "-") term)*   # sums
    term ::= num | "(" expr ")"
    num  ::= [0-9]{1,3}
  )G"));
  EXPECT_TRUE(Matches(*a, "1+(22-333)"));
  EXPECT_TRUE(Matches(*a, "((7))"));
  EXPECT_FALSE(Matches(*a, "1+"));
  EXPECT_FALSE(Matches(*a, "1234"));
  EXPECT_FALSE(Matches(*a, "(1"));
}

TEST(StructuredGbnfTest, ErrorsAreReported) {
  for (const char* g : {"root ::= foo", "expr ::= \"a\"", "root ::= root \"a\" | \"b\"",
                        "root ::= \"a", "root ::= [b-a]", "root ::= \"a\"\nroot ::= \"b\""}) {
    auto a =
        structured::CompileConstraint(Spec(ConstraintKind::kGrammar, g), testing::TestVocabulary());
    EXPECT_FALSE(a.ok()) << g;
  }
}

TEST(StructuredJsonTest, SchemaBasics) {
  auto a = Compile(Spec(ConstraintKind::kJsonSchema, R"({"type":"object","properties":{
      "id":{"type":"integer","minimum":-5,"maximum":120},
      "tags":{"type":"array","items":{"enum":["x","y"]},"maxItems":2},
      "kind":{"const":"k"}},"required":["id","kind"],"additionalProperties":false})"));
  EXPECT_TRUE(Matches(*a, R"({"id":7,"kind":"k"})"));
  EXPECT_TRUE(Matches(*a, R"({ "id": -5, "tags": ["x", "y"], "kind": "k" })"));
  EXPECT_FALSE(Matches(*a, R"({"id":121,"kind":"k"})"));
  EXPECT_FALSE(Matches(*a, R"({"id":-6,"kind":"k"})"));
  EXPECT_FALSE(Matches(*a, R"({"id":07,"kind":"k"})"));
  EXPECT_FALSE(Matches(*a, R"({"kind":"k","id":7})"));  // schema order
  EXPECT_FALSE(Matches(*a, R"({"id":7,"tags":["x","x","y"],"kind":"k"})"));
  EXPECT_FALSE(Matches(*a, R"({"id":7})"));
  EXPECT_FALSE(Matches(*a, R"({"id":7,    "kind":"k"})"));  // whitespace is bounded
}

TEST(StructuredJsonTest, RefsRecursionAndCombinators) {
  auto a = Compile(
      Spec(ConstraintKind::kJsonSchema, R"({"$ref":"#/$defs/node","$defs":{"node":{"type":"object",
      "properties":{"v":{"anyOf":[{"type":"null"},{"type":"string","maxLength":2}]},
      "kids":{"type":"array","items":{"$ref":"#/$defs/node"}}},"required":["v"],"additionalProperties":false}}})"));
  EXPECT_TRUE(Matches(*a, R"({"v":null,"kids":[{"v":"ab"},{"v":null,"kids":[]}]})"));
  EXPECT_FALSE(Matches(*a, R"({"v":"abc"})"));
  auto all = Compile(Spec(ConstraintKind::kJsonSchema,
                          R"({"allOf":[{"type":"object","properties":{"a":{"type":"integer"}},
      "required":["a"]},{"properties":{"b":{"type":"boolean"}},"required":["b"]}]})"));
  EXPECT_TRUE(Matches(*all, R"({"a":1,"b":true})"));
  EXPECT_FALSE(Matches(*all, R"({"a":1})"));
}

TEST(StructuredJsonTest, StringsFormatsAndNumbers) {
  auto a = Compile(Spec(ConstraintKind::kJsonSchema, R"({"type":"array","prefixItems":[
      {"type":"string","format":"date"},{"type":"string","pattern":"^[A-Z]{2}-\\d+$"},
      {"type":"number","minimum":0,"exclusiveMaximum":10},{"type":"string","minLength":2,"maxLength":3}],
      "items":false})"));
  EXPECT_TRUE(Matches(*a, R"(["2024-02-28","AB-12",9.75,"\"\\n"])"));
  EXPECT_FALSE(Matches(*a, R"(["2024-02-30","AB-12",9.75,"ab"])"));
  EXPECT_FALSE(Matches(*a, R"(["2024-02-28","AB-",9.75,"ab"])"));
  EXPECT_FALSE(Matches(*a, R"(["2024-02-28","AB-1",10,"ab"])"));
  EXPECT_FALSE(Matches(*a, R"(["2024-02-28","AB-1",1,"abcd"])"));
  EXPECT_TRUE(Matches(*a, R"(["2024-02-28","AB-1",0,"日本"])"));
}

TEST(StructuredJsonTest, UnsupportedAndInvalidSchemasAreClearErrors) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {R"({"type":"string","not":{"const":"a"}})", "'not'"},
      {R"({"type":"object","patternProperties":{"a":{}}})", "'patternProperties'"},
      {R"({"$ref":"#/$defs/missing"})", "does not resolve"},
      {R"({"$ref":"#/prefixItems/99999999999999999999","prefixItems":[{}]})", "does not resolve"},
      {R"({"$ref":"http://example.com/s.json"})", "not a local reference"},
      {R"({"type":"strin"})", "unknown type"},
      {R"({"type":"string","format":"color"})", "format 'color'"},
      {R"({"oneOf":[{"type":"string"},{"type":"string","maxLength":3}]})", "may both match"},
      {R"({"type":"integer","minimum":5,"maximum":4})", "no integer"},
      {R"({"type":"string","pattern":"(a)\\1"})", "backreference"},
      {R"({"type":"array","items":{"type":"integer"},"uniqueItems":true})", "'uniqueItems'"},
      {R"(false)", "nothing satisfies"},
      {R"({"type":"integer","multipleOf":3})", "'multipleOf'"},
      {R"({"type":"number" )", "not valid JSON"},
      {R"({"allOf":[{"properties":{"a":{}}}],"additionalProperties":false})",
       "additionalProperties"},
  };
  for (const auto& [schema, what] : cases) {
    auto a = structured::CompileConstraint(Spec(ConstraintKind::kJsonSchema, schema),
                                           testing::TestVocabulary());
    ASSERT_FALSE(a.ok()) << schema;
    EXPECT_NE(a.status().message().find(what), std::string::npos) << a.status().ToString();
  }
}

TEST(StructuredSpecTest, ParsesOpenAiAndVllmKeys) {
  using nlohmann::ordered_json;
  auto s = structured::ParseOutputConstraint(ordered_json::parse(
      R"({"response_format":{"type":"json_schema","json_schema":{"name":"x","strict":true,
          "schema":{"type":"object","properties":{"b":{},"a":{}}}}}})"));
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->kind, ConstraintKind::kJsonSchema);
  EXPECT_LT(s->text.find("\"b\""), s->text.find("\"a\""));  // property order kept
  s = structured::ParseOutputConstraint(
      nlohmann::json::parse(R"({"response_format":{"type":"json_object"}})"));
  EXPECT_EQ(s->kind, ConstraintKind::kJsonObject);
  s = structured::ParseOutputConstraint(
      nlohmann::json::parse(R"({"response_format":{"type":"text"}})"));
  EXPECT_FALSE(s->active());
  s = structured::ParseOutputConstraint(
      nlohmann::json::parse(R"({"structured_outputs":{"choice":["a","b"]}})"));
  EXPECT_EQ(s->kind, ConstraintKind::kChoice);
  EXPECT_EQ(s->choices.size(), 2u);
  s = structured::ParseOutputConstraint(
      nlohmann::json::parse(R"({"structured_outputs":{"regex":"a+"}})"));
  EXPECT_EQ(s->kind, ConstraintKind::kRegex);
  for (const char* bad : {R"({"response_format":{"type":"xml"}})",
                          R"({"structured_outputs":{"regex":"a","choice":["b"]}})",
                          R"({"structured_outputs":{"json":{},"foo":1}})",
                          R"({"response_format":{"type":"json_object"},
                          "structured_outputs":{"regex":"a"}})",
                          R"({"structured_outputs":{"choice":[]}})"}) {
    EXPECT_FALSE(structured::ParseOutputConstraint(nlohmann::json::parse(bad)).ok()) << bad;
  }
}

}  // namespace
}  // namespace dsinfer
