// Messages: validation and the reference encoder's preprocessing of OpenAI-style chat messages
// (recipe-v4.md §3.3): NormalizeMessages checks the user's JSON and gives clear errors (unknown
// role, tool call without a name, bad content type); MergeToolMessages, SortToolResults and
// DropThinking are the reference's merge_tool_messages, sort_tool_results_by_call_order and
// _drop_thinking_messages. Messages stay JSON objects (ordered, so tool schemas keep key order).
// Pure functions; thread-safe.
#pragma once

#include <nlohmann/json.hpp>
#include <vector>

#include "base/status.h"
#include "recipe/dialect.h"

namespace dsinfer::recipe {

using Json = nlohmann::ordered_json;
using Messages = std::vector<Json>;

// Validates `messages` (a JSON array of message objects) and returns them with content-part
// arrays flattened (text parts joined by "\n\n"), "reasoning" accepted for "reasoning_content",
// and object-valued tool-call arguments turned into JSON strings. `tools` (an OpenAI tools array,
// or null) is attached to the head system/developer message, or to a new empty system message.
StatusOr<Messages> NormalizeMessages(const Json& messages, const Json& tools);

// Python truthiness of a JSON value (null, false, 0, "", [] and {} are false).
bool Truthy(const Json& v);

Messages MergeToolMessages(const Messages& messages, Dialect dialect);
void SortToolResults(Messages& messages);
int FindLastUserIndex(const Messages& messages, Dialect dialect);
Messages DropThinking(const Messages& messages, Dialect dialect);

}  // namespace dsinfer::recipe
