// ToGenerateRequest: a validated request::Request -> the engine's GenerateRequest (the public
// embedding API). The only place the schema meets the engine's types, shared by the server and
// `dsinfer generate --input`. Pure function; thread-safe.
#pragma once

#include "dsinfer/engine.h"
#include "request/request.h"

namespace dsinfer::api {

GenerateRequest ToGenerateRequest(const request::Request& r);

}  // namespace dsinfer::api
