// Structured output: constraint compile time and token-mask time per step over a real vocabulary
// (the V4 tokenizer: 129,280 ids). For each schema, `runs` generations of up to `steps` tokens
// pick uniformly among the allowed tokens (EOS once accepting, with probability 1/4); every
// Matcher::Mask() call is timed. The first run starts with an empty mask cache (cold); the others
// share the compiled constraint, as requests with the same schema do in the engine.
//   bench_structured TOKENIZER_JSON [runs=20] [steps=120] [misses] [lazy] [configs=N] [only=NAME]
// Compile time includes TokenAutomaton::Precompute (the families classified before the first
// mask), which `lazy` turns off (the A/B of that change: each family's first mask walks then);
// `configs=N` bounds it (CompileOptions::precompute_configs); `only=NAME` runs one schema.
// Prints one JSON line per schema and one for all of them; with `misses`, also one line per
// cache miss to stderr (schema, run, step, µs, whole-trie walks, new configurations, the text's
// last 40 bytes): the generations are the same in every run of one build (masks are exact), so
// the per-miss minimum over a few runs takes the machine's noise out of a profile. Mask times are
// the thread's CPU time (CLOCK_THREAD_CPUTIME_ID: robust to a shared, loaded machine) minus the
// median cost of an empty pair of clock reads (a system call on this VM, ~1-2 us), measured first.
#include <sys/resource.h>
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "structured/constraint_compiler.h"
#include "structured/matcher.h"
#include "tokenizer/tokenizer.h"

namespace {

using namespace dsinfer;
using Clock = std::chrono::steady_clock;

double Us(Clock::duration d) { return std::chrono::duration<double, std::micro>(d).count(); }

double ThreadCpuUs() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e6 + static_cast<double>(ts.tv_nsec) * 1e-3;
}

// Peak resident memory of the process: the vocabulary and the largest automaton (each schema's
// is freed after its runs).
double MaxRssMb() {
  rusage u;
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_maxrss) / 1024.0;
}

double Percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(q * static_cast<double>(v.size())))];
}

struct Case {
  const char* name;
  structured::ConstraintKind kind;
  const char* text;
};

