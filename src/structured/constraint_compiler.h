// CompileConstraint: a ConstraintSpec into a TokenAutomaton over a vocabulary, within size limits
// (an invalid or unsupported spec is InvalidArgument / Unimplemented naming the problem; one that
// would explode is InvalidArgument). ConstraintCache shares compiled constraints between requests
// with the same spec (and so their cached masks). Compilation is a pure function; the cache is
// thread-safe.
#pragma once

#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "structured/constraint_spec.h"
#include "structured/json_schema_compiler.h"
#include "structured/token_automaton.h"

namespace dsinfer::structured {

struct CompileOptions {
  int64_t max_elements = 1 << 20;  // grammar size bound (compile time and memory follow it)
  JsonSchemaOptions json;
  PdaLimits pda;
  // TokenAutomaton::Precompute at compile time: the bounded-string families (and shared keys) of
  // the configurations reachable within these bounds are classified before the first mask
  // (precompute_us = 0: none, each family's first mask walks the vocabulary). The configurations
  // bound the work (tens of ms); the time is a backstop on a loaded machine.
  int32_t precompute_configs = 4096;
  int64_t precompute_us = 200'000;
};

StatusOr<Grammar> CompileToGrammar(const ConstraintSpec& spec, const CompileOptions& options = {});
StatusOr<std::shared_ptr<TokenAutomaton>> CompileConstraint(const ConstraintSpec& spec,
                                                            std::shared_ptr<const Vocabulary> vocab,
                                                            const CompileOptions& options = {});

class ConstraintCache {
 public:
  ConstraintCache(std::shared_ptr<const Vocabulary> vocab, CompileOptions options = {},
                  size_t capacity = 16)
      : vocab_(std::move(vocab)), options_(options), capacity_(capacity) {}
  // The compiled constraint of `spec` (compiled on first use; errors are not cached).
  StatusOr<std::shared_ptr<TokenAutomaton>> Get(const ConstraintSpec& spec);
  const Vocabulary& vocab() const { return *vocab_; }

 private:
  std::mutex mu_;
  std::shared_ptr<const Vocabulary> vocab_;
  CompileOptions options_;
  size_t capacity_;
  std::list<std::string> lru_;  // most recent first
  std::unordered_map<std::string,
                     std::pair<std::shared_ptr<TokenAutomaton>, std::list<std::string>::iterator>>
      map_;
};

}  // namespace dsinfer::structured
