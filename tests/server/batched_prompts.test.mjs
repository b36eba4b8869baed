// `dsinfer serve`: /v1/completions with a list of prompts (strings or arrays of token ids), driven
// by the official openai npm client. Each prompt is its own engine request: with a seed, choice
// p * n + j equals completion j of prompt p sent alone; usage sums over the prompts; echo and
// logprobs are per choice; streamed == unstreamed, chunks interleaved by index, one usage chunk
// and one [DONE]; the error cases (empty list, empty item, nested non-ids, ids outside the
// vocabulary, a prompt beyond the context, more sequences than the queue) get OpenAI error
// objects and leave nothing running; a client that leaves mid-stream frees every prompt's request.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';

import { OpenAI, eventually, expectStatus, killAll, metric, startServer, stopServer } from './server_util.mjs';

let server;
let client;

before(async () => {
  server = await startServer(['--served-model-name', 'tiny-test']);
  client = new OpenAI({ apiKey: 'none', baseURL: server.url + '/v1', maxRetries: 0, timeout: 60000 });
});

after(async () => {
  try {
    const { code } = await stopServer(server);
    assert.equal(code, 0, 'SIGTERM drains and exits 0:\n' + server.log());
  } finally {
    killAll();
  }
});

const running = () => metric(server.url, 'dsinfer_requests_running');
const open = () => metric(server.url, 'dsinfer_http_requests_open');
const freed = () => eventually(async () => (await running()) === 0 && (await open()) === 0, 10000,
  'every request to be freed');

const PROMPTS = ['Once upon a time', 'The capital of France is', 'def fibonacci(n):'];
const IDS = [[100, 200, 300], [400], [500, 600, 700, 800]];

// Each prompt alone with the same body: the choices a list of prompts must reproduce, in order.
async function alone(prompts, body) {
  const choices = [];
  let prompt_tokens = 0;
  let completion_tokens = 0;
  for (const prompt of prompts) {
    const r = await client.completions.create({ ...body, prompt });
    prompt_tokens += r.usage.prompt_tokens;
    completion_tokens += r.usage.completion_tokens;
    for (const c of r.choices) choices.push(c);
  }
  return { choices, prompt_tokens, completion_tokens };
}

// A streamed completions request over raw SSE (to see every chunk and the [DONE] line).
async function streamRaw(body) {
  const r = await fetch(server.url + '/v1/completions', { method: 'POST',
    headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ ...body, stream: true }) });
  assert.equal(r.status, 200);
  const events = (await r.text()).split('\n\n').filter((e) => e.startsWith('data: ')).map((e) => e.slice(6));
  const done = events.filter((e) => e === '[DONE]').length;
  assert.equal(events.at(-1), '[DONE]');
  const chunks = events.filter((e) => e !== '[DONE]').map((e) => JSON.parse(e));
  return { chunks, done };
}

describe('a list of prompts', () => {
  test('3 prompts, n = 2, seeded: choice p*n+j equals prompt p alone; usage summed', async () => {
    const body = { max_tokens: 10, seed: 11, n: 2, temperature: 1.0, ignore_eos: true };
    for (const prompts of [PROMPTS, IDS]) {
      const ref = await alone(prompts, body);
      const r = await client.completions.create({ ...body, prompt: prompts });
      assert.equal(r.object, 'text_completion');
      assert.equal(r.choices.length, prompts.length * 2);
      r.choices.forEach((c, i) => {
        assert.equal(c.index, i);
        assert.equal(c.text, ref.choices[i].text, `choice ${i}`);
        assert.equal(c.finish_reason, 'length');
      });
      // The two completions of one prompt differ (n = 2 samples), so the order is meaningful.
      assert.notEqual(r.choices[0].text, r.choices[1].text);
      assert.equal(r.usage.prompt_tokens, ref.prompt_tokens);
      assert.equal(r.usage.completion_tokens, ref.completion_tokens);
      assert.equal(r.usage.completion_tokens, prompts.length * 2 * 10);
      assert.equal(r.usage.total_tokens, ref.prompt_tokens + ref.completion_tokens);
    }
    // Mixed strings and ids, and a one-element list, are accepted too.
    const mixed = await client.completions.create({ ...body, n: 1, prompt: [PROMPTS[0], IDS[1]] });
    const ref = await alone([PROMPTS[0], IDS[1]], { ...body, n: 1 });
    assert.deepEqual(mixed.choices.map((c) => c.text), ref.choices.map((c) => c.text));
  });

  test('echo and logprobs per choice', async () => {
    const body = { max_tokens: 6, seed: 5, n: 2, ignore_eos: true, echo: true, logprobs: 2 };
    const r = await client.completions.create({ ...body, prompt: PROMPTS });
    const ref = await alone(PROMPTS, body);
    assert.equal(r.choices.length, 6);
    r.choices.forEach((c, i) => {
      const prompt = PROMPTS[Math.floor(i / 2)];
      assert.ok(c.text.startsWith(prompt), `choice ${i} echoes its own prompt: ${c.text}`);
      assert.equal(c.text, ref.choices[i].text);
      // The prompt's tokens first (echo scores the prompt; its first token has no logprob).
      assert.ok(c.logprobs.tokens.length > 6);
      assert.equal(c.logprobs.token_logprobs[0], null);
      assert.equal(c.logprobs.text_offset[0], 0);
      assert.ok(c.logprobs.token_logprobs.slice(-6).every((x) => typeof x === 'number'));
      assert.deepEqual(c.logprobs.tokens, ref.choices[i].logprobs.tokens);
      assert.deepEqual(c.logprobs.token_logprobs, ref.choices[i].logprobs.token_logprobs);
    });
  });

  test('streamed == unstreamed: chunks indexed per choice, one usage chunk, one [DONE]', async () => {
    const body = { prompt: PROMPTS, max_tokens: 12, seed: 9, n: 2, ignore_eos: true, logprobs: 1 };
    const whole = await client.completions.create(body);
    const { chunks, done } = await streamRaw({ ...body, stream_options: { include_usage: true } });
    assert.equal(done, 1);
    const texts = [];
    const finishes = [];
    const tokens = [];
    const usages = chunks.filter((c) => c.usage);
    assert.equal(usages.length, 1);
    assert.equal(chunks.at(-1), usages[0], 'the usage chunk is the last');
    assert.deepEqual(usages[0].choices, []);
    assert.deepEqual(usages[0].usage, whole.usage);
    const indices = [];
    for (const chunk of chunks) {
      assert.equal(chunk.object, 'text_completion');
      for (const ch of chunk.choices) {
        assert.ok(ch.index >= 0 && ch.index < 6, `index ${ch.index}`);
        indices.push(ch.index);
        texts[ch.index] = (texts[ch.index] ?? '') + ch.text;
        if (ch.logprobs) (tokens[ch.index] ??= []).push(...ch.logprobs.tokens);
        if (ch.finish_reason) {
          assert.equal(finishes[ch.index], undefined, 'one finish per choice');
          finishes[ch.index] = ch.finish_reason;
        }
      }
    }
    assert.deepEqual(new Set(indices), new Set([0, 1, 2, 3, 4, 5]));
    whole.choices.forEach((c, i) => {
      assert.equal(texts[i], c.text, `choice ${i}`);
      assert.equal(finishes[i], c.finish_reason);
      assert.deepEqual(tokens[i], c.logprobs.tokens);
    });
    // The openai client reads the same stream.
    const seen = [];
    for await (const chunk of await client.completions.create({ ...body, stream: true })) {
      for (const ch of chunk.choices) seen[ch.index] = (seen[ch.index] ?? '') + ch.text;
    }
    assert.deepEqual(seen, whole.choices.map((c) => c.text));
  });
});

