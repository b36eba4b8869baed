#include "structured/constraint_compiler.h"

#include <algorithm>
#include <chrono>

#include "structured/gbnf_compiler.h"
#include "structured/regex_compiler.h"
#include "structured/tool_call_grammar.h"

namespace dsinfer::structured {

StatusOr<Grammar> CompileToGrammar(const ConstraintSpec& spec, const CompileOptions& options) {
  GrammarBuilder b(options.max_elements);
  const int32_t root = b.NewRule("root");
  Element body;
  switch (spec.kind) {
    case ConstraintKind::kNone:
      return InvalidArgument("no constraint to compile");
    case ConstraintKind::kJsonObject:
      body = JsonObjectElement(b, options.json);
      break;
    case ConstraintKind::kJsonSchema: {
      const auto schema =
          nlohmann::ordered_json::parse(spec.text, nullptr, /*allow_exceptions=*/false);
      if (schema.is_discarded()) return InvalidArgument("the JSON schema is not valid JSON");
      DSINFER_ASSIGN_OR_RETURN(body, CompileJsonSchema(b, schema, options.json));
      break;
    }
    case ConstraintKind::kRegex: {
      DSINFER_ASSIGN_OR_RETURN(body, CompileRegex(b, spec.text, RegexMode::kFullMatch));
      break;
    }
    case ConstraintKind::kChoice: {
      if (spec.choices.empty()) return InvalidArgument("choice needs at least one string");
      std::vector<std::vector<Element>> alts;
      for (const auto& c : spec.choices) alts.push_back(b.LiteralSeq(c));
      body = b.Choice(std::move(alts), "choice");
      break;
    }
    case ConstraintKind::kGrammar: {
      DSINFER_ASSIGN_OR_RETURN(body, CompileGbnf(b, spec.text));
      break;
    }
    case ConstraintKind::kToolCalls: {
      DSINFER_ASSIGN_OR_RETURN(body, CompileToolCalls(b, spec.text, options.json));
      break;
    }
  }
  b.AddAlt(root, {body});
  return b.Finish(root);
}

StatusOr<std::shared_ptr<TokenAutomaton>> CompileConstraint(const ConstraintSpec& spec,
                                                            std::shared_ptr<const Vocabulary> vocab,
                                                            const CompileOptions& options) {
  if (spec.kind == ConstraintKind::kToolCalls && vocab->special_id(kDsmlSlot) < 0) {
    return InvalidArgument(
        "a forced tool call needs the tokenizer's \"\xEF\xBD\x9C"
        "DSML\xEF\xBD\x9C\" token, and it "
        "has none");
  }
  DSINFER_ASSIGN_OR_RETURN(Grammar g, CompileToGrammar(spec, options));
  auto a = std::make_shared<TokenAutomaton>(std::move(g), std::move(vocab), options.pda);
  DSINFER_RETURN_IF_ERROR(a->status());
  const int32_t init = a->initial();
  if (init == Pda::kDead) return InvalidArgument("the constraint matches no output at all");
  if (options.precompute_us > 0) {
    // Well within the automaton's own bound: what the generations would not reach stays unmade.
    a->Precompute(std::min(options.precompute_configs, options.pda.max_configs / 4),
                  std::chrono::microseconds(options.precompute_us));
    DSINFER_RETURN_IF_ERROR(a->status());
  }
  return a;
}

StatusOr<std::shared_ptr<TokenAutomaton>> ConstraintCache::Get(const ConstraintSpec& spec) {
  const std::string key = spec.Key();
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = map_.find(key);
    if (it != map_.end()) {
      lru_.splice(lru_.begin(), lru_, it->second.second);
      return it->second.first;
    }
  }
  DSINFER_ASSIGN_OR_RETURN(auto a, CompileConstraint(spec, vocab_, options_));  // outside the lock
  std::lock_guard<std::mutex> lock(mu_);
  auto it = map_.find(key);
  if (it != map_.end()) return it->second.first;
  lru_.push_front(key);
  map_[key] = {a, lru_.begin()};
  while (map_.size() > capacity_) {
    map_.erase(lru_.back());
    lru_.pop_back();
  }
  return a;
}

}  // namespace dsinfer::structured
