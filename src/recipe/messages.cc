// Messages: validation and preprocessing, mirroring encoding_dsv4.py / the V4.1 encoder.
#include "recipe/messages.h"

#include <algorithm>
#include <map>

#include "recipe/python_json.h"

namespace dsinfer::recipe {

namespace {

const char* const kRoles[] = {"system", "developer", "user", "assistant", "tool", "latest_reminder"};
const char* const kTasks[] = {"action", "query", "authority", "domain", "title", "read_url"};

std::string Where(size_t i) { return "messages[" + std::to_string(i) + "]"; }

// Flattens OpenAI content parts into one string.
StatusOr<Json> FlattenContent(const Json& content, const std::string& where) {
  if (content.is_null() || content.is_string()) return content;
  if (!content.is_array()) return InvalidArgument(where + ".content must be a string, null or an array of parts");
  std::string out;
  bool first = true;
  for (const auto& part : content) {
    if (!part.is_object() || part.value("type", "") != "text" || !part.contains("text") ||
        !part["text"].is_string()) {
      return InvalidArgument(where + ".content: only {\"type\": \"text\", \"text\": ...} parts are supported");
    }
    if (!first) out += "\n\n";
    first = false;
    out += part["text"].get<std::string>();
  }
  return Json(out);
}

}  // namespace

bool Truthy(const Json& v) {
  switch (v.type()) {
    case nlohmann::json::value_t::null: return false;
    case nlohmann::json::value_t::boolean: return v.get<bool>();
    case nlohmann::json::value_t::number_integer: return v.get<int64_t>() != 0;
    case nlohmann::json::value_t::number_unsigned: return v.get<uint64_t>() != 0;
    case nlohmann::json::value_t::number_float: return v.get<double>() != 0.0;
    case nlohmann::json::value_t::string: return !v.get_ref<const std::string&>().empty();
    case nlohmann::json::value_t::array:
    case nlohmann::json::value_t::object: return !v.empty();
    default: return false;
  }
}

StatusOr<Messages> NormalizeMessages(const Json& messages, const Json& tools) {
  if (!messages.is_array()) return InvalidArgument("messages must be a JSON array");
  Messages out;
  for (size_t i = 0; i < messages.size(); ++i) {
    const std::string where = Where(i);
    Json m = messages[i];
    if (!m.is_object()) return InvalidArgument(where + " is not an object");
    if (!m.contains("role") || !m["role"].is_string()) return InvalidArgument(where + " has no role");
    const std::string role = m["role"].get<std::string>();
    if (std::find(std::begin(kRoles), std::end(kRoles), role) == std::end(kRoles)) {
      return InvalidArgument(where + ": unknown role '" + role +
                             "' (system, developer, user, assistant, tool, latest_reminder)");
    }
    if (m.contains("content") && role != "tool") {
      DSINFER_ASSIGN_OR_RETURN(m["content"], FlattenContent(m["content"], where));
    }
    if (role == "tool" && m.contains("content") && !m["content"].is_string() &&
        !m["content"].is_array() && !m["content"].is_null()) {
      return InvalidArgument(where + ".content must be a string or an array of parts");
    }
    if (role == "developer" && !Truthy(m.value("content", Json()))) {
      return InvalidArgument(where + ": a developer message needs non-empty content");
    }
    if (!m.contains("reasoning_content") && m.contains("reasoning")) {
      m["reasoning_content"] = m["reasoning"];
      m.erase("reasoning");
    }
    if (m.contains("reasoning_content") && !m["reasoning_content"].is_null() &&
        !m["reasoning_content"].is_string()) {
      return InvalidArgument(where + ".reasoning_content must be a string");
    }
    if (m.contains("task") && !m["task"].is_null()) {
      if (!m["task"].is_string() ||
          std::find(std::begin(kTasks), std::end(kTasks), m["task"].get<std::string>()) == std::end(kTasks)) {
        return InvalidArgument(where + ".task must be one of action, query, authority, domain, title, read_url");
      }
    }
    if (m.contains("tool_calls") && !m["tool_calls"].is_null()) {
      if (!m["tool_calls"].is_array()) return InvalidArgument(where + ".tool_calls must be an array");
      for (size_t k = 0; k < m["tool_calls"].size(); ++k) {
        Json& tc = m["tool_calls"][k];
        const std::string w = where + ".tool_calls[" + std::to_string(k) + "]";
        if (!tc.is_object() || !tc.contains("function") || !tc["function"].is_object()) {
          return InvalidArgument(w + " needs a \"function\" object");
        }
        Json& fn = tc["function"];
        if (!fn.contains("name") || !fn["name"].is_string() || fn["name"].get<std::string>().empty()) {
          return InvalidArgument(w + " has no function name");
        }
        if (!fn.contains("arguments") || fn["arguments"].is_null()) {
          fn["arguments"] = "{}";
        } else if (!fn["arguments"].is_string()) {
          fn["arguments"] = PythonJsonDumps(fn["arguments"]);
        }
      }
    }
    if (m.contains("tools") && !m["tools"].is_null()) {
      if (!m["tools"].is_array()) return InvalidArgument(where + ".tools must be an array");
      for (const auto& t : m["tools"]) {
        if (!t.is_object() || !t.contains("function") || !t["function"].is_object()) {
          return InvalidArgument(where + ".tools: each tool needs a \"function\" object");
        }
      }
    }
    out.push_back(std::move(m));
  }
  if (!tools.is_null()) {
    if (!tools.is_array()) return InvalidArgument("tools must be a JSON array");
    for (const auto& t : tools) {
      if (!t.is_object() || !t.contains("function") || !t["function"].is_object()) {
        return InvalidArgument("tools: each tool needs a \"function\" object");
      }
    }
    if (!tools.empty()) {
      if (!out.empty() && (out[0]["role"] == "system" || out[0]["role"] == "developer")) {
        out[0]["tools"] = tools;
      } else {
        Json sys = Json::object();
        sys["role"] = "system";
        sys["tools"] = tools;
        out.insert(out.begin(), sys);
      }
    }
  }
  return out;
}

Messages MergeToolMessages(const Messages& messages, Dialect dialect) {
  Messages merged;
  auto last_is_user_with_blocks = [&] {
    return !merged.empty() && merged.back().value("role", "") == "user" &&
           merged.back().contains("content_blocks");
  };
  for (const Json& msg : messages) {
    const std::string role = msg.value("role", "");
    if (role == "tool") {
      Json block = Json::object();
      block["type"] = "tool_result";
      block["tool_use_id"] = msg.value("tool_call_id", Json(""));
      block["content"] = msg.contains("content") ? msg["content"] : Json("");
      if (last_is_user_with_blocks()) {
        merged.back()["content_blocks"].push_back(block);
      } else {
        Json u = Json::object();
        u["role"] = "user";
        u["content_blocks"] = Json::array({block});
        merged.push_back(u);
      }
    } else if (role == "user") {
      const Json content = msg.contains("content") ? msg["content"] : Json("");
      Json blocks;
      if (dialect == Dialect::kV41 && msg.contains("content_blocks") && !msg["content_blocks"].is_null()) {
        blocks = msg["content_blocks"];
      } else {
        Json text = Json::object();
        text["type"] = "text";
        text["text"] = content;
        blocks = Json::array({text});
      }
      const bool task_free = merged.empty() || !merged.back().contains("task") || merged.back()["task"].is_null();
      if (last_is_user_with_blocks() && task_free) {
        for (const auto& b : blocks) merged.back()["content_blocks"].push_back(b);
      } else if (dialect == Dialect::kV41) {
        Json u = msg;
        u["content_blocks"] = blocks;
        merged.push_back(u);
      } else {
        Json u = Json::object();
        u["role"] = "user";
        u["content"] = content;
        u["content_blocks"] = blocks;
        for (const char* key : {"task", "wo_eos", "mask"}) {
          if (msg.contains(key)) u[key] = msg[key];
        }
        merged.push_back(u);
      }
    } else {
      merged.push_back(msg);
    }
  }
  return merged;
}

void SortToolResults(Messages& messages) {
  std::map<std::string, int> order;
  for (Json& msg : messages) {
    const std::string role = msg.value("role", "");
    if (role == "assistant" && msg.contains("tool_calls") && Truthy(msg["tool_calls"])) {
      order.clear();
      int idx = 0;
      for (const auto& tc : msg["tool_calls"]) {
        std::string id;
        if (tc.contains("id") && tc["id"].is_string()) id = tc["id"].get<std::string>();
        if (id.empty() && tc.contains("function") && tc["function"].contains("id") &&
            tc["function"]["id"].is_string()) {
          id = tc["function"]["id"].get<std::string>();
        }
        if (!id.empty()) order[id] = idx;
        ++idx;
      }
    } else if (role == "user" && msg.contains("content_blocks") && Truthy(msg["content_blocks"])) {
      std::vector<Json> tool_blocks;
      for (const auto& b : msg["content_blocks"]) {
        if (b.value("type", "") == "tool_result") tool_blocks.push_back(b);
      }
      if (tool_blocks.size() > 1 && !order.empty()) {
        auto key = [&](const Json& b) {
          const Json id = b.value("tool_use_id", Json(""));
          if (!id.is_string()) return 0;
          auto it = order.find(id.get<std::string>());
          return it == order.end() ? 0 : it->second;
        };
        std::stable_sort(tool_blocks.begin(), tool_blocks.end(),
                         [&](const Json& a, const Json& b) { return key(a) < key(b); });
        size_t k = 0;
        for (auto& b : msg["content_blocks"]) {
          if (b.value("type", "") == "tool_result") b = tool_blocks[k++];
        }
      }
    }
  }
}

int FindLastUserIndex(const Messages& messages, Dialect dialect) {
  for (int i = static_cast<int>(messages.size()) - 1; i >= 0; --i) {
    const std::string role = messages[static_cast<size_t>(i)].value("role", "");
    if (role == "user" || role == "developer") return i;
    if (dialect == Dialect::kV41 && role == "system" && i > 0) return i;
  }
  return -1;
}

Messages DropThinking(const Messages& messages, Dialect dialect) {
  const int last_user = FindLastUserIndex(messages, dialect);
  Messages out;
  for (size_t i = 0; i < messages.size(); ++i) {
    const std::string role = messages[i].value("role", "");
    const bool keep = role == "user" || role == "system" || role == "tool" || role == "latest_reminder" ||
                      role == "direct_search_results";
    if (keep || static_cast<int>(i) >= last_user) {
      out.push_back(messages[i]);
    } else if (role == "assistant") {
      Json m = messages[i];
      m.erase("reasoning_content");
      out.push_back(std::move(m));
    }
  }
  return out;
}

}  // namespace dsinfer::recipe
