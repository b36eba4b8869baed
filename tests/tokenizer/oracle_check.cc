// oracle_check: compares dsinfer's tokenizer with Hugging Face ids on a corpus.
//   oracle_check TOKENIZER_JSON CORPUS_JSONL EXPECTED_JSONL
// CORPUS_JSONL lines are {"b64": raw bytes}; EXPECTED_JSONL lines {"ids": [...], "text": ...} come
// from tools/tokenizer/hf_oracle.js. Checks Encode (allow_special), Decode and the incremental
// detokenizer; prints mismatches and "N passed, M failed"; exit 1 on any mismatch.
#include <chrono>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tokenizer/incremental_detokenizer.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"

namespace {

std::string Base64Decode(const std::string& in) {
  static int table[256];
  static bool init = false;
  if (!init) {
    for (int& t : table) t = -1;
    const char* a = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    for (int i = 0; i < 64; ++i) table[static_cast<unsigned char>(a[i])] = i;
    init = true;
  }
  std::string out;
  int val = 0, bits = -8;
  for (unsigned char c : in) {
    if (table[c] < 0) continue;
    val = (val << 6) + table[c];
    bits += 6;
    if (bits >= 0) {
      out.push_back(static_cast<char>((val >> bits) & 0xFF));
      bits -= 8;
    }
  }
  return out;
}

std::vector<std::string> ReadLines(const char* path) {
  std::ifstream in(path);
  std::vector<std::string> lines;
  for (std::string l; std::getline(in, l);) {
    if (!l.empty()) lines.push_back(l);
  }
  return lines;
}

std::string Show(const std::vector<int32_t>& ids) {
  std::string s;
  for (size_t i = 0; i < ids.size() && i < 40; ++i) s += std::to_string(ids[i]) + " ";
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: oracle_check TOKENIZER_JSON CORPUS_JSONL EXPECTED_JSONL\n");
    return 2;
  }
  auto tok = dsinfer::tokenizer::Tokenizer::Load(argv[1]);
  if (!tok.ok()) {
    std::fprintf(stderr, "%s\n", tok.status().ToString().c_str());
    return 1;
  }
  const auto corpus = ReadLines(argv[2]);
  const auto expected = ReadLines(argv[3]);
  if (corpus.size() != expected.size() || corpus.empty()) {
    std::fprintf(stderr, "corpus has %zu lines, expected %zu\n", corpus.size(), expected.size());
    return 1;
  }
  int passed = 0, failed = 0;
  size_t bytes = 0;
  std::vector<std::string> texts;
  for (size_t i = 0; i < corpus.size(); ++i) {
    const std::string text = Base64Decode(nlohmann::json::parse(corpus[i])["b64"].get<std::string>());
    texts.push_back(text);
    bytes += text.size();
    const auto exp = nlohmann::json::parse(expected[i]);
    const auto want = exp["ids"].get<std::vector<int32_t>>();
    const auto got = (*tok)->Encode(text, /*allow_special=*/true);
    const std::string want_text = exp["text"].get<std::string>();
    const std::string got_text = (*tok)->Decode(want);
    dsinfer::tokenizer::IncrementalDetokenizer detok(tok->get());
    std::string streamed;
    for (int32_t id : want) streamed += detok.Add(id);
    streamed += detok.Finish();
    if (got == want && got_text == want_text && streamed == want_text) {
      ++passed;
    } else {
      if (failed < 10) {
        std::fprintf(stderr, "MISMATCH line %zu: %s\n  want: %s\n  got:  %s\n  decode ok=%d stream ok=%d\n",
                     i + 1, nlohmann::json(dsinfer::tokenizer::RepairUtf8(texts.back())).dump().c_str(),
                     Show(want).c_str(), Show(got).c_str(), got_text == want_text,
                     streamed == want_text);
      }
      ++failed;
    }
  }
  // Speed: encode the whole corpus, best of 3.
  double best = 1e30;
  size_t n_ids = 0;
  std::vector<int32_t> ids;
  for (int rep = 0; rep < 3; ++rep) {
    const auto t0 = std::chrono::steady_clock::now();
    n_ids = 0;
    for (const auto& t : texts) {
      ids.clear();
      (*tok)->EncodeTo(t, true, &ids);
      n_ids += ids.size();
    }
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  std::printf("{\"impl\": \"dsinfer\", \"bytes\": %zu, \"tokens\": %zu, \"seconds\": %.4f, \"mb_per_s\": %.2f}\n",
              bytes, n_ids, best, bytes / 1e6 / best);
  std::printf("%d passed, %d failed\n", passed, failed);
  return failed ? 1 : 0;
}
