// `dsinfer serve`: the OpenAI-compatible HTTP server (api/server.h) with the engine flags of
// `generate`. Listens on 127.0.0.1:8000 unless told otherwise; prints "listening on ..." once the
// port is bound (with --port 0, the port picked) and "ready" once the model is loaded.
#include <climits>

#include "api/server.h"
#include "cli/commands.h"
#include "cli/engine_flags.h"
#include "cli/flags.h"

namespace dsinfer::cli {

namespace {

std::vector<FlagSpec> Specs() {
  std::vector<FlagSpec> specs = {
      {"model", "model dir (config.json + *.safetensors [+ tokenizer.json])"},
      {"host", "address to listen on (default 127.0.0.1)"},
      {"port", "TCP port (default 8000; 0 = any free port)"},
      {"served-model-name", "the model's name in the API (default: the model dir's name)"},
      {"api-key", "require 'Authorization: Bearer KEY' on /v1/* and /tokenize"},
      {"max-queued", "sequences that may wait beyond --max-running; more get 429 (default 1024)"},
      {"max-body-mb", "largest request body in MiB; larger get 413 (default 8)"},
      {"drain-timeout", "seconds in-flight requests may take after SIGTERM (default 30)"},
  };
  for (const FlagSpec& f : EngineFlagSpecs()) specs.push_back(f);
  return specs;
}

Status Run(const Flags& flags) {
  if (!flags.Has("model") && !flags.Has("random-preset"))
    return InvalidArgument("--model is required");
  api::ServerOptions o;
  DSINFER_ASSIGN_OR_RETURN(o.engine, EngineOptionsFromFlags(flags));
  o.http.host = flags.GetOr("host", "127.0.0.1");
  DSINFER_ASSIGN_OR_RETURN(int64_t port, flags.GetInt("port", 8000));
  if (port < 0 || port > 65535) {
    return InvalidArgument("--port must be in [0, 65535], got " + std::to_string(port));
  }
  o.http.port = static_cast<int>(port);
  DSINFER_ASSIGN_OR_RETURN(int64_t body_mb, flags.GetInt("max-body-mb", 8));
  if (body_mb < 1 || body_mb > 4096) return InvalidArgument("--max-body-mb must be in [1, 4096]");
  o.http.max_body_bytes = body_mb << 20;
  o.service.model_dir = o.engine.model_dir;
  o.service.served_model_name = flags.GetOr("served-model-name", o.engine.random_preset);
  o.service.api_key = flags.GetOr("api-key", "");
  DSINFER_ASSIGN_OR_RETURN(o.service.max_queued, flags.GetInt("max-queued", 1024));
  if (o.service.max_queued < 0) {
    return InvalidArgument("--max-queued must be >= 0, got " +
                           std::to_string(o.service.max_queued));
  }
  o.service.max_running = o.engine.max_running;
  DSINFER_ASSIGN_OR_RETURN(int64_t drain, flags.GetInt("drain-timeout", 30));
  if (drain < 0) return InvalidArgument("--drain-timeout must be >= 0");
  o.drain_timeout_s = static_cast<double>(drain);
  return api::RunServer(o);
}

}  // namespace

int RunServe(int argc, char** argv) {
  return RunSubcommand(argc, argv, "serve",
                       "The OpenAI-compatible HTTP server: /v1/chat/completions, /v1/completions, "
                       "/v1/models, /tokenize, /detokenize, /health, /metrics.",
                       Specs(), Run);
}

}  // namespace dsinfer::cli
