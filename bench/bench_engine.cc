// Engine benchmark: offline throughput of the whole runtime (scheduler, state cache, sampler,
// model) on a model dir, or on a preset with device-random weights (--random-preset, CUDA). Submits
// --requests random-id prompts at once, each generating exactly its output length (ignore_eos,
// seeded sampling with top_k 50), and prints one JSON line: requests, tokens, wall time, output and
// total tokens/s, TTFT and TPOT percentiles (TTFT counts from submission, so it includes queueing
// in this offline batch), steps, the mean decode batch and the mean decode-step time.
// Lengths: fixed (--prompt-len, --output-len), or lognormal with the given median and --sigma,
// clipped to [min, max] (--prompt-median/-min/-max, --output-median/-min/-max).
// --chat-conversations C --chat-turns T: a multi-turn chat workload instead: C conversations run
// at once, each turn's prompt is the previous turn's prompt, its answer and a new message of a
// prompt length, and every conversation starts with the same --system-len tokens (the prefix
// cache's workload: compare with --no-prefix-cache).
// Structured output: --json-schema FILE or --structured-regex R constrains a share of the requests
// (--structured-fraction, default all; they end when their constraint is complete, so outputs are
// at most the drawn length), with the model dir's tokenizer or --tokenizer F (with a preset too:
// flash-l8 has the V4 vocabulary); the line then counts the draws that sat out a step because their
// grammar mask was late (structured_mask_late; --structured-mask-deadline-us).
// --prompt-ids-file F: prompts cut from real token ids instead of random ones (a JSON list of id
// lists, or an object whose "windows" is one, e.g. tests/data/demo_heldout_windows.json): request
// i takes its drawn length from list i % L, at an offset that moves on with each pass over the
// lists; greedy drafts need real text to be accepted.
// --completions N: every request of the offline workload asks for N completions (n > 1 siblings
// share the prompt's state; the line's state_memory shows its peak, and what sharing saved).
//   bench_engine --model DIR | --random-preset NAME [--device auto|cpu|cuda] [--requests N]
//                [length flags] [--seed S] [structured flags] [engine flags of `dsinfer generate`]
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <random>
#include <sstream>
#include <thread>
#include <vector>

#include "cli/engine_flags.h"
#include "cli/flags.h"
#include "cli/run_summary.h"
#include "dsinfer/engine.h"