const Case kCases[] = {
    {"person", structured::ConstraintKind::kJsonSchema,
     R"({"type":"object","properties":{"name":{"type":"string","maxLength":40},"age":{"type":"integer","minimum":0,"maximum":150},
         "email":{"type":"string","format":"email"},"tags":{"type":"array","items":{"type":"string","maxLength":12},"maxItems":5}},
         "required":["name","age"],"additionalProperties":false})"},
    {"tool_args", structured::ConstraintKind::kJsonSchema,
     R"({"type":"object","properties":{"location":{"type":"string","maxLength":60},"unit":{"enum":["celsius","fahrenheit"]},
         "days":{"type":"integer","minimum":1,"maximum":14},"include_hourly":{"type":"boolean"}},"required":["location","unit"],
         "additionalProperties":false})"},
    {"order", structured::ConstraintKind::kJsonSchema,
     R"({"type":"object","properties":{"order_id":{"type":"string","format":"uuid"},"created":{"type":"string","format":"date-time"},
         "items":{"type":"array","minItems":1,"maxItems":5,"items":{"type":"object","properties":{"sku":{"type":"string","pattern":"^[A-Z]{3}-[0-9]{4}$"},
         "qty":{"type":"integer","minimum":1,"maximum":100},"price":{"type":"number","minimum":0,"maximum":10000}},"required":["sku","qty","price"],
         "additionalProperties":false}},"status":{"enum":["pending","paid","shipped","cancelled"]},
         "note":{"anyOf":[{"type":"null"},{"type":"string","maxLength":80}]}},"required":["order_id","created","items","status"],
         "additionalProperties":false})"},
    {"address_book", structured::ConstraintKind::kJsonSchema,
     R"({"$defs":{"address":{"type":"object","properties":{"street":{"type":"string","maxLength":50},"city":{"type":"string","maxLength":30},
         "zip":{"type":"string","pattern":"^[0-9]{5}$"},"country":{"type":"string","maxLength":2,"minLength":2}},"required":["street","city","zip","country"],
         "additionalProperties":false}},"type":"object","properties":{"contacts":{"type":"array","maxItems":4,"items":{"type":"object",
         "properties":{"name":{"type":"string","maxLength":30},"home":{"$ref":"#/$defs/address"},"work":{"$ref":"#/$defs/address"},
         "phones":{"type":"array","items":{"type":"string","pattern":"^\\+[0-9]{7,12}$"},"maxItems":3}},"required":["name","home"],
         "additionalProperties":false}}},"required":["contacts"],"additionalProperties":false})"},
    {"tree", structured::ConstraintKind::kJsonSchema,
     R"({"$defs":{"node":{"type":"object","properties":{"label":{"type":"string","maxLength":20},"children":{"type":"array",
         "items":{"$ref":"#/$defs/node"},"maxItems":3}},"required":["label"],"additionalProperties":false}},"$ref":"#/$defs/node"})"},
    {"long_text", structured::ConstraintKind::kJsonSchema,
     R"({"type":"object","properties":{"title":{"type":"string","maxLength":100},"summary":{"type":"string","minLength":10,"maxLength":400}},
         "required":["title","summary"],"additionalProperties":false})"},
    {"free_text_fields", structured::ConstraintKind::kJsonSchema,
     R"({"type":"object","properties":{"question":{"type":"string"},"answer":{"type":"string"},"confidence":{"type":"number","minimum":0,"maximum":1}},
         "required":["question","answer","confidence"],"additionalProperties":false})"},
    {"json_object", structured::ConstraintKind::kJsonObject, ""},
    {"regex_phone", structured::ConstraintKind::kRegex, R"(\(\d{3}\) \d{3}-\d{4})"},
    {"grammar_arith", structured::ConstraintKind::kGrammar,
     "root ::= expr\nexpr ::= term ((\"+\" | \"-\" | \"*\") term)*\nterm ::= [0-9]{1,4} | \"(\" "
     "expr \")\"\n"},
};

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr,
                 "usage: bench_structured TOKENIZER_JSON [runs] [steps] [misses] [lazy] "
                 "[configs=N] [only=NAME]\n");
    return 2;
  }
  const int runs = argc > 2 ? std::atoi(argv[2]) : 20;
  const int steps = argc > 3 ? std::atoi(argv[3]) : 120;
  bool trace_misses = false, lazy = false;
  std::string only;  // one schema by name (profiling)
  int32_t precompute_configs = structured::CompileOptions{}.precompute_configs;
  for (int i = 4; i < argc; ++i) {
    const std::string flag = argv[i];
    if (flag == "misses") {
      trace_misses = true;
    } else if (flag == "lazy") {
      lazy = true;
    } else if (flag.rfind("configs=", 0) == 0) {
      precompute_configs = std::atoi(flag.c_str() + 8);
    } else if (flag.rfind("only=", 0) == 0) {
      only = flag.substr(5);
    } else {
      std::fprintf(stderr, "unknown flag %s (misses, lazy, configs=N, only=NAME)\n", argv[i]);
      return 2;
    }
  }
  auto tok = tokenizer::Tokenizer::Load(argv[1]);
  if (!tok.ok()) {
    std::fprintf(stderr, "%s\n", tok.status().ToString().c_str());
    return 1;
  }
  const int32_t eos = (*tok)->TokenToId("<｜end▁of▁sentence｜>").value_or(1);
  auto t0 = Clock::now();
  auto vocab = structured::Vocabulary::FromTokenizer(**tok, 129280, eos);
  const double vocab_ms = Us(Clock::now() - t0) / 1e3;
  std::printf("%s\n", nlohmann::json({{"bench", "structured_vocab"},
                                      {"vocab", vocab->size()},
                                      {"trie_nodes", vocab->trie().num_nodes()},
                                      {"build_ms", vocab_ms}})
                          .dump()
                          .c_str());
  std::vector<double> empty;
  for (int i = 0; i < 2001; ++i) {
    const double a = ThreadCpuUs();
    empty.push_back(ThreadCpuUs() - a);
  }
  const double clock_overhead = Percentile(empty, 0.5);
  std::vector<double> all, all_warm;
  for (const Case& c : kCases) {
    if (!only.empty() && only != c.name) continue;
    structured::ConstraintSpec spec;
    spec.kind = c.kind;
    spec.text = c.text;
    t0 = Clock::now();
    structured::CompileOptions options;
    if (lazy) options.precompute_us = 0;
    options.precompute_configs = precompute_configs;
    auto automaton = structured::CompileConstraint(spec, vocab, options);
    const double compile_ms = Us(Clock::now() - t0) / 1e3;
    if (!automaton.ok()) {
      std::fprintf(stderr, "%s: %s\n", c.name, automaton.status().ToString().c_str());
      return 1;
    }
    const auto compiled = (*automaton)->stats();
    std::vector<double> times, warm;
    int stopped = 0;
    for (int run = 0; run < runs; ++run) {
      std::mt19937 rng(static_cast<uint32_t>(run));
      structured::Matcher m(*automaton);
      std::string text;
      for (int step = 0; step < steps && !m.IsCompleted(); ++step) {
        const auto before =
            trace_misses ? (*automaton)->stats() : structured::TokenAutomaton::Stats{};
        const double start = ThreadCpuUs();
        const auto mask = m.Mask();
        const double us = std::max(0.0, ThreadCpuUs() - start - clock_overhead);
        if (trace_misses) {
          const auto after = (*automaton)->stats();
          if (after.mask_misses > before.mask_misses) {
            const std::string tail = text.substr(text.size() > 40 ? text.size() - 40 : 0);
            std::fprintf(stderr, "%s\n",
                         nlohmann::json({{"schema", c.name},
                                         {"run", run},
                                         {"step", step},
                                         {"us", us},
                                         {"config_walks", after.config_walks - before.config_walks},
                                         {"key_walks", after.key_walks - before.key_walks},
                                         {"family_walks", after.family_walks - before.family_walks},
                                         {"new_configs", after.configs - before.configs},
                                         {"text", tail}})
                             .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)
                             .c_str());
          }
        }
        times.push_back(us);
        if (run > 0) warm.push_back(us);
        std::vector<int32_t> allowed;
        for (int64_t w = 0; w < vocab->mask_words(); ++w) {
          for (uint64_t bits = (*mask)[w]; bits; bits &= bits - 1) {
            allowed.push_back(static_cast<int32_t>(w * 64 + __builtin_ctzll(bits)));
          }
        }
        if (allowed.empty()) break;
        int32_t pick = allowed[rng() % allowed.size()];
        if (m.IsAccepting() && rng() % 4 == 0) pick = eos;
        if (!m.Advance(pick).ok()) break;
        if (trace_misses && pick != eos) text += vocab->bytes(pick);
      }
      stopped += m.IsCompleted();
    }
    const auto stats = (*automaton)->stats();
    all.insert(all.end(), times.begin(), times.end());
    all_warm.insert(all_warm.end(), warm.begin(), warm.end());
    double mean = 0;
    for (double t : times) mean += t;
    mean /= std::max<size_t>(times.size(), 1);
    std::printf("%s\n", nlohmann::json({{"bench", "structured_mask"},
                                        {"schema", c.name},
                                        {"compile_ms", compile_ms},
                                        {"compile_family_walks", compiled.family_walks},
                                        {"compile_key_walks", compiled.key_walks},
                                        {"compile_configs", compiled.configs},
                                        {"masks", times.size()},
                                        {"p50_us", Percentile(times, 0.5)},
                                        {"p99_us", Percentile(times, 0.99)},
                                        {"max_us", Percentile(times, 1.0)},
                                        {"mean_us", mean},
                                        {"warm_p50_us", Percentile(warm, 0.5)},
                                        {"warm_p99_us", Percentile(warm, 0.99)},
                                        {"configs", stats.configs},
                                        {"cache_hits", stats.mask_hits},
                                        {"cache_misses", stats.mask_misses},
                                        {"config_walks", stats.config_walks},
                                        {"key_walks", stats.key_walks},
                                        {"family_walks", stats.family_walks},
                                        {"completed_runs", stopped},
                                        {"runs", runs}})
                            .dump()
                            .c_str());
  }
  double mean = 0;
  for (double t : all) mean += t;
  mean /= std::max<size_t>(all.size(), 1);
  std::printf("%s\n", nlohmann::json({{"bench", "structured_mask_all"},
                                      {"masks", all.size()},
                                      {"p50_us", Percentile(all, 0.5)},
                                      {"p99_us", Percentile(all, 0.99)},
                                      {"mean_us", mean},
                                      {"warm_p50_us", Percentile(all_warm, 0.5)},
                                      {"warm_p99_us", Percentile(all_warm, 0.99)},
                                      {"max_rss_mb", MaxRssMb()}})
                          .dump()
                          .c_str());
  return 0;
}
