// `dsinfer serve` end to end on a DeepSeek-V4.1 model (the v41-tiny-engram preset: KV sharing,
// the two-level indexer and the Engram n-gram memory, on the CPU backend) with the V4 tokenizer
// given V4.1's `<｜System｜>` (prepare_model.sh), so the V4.1 chat dialect, driven by the official
// openai npm client: the V4.1 rendering (`<｜System｜>`, numeric reasoning effort), chat (streamed
// text == unstreamed text at temperature 0), completions with n = 2 and logprobs, seeded sampling
// reproducible, a JSON schema followed, a forced tool call in V4.1's DSML (`<｜DSML｜ invoke`),
// the tokenizer's ids inside the model's vocabulary; n-gram speculation and the prefix cache, and
// DSpark speculation (the preset's drafter), giving the same choices as a server with neither; MTP
// speculation refused at start-up naming DSpark (V4.1's drafter).
//
// Not covered: image inputs. The preset has no vision_config (so no image_token_id: the
// `<｜image｜>` id 129279 is an ordinary token here, tested below). Left out for a bug: with a
// vision_config (e.g. `"vision_config": {}, "image_token_id": 129279` added to this model's
// config), a prompt holding the image token passes admission and is refused only inside the
// forward pass (deepseek_v41 Model::CheckIds), so the request gets a 500 "generation failed:
// forward failed: INVALID_ARGUMENT: image inputs are not supported ..." instead of a 400, and so
// does every other request in the same batch (engine_core FailBatch). A sampled image token (e.g.
// forced by logit_bias {"129279": 100}, max_tokens 4) fails the same way when it is fed back. Add
// the cases (a 400 at admission, the token never sampled, a concurrent request unharmed) once the
// engine refuses or masks the image token before the forward pass.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';

import { MODEL, OpenAI, killAll, metric, spawnServer, startServer, stopServer } from './server_util.mjs';

let plain;    // neither speculation nor the prefix cache
let fast;     // n-gram speculation (3 drafts) and the prefix cache
let dspark;   // DSpark speculation (blocks of 5, the confidence head choosing the length)

before(async () => {
  [plain, fast, dspark] = await Promise.all([
    startServer(['--no-prefix-cache', '--served-model-name', 'v41']),
    startServer(['--speculative-method', 'ngram', '--num-speculative-tokens', '3',
                 '--prefix-checkpoint-interval', '128', '--served-model-name', 'v41']),
    startServer(['--speculative-method', 'dspark', '--speculative-adaptive', '--served-model-name', 'v41']),
  ]);
});

after(async () => {
  try {
    for (const s of [plain, fast, dspark]) assert.equal((await stopServer(s)).code, 0, s.log());
  } finally {
    killAll();
  }
});

const clientOf = (s) => new OpenAI({ apiKey: 'none', baseURL: s.url + '/v1', maxRetries: 0, timeout: 60000 });
const user = (text) => [{ role: 'user', content: text }];