namespace {

// The workload's sampling (--temperature, --top-k, --top-p): seeded top-k 50 by default.
struct Sampling {
  float temperature = 1.0f;
  int top_k = 50;
  float top_p = 1.0f;
  void Apply(dsinfer::GenerateRequest* r) const {
    r->params.temperature = temperature;
    r->params.top_k = top_k;
    r->params.top_p = top_p;
  }
};
Sampling sampling;

using namespace dsinfer;

struct Lengths {
  int64_t fixed = 0;  // > 0: every request this long
  double median = 0, sigma = 1;
  int64_t min = 1, max = 1;
};

StatusOr<Lengths> ReadLengths(const cli::Flags& flags, const std::string& what,
                              int64_t fixed_default) {
  Lengths l;
  DSINFER_ASSIGN_OR_RETURN(l.fixed, flags.GetInt(what + "-len", fixed_default));
  if (flags.Has(what + "-median")) {
    DSINFER_ASSIGN_OR_RETURN(const int64_t median, flags.GetInt(what + "-median", 0));
    DSINFER_ASSIGN_OR_RETURN(l.min, flags.GetInt(what + "-min", 1));
    DSINFER_ASSIGN_OR_RETURN(l.max, flags.GetInt(what + "-max", median * 4));
    l.median = static_cast<double>(median);
    l.sigma = std::stod(flags.GetOr("sigma", "1"));
    l.fixed = 0;
    if (median < 1 || l.min < 1 || l.max < l.min) {
      return InvalidArgument("--" + what + "-median/-min/-max must satisfy 1 <= min <= max");
    }
  } else if (l.fixed < 1) {
    return InvalidArgument("--" + what + "-len must be >= 1");
  }
  return l;
}

int64_t Draw(const Lengths& l, std::mt19937_64& rng) {
  if (l.fixed > 0) return l.fixed;
  std::normal_distribution<double> z(0.0, 1.0);
  const double v = std::round(l.median * std::exp(l.sigma * z(rng)));
  return std::clamp(static_cast<int64_t>(v), l.min, l.max);
}

// The chat workload: one thread per conversation, each turn submitted when the previous one ends.
Status RunChat(const EngineOptions& o, int64_t conversations, int64_t turns, int64_t system_len,
               const Lengths& message, const Lengths& output, uint64_t seed) {
  DSINFER_ASSIGN_OR_RETURN(auto engine, Engine::Create(o));
  std::mt19937_64 rng(seed);
  std::vector<int32_t> system(static_cast<size_t>(system_len));
  for (auto& id : system) id = static_cast<int32_t>(rng() % engine->vocab_size());
  std::vector<std::vector<RequestResult>> results(static_cast<size_t>(conversations));
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<std::thread> threads;
  for (int64_t c = 0; c < conversations; ++c) {
    threads.emplace_back([&, c] {
      std::mt19937_64 r(seed * 7919 + static_cast<uint64_t>(c));
      std::vector<int32_t> history = system;
      for (int64_t t = 0; t < turns; ++t) {
        const int64_t n = Draw(message, r);
        for (int64_t i = 0; i < n; ++i)
          history.push_back(static_cast<int32_t>(r() % engine->vocab_size()));
        GenerateRequest req;
        req.prompt_ids = history;
        req.params.max_tokens = static_cast<int>(Draw(output, r));
        req.params.ignore_eos = true;
        sampling.Apply(&req);
        req.params.seed = static_cast<uint64_t>(c * 1000 + t);
        auto stream = engine->Submit(req);
        if (!stream.ok()) {
          std::fprintf(stderr, "conversation %lld turn %lld: %s\n", static_cast<long long>(c),
                       static_cast<long long>(t), stream.status().ToString().c_str());
          return;
        }
        RequestResult res = CollectResult(**stream, 1);
        if (!res.status.ok()) {
          std::fprintf(stderr, "conversation %lld turn %lld: %s\n", static_cast<long long>(c),
                       static_cast<long long>(t), res.status.ToString().c_str());
          return;
        }
        history.insert(history.end(), res.completions[0].ids.begin(), res.completions[0].ids.end());
        results[static_cast<size_t>(c)].push_back(std::move(res));
      }
    });
  }
  for (auto& t : threads) t.join();
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  cli::RunSummary summary;
  int64_t done = 0;
  for (const auto& conv : results) {
    for (const auto& r : conv) {
      summary.Add(r);
      ++done;
    }
  }
  summary.set_wall_seconds(wall);
  summary.set_engine_stats(engine->Stats());
  summary.set_speculative(o.speculative);
  auto j = summary.ToJson();
  j["bench"] = "engine_chat";
  j["model"] = o.random_preset.empty() ? o.model_dir : o.random_preset;
  j["device"] = engine->device();
  j["conversations"] = conversations;
  j["turns"] = turns;
  j["turns_done"] = done;
  j["system_len"] = system_len;
  j["prefix_cache_on"] = o.prefix_cache;
  j["max_batch_tokens"] = engine->max_batch_tokens();
  j["max_running"] = o.max_running;
  std::printf("%s\n", j.dump().c_str());
  return done == conversations * turns ? Status::Ok() : Internal("some turns failed");
}

// --json-schema / --structured-regex: the constraint of the constrained requests (kNone: none).
StatusOr<OutputConstraint> ReadConstraint(const cli::Flags& flags) {
  OutputConstraint c;
  if (flags.Has("json-schema") && flags.Has("structured-regex")) {
    return InvalidArgument("give at most one of --json-schema and --structured-regex");
  }
  if (auto file = flags.Get("json-schema")) {
    std::ifstream in(*file);
    if (!in) return NotFound("--json-schema: cannot read " + *file);
    std::stringstream text;
    text << in.rdbuf();
    c.kind = OutputConstraint::Kind::kJsonSchema;
    c.text = text.str();
  } else if (auto regex = flags.Get("structured-regex")) {
    c.kind = OutputConstraint::Kind::kRegex;
    c.text = *regex;
  }
  return c;
}

Status Run(const cli::Flags& flags) {
  DSINFER_ASSIGN_OR_RETURN(EngineOptions o, cli::EngineOptionsFromFlags(flags));
  DSINFER_ASSIGN_OR_RETURN(const OutputConstraint constraint, ReadConstraint(flags));
  const double structured_fraction = std::stod(flags.GetOr("structured-fraction", "1"));
  if (!(structured_fraction >= 0 && structured_fraction <= 1)) {
    return InvalidArgument("--structured-fraction must be in [0, 1]");
  }
  DSINFER_ASSIGN_OR_RETURN(const int64_t requests, flags.GetInt("requests", 16));
  DSINFER_ASSIGN_OR_RETURN(const Lengths prompt, ReadLengths(flags, "prompt", 128));
  DSINFER_ASSIGN_OR_RETURN(const Lengths output, ReadLengths(flags, "output", 32));
  DSINFER_ASSIGN_OR_RETURN(const int64_t seed, flags.GetInt("seed", 1));
  if (requests < 1) return InvalidArgument("--requests must be >= 1");
  DSINFER_ASSIGN_OR_RETURN(const int64_t completions, flags.GetInt("completions", 1));
  if (completions < 1 || completions > 128)
    return InvalidArgument("--completions must be in [1, 128]");
  DSINFER_ASSIGN_OR_RETURN(const int64_t top_k, flags.GetInt("top-k", 50));
  sampling.top_k = static_cast<int>(top_k);
  sampling.temperature = std::stof(flags.GetOr("temperature", "1"));
  sampling.top_p = std::stof(flags.GetOr("top-p", "1"));
  DSINFER_ASSIGN_OR_RETURN(const int64_t conversations, flags.GetInt("chat-conversations", 0));
  DSINFER_ASSIGN_OR_RETURN(const int64_t turns, flags.GetInt("chat-turns", 8));
  DSINFER_ASSIGN_OR_RETURN(const int64_t system_len, flags.GetInt("system-len", 512));
  if (conversations > 0) {
    if (turns < 1 || system_len < 0) return InvalidArgument("--chat-turns >= 1, --system-len >= 0");
    if (constraint.active()) {
      return InvalidArgument("--json-schema / --structured-regex: the offline workload only");
    }
    if (o.max_model_len == 0) {
      o.max_model_len = system_len + turns * (std::max(prompt.fixed, prompt.max) +
                                              std::max(output.fixed, output.max));
    }
    return RunChat(o, conversations, turns, system_len, prompt, output,
                   static_cast<uint64_t>(seed));
  }
  if (o.max_model_len == 0)
    o.max_model_len = std::max(prompt.fixed, prompt.max) + std::max(output.fixed, output.max);
  DSINFER_ASSIGN_OR_RETURN(auto engine, Engine::Create(o));
  std::vector<std::vector<int32_t>> texts;
  if (auto file = flags.Get("prompt-ids-file")) {
    std::ifstream in(*file);
    if (!in) return NotFound("--prompt-ids-file: cannot read " + *file);
    const auto j = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
    const nlohmann::json& lists = j.is_object() && j.contains("windows") ? j["windows"] : j;
    if (!lists.is_array() || lists.empty())
      return InvalidArgument("--prompt-ids-file: expected a JSON list of token id lists");
    for (const auto& l : lists) {
      if (!l.is_array() || l.empty())
        return InvalidArgument("--prompt-ids-file: every entry must be a list of token ids");
      std::vector<int32_t> ids;
      for (const auto& id : l) {
        if (!id.is_number_integer() || id.get<int64_t>() < 0 ||
            id.get<int64_t>() >= engine->vocab_size())
          return InvalidArgument("--prompt-ids-file: a token id outside the vocabulary");
        ids.push_back(id.get<int32_t>());
      }
      texts.push_back(std::move(ids));
    }
  }
  std::mt19937_64 rng(static_cast<uint64_t>(seed));
  std::vector<GenerateRequest> reqs(static_cast<size_t>(requests));
  for (int64_t i = 0; i < requests; ++i) {
    auto& r = reqs[i];
    r.prompt_ids.resize(static_cast<size_t>(Draw(prompt, rng)));
    if (texts.empty()) {
      for (auto& id : r.prompt_ids) id = static_cast<int32_t>(rng() % engine->vocab_size());
    } else {
      const auto& t = texts[static_cast<size_t>(i) % texts.size()];
      const auto len = std::min(r.prompt_ids.size(), t.size());
      const size_t room = t.size() - len + 1;
      const size_t at = (static_cast<size_t>(i) / texts.size() * (len / 2 + 1)) % room;
      r.prompt_ids.assign(t.begin() + static_cast<std::ptrdiff_t>(at),
                          t.begin() + static_cast<std::ptrdiff_t>(at + len));
    }
    r.params.max_tokens = static_cast<int>(Draw(output, rng));
    r.params.ignore_eos = true;
    sampling.Apply(&r);
    r.params.seed = static_cast<uint64_t>(i);
    r.params.n = static_cast<int>(completions);
    // Constrained: request i when the count of constrained ones up to it grows (evenly spread).
    const auto share = [&](int64_t k) { return static_cast<int64_t>(k * structured_fraction); };
    if (constraint.active() && share(i + 1) > share(i)) r.params.structured_outputs = constraint;
  }
  const auto t0 = std::chrono::steady_clock::now();
  const auto results = engine->Generate(reqs);
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  cli::RunSummary summary;
  for (const auto& r : results) summary.Add(r);
  summary.set_wall_seconds(wall);
  summary.set_engine_stats(engine->Stats());
  summary.set_speculative(o.speculative);
  auto j = summary.ToJson();
  j["bench"] = "engine_offline";
  j["completions"] = completions;
  j["model"] = o.random_preset.empty() ? o.model_dir : o.random_preset;
  j["device"] = engine->device();
  j["threads"] = o.num_threads;
  j["prompt"] = prompt.fixed ? nlohmann::json(prompt.fixed)
                             : nlohmann::json({{"median", prompt.median},
                                               {"sigma", prompt.sigma},
                                               {"min", prompt.min},
                                               {"max", prompt.max}});
  j["output"] = output.fixed ? nlohmann::json(output.fixed)
                             : nlohmann::json({{"median", output.median},
                                               {"sigma", output.sigma},
                                               {"min", output.min},
                                               {"max", output.max}});
  j["max_batch_tokens"] = engine->max_batch_tokens();
  j["max_running"] = o.max_running;
  if (constraint.active()) {
    j["structured"] = {{"kind", flags.Has("json-schema") ? "json_schema" : "regex"},
                       {"fraction", structured_fraction},
                       {"mask_deadline_us", o.structured_mask_deadline_us}};
  }
  std::printf("%s\n", j.dump().c_str());
  return Status::Ok();
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<cli::FlagSpec> specs = cli::EngineFlagSpecs();
  specs.insert(
      specs.end(),
      {{"model", "model dir"},
       {"requests", "requests, all submitted at once (default 16)"},
       {"completions", "completions per request (n, default 1): n > 1 forks the prompt's state"},
       {"prompt-len", "every prompt this long (default 128)"},
       {"prompt-median", "lognormal prompt lengths with this median"},
       {"prompt-min", "shortest prompt (default 1)"},
       {"prompt-max", "longest prompt (default 4 x median)"},
       {"output-len", "every output this long (default 32)"},
       {"output-median", "lognormal output lengths with this median"},
       {"output-min", "shortest output (default 1)"},
       {"output-max", "longest output (default 4 x median)"},
       {"sigma", "sigma of the lognormal lengths (default 1)"},
       {"seed", "workload seed (default 1)"},
       {"prompt-ids-file", "prompts cut from the token id lists of this JSON file"},
       {"temperature", "sampling temperature (default 1; 0: greedy)"},
       {"top-k", "top-k (default 50; 0: off)"},
       {"top-p", "top-p (default 1: off)"},
       {"chat-conversations", "multi-turn chat workload: conversations at once"},
       {"chat-turns", "chat: turns per conversation (default 8)"},
       {"system-len", "chat: tokens of the system prompt all share (default 512)"},
       {"json-schema", "structured output: a file holding a JSON schema"},
       {"structured-regex", "structured output: a regex"},
       {"structured-fraction",
        "structured output: the share of requests constrained (default 1)"}});
  // RunSubcommand reads flags from argv[2] on (after `dsinfer <command>`).
  std::vector<char*> args(argv, argv + argc);
  args.insert(args.begin() + 1, argv[0]);
  return cli::RunSubcommand(argc + 1, args.data(), "bench_engine", "offline engine throughput",
                            specs, Run);
}
