// The engine's main and MTP draft logits of a token sequence, for check_engine.py --mtp-tool
// (the dsinfer CLI exposes only the main logits). Links against a built tree's libraries:
//   c++ -std=c++20 -O2 -I SRC -I INCLUDE mtp_logits.cc BUILD/src/model/deepseek_v4/lib*.a
//       BUILD/src/backend/cpu/lib*.a BUILD/src/io/lib*.a BUILD/src/base/lib*.a -lpthread
// (tools/demo_model/build_mtp_logits.sh does this against /work/main-style build dirs).
//   mtp_logits MODEL_DIR 1,2,3,... MAIN.npy MTP.npy
// MAIN.npy [T, V]: Forward over the whole sequence (one prefill). MTP.npy [T-1, V]: ForwardMtp
// rows i = 0..T-2, row i pairing the main streams of position i with token ids[i+1].
#include <cstdio>
#include <sstream>
#include <string>
#include <vector>

#include "io/npy.h"
#include "model/deepseek_v4/model.h"

namespace mdl = dsinfer::model::deepseek_v4;

static int Fail(const dsinfer::Status& s) {
  std::fprintf(stderr, "mtp_logits: %s\n", s.ToString().c_str());
  return 1;
}

int main(int argc, char** argv) {
  if (argc != 5) {
    std::fprintf(stderr, "usage: mtp_logits MODEL_DIR IDS(comma-separated) MAIN.npy MTP.npy\n");
    return 2;
  }
  std::vector<int32_t> ids;
  std::stringstream ss(argv[2]);
  for (std::string tok; std::getline(ss, tok, ',');) ids.push_back(std::stoi(tok));
  auto model_or = mdl::Model::Load(argv[1]);
  if (!model_or.ok()) return Fail(model_or.status());
  auto model = std::move(model_or).value();
  const auto& c = model->config();
  auto state = model->NewSequence();
  auto out = model->Forward({mdl::SequenceChunk{state.get(), ids}}, mdl::LogitsRows::kAll, true);
  if (!out.ok()) return Fail(out.status());
  const int64_t T = static_cast<int64_t>(ids.size()), V = c.vocab_size;
  dsinfer::Status st = dsinfer::io::WriteNpyF32(argv[3], {T, V}, out.value().logits.data());
  if (!st.ok()) return Fail(st);
  const int64_t row = int64_t{c.hc_mult} * c.hidden_size;
  mdl::Model::MtpChunk ch;
  ch.state = state.get();
  ch.streams.assign(out.value().streams.begin(), out.value().streams.begin() + (T - 1) * row);
  ch.next_ids.assign(ids.begin() + 1, ids.end());
  auto mtp = model->ForwardMtp({std::move(ch)}, mdl::LogitsRows::kAll);
  if (!mtp.ok()) return Fail(mtp.status());
  st = dsinfer::io::WriteNpyF32(argv[4], {T - 1, V}, mtp.value().logits.data());
  if (!st.ok()) return Fail(st);
  return 0;
}
