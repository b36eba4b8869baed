// Deterministic tokenizer test corpus: >= 5,000 varied strings (many scripts, CJK inside and outside
// the pre-tokenizer's CJK ranges, emoji and ZWJ sequences, combining marks, unusual whitespace such
// as U+0085/U+FEFF/U+2028/NBSP/U+3000, code, numbers in many scripts, long runs, added-token
// spellings, and invalid UTF-8). Writes JSON lines {"b64": base64 of the raw bytes}.
// Usage: node gen_corpus.js [COUNT] > corpus.jsonl
'use strict';

const count = Number(process.argv[2] || 6000);
let state = 0x9e3779b97f4a7c15n;
function rand() {  // splitmix64
  state = (state + 0x9e3779b97f4a7c15n) & 0xffffffffffffffffn;
  let z = state;
  z = ((z ^ (z >> 30n)) * 0xbf58476d1ce4e5b9n) & 0xffffffffffffffffn;
  z = ((z ^ (z >> 27n)) * 0x94d049bb133111ebn) & 0xffffffffffffffffn;
  return Number((z ^ (z >> 31n)) >> 11n) / 2 ** 53;
}
const randInt = (n) => Math.floor(rand() * n);
const pick = (a) => a[randInt(a.length)];
const cp = (c) => String.fromCodePoint(c);
const range = (lo, hi) => () => cp(lo + randInt(hi - lo + 1));

const B = '\u2581', V = '\uFF5C';
const specials = [
  `<${V}begin${B}of${B}sentence${V}>`, `<${V}end${B}of${B}sentence${V}>`, `<${V}User${V}>`,
  `<${V}Assistant${V}>`, '<think>', '</think>', `${V}DSML${V}`, `<${V}DSML${V}tool_calls>`,
  `<${V}latest_reminder${V}>`, '<|EOT|>', `<${V}place${B}holder${B}no${B}42${V}>`,
  `<${V}tool${B}calls${B}begin${V}>`, `<${V}action${V}>`, '<dsml:', '</dsml:', `<${V}/table>${V}`,
  '<|place_holder_mm_span_0100|>', `<${V}image${V}>`, `<${V}User`, '<think', `${V}DSML`,
];
const words = ['the', 'The', ' quick', 'brown', 'fox', "don't", "it's", "I'll", "we've", 'HELLO',
  'naïve', 'café', 'Straße', 'Ελληνικά', 'русский', 'язык', 'עברית', 'العربية', 'हिन्दी', 'தமிழ்',
  'ไทย', 'ភាសាខ្មែរ', '한국어', '日本語', 'カタカナ', 'ひらがな', '中文', '毕老师', '龦龥一㐀',
  '𠀀𠀁', 'ꯀꯁ', 'Ⅻ', '½', '²', '١٢٣', '१२३', '１２３', '٣.١٤', 'x²+y²', 'e=mc²', 'Ⓐ', '∑∫√',
  '…', '—', '«»', '„“', '‘’', '¿¡', '。', '，', '！', '、', '؟', '।', 'ʻokina', 'ŋ', 'ǅ'];
const ws = [' ', '  ', '\t', '\n', '\r\n', '\n\n', '\u00a0', '\u0085', '\ufeff', '\u2028', '\u2029',
  '\u3000', '\u1680', '\u2000', '\u200a', '\u202f', '\u205f', '\u180e', '\u200b', '\u200d', '\v',
  '\f', '\r', ' \n ', '\u000b\u000c'];
const emoji = ['😀', '👍🏽', '👨‍👩‍👧‍👦', '🏳️‍🌈', '❤️', '🇫🇷', '🇯🇵', '🧑🏿‍💻', '👩‍❤️‍💋‍👨', '1️⃣', '#️⃣',
  '✈︎', '🫠', '🦀', '🐍', '☃', '♥', '©', '™', '⌘'];
const marks = ['\u0301', '\u0308', '\u0327', '\u20dd', '\u0e49', '\u093f', '\u05b7', '\u064e',
  '\u1ab0', '\ufe0f', '\u034f'];
