// RunServer: `dsinfer serve`. Listens first (so /health answers 503 while the model loads), loads
// the engine on the calling thread, then serves on one io_context thread until SIGTERM / SIGINT:
// then it drains — stops accepting, answers 503 to new requests, lets in-flight requests finish
// for up to drain_timeout_s, aborts the rest (finish_reason "abort") and returns once their
// replies are written. Blocking; one per process.
#pragma once

#include <string>

#include "api/http_server.h"
#include "api/openai_service.h"
#include "base/status.h"
#include "dsinfer/engine.h"

namespace dsinfer::api {

struct ServerOptions {
  EngineOptions engine;
  HttpServerOptions http;
  ServiceOptions service;
  double drain_timeout_s = 30;
};

Status RunServer(const ServerOptions& options);

}  // namespace dsinfer::api