describe('errors', () => {

  test('400 for an empty list, an empty item, nested non-ids, ids outside the vocabulary', async () => {
    const create = (prompt) => client.completions.create({ prompt, max_tokens: 2 });
    await expectStatus(create([]), 400, /"prompt" is an empty list/, 'prompt');
    await expectStatus(create(['a', '']), 400, /"prompt" item 1 is an empty string/, 'prompt');
    await expectStatus(create([[1, 2], []]), 400, /"prompt" item 1 is an empty array/, 'prompt');
    await expectStatus(create([[1, 2], [[3]]]), 400, /"prompt" item 1 must be an array of token ids/, 'prompt');
    await expectStatus(create([[1, 2], ['a']]), 400, /"prompt" item 1 must be an array of token ids/, 'prompt');
    await expectStatus(create(['a', { x: 1 }]), 400, /"prompt" item 1 must be a string or an array of token ids/);
    await expectStatus(create([[1, 2], [3, 999999999]]), 400,
      /"prompt" item 1: prompt token id 999999999 is outside the vocabulary/, 'prompt');
    // The first prompt was submitted before the second was refused: it is ended, not left running.
    await expectStatus(client.completions.create({ prompt: ['a', 'x'.repeat(50000)], max_tokens: 1 }), 400,
      /"prompt" item 1: .*context holds 4096/, 'prompt');
    await freed();
    assert.equal(await metric(server.url, 'dsinfer_state_memory_used_bytes'), 0);
  });

  test('429 for more sequences than the queue ever holds (1024 queued + 64 running)', async () => {
    await expectStatus(client.completions.create({ prompt: Array(545).fill('a'), n: 2, max_tokens: 1 }), 429,
      /"prompt" holds 545 prompts of 2 completions each: 1090 sequences, more than the server's queue ever holds \(1088\)/);
    await freed();
  });

  test('a refused list leaves a concurrent request untouched', async () => {
    const body = { prompt: 'Concurrent bystander', max_tokens: 40, seed: 3, ignore_eos: true };
    const ref = await client.completions.create(body);
    const bystander = client.completions.create(body);
    await Promise.all([0, 1, 2].map(() => expectStatus(
      client.completions.create({ prompt: ['a', 'b', [7, 999999999]], max_tokens: 40, ignore_eos: true }), 400,
      /"prompt" item 2: prompt token id 999999999/)));
    assert.equal((await bystander).choices[0].text, ref.choices[0].text);
    await freed();
  });
});

describe('aborts', () => {
  test('a client that leaves mid-stream frees every prompt\'s request', async () => {
    const before = await metric(server.url, 'dsinfer_client_aborts_total');
    const controller = new AbortController();
    const stream = await client.completions.create(
      { prompt: PROMPTS, n: 2, max_tokens: 3000, ignore_eos: true, stream: true },
      { signal: controller.signal });
    let chunks = 0;
    const indices = new Set();
    try {
      for await (const chunk of stream) {
        for (const ch of chunk.choices) indices.add(ch.index);
        if (++chunks === 40) {
          // Every prompt's sequences are in the engine (running or waiting).
          assert.equal((await running()) + (await metric(server.url, 'dsinfer_requests_waiting')), 6);
          controller.abort();
        }
      }
    } catch (e) {
      // The client may end the iteration quietly or with an abort error.
    }
    assert.ok(chunks >= 40);
    assert.ok(indices.size > 1, 'chunks of several choices interleave');
    await freed();
    assert.equal(await metric(server.url, 'dsinfer_client_aborts_total'), before + 1);
    assert.equal(await metric(server.url, 'dsinfer_state_memory_used_bytes'), 0);
  });
});
