// Tokenizer: tokenizer.json loading, encoding (added tokens -> pre-tokenizer -> BPE) and decoding
// (Hugging Face's ByteLevel decoder, per token, then lossy UTF-8).
#include "tokenizer/tokenizer.h"

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "tokenizer/byte_level.h"
#include "tokenizer/utf8.h"

namespace dsinfer::tokenizer {

namespace {
constexpr uint8_t kKnown = 1;
constexpr uint8_t kSpecial = 2;

Status CheckNormalizer(const nlohmann::json& j) {
  if (!j.contains("normalizer") || j["normalizer"].is_null()) return Status::Ok();
  const auto& n = j["normalizer"];
  if (n.is_object() && n.value("type", "") == "Sequence" && n.contains("normalizers") &&
      n["normalizers"].is_array() && n["normalizers"].empty()) {
    return Status::Ok();
  }
  return Unimplemented("tokenizer.json: normalizers are not supported (byte-level BPE only)");
}
}  // namespace

StatusOr<std::unique_ptr<Tokenizer>> Tokenizer::Load(const std::string& path) {
  namespace fs = std::filesystem;
  std::string file = path;
  std::error_code ec;
  if (fs::is_directory(path, ec)) file = (fs::path(path) / "tokenizer.json").string();
  std::ifstream in(file, std::ios::binary);
  if (!in) return NotFound("cannot read tokenizer file " + file);
  std::stringstream ss;
  ss << in.rdbuf();
  auto t = FromJson(ss.str());
  if (!t.ok()) return Status(t.status().code(), file + ": " + t.status().message());
  return t;
}

StatusOr<std::unique_ptr<Tokenizer>> Tokenizer::FromJson(std::string_view json_text) {
  auto j = nlohmann::json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return DataLoss("tokenizer.json is not a JSON object");
  DSINFER_RETURN_IF_ERROR(CheckNormalizer(j));
  std::unique_ptr<Tokenizer> t(new Tokenizer());
  if (!j.contains("model")) return DataLoss("tokenizer.json: no model");
  DSINFER_ASSIGN_OR_RETURN(t->model_, BpeModel::Create(j["model"]));
  DSINFER_ASSIGN_OR_RETURN(t->pre_tokenizer_,
                           PreTokenizer::Create(j.contains("pre_tokenizer") ? j["pre_tokenizer"]
                                                                            : nlohmann::json()));
  if (j.contains("added_tokens") && j["added_tokens"].is_array()) {
    for (const auto& a : j["added_tokens"]) {
      if (!a.is_object() || !a.contains("id") || !a["id"].is_number_integer() ||
          !a.contains("content") || !a["content"].is_string()) {
        return DataLoss("tokenizer.json: malformed added_tokens entry");
      }
      if (a.value("lstrip", false) || a.value("rstrip", false) || a.value("single_word", false)) {
        return Unimplemented("tokenizer.json: added tokens with lstrip/rstrip/single_word");
      }
      AddedToken tok;
      const int64_t id = a["id"].get<int64_t>();
      if (id < 0 || id > (int64_t{1} << 30)) return DataLoss("tokenizer.json: bad added token id");
      tok.id = static_cast<int32_t>(id);
      tok.content = a["content"].get<std::string>();
      tok.special = a.value("special", false);
      if (!IsValidUtf8(tok.content)) return DataLoss("tokenizer.json: added token is not UTF-8");
      t->added_by_content_.emplace(tok.content, tok.id);
      t->added_.push_back(std::move(tok));
    }
  }
  t->matcher_ = AddedTokenMatcher(t->added_);

  int32_t end = t->model_->vocab_end();
  for (const auto& a : t->added_) end = std::max(end, a.id + 1);
  t->id_bytes_.assign(static_cast<size_t>(end), std::string());
  t->id_flags_.assign(static_cast<size_t>(end), 0);
  // HF ByteLevel decoder, per token: the inverse byte map if every character is in the alphabet,
  // else the token's own UTF-8.
  auto token_bytes = [](const std::string& tok) {
    auto b = ByteLevelToBytes(tok);
    return b ? *b : tok;
  };
  for (int32_t id = 0; id < t->model_->vocab_end(); ++id) {
    const std::string& tok = t->model_->TokenOf(id);
    if (tok.empty()) continue;
    t->id_bytes_[static_cast<size_t>(id)] = token_bytes(tok);
    t->id_flags_[static_cast<size_t>(id)] = kKnown;
  }
  for (const auto& a : t->added_) {  // an added token overrides a vocab entry of the same id
    t->id_bytes_[static_cast<size_t>(a.id)] = token_bytes(a.content);
    t->id_flags_[static_cast<size_t>(a.id)] = kKnown | (a.special ? kSpecial : 0);
  }
  return t;
}

std::vector<int32_t> Tokenizer::Encode(std::string_view text, bool allow_special) const {
  std::vector<int32_t> ids;
  ids.reserve(text.size() / 3 + 4);
  EncodeTo(text, allow_special, &ids);
  return ids;
}

void Tokenizer::EncodeTo(std::string_view text, bool allow_special, std::vector<int32_t>* out) const {
  std::string repaired;
  if (!IsValidUtf8(text)) {
    repaired = RepairUtf8(text);
    text = repaired;
  }
  if (!allow_special || matcher_.empty()) {
    EncodeOrdinary(text, out);
    return;
  }
  size_t pos = 0;
  while (pos < text.size()) {
    const auto m = matcher_.FindNext(text, pos);
    if (m.id < 0) {
      EncodeOrdinary(text.substr(pos), out);
      break;
    }
    EncodeOrdinary(text.substr(pos, m.begin - pos), out);
    out->push_back(m.id);
    pos = m.end;
  }
}

void Tokenizer::EncodeOrdinary(std::string_view text, std::vector<int32_t>* out) const {
  if (text.empty()) return;
  pre_tokenizer_->Split(text, [&](std::string_view piece) { model_->Encode(piece, out); });
}

const std::string& Tokenizer::TokenBytes(int32_t id) const {
  static const std::string kEmpty;
  if (id < 0 || id >= id_end()) return kEmpty;
  return id_bytes_[static_cast<size_t>(id)];
}

std::string Tokenizer::Decode(const std::vector<int32_t>& ids, bool skip_special) const {
  std::string bytes;
  for (int32_t id : ids) {
    if (!IsKnownId(id)) continue;
    if (skip_special && IsSpecial(id)) continue;
    bytes += id_bytes_[static_cast<size_t>(id)];
  }
  return IsValidUtf8(bytes) ? bytes : RepairUtf8(bytes);
}

std::optional<int32_t> Tokenizer::TokenToId(std::string_view token) const {
  auto it = added_by_content_.find(std::string(token));
  if (it != added_by_content_.end()) return it->second;
  const int32_t id = model_->IdOf(std::string(token));
  if (id >= 0) return id;
  return std::nullopt;
}

bool Tokenizer::IsKnownId(int32_t id) const {
  return id >= 0 && id < id_end() && (id_flags_[static_cast<size_t>(id)] & kKnown);
}

bool Tokenizer::IsSpecial(int32_t id) const {
  return IsKnownId(id) && (id_flags_[static_cast<size_t>(id)] & kSpecial);
}

}  // namespace dsinfer::tokenizer
