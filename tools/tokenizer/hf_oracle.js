// The Hugging Face tokenizers oracle (npm `tokenizers`, the official binding): reads corpus lines
// {"b64": ...} and writes one line {"ids": [...], "text": decode(ids)} per input, from
// encode(text, add_special_tokens=False); invalid UTF-8 is decoded lossily first (U+FFFD per
// maximal invalid subsequence, as Rust does).
// Usage: node hf_oracle.js TOKENIZER_JSON CORPUS_JSONL > EXPECTED_JSONL
//        RAYON_NUM_THREADS=1 node hf_oracle.js TOKENIZER_JSON CORPUS_JSONL --bench  (encode MB/s)
'use strict';
const fs = require('fs');
const path = require('path');
const {Tokenizer} = require(path.join(__dirname, '../../third_party/npm/node_modules/tokenizers'));

async function main() {
  const [, , tokPath, corpusPath, mode] = process.argv;
  const tok = Tokenizer.fromFile(tokPath);
  const texts = fs.readFileSync(corpusPath, 'utf8').split('\n').filter((l) => l.length)
    .map((l) => Buffer.from(JSON.parse(l).b64, 'base64').toString('utf8'));
  if (mode === '--bench') {
    // One thread: run with RAYON_NUM_THREADS=1 so encodeBatch does not fan out.
    const bytes = texts.reduce((n, t) => n + Buffer.byteLength(t, 'utf8'), 0);
    const time = async (fn) => {
      let best = Infinity;
      for (let rep = 0; rep < 3; ++rep) {
        const t0 = process.hrtime.bigint();
        await fn();
        best = Math.min(best, Number(process.hrtime.bigint() - t0) / 1e9);
      }
      return best;
    };
    const opts = {addSpecialTokens: false};
    const single = await time(async () => { for (const t of texts) await tok.encode(t, null, opts); });
    const batch = await time(async () => { await tok.encodeBatch(texts, opts); });
    for (const [impl, s] of [['hf-node-encode-per-text', single], ['hf-node-encodeBatch', batch]]) {
      console.log(JSON.stringify({impl, bytes, seconds: s, mb_per_s: bytes / 1e6 / s}));
    }
    return;
  }
  const lines = [];
  for (const t of texts) {
    const enc = await tok.encode(t, null, {addSpecialTokens: false});
    const ids = Array.from(enc.getIds());
    lines.push(JSON.stringify({ids, text: await tok.decode(ids, false)}));
  }
  process.stdout.write(lines.join('\n') + '\n');
}
main().catch((e) => { console.error(e); process.exit(1); });
