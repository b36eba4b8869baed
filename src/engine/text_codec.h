// TextCodec: the engine's narrow view of the tokenizer and the chat recipe: encode a prompt, render
// chat messages to ids, and turn generated ids into UTF-8-safe text deltas. The engine works on ids;
// without a tokenizer (NoTextCodec) text prompts, messages and stop strings are rejected with a
// clear error and outputs carry ids only. Implementations are immutable and thread-safe (Submit
// encodes on the caller's thread); an IncrementalDecoder belongs to one completion.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "dsinfer/engine.h"
#include "recipe/dialect.h"

namespace dsinfer::tokenizer {
class Tokenizer;
}  // namespace dsinfer::tokenizer

namespace dsinfer::engine {

class IncrementalDecoder {
 public:
  virtual ~IncrementalDecoder() = default;
  // Text completed by `id` (may be empty while a UTF-8 character is incomplete).
  virtual std::string Add(int32_t id) = 0;
  // Held bytes at the end of generation.
  virtual std::string Finish() = 0;
};

class TextCodec {
 public:
  virtual ~TextCodec() = default;
  virtual bool has_text() const = 0;
  virtual StatusOr<std::vector<int32_t>> Encode(const std::string& text) const = 0;
  virtual StatusOr<std::vector<int32_t>> RenderChat(const std::vector<ChatMessage>& messages,
                                                    const ChatOptions& options) const = 0;
  virtual std::string Decode(const std::vector<int32_t>& ids) const = 0;
  // The recipe's parse of a chat completion (control tokens included in the parsed text).
  virtual StatusOr<ChatReply> ParseChat(const std::vector<int32_t>& ids,
                                        const ChatOptions& chat) const = 0;
  // nullptr when there is no text.
  virtual std::unique_ptr<IncrementalDecoder> NewDecoder() const = 0;
  // The tokenizer behind the text (token bytes for structured output), or nullptr.
  virtual const tokenizer::Tokenizer* tokenizer() const { return nullptr; }
  // The chat recipe's dialect (a forced tool call writes its DSML tags).
  virtual recipe::Dialect dialect() const { return recipe::Dialect::kV4; }
};

// Ids only: every text operation is an InvalidArgument explaining that the model has no tokenizer.
std::unique_ptr<TextCodec> NoTextCodec();

// The codec for a model dir: the tokenizer at `tokenizer_path` (a tokenizer.json or a dir holding
// one), or <model_dir>/tokenizer.json when it exists, with the recipe dialect of the model dir;
// else NoTextCodec(). Raw text prompts are encoded as is (added-token spellings become their ids;
// no BOS is added); generated text skips special tokens.
StatusOr<std::unique_ptr<TextCodec>> LoadTextCodec(const std::string& model_dir,
                                                   const std::string& tokenizer_path);

}  // namespace dsinfer::engine
