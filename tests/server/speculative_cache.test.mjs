// `dsinfer serve` with speculative decoding (the tiny model's MTP layer, 2 drafts) and the prefix
// cache (on by default), against a server with neither: the same requests (chat with a next turn,
// completions, n = 2, seeded sampling, logprobs) give the same choices, token for token and
// logprob for logprob, through the official openai client; /metrics counts the drafts and the
// cache's hits; a bad --speculative-method is refused at start-up. A third server runs both with
// the routed experts over 3 ranks (expert parallelism, replicas, EPLB re-planning every 4 steps):
// the same choices again, and /metrics has its ranks and rebalances.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';

import { OpenAI, killAll, metric, spawnServer, startServer, stopServer } from './server_util.mjs';

let fast;
let plain;
let split;

before(async () => {
  const spec = ['--speculative-method', 'mtp', '--num-speculative-tokens', '2', '--prefix-checkpoint-interval', '128', '--served-model-name', 'm'];
  [fast, plain, split] = await Promise.all([
    startServer(spec),
    startServer(['--no-prefix-cache', '--served-model-name', 'm']),
    startServer([...spec, '--expert-parallel', '3', '--eplb-redundant-experts', '2', '--eplb-interval', '4']),
  ]);
});

after(async () => {
  try {
    for (const s of [fast, plain, split]) assert.equal((await stopServer(s)).code, 0, s.log());
  } finally {
    killAll();
  }
});

const clientOf = (s) => new OpenAI({ apiKey: 'none', baseURL: s.url + '/v1', maxRetries: 0, timeout: 60000 });

test('chat turns and completions are the same with speculation and the prefix cache', async () => {
  const system = 'You are a terse assistant. '.repeat(40);  // a shared prefix past one checkpoint
  const first = [{ role: 'system', content: system }, { role: 'user', content: 'Name three rivers.' }];
  const bodies = [
    { messages: first, max_tokens: 24, temperature: 0.8, seed: 7, logprobs: true, top_logprobs: 2 },
    { messages: first, max_tokens: 16, temperature: 0, n: 2 },
  ];
  const results = [];
  for (const s of [fast, plain, split]) {
    const c = clientOf(s);
    const out = [];
    for (const b of bodies) out.push(await c.chat.completions.create({ model: 'm', ...b }));
    // The next turn repeats the first and its answer.
    const answer = out[0].choices[0].message.content;
    out.push(await c.chat.completions.create({
      model: 'm', max_tokens: 20, temperature: 0.7, seed: 3, logprobs: true,
      messages: [...first, { role: 'assistant', content: answer }, { role: 'user', content: 'And three lakes?' }],
    }));
    out.push(await c.completions.create({ model: 'm', prompt: system + 'Once', max_tokens: 20, seed: 5, n: 2, logprobs: 1 }));
    results.push(out);
  }
  const [a, b, c] = results;
  for (const [name, got] of [['speculation and cache', a], ['expert parallelism', c]]) {
    for (let i = 0; i < got.length; ++i) {
      assert.equal(got[i].choices.length, b[i].choices.length);
      for (let j = 0; j < got[i].choices.length; ++j) {
        const x = got[i].choices[j], y = b[i].choices[j];
        assert.deepEqual(x.message ?? x.text, y.message ?? y.text, `${name}: request ${i} choice ${j}`);
        assert.deepEqual(x.logprobs, y.logprobs, `${name}: request ${i} choice ${j} logprobs`);
        assert.equal(x.finish_reason, y.finish_reason);
      }
      assert.deepEqual(got[i].usage, b[i].usage);
    }
  }
  assert.equal(await metric(split.url, 'dsinfer_expert_parallel_ranks'), 3);
  assert.ok(await metric(split.url, 'dsinfer_eplb_rebalances_total') >= 1);
  assert.ok(await metric(split.url, 'dsinfer_eplb_imbalance') >= 1);
  assert.ok(await metric(fast.url, 'dsinfer_spec_decode_num_draft_tokens_total') > 0);
  assert.ok(await metric(fast.url, 'dsinfer_prefix_cache_hits_total') > 0);
  assert.ok(await metric(fast.url, 'dsinfer_prefix_cache_reused_tokens_total') > 100);
  assert.equal(await metric(plain.url, 'dsinfer_prefix_cache_queries_total'), 0);
  assert.equal(await metric(plain.url, 'dsinfer_spec_decode_num_draft_tokens_total'), 0);
});

test('a bad speculative method is refused at start-up', async () => {
  const proc = spawnServer(['--model', process.env.DSINFER_SERVER_MODEL, '--port', '0', '--speculative-method', 'eagle']);
  let err = '';
  proc.stderr.on('data', (d) => { err += d; });
  const code = await new Promise((resolve) => proc.on('exit', resolve));
  assert.notEqual(code, 0);
  assert.match(err, /speculative-method/);
});
