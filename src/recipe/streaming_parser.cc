// StreamingParser: the state machine. Holdback rule: a state emits everything before the earliest
// complete marker, or else everything but the longest tail that is a proper prefix of a marker.
#include "recipe/streaming_parser.h"

#include <algorithm>
#include <set>

#include "recipe/python_json.h"

namespace dsinfer::recipe {

namespace {

// Earliest occurrence of any of `stops` in `s` from `from`; *which = its index.
size_t FindFirst(std::string_view s, size_t from, const std::vector<std::string_view>& stops, size_t* which) {
  size_t best = std::string_view::npos;
  for (size_t k = 0; k < stops.size(); ++k) {
    const size_t p = s.find(stops[k], from);
    if (p < best) {
      best = p;
      *which = k;
    }
  }
  return best;
}

// Length of the longest suffix of `s` that is a proper prefix of one of `stops`.
size_t HoldBack(std::string_view s, const std::vector<std::string_view>& stops) {
  size_t keep = 0;
  for (std::string_view stop : stops) {
    for (size_t len = std::min(stop.size() - 1, s.size()); len > keep; --len) {
      if (s.substr(s.size() - len) == stop.substr(0, len)) {
        keep = len;
        break;
      }
    }
  }
  return keep;
}

}  // namespace

void ParseDelta::Append(const ParseDelta& other) {
  reasoning += other.reasoning;
  content += other.content;
  tool_calls.insert(tool_calls.end(), other.tool_calls.begin(), other.tool_calls.end());
  done = done || other.done;
}

StreamingParser::StreamingParser(Dialect dialect, bool thinking)
    : state_(thinking ? State::kReasoning : State::kContent) {
  const DsmlNames n = DsmlNamesOf(dialect);
  const std::string d(kDsml);
  marker_ = "\n\n<" + d + std::string(n.calls);
  invoke_open_ = "<" + d + std::string(n.invoke);
  invoke_close_ = "</" + d + std::string(n.invoke);
  param_open_ = "<" + d + std::string(n.parameter);
  param_close_ = "/" + d + std::string(n.parameter);
  calls_close_ = "</" + d + std::string(n.calls) + ">";
}

ParseDelta StreamingParser::Push(std::string_view text) {
  ParseDelta out;
  buf_.append(text);
  Run(&out, /*final=*/false);
  return out;
}

ParseDelta StreamingParser::Finish() {
  ParseDelta out;
  Run(&out, /*final=*/true);
  return out;
}

void StreamingParser::Run(ParseDelta* out, bool final) {
  bool progress = true;
  while (progress) {
    switch (state_) {
      case State::kReasoning: progress = RunReasoning(out, final); break;
      case State::kContent: progress = RunContent(out, final); break;
      case State::kToolCalls: progress = RunToolCalls(out, final); break;
      case State::kAfterToolCalls: progress = RunAfterToolCalls(out, final); break;
      case State::kDone:
        // Text after the end-of-sentence token is unusual; keep it as content, never drop it.
        out->content += buf_;
        buf_.clear();
        out->done = true;
        progress = false;
        break;
    }
  }
}

bool StreamingParser::RunReasoning(ParseDelta* out, bool final) {
  const std::vector<std::string_view> stops = {kThinkEnd, marker_, kEos};
  size_t which = 0;
  const size_t p = FindFirst(buf_, 0, stops, &which);
  if (p != std::string_view::npos) {
    out->reasoning.append(buf_, 0, p);
    if (which == 0) {
      buf_.erase(0, p + kThinkEnd.size());
      state_ = State::kContent;
    } else if (which == 1) {  // tool calls inside reasoning: hand them to the tool-call parser
      buf_.erase(0, p);
      state_ = State::kContent;
    } else {
      buf_.erase(0, p + kEos.size());
      state_ = State::kDone;
    }
    return true;
  }
  const size_t keep = final ? 0 : HoldBack(buf_, stops);
  out->reasoning.append(buf_, 0, buf_.size() - keep);
  buf_.erase(0, buf_.size() - keep);
  return false;
}

bool StreamingParser::RunContent(ParseDelta* out, bool final) {
  const std::vector<std::string_view> stops = {marker_, kEos};
  size_t which = 0;
  const size_t from = skip_marker_at_start_ ? 1 : 0;
  const size_t p = FindFirst(buf_, from, stops, &which);
  if (p != std::string_view::npos) {
    skip_marker_at_start_ = false;
    out->content.append(buf_, 0, p);
    if (which == 0) {
      buf_.erase(0, p);
      pos_ = marker_.size();
      state_ = State::kToolCalls;
    } else {
      buf_.erase(0, p + kEos.size());
      state_ = State::kDone;
    }
    return true;
  }
  size_t keep = final ? 0 : HoldBack(buf_, stops);
  if (skip_marker_at_start_ && !buf_.empty()) keep = std::min(keep, buf_.size() - 1);
  const size_t emit = buf_.size() - keep;
  out->content.append(buf_, 0, emit);
  buf_.erase(0, emit);
  if (emit > 0) skip_marker_at_start_ = false;  // the failed marker's first byte is out
  return false;
}

bool StreamingParser::RunToolCalls(ParseDelta* out, bool final) {
  size_t next = 0;
  ToolCall call;
  const Step step = ParseElement(&next, &call);
  switch (step) {
    case Step::kInvoke:
      out->tool_calls.push_back(std::move(call));
      buf_.erase(0, next);  // the parsed markup is consumed
      pos_ = 0;
      return true;
    case Step::kEnd:
      buf_.erase(0, next);
      pos_ = 0;
      state_ = State::kAfterToolCalls;
      return true;
    case Step::kNeedMore:
      if (!final) return false;
      [[fallthrough]];
    case Step::kInvalid:
      // Unparsable: the unconsumed text is content again.
      state_ = State::kContent;
      skip_marker_at_start_ = buf_.compare(0, marker_.size(), marker_) == 0;
      pos_ = 0;
      return true;
  }
  return false;
}

bool StreamingParser::RunAfterToolCalls(ParseDelta* out, bool final) {
  const int m = MatchAt(0, kEos);
  if (m == 1) {
    buf_.erase(0, kEos.size());
    state_ = State::kDone;
    return true;
  }
  if (m == 0 && !final) return false;
  if (buf_.empty()) return false;
  state_ = State::kContent;  // text after the block: content
  return true;
}

int StreamingParser::MatchAt(size_t at, std::string_view lit) const {
  const size_t avail = buf_.size() > at ? buf_.size() - at : 0;
  const size_t n = std::min(avail, lit.size());
  if (buf_.compare(at, n, lit, 0, n) != 0) return -1;
  return n == lit.size() ? 1 : 0;
}

StreamingParser::Step StreamingParser::ParseElement(size_t* next, ToolCall* call) const {
  size_t at = pos_;
  auto expect = [&](std::string_view lit) -> int {
    const int m = MatchAt(at, lit);
    if (m == 1) at += lit.size();
    return m;
  };
  if (int m = expect(">\n"); m != 1) return m == 0 ? Step::kNeedMore : Step::kInvalid;
  const int end = MatchAt(at, calls_close_);
  if (end == 1) {
    *next = at + calls_close_.size();
    return Step::kEnd;
  }
  const int inv = expect(invoke_open_);
  if (inv == -1) return end == 0 ? Step::kNeedMore : Step::kInvalid;
  if (inv == 0) return Step::kNeedMore;
  // Header: up to the first parameter or the invoke's end; must be \s*name="NAME">\n.
  const std::vector<std::string_view> header_stops = {param_open_, invoke_close_};
  size_t which = 0;
  size_t h = FindFirst(buf_, at, header_stops, &which);
  if (h == std::string::npos) return Step::kNeedMore;
  std::string_view header(buf_.data() + at, h - at);
  size_t ws = 0;
  while (ws < header.size() && (header[ws] == ' ' || header[ws] == '\n' || header[ws] == '\t' || header[ws] == '\r')) ++ws;
  header.remove_prefix(ws);
  // Python's `$` also matches before one final "\n", so the header may end ">\n\n" (no params).
  if (header.size() >= 10 && header.substr(header.size() - 4) == "\">\n\n") header.remove_suffix(1);
  if (header.substr(0, 6) != "name=\"" || header.size() < 9 || header.substr(header.size() - 3) != "\">\n") {
    return Step::kInvalid;
  }
  call->name = std::string(header.substr(6, header.size() - 9));
  if (call->name.empty()) return Step::kInvalid;
  at = h + header_stops[which].size();
  std::string args = "{";
  std::set<std::string> seen;
  while (which == 0) {  // a parameter
    const size_t pc = buf_.find(param_close_, at);
    if (pc == std::string::npos) return Step::kNeedMore;
    std::string_view param(buf_.data() + at, pc - at);  //  name="K" string="true">V<
    if (param.substr(0, 7) != " name=\"" || param.empty() || param.back() != '<') return Step::kInvalid;
    const size_t t = param.find("\" string=\"true\">", 7);
    const size_t f = param.find("\" string=\"false\">", 7);
    const size_t q = std::min(t, f);
    if (q == std::string_view::npos) return Step::kInvalid;
    const bool is_string = q == t;
    const std::string key(param.substr(7, q - 7));
    const size_t vstart = q + (is_string ? 16 : 17);
    if (vstart > param.size() - 1) return Step::kInvalid;
    const std::string value(param.substr(vstart, param.size() - 1 - vstart));
    if (!seen.insert(key).second) return Step::kInvalid;  // duplicate parameter
    if (seen.size() > 1) args += ", ";
    args += PythonJsonString(key) + ": " + (is_string ? PythonJsonString(value) : value);
    at = pc + param_close_.size();
    if (int m = expect(">\n"); m != 1) return m == 0 ? Step::kNeedMore : Step::kInvalid;
    const int po = MatchAt(at, param_open_), ic = MatchAt(at, invoke_close_);
    if (po == 1) {
      at += param_open_.size();
      which = 0;
    } else if (ic == 1) {
      at += invoke_close_.size();
      which = 1;
    } else {
      return (po == 0 || ic == 0) ? Step::kNeedMore : Step::kInvalid;
    }
  }
  call->arguments = args + "}";
  *next = at;
  return Step::kInvoke;
}

ParseDelta ParseCompletion(std::string_view text, Dialect dialect, bool thinking) {
  StreamingParser p(dialect, thinking);
  ParseDelta out = p.Push(text);
  out.Append(p.Finish());
  return out;
}

}  // namespace dsinfer::recipe