describe('DeepSeek-V4.1 (Engram) through the openai client', () => {
  test('the server runs the V4.1 model; the tokenizer\'s ids are in its vocabulary', async () => {
    assert.match(plain.log(), /ready \(DeepSeek-V4\.1 on cpu/);
    const c = clientOf(plain);
    assert.deepEqual((await c.models.list()).data.map((m) => m.id), ['v41']);
    // The tokenizer's highest id (an added special token) is a valid prompt token; the first id
    // past the model's 129,280 is refused.
    const tok = await (await fetch(plain.url + '/tokenize', { method: 'POST',
      body: JSON.stringify({ prompt: '<｜image｜>' }) })).json();
    assert.deepEqual(tok.tokens, [129279]);
    const top = await c.completions.create({ prompt: [129279, 5, 129279], max_tokens: 2, seed: 1, ignore_eos: true });
    assert.equal(top.usage.prompt_tokens, 3);
    assert.equal(top.usage.completion_tokens, 2);
    await assert.rejects(c.completions.create({ prompt: [129280], max_tokens: 2 }),
      (e) => e.status === 400 && /outside the vocabulary \[0, 129280\)/.test(e.message));
  });

  test('chats render in the V4.1 dialect: <｜System｜>, numeric reasoning effort', async () => {
    const post = async (path, body) => (await fetch(plain.url + path, { method: 'POST', body: JSON.stringify(body) })).json();
    const render = async (body) => (await post('/detokenize', { tokens: (await post('/tokenize', body)).tokens })).prompt;
    // vLLM's V4.1 encoder's rendering (tests/data/recipe_v41_goldens.json, "system_user_chat").
    assert.equal(await render({ messages: [{ role: 'system', content: 'You are a helpful assistant.' }, ...user('Hello')] }),
      '<｜begin▁of▁sentence｜><｜System｜>You are a helpful assistant.<｜User｜>Hello<｜Assistant｜></think>');
    const tok = await post('/tokenize', { messages: [{ role: 'system', content: 'Be brief.' }, ...user('Hi')] });
    assert.deepEqual(tok.tokens.slice(0, 2), [0, 128799]);
    const thinking = { messages: user('Hi'), chat_template_kwargs: { thinking: true }, reasoning_effort: '37' };
    assert.equal(await render(thinking), '<｜begin▁of▁sentence｜><｜System｜>Reasoning Effort: 37 (range 1-100, ' +
      'the higher the value, the more thorough the reasoning)\n\n<｜User｜>Hi<｜Assistant｜><think>');
    const c = clientOf(plain);
    const r = await c.chat.completions.create({ ...thinking, max_tokens: 12, seed: 2, ignore_eos: true });
    // A random model rarely closes </think>: what it wrote is reasoning.
    const m = r.choices[0].message;
    assert.equal((m.reasoning_content ?? '').length > 0, r.usage.completion_tokens_details.reasoning_tokens > 0);
    assert.ok(r.usage.completion_tokens_details.reasoning_tokens > 0 || m.content.length > 0);
    await assert.rejects(c.chat.completions.create({ ...thinking, reasoning_effort: 'bogus', max_tokens: 2 }),
      (e) => e.status === 400 && /not low, high, xhigh, max or 1-100 \(dialect v4\.1\)/.test(e.message));
  });

  test('chat: streamed text equals the unstreamed text at temperature 0', async () => {
    const c = clientOf(plain);
    const body = { model: 'v41', messages: user('Tell me about rivers'), max_tokens: 20, temperature: 0, ignore_eos: true };
    const whole = await c.chat.completions.create(body);
    assert.equal(whole.object, 'chat.completion');
    assert.equal(whole.model, 'v41');
    const m = whole.choices[0].message;
    assert.equal(m.role, 'assistant');
    assert.ok(m.content.length > 0);
    assert.equal(whole.choices[0].finish_reason, 'length');
    assert.equal(whole.usage.completion_tokens, 20);
    assert.equal(whole.usage.total_tokens, whole.usage.prompt_tokens + 20);
    // Greedy is deterministic: the same request again gives the same text.
    assert.equal((await c.chat.completions.create(body)).choices[0].message.content, m.content);
    const stream = await c.chat.completions.create({ ...body, stream: true, stream_options: { include_usage: true } });
    let text = '';
    let finish = null;
    let usage = null;
    let chunks = 0;
    for await (const chunk of stream) {
      assert.equal(chunk.object, 'chat.completion.chunk');
      if (chunk.usage) usage = chunk.usage;
      for (const ch of chunk.choices) {
        ++chunks;
        text += ch.delta.content ?? '';
        if (ch.finish_reason) finish = ch.finish_reason;
      }
    }
    assert.ok(chunks > 2, 'the reply came in pieces');
    assert.equal(text, m.content);
    assert.equal(finish, 'length');
    assert.deepEqual(usage, whole.usage);
  });

  test('completions: n = 2 with logprobs', async () => {
    const c = clientOf(plain);
    const r = await c.completions.create({ prompt: 'Once upon a time', max_tokens: 8, n: 2, logprobs: 2,
      temperature: 1, seed: 3, ignore_eos: true });
    assert.equal(r.object, 'text_completion');
    assert.deepEqual(r.choices.map((ch) => ch.index), [0, 1]);
    assert.equal(r.usage.completion_tokens, 16);
    assert.notEqual(r.choices[0].text, r.choices[1].text, 'two samples differ');
    for (const ch of r.choices) {
      const lp = ch.logprobs;
      assert.equal(lp.tokens.length, 8);
      assert.equal(lp.token_logprobs.length, 8);
      assert.equal(lp.text_offset[0], 0);
      for (let i = 0; i < 8; ++i) {
        assert.ok(lp.token_logprobs[i] <= 0 && Number.isFinite(lp.token_logprobs[i]));
        const top = Object.values(lp.top_logprobs[i]);
        assert.equal(top.length, 2);
        for (const v of top) assert.ok(v <= 0);
        // The drawn token is at most as likely as the best alternative.
        assert.ok(lp.token_logprobs[i] <= Math.max(...top) + 1e-6);
        if (i > 0) assert.ok(lp.text_offset[i] >= lp.text_offset[i - 1]);
      }
    }
    // Both choices score from the same prompt: the first step's top logprobs are the same.
    assert.deepEqual(r.choices[0].logprobs.top_logprobs[0], r.choices[1].logprobs.top_logprobs[0]);
  });

  test('seeded sampling is reproducible; another seed differs', async () => {
    const c = clientOf(plain);
    const body = { messages: user('Pick a word'), max_tokens: 16, temperature: 1, seed: 42, ignore_eos: true,
      logprobs: true, top_logprobs: 1 };
    const a = await c.chat.completions.create(body);
    const b = await c.chat.completions.create(body);
    assert.equal(a.choices[0].message.content, b.choices[0].message.content);
    assert.deepEqual(a.choices[0].logprobs, b.choices[0].logprobs);
    const other = await c.chat.completions.create({ ...body, seed: 43 });
    assert.notEqual(other.choices[0].message.content, a.choices[0].message.content);
  });

  test('response_format json_schema: the reply parses and follows the schema', async () => {
    const c = clientOf(plain);
    const schema = { type: 'object', properties: {
      ok: { type: 'boolean' }, n: { type: 'integer', minimum: 0, maximum: 9 }, tag: { enum: ['a', 'b'] } },
    required: ['ok', 'n', 'tag'], additionalProperties: false };
    for (const seed of [1, 2, 3]) {
      // At most 2 whitespace bytes between JSON tokens (the schema compiler's bound): the longest
      // reply this schema allows fits in 48 tokens.
      const r = await c.chat.completions.create({ messages: user('Answer in JSON'), max_tokens: 48,
        temperature: 1, seed, response_format: { type: 'json_schema', json_schema: { name: 's', schema } } });
      const text = r.choices[0].message.content;
      assert.equal(r.choices[0].finish_reason, 'stop', text);
      const v = JSON.parse(text);
      assert.equal(typeof v, 'object');
      assert.ok(v !== null && !Array.isArray(v));
      assert.deepEqual(Object.keys(v).sort(), ['n', 'ok', 'tag']);
      assert.equal(typeof v.ok, 'boolean');
      assert.ok(Number.isInteger(v.n) && v.n >= 0 && v.n <= 9, String(v.n));
      assert.ok(['a', 'b'].includes(v.tag), v.tag);
    }
  });

  test('tool_choice naming a function: one call of it with the required arguments', async () => {
    const c = clientOf(plain);
    const tools = [
      { type: 'function', function: { name: 'get_weather', description: 'Weather of a city',
        parameters: { type: 'object', properties: { city: { type: 'string', maxLength: 8 },
          days: { type: 'integer', minimum: 1, maximum: 7 } },
        required: ['city', 'days'], additionalProperties: false } } },
      { type: 'function', function: { name: 'ping', description: 'No arguments' } },
    ];
    // A DSML tool-call block is ~80 tokens with the V4 tokenizer: this request needs more than 24.
    const r = await c.chat.completions.create({ messages: user('Weather in Paris?'), tools, temperature: 1,
      seed: 1, max_tokens: 160, parallel_tool_calls: false, logprobs: true,
      tool_choice: { type: 'function', function: { name: 'get_weather' } } });
    const choice = r.choices[0];
    assert.equal(choice.finish_reason, 'tool_calls', JSON.stringify(choice));
    assert.ok(!choice.message.content, 'no content before the block');
    assert.equal(choice.message.tool_calls.length, 1);
    const call = choice.message.tool_calls[0];
    assert.equal(call.type, 'function');
    assert.match(call.id, /^call_/);
    assert.equal(call.function.name, 'get_weather');
    const args = JSON.parse(call.function.arguments);
    assert.ok(args !== null && typeof args === 'object' && !Array.isArray(args));
    assert.deepEqual(Object.keys(args).sort(), ['city', 'days']);
    assert.equal(typeof args.city, 'string');
    assert.ok([...args.city].length <= 8, args.city);
    assert.ok(Number.isInteger(args.days) && args.days >= 1 && args.days <= 7, String(args.days));
    // The block the model wrote is V4.1's DSML (tags with a leading space).
    const wrote = choice.logprobs.content.map((e) => e.token).join('');
    assert.match(wrote, /<｜DSML｜ calls>\s*<｜DSML｜ invoke name="get_weather">/);
    assert.ok(wrote.includes('</｜DSML｜ calls>'), wrote);
  });
});

test('n-gram speculation with the prefix cache, and DSpark speculation, give the same choices as a server with neither', async () => {
  // A random model's text never repeats, so nothing would be drafted: a logit bias on three tokens
  // makes the replies draw mostly those (which of them depends on the context), so the drafter
  // proposes continuations of earlier occurrences and the verifier accepts some and rejects some
  // (rollback of the windows, the compressor and Engram's look-back ring). The shared system
  // prompt spans a prefix-cache checkpoint (128 tokens).
  const system = 'The river runs to the sea and the sea runs to the river. '.repeat(20);
  const first = [{ role: 'system', content: system }, { role: 'user', content: 'The river runs to the' }];
  const bias = (b) => ({ 1000: b, 2000: b, 3000: b });
  const requests = [
    (c) => c.chat.completions.create({ model: 'v41', messages: first, max_tokens: 24, temperature: 0,
      logit_bias: bias(8), logprobs: true, top_logprobs: 2 }),
    (c) => c.chat.completions.create({ model: 'v41', messages: first, max_tokens: 16, temperature: 0.8, seed: 7, n: 2,
      logit_bias: bias(10), logprobs: true }),
    (c) => c.chat.completions.create({ model: 'v41', max_tokens: 16, temperature: 0.7, seed: 3,
      messages: [...first, { role: 'assistant', content: 'the sea.' }, { role: 'user', content: 'And then?' }] }),
    (c) => c.completions.create({ model: 'v41', prompt: system + 'The river', max_tokens: 20, seed: 5, n: 2,
      logit_bias: bias(9), logprobs: 1 }),
  ];
  const results = [];
  for (const s of [plain, fast, dspark]) {
    const c = clientOf(s);
    const out = [];
    for (const send of requests) out.push(await send(c));
    results.push(out);
  }
  const [b] = results;
  for (const [name, a] of [['n-gram', results[1]], ['DSpark', results[2]]]) {
    for (let i = 0; i < a.length; ++i) {
      assert.equal(a[i].choices.length, b[i].choices.length);
      for (let j = 0; j < a[i].choices.length; ++j) {
        const x = a[i].choices[j], y = b[i].choices[j];
        assert.deepEqual(x.message ?? x.text, y.message ?? y.text, `${name}: request ${i} choice ${j}`);
        assert.deepEqual(x.logprobs, y.logprobs, `${name}: request ${i} choice ${j} logprobs`);
        assert.equal(x.finish_reason, y.finish_reason);
      }
      assert.deepEqual(a[i].usage, b[i].usage);
    }
  }
  assert.ok(await metric(dspark.url, 'dsinfer_spec_decode_num_draft_tokens_total') > 0, 'DSpark drafted');
  const drafted = await metric(fast.url, 'dsinfer_spec_decode_num_draft_tokens_total');
  const accepted = await metric(fast.url, 'dsinfer_spec_decode_num_accepted_tokens_total');
  assert.ok(accepted > 0, `drafts accepted: ${accepted} of ${drafted}`);
  assert.ok(accepted < drafted, `drafts rejected: ${accepted} of ${drafted}`);
  assert.ok(await metric(fast.url, 'dsinfer_prefix_cache_hits_total') > 0, 'the cache hit');
  assert.ok(await metric(fast.url, 'dsinfer_prefix_cache_reused_tokens_total') >= 128);
  assert.equal(await metric(plain.url, 'dsinfer_prefix_cache_queries_total'), 0);
  assert.equal(await metric(plain.url, 'dsinfer_spec_decode_num_draft_tokens_total'), 0);
});

test('MTP speculation is refused at start-up, naming DSpark', async () => {
  const proc = spawnServer(['--model', MODEL, '--host', '127.0.0.1', '--port', '0', '--threads', '1',
                            '--speculative-method', 'mtp']);
  let err = '';
  proc.stderr.on('data', (d) => { err += d; });
  const code = await new Promise((resolve) => proc.on('exit', resolve));
  assert.notEqual(code, 0, err);
  assert.match(err, /MTP speculative decoding: DeepSeek-V4\.1 has no MTP layer; its drafter is DSpark \(--speculative-method dspark\)/);
});