const code = ['int main() {\n  return 0;\n}', 'def f(x):\n    return x**2  # sq', 'for (i=0;i<n;++i) a[i]+=b[i];',
  '<div class="a">x</div>', '{"key": [1, 2.5, null, true]}', 'SELECT * FROM t WHERE id=42;',
  'https://example.com/a?b=c&d=e#f', 'user@example.org', '    indented\n\tTabbed', '#include <vector>',
  'let _name = $var ?? `tpl${x}`;', 'a.b.c().d', "'s 't 're 've 'm 'll 'd", 'x:=1;;;;', '!!!???...',
  '--flag=value', 'C:\\path\\to\\file.txt', '0x1F 0b1010 1e-9 3.14159 -42 1,000,000'];
const generators = [
  () => pick(words),
  () => pick(ws),
  () => pick(emoji),
  () => pick(specials),
  () => pick(code),
  () => String(randInt(1e9)),
  () => range(0x41, 0x7a)() + pick(marks),
  range(0x20, 0x7e),
  range(0x00, 0x1f),
  range(0x80, 0x2ff),
  range(0x370, 0x52f),
  range(0x590, 0x6ff),
  range(0x900, 0xdff),
  range(0xe00, 0xfff),
  range(0x1100, 0x11ff),
  range(0x1e00, 0x1fff),
  range(0x2000, 0x2bff),
  range(0x3000, 0x30ff),
  range(0x3400, 0x4dbf),
  range(0x4e00, 0x9fff),
  range(0xa000, 0xabff),
  range(0xac00, 0xd7a3),
  range(0xf900, 0xfaff),
  range(0xfe00, 0xffef),
  range(0x10000, 0x1ffff),
  range(0x1f300, 0x1faff),
  range(0x20000, 0x2fa1f),
  range(0xe0000, 0xe007f),
  range(0xf0000, 0xf00ff),
  () => pick(ws).repeat(1 + randInt(40)),
  () => pick(['a', 'ab', '0', '1', ' ', '-', '=', '😀', '中', 'é', '\n']).repeat(1 + randInt(300)),
];
function textPart(n) {
  let s = '';
  for (let i = 0; i < n; ++i) s += pick(generators)();
  return s;
}
function sentence() {
  let s = '';
  const n = 1 + randInt(25);
  for (let i = 0; i < n; ++i) {
    const r = rand();
    if (r < 0.45) s += pick(words);
    else if (r < 0.65) s += pick(ws);
    else if (r < 0.72) s += pick(emoji);
    else if (r < 0.78) s += String(randInt(100000));
    else if (r < 0.84) s += pick(code);
    else if (r < 0.88) s += pick(specials);
    else s += textPart(1 + randInt(3));
  }
  return s;
}
function invalidBytes() {
  const good = Buffer.from(sentence(), 'utf8');
  const bad = [[0x80], [0xbf], [0xc0, 0xaf], [0xc3], [0xe2, 0x82], [0xed, 0xa0, 0x80], [0xf0, 0x9f, 0x98],
    [0xf4, 0x90, 0x80, 0x80], [0xfe], [0xff], [0xf8, 0x88, 0x80, 0x80, 0x80], [0xe0, 0x80, 0x80]];
  const parts = [good.subarray(0, randInt(good.length + 1))];
  for (let k = 0; k < 1 + randInt(3); ++k) {
    parts.push(Buffer.from(pick(bad)));
    parts.push(Buffer.from(sentence(), 'utf8').subarray(0, randInt(20)));
  }
  return Buffer.concat(parts);
}

const fixed = ['', ' ', 'Hello', 'Hello world', '12345678', '    int', '\u00a0\u3000y', '  \n',
  'Hello! 毕老师！1 + 1 = 2 ĠÑĤÐ²ÑĬÑĢ', `<${V}DSML${V}invoke`, '龦龥一㐀', 'a\u0085b', 'a\ufeffb',
  'x\u2028y', `${'\n'.repeat(1000)}`, 'a'.repeat(5000), ' '.repeat(3000) + 'x', '😀'.repeat(500)];
const out = [];
for (const s of fixed) out.push(Buffer.from(s, 'utf8'));
while (out.length < count) {
  const r = rand();
  if (r < 0.05) out.push(invalidBytes());
  else if (r < 0.35) out.push(Buffer.from(textPart(1 + randInt(40)), 'utf8'));
  else out.push(Buffer.from(sentence(), 'utf8'));
}
process.stdout.write(out.map((b) => JSON.stringify({b64: b.toString('base64')})).join('\n') + '\n');
