// `dsinfer generate`: offline generation. Requests come from --prompt / --prompt-ids (one) or
// --input (JSONL, one request per line; see request_json.h); results go to --output (JSONL, one
// line per request, in input order) or stdout. A bad line or a rejected request gets an error line
// and the others still run. A progress bar on a terminal, a throughput summary on stderr at the end.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>

#include "api/generate_request.h"
#include "base/status.h"
#include "cli/commands.h"
#include "cli/engine_flags.h"
#include "cli/flags.h"
#include "cli/progress_bar.h"
#include "cli/request_json.h"
#include "cli/run_summary.h"
#include "dsinfer/engine.h"
#include "engine/public_types.h"
#include "request/json_text.h"
#include "request/request_parser.h"
#include "tokenizer/utf8.h"

namespace dsinfer::cli {

namespace {

using json = nlohmann::json;

std::vector<FlagSpec> Specs() {
  std::vector<FlagSpec> specs = {
      {"model", "model dir (config.json + *.safetensors [+ tokenizer.json])"},
      {"prompt", "one text prompt (needs a tokenizer)"},
      {"prompt-ids", "one prompt as token ids: 1,2,3"},
      {"input",
       "JSONL file ('-': standard input): one request per line (prompt (or a list of prompts) | "
       "prompt_ids | messages, "
       "sampling params)"},
      {"output", "JSONL results, one line per request in input order (default: stdout)"},
      {"max-tokens", "default max_tokens (16)"},
      {"temperature", "default temperature (1.0; 0 = greedy)"},
      {"top-k", "default top_k (0 = off)"},
      {"top-p", "default top_p (1.0)"},
      {"min-p", "default min_p (0)"},
      {"seed", "default seed (none: random per request)"},
      {"n", "default completions per prompt (1)"},
      {"ignore-eos", "default ignore_eos", false},
      {"summary-json", "also write the summary as one JSON line to this file"},
      {"quiet", "no progress bar and no summary", false},
  };
  for (const FlagSpec& f : EngineFlagSpecs()) specs.push_back(f);
  return specs;
}

StatusOr<float> GetFloat(const Flags& flags, const std::string& name, float fallback) {
  auto v = flags.Get(name);
  if (!v) return fallback;
  try {
    size_t used = 0;
    const float x = std::stof(*v, &used);
    if (used != v->size()) throw std::invalid_argument("trailing");
    return x;
  } catch (const std::exception&) {
    return InvalidArgument("flag --" + name + " needs a number, got '" + *v + "'");
  }
}

StatusOr<GenerateRequest> Defaults(const Flags& flags) {
  GenerateRequest d;
  auto& p = d.params;
  DSINFER_ASSIGN_OR_RETURN(int64_t max_tokens, flags.GetInt("max-tokens", 16));
  DSINFER_ASSIGN_OR_RETURN(int64_t top_k, flags.GetInt("top-k", 0));
  DSINFER_ASSIGN_OR_RETURN(int64_t n, flags.GetInt("n", 1));
  DSINFER_ASSIGN_OR_RETURN(p.temperature, GetFloat(flags, "temperature", 1.0f));
  DSINFER_ASSIGN_OR_RETURN(p.top_p, GetFloat(flags, "top-p", 1.0f));
  DSINFER_ASSIGN_OR_RETURN(p.min_p, GetFloat(flags, "min-p", 0.0f));
  // The values as given in the messages (not after a clamp).
  if (max_tokens < 1 || max_tokens > INT32_MAX) {
    return InvalidArgument("--max-tokens must be >= 1, got " + std::to_string(max_tokens));
  }
  if (n < 1 || n > INT32_MAX) return InvalidArgument("--n must be >= 1, got " + std::to_string(n));
  if (top_k < -1 || top_k > INT32_MAX) {
    return InvalidArgument("--top-k must be >= 0 (0 or -1: off), got " + std::to_string(top_k));
  }
  p.max_tokens = static_cast<int>(max_tokens);
  p.top_k = static_cast<int>(top_k);
  p.n = static_cast<int>(n);
  if (flags.Has("seed")) {
    DSINFER_ASSIGN_OR_RETURN(int64_t seed, flags.GetInt("seed", 0));
    if (seed < 0) {
      return InvalidArgument("--seed must be a non-negative integer, got " + std::to_string(seed));
    }
    p.seed = static_cast<uint64_t>(seed);
  }
  p.ignore_eos = flags.Has("ignore-eos");
  DSINFER_RETURN_IF_ERROR(p.Validate());
  return d;
}

struct Input {
  json id;
  // One engine request per prompt: a line with a list of prompts has several, whose results make
  // one output line (choice p * n + j is completion j of prompt p).
  StatusOr<std::vector<GenerateRequest>> requests = InvalidArgument("unset");
};

StatusOr<std::vector<Input>> ReadInputs(const Flags& flags, const GenerateRequest& defaults) {
  const int sources = flags.Has("prompt") + flags.Has("prompt-ids") + flags.Has("input");
  if (sources != 1) return InvalidArgument("give exactly one of --prompt, --prompt-ids and --input");
  std::vector<Input> inputs;
  if (auto text = flags.Get("prompt")) {
    if (text->empty()) return InvalidArgument("--prompt is empty: give the text to continue");
    if (const size_t bad = tokenizer::FindInvalidUtf8(*text); bad != std::string::npos) {
      return InvalidArgument("--prompt is not valid UTF-8 (first bad byte at offset " +
                             std::to_string(bad) + ")");
    }
    GenerateRequest r = defaults;
    r.prompt = *text;
    inputs.push_back({0, std::vector<GenerateRequest>{r}});
  } else if (auto ids = flags.Get("prompt-ids")) {
    GenerateRequest r = defaults;
    std::stringstream ss(*ids);
    std::string item;
    while (std::getline(ss, item, ',')) {
      try {
        size_t used = 0;
        const long long v = std::stoll(item, &used);
        if (used != item.size() || v < 0 || v > INT32_MAX) throw std::invalid_argument("bad");
        r.prompt_ids.push_back(static_cast<int32_t>(v));
      } catch (const std::exception&) {
        return InvalidArgument("--prompt-ids needs token ids separated by commas");
      }
    }
    inputs.push_back({0, std::vector<GenerateRequest>{r}});
  } else {
    const std::string path = *flags.Get("input");
    std::ifstream file;
    if (path != "-") {  // "-": standard input
      file.open(path);
      if (!file) return NotFound("cannot read --input " + path);
    }
    std::istream& in = path == "-" ? std::cin : file;
    request::Request schema_defaults;
    schema_defaults.sampling = engine::ToSamplerParams(defaults.params);
    schema_defaults.priority = defaults.priority;
    std::string line;
    for (int64_t number = 1; std::getline(in, line); ++number) {
      if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
      // The server's schema (request/): an OpenAI body pasted as a line works.
      auto j = request::ParseJsonText(line);
      Input input;
      input.id = j.ok() && j->is_object() && j->contains("id") ? (*j)["id"] : json(number);
      // The output constraint is read from the line with its own key order (a schema's property
      // order is its generation order; `json` sorts keys).
      const nlohmann::ordered_json ordered =
          j.ok() ? nlohmann::ordered_json::parse(line, nullptr, false) : nlohmann::ordered_json();
      StatusOr<request::Request> parsed =
          j.ok() ? request::ParseRequest(*j, request::Kind::kJsonl, schema_defaults, &ordered)
                 : j.status();
      if (parsed.ok()) {
        std::vector<GenerateRequest> requests;
        for (const request::Request& one : request::SplitPrompts(*parsed)) {
          requests.push_back(api::ToGenerateRequest(one));
        }
        input.requests = std::move(requests);
      } else {
        input.requests = Status(parsed.status().code(), "line " + std::to_string(number) + ": " +
                                                            parsed.status().message());
      }
      inputs.push_back(std::move(input));
    }
    if (inputs.empty()) {
      return InvalidArgument("--input " + path + " holds no requests (it is empty or blank)");
    }
  }
  return inputs;
}

Status Run(const Flags& flags, bool* any_failed) {
  if (!flags.Has("model") && !flags.Has("random-preset"))
    return InvalidArgument("--model is required");
  DSINFER_ASSIGN_OR_RETURN(GenerateRequest defaults, Defaults(flags));
  DSINFER_ASSIGN_OR_RETURN(EngineOptions options, EngineOptionsFromFlags(flags));
  DSINFER_ASSIGN_OR_RETURN(std::vector<Input> inputs, ReadInputs(flags, defaults));
  std::ofstream file;
  if (auto path = flags.Get("output")) {
    file.open(*path);
    if (!file) return NotFound("cannot write --output " + *path);
  }
  std::ostream& out = file.is_open() ? file : std::cout;
  const bool quiet = flags.Has("quiet");
  // Loading (CUDA): a progress line on a terminal while the weights reach the device.
  std::atomic<int64_t> loaded{0}, to_load{0};
  options.load_progress = [&](int64_t done, int64_t total) {
    loaded = done;
    to_load = total;
  };
  auto load_bar = quiet ? nullptr
                        : std::make_unique<ProgressBar>(
                              [&](int64_t* done, int64_t* all, std::string*) {
                                *all = to_load.load() >> 20;
                                *done = std::min(loaded.load() >> 20, *all);
                              },
                              "MiB of weights");
  auto created = Engine::Create(options);
  if (load_bar) load_bar->Stop();
  DSINFER_RETURN_IF_ERROR(created.status());
  auto engine = std::move(*created);
  if (!quiet) {
    std::fprintf(stderr, "dsinfer generate: %s on device %s; %s\n", engine->model_family().c_str(),
                 engine->device().c_str(), engine->MemoryPlanDescription().c_str());
  }

  const auto start = std::chrono::steady_clock::now();
  auto seconds = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(); };
  // streams[i]: one per prompt of line i, or none when the line was refused (rejected[i]); a prompt
  // the engine refuses ends the line's other prompts.
  std::vector<std::vector<std::shared_ptr<RequestStream>>> streams(inputs.size());
  std::vector<RequestResult> rejected(inputs.size());
  int64_t total = 0;  // engine requests, and one per refused line (the progress bar's count)
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!inputs[i].requests.ok()) {
      rejected[i].status = inputs[i].requests.status();
      ++total;
      continue;
    }
    const auto& requests = *inputs[i].requests;
    for (size_t p = 0; p < requests.size(); ++p) {
      auto stream = engine->Submit(requests[p]);
      if (stream.ok()) {
        streams[i].push_back(*stream);
        continue;
      }
      for (const auto& s : streams[i]) engine->Abort(s->id());
      streams[i].clear();
      rejected[i].status =
          requests.size() == 1
              ? stream.status()
              : Status(stream.status().code(),
                       "\"prompt\" item " + std::to_string(p) + ": " + stream.status().message());
      break;
    }
    total += streams[i].empty() ? 1 : static_cast<int64_t>(streams[i].size());
  }
  std::unique_ptr<ProgressBar> bar;
  if (!quiet) {
    bar = std::make_unique<ProgressBar>([&](int64_t* done, int64_t* all, std::string* extra) {
      const EngineStats s = engine->Stats();
      *done = s.requests_finished + (total - s.requests_submitted);
      *all = total;
      char buf[96];
      std::snprintf(buf, sizeof(buf), "%lld tokens  %.1f tok/s", static_cast<long long>(s.generated_tokens),
                    s.generated_tokens / std::max(seconds(), 1e-9));
      *extra = buf;
    });
  }
  RunSummary summary;
  for (size_t i = 0; i < inputs.size(); ++i) {
    RequestResult result = rejected[i];
    for (size_t p = 0; p < streams[i].size(); ++p) {
      // A list of prompts: one result, its completions in prompt order, its prompt tokens summed.
      const int n = (*inputs[i].requests)[p].params.n;
      RequestResult one = CollectResult(*streams[i][p], n);
      if (p == 0) result.id = one.id;
      if (result.status.ok() && !one.status.ok()) result.status = one.status;
      result.prompt_tokens += one.prompt_tokens;
      for (Completion& c : one.completions) {
        c.index += static_cast<int>(p) * n;
        result.completions.push_back(std::move(c));
      }
    }
    summary.Add(result);
    *any_failed |= !result.status.ok();
    json line = ResultJson(inputs[i].id, result, engine->has_tokenizer());
    if (inputs[i].requests.ok() && !inputs[i].requests->front().messages.empty() &&
        engine->has_tokenizer()) {
      AddChatMessages(*engine, inputs[i].requests->front().chat, &line);
    }
    out << line.dump(-1, ' ', false, json::error_handler_t::replace) << "\n";
    out.flush();
  }
  summary.set_wall_seconds(seconds());
  summary.set_engine_stats(engine->Stats());
  summary.set_speculative(options.speculative);
  if (bar) bar->Stop();
  if (!quiet) std::fprintf(stderr, "%s", summary.ToText().c_str());
  if (auto path = flags.Get("summary-json")) {
    std::ofstream s(*path);
    if (!s) return NotFound("cannot write --summary-json " + *path);
    s << summary.ToJson().dump() << "\n";
  }
  return Status::Ok();
}

}  // namespace

int RunGenerate(int argc, char** argv) {
  bool any_failed = false;
  const int rc = RunSubcommand(argc, argv, "generate",
                               "Offline generation: prompts in, completions out (JSONL).", Specs(),
                               [&](const Flags& flags) { return Run(flags, &any_failed); });
  return rc == 0 && any_failed ? 1 : rc;  // some requests failed (their lines say why)
}

}  // namespace dsinfer::cli
