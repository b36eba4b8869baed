// `dsinfer serve` end to end on the tiny model with the V4 tokenizer, driven by the official
// openai npm client: models, chat (plain, thinking, tools in the prompt and in the history),
// streaming (streamed text == unstreamed text for the same seeded request), n > 1, seeds,
// logprobs, legacy completions with echo, /tokenize and /detokenize, the error statuses
// (400 / 401 / 404 / 405), client aborts (the request is freed: /metrics running count back to 0)
// and concurrent streams. The 413 / 429 / 503 cases need other server flags: limits.test.mjs.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';

import { OpenAI, eventually, expectStatus, killAll, metric, rawRequest, startServer, stopServer } from './server_util.mjs';

const KEY = 'sk-dsinfer-test';
let server;
let client;

before(async () => {
  server = await startServer(['--api-key', KEY, '--served-model-name', 'tiny-test']);
  client = new OpenAI({ apiKey: KEY, baseURL: server.url + '/v1', maxRetries: 0, timeout: 60000 });
});

after(async () => {
  try {
    const { code } = await stopServer(server);
    assert.equal(code, 0, 'SIGTERM drains and exits 0:\n' + server.log());
  } finally {
    killAll();
  }
});

const user = (text) => [{ role: 'user', content: text }];

// Gathers a chat stream per choice: content, reasoning, tool calls, finish reason, logprobs.
async function streamChat(body, options = {}) {
  const stream = await client.chat.completions.create({ ...body, stream: true }, options);
  const choices = [];
  let usage = null;
  let roles = 0;
  for await (const chunk of stream) {
    assert.equal(chunk.object, 'chat.completion.chunk');
    if (chunk.usage) usage = chunk.usage;
    for (const ch of chunk.choices) {
      const c = (choices[ch.index] ??= { content: '', reasoning: '', tools: [], finish: null, logprobs: [] });
      if (ch.delta.role) { assert.equal(ch.delta.role, 'assistant'); ++roles; }
      c.content += ch.delta.content ?? '';
      c.reasoning += ch.delta.reasoning_content ?? '';
      for (const t of ch.delta.tool_calls ?? []) c.tools.push(t);
      if (ch.logprobs) c.logprobs.push(...ch.logprobs.content);
      if (ch.finish_reason) c.finish = ch.finish_reason;
    }
  }
  return { choices, usage, roles };
}

describe('models and health', () => {
  test('/v1/models lists the served name', async () => {
    const page = await client.models.list();
    assert.deepEqual(page.data.map((m) => m.id), ['tiny-test']);
    assert.equal(page.data[0].object, 'model');
  });
  test('/health is 200 without a key; X-Request-Id is echoed', async () => {
    const r = await fetch(server.url + '/health', { headers: { 'X-Request-Id': 'abc-123' } });
    assert.equal(r.status, 200);
    assert.equal(r.headers.get('x-request-id'), 'abc-123');
  });
});

describe('chat completions', () => {
  test('a seeded chat reply has the OpenAI shape and is reproducible', async () => {
    const body = { model: 'tiny-test', messages: user('Hello there'), max_tokens: 12, seed: 7, ignore_eos: true };
    const a = await client.chat.completions.create(body);
    assert.match(a.id, /^chatcmpl-/);
    assert.equal(a.object, 'chat.completion');
    assert.equal(a.model, 'tiny-test');
    assert.equal(a.choices.length, 1);
    assert.equal(a.choices[0].message.role, 'assistant');
    assert.equal(typeof a.choices[0].message.content, 'string');
    assert.ok(a.choices[0].message.content.length > 0);
    assert.equal(a.choices[0].finish_reason, 'length');
    assert.equal(a.usage.completion_tokens, 12);
    assert.ok(a.usage.prompt_tokens > 3);
    assert.equal(a.usage.total_tokens, a.usage.prompt_tokens + 12);
    const b = await client.chat.completions.create(body);
    assert.equal(b.choices[0].message.content, a.choices[0].message.content, 'same seed, same text');
    const c = await client.chat.completions.create({ ...body, seed: 8 });
    assert.notEqual(c.choices[0].message.content, a.choices[0].message.content, 'another seed');
  });

  test('without max_tokens a chat may use the context; with ignore_eos it stops at the context', async () => {
    const r = await client.chat.completions.create({
      messages: user('Hi'), temperature: 0, max_completion_tokens: 5 });
    assert.ok(r.usage.completion_tokens <= 5);
  });

  test('streamed text equals unstreamed text (seeded), usage chunk when asked', async () => {
    const body = { messages: user('Tell me a story'), max_tokens: 24, seed: 11, ignore_eos: true };
    const whole = await client.chat.completions.create(body);
    const s = await streamChat({ ...body, stream_options: { include_usage: true } });
    assert.equal(s.roles, 1);
    assert.equal(s.choices[0].content, whole.choices[0].message.content);
    assert.equal(s.choices[0].finish, whole.choices[0].finish_reason);
    assert.deepEqual(s.usage, whole.usage);
  });

  test('n > 1: indexed choices, streamed == unstreamed per index', async () => {
    const body = { messages: user('Pick a word'), max_tokens: 10, n: 3, seed: 5, ignore_eos: true };
    const whole = await client.chat.completions.create(body);
    assert.deepEqual(whole.choices.map((c) => c.index), [0, 1, 2]);
    assert.equal(whole.usage.completion_tokens, 30);
    const texts = new Set(whole.choices.map((c) => c.message.content));
    assert.ok(texts.size > 1, 'the completions differ');
    const s = await streamChat(body);
    assert.equal(s.roles, 3);
    for (let i = 0; i < 3; ++i) assert.equal(s.choices[i].content, whole.choices[i].message.content);
  });

  test('thinking: reasoning_content and content, streamed == unstreamed', async () => {
    const body = { messages: user('Think first'), max_tokens: 16, seed: 3, ignore_eos: true,
                   chat_template_kwargs: { thinking: true } };
    const whole = await client.chat.completions.create(body);
    const m = whole.choices[0].message;
    // A random model rarely closes </think>: everything it wrote is reasoning then.
    assert.ok((m.reasoning_content ?? '').length + m.content.length > 0);
    assert.equal(whole.usage.completion_tokens_details.reasoning_tokens > 0, (m.reasoning_content ?? '') !== '');
    const s = await streamChat(body);
    assert.equal(s.choices[0].reasoning, m.reasoning_content ?? '');
    assert.equal(s.choices[0].content, m.content);
  });

  test('tools are rendered into the prompt (and dropped by tool_choice none); history tool calls work', async () => {
    const tools = [{ type: 'function', function: { name: 'get_weather', description: 'Weather of a city',
      parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] } } }];
    const plain = await client.chat.completions.create({ messages: user('Weather in Paris?'), max_tokens: 2, seed: 1 });
    const withTools = await client.chat.completions.create({
      messages: user('Weather in Paris?'), tools, tool_choice: 'auto', max_tokens: 2, seed: 1 });
    assert.ok(withTools.usage.prompt_tokens > plain.usage.prompt_tokens + 20);
    const tok = await (await fetch(server.url + '/tokenize', { method: 'POST',
      headers: { Authorization: 'Bearer ' + KEY },
      body: JSON.stringify({ messages: user('Weather in Paris?'), tools }) })).json();
    assert.equal(tok.count, withTools.usage.prompt_tokens, 'the prompt is the recipe rendering');
    const none = await client.chat.completions.create({
      messages: user('Weather in Paris?'), tools, tool_choice: 'none', max_tokens: 2, seed: 1 });
    assert.equal(none.usage.prompt_tokens, plain.usage.prompt_tokens);
    const history = [
      { role: 'user', content: 'Weather in Paris?' },
      { role: 'assistant', content: '', tool_calls: [{ id: 'call_1', type: 'function',
        function: { name: 'get_weather', arguments: '{"city": "Paris"}' } }] },
      { role: 'tool', tool_call_id: 'call_1', content: '{"temp": 21}' }];
    const r = await client.chat.completions.create({ messages: history, tools, max_tokens: 4, seed: 2 });
    assert.equal(r.choices[0].message.role, 'assistant');
    assert.ok(!r.choices[0].message.tool_calls || Array.isArray(r.choices[0].message.tool_calls));
    await assert.rejects(client.chat.completions.create({ messages: user('x'), tools,
      tool_choice: { type: 'function', function: { name: 'get_time' } } }),
    (e) => e.status === 400 && /"get_time", which is not in "tools"/.test(e.message));
  });

  test('logprobs: token, logprob, bytes, top_logprobs; streamed == unstreamed', async () => {
    const body = { messages: user('Count'), max_tokens: 6, seed: 9, ignore_eos: true, logprobs: true, top_logprobs: 3 };
    const whole = await client.chat.completions.create(body);
    const lps = whole.choices[0].logprobs.content;
    assert.equal(lps.length, 6);
    let text = '';
    for (const e of lps) {
      assert.ok(e.logprob <= 0);
      assert.equal(e.top_logprobs.length, 3);
      assert.ok(e.top_logprobs[0].logprob >= e.top_logprobs[2].logprob);
      assert.ok(Array.isArray(e.bytes));
      // Special tokens (a random model draws placeholders) have logprobs but no text.
      if (!/^<｜[^｜]*｜>$/.test(e.token)) text += Buffer.from(e.bytes).toString('latin1');
    }
    assert.equal(Buffer.from(text, 'latin1').toString('utf8'), whole.choices[0].message.content);
    const s = await streamChat(body);
    assert.deepEqual(s.choices[0].logprobs, lps);
  });
});

describe('legacy completions', () => {
  test('default max_tokens 16, echo, logprobs with text offsets', async () => {
    const r = await client.completions.create({ model: 'tiny-test', prompt: 'Once upon a time', seed: 4, ignore_eos: true });
    assert.equal(r.object, 'text_completion');
    assert.equal(r.usage.completion_tokens, 16);
    const e = await client.completions.create({ prompt: 'Once upon a time', seed: 4, ignore_eos: true, echo: true, logprobs: 2, max_tokens: 16 });
    assert.equal(e.choices[0].text, 'Once upon a time' + r.choices[0].text);
    // echo with logprobs scores the prompt too (lm-eval's loglikelihood): its first token has none.
    const prompt = e.usage.prompt_tokens;
    const lp = e.choices[0].logprobs;
    assert.equal(lp.tokens.length, prompt + 16);
    assert.equal(lp.token_logprobs[0], null);
    assert.equal(lp.top_logprobs[0], null);
    for (let i = 1; i < lp.tokens.length; ++i) {
      assert.equal(typeof lp.token_logprobs[i], 'number');
      assert.ok(lp.token_logprobs[i] <= 0);
      assert.ok(Object.keys(lp.top_logprobs[i]).length <= 2);
      assert.ok(lp.text_offset[i] >= lp.text_offset[i - 1]);
    }
    // The completion's part equals the logprobs of the same request without echo.
    const plain = await client.completions.create({ prompt: 'Once upon a time', seed: 4, ignore_eos: true, logprobs: 2, max_tokens: 16 });
    assert.deepEqual(lp.token_logprobs.slice(prompt), plain.choices[0].logprobs.token_logprobs);
    assert.equal(plain.choices[0].logprobs.text_offset[0], 0);
  });
  test('prompt_logprobs (vLLM): one entry per prompt token, the first null; not with stream', async () => {
    const body = { prompt: [100, 200, 300, 400], max_tokens: 2, seed: 6, ignore_eos: true, prompt_logprobs: 2 };
    const r = await client.completions.create(body);
    const pl = r.choices[0].prompt_logprobs;
    assert.equal(pl.length, 4);
    assert.equal(pl[0], null);
    for (let t = 1; t < 4; ++t) {
      const entry = pl[t][String(body.prompt[t])];
      assert.ok(entry && entry.logprob <= 0, `token ${t}`);
      assert.ok(Object.keys(pl[t]).length >= 2 && Object.keys(pl[t]).length <= 3);
    }
    // The same scores for the same prompt in another request (and n = 2: one list per choice).
    const again = await client.completions.create({ ...body, n: 2, seed: 9 });
    assert.deepEqual(again.choices[1].prompt_logprobs, pl);
    await expectStatus(client.completions.create({ ...body, stream: true }), 400, /"prompt_logprobs"/);
    await expectStatus(client.completions.create({ prompt: 'x', echo: true, logprobs: 1, stream: true }), 400, /"echo"/);
  });
  test('token-id prompts; streamed == unstreamed', async () => {
    const body = { prompt: [100, 200, 300], max_tokens: 12, seed: 6, ignore_eos: true };
    const whole = await client.completions.create(body);
    let text = '';
    let finish = null;
    for await (const chunk of await client.completions.create({ ...body, stream: true })) {
      for (const ch of chunk.choices) { text += ch.text; finish = ch.finish_reason ?? finish; }
    }
    assert.equal(text, whole.choices[0].text);
    assert.equal(finish, 'length');
  });
  test('/tokenize and /detokenize round-trip', async () => {
    const post = (path, body) => fetch(server.url + path, { method: 'POST',
      headers: { Authorization: 'Bearer ' + KEY }, body: JSON.stringify(body) });
    const t = await (await post('/tokenize', { prompt: 'Hello world' })).json();
    assert.ok(t.count >= 2 && t.tokens.length === t.count);
    const d = await (await post('/detokenize', { tokens: t.tokens })).json();
    assert.equal(d.prompt, 'Hello world');
  });
});

describe('errors', () => {
  test('400: unknown keys named, bad values, seed -1, max_tokens beyond the context, bad constraints', async () => {
    await expectStatus(client.chat.completions.create({ messages: user('x'), temprature: 1 }), 400,
      /"temprature" is not a known request key/, 'temprature');
    await expectStatus(client.chat.completions.create({ messages: user('x'), n: 'two' }), 400, /"n" must be an integer/, 'n');
    await expectStatus(client.chat.completions.create({ messages: user('x'), seed: -1 }), 400, /"seed" must be >= 0, got -1/);
    await expectStatus(client.chat.completions.create({ messages: user('x'), max_tokens: 100000 }), 400,
      /the context holds 4096 tokens, but \d+ were requested \(\d+ in the prompt, max_tokens 100000\)/);
    await expectStatus(client.completions.create({ prompt: 'x'.repeat(50000), max_tokens: 1 }), 400, /context holds 4096/);
    await expectStatus(client.chat.completions.create({ messages: user('x'), tool_choice: 'required' }), 400,
      /"tool_choice" "required" needs a non-empty "tools" array/);
    await expectStatus(client.chat.completions.create({ messages: user('x'), response_format: { type: 'json_schema',
      json_schema: { name: 's', schema: { type: 'object', properties: { a: { $ref: '#/$defs/missing' } } } } } }), 400);
    await expectStatus(client.chat.completions.create({ messages: user('x'), structured_outputs: { regex: '(' } }), 400);
    await expectStatus(client.chat.completions.create({ messages: [{ role: 'wizard', content: 'x' }] }), 400);
  });
  test('structured output: a choice, a regex and a JSON schema are followed', async () => {
    const choice = await client.chat.completions.create({ messages: user('x'), temperature: 1, seed: 3,
      max_tokens: 8, structured_outputs: { choice: ['yes', 'no', 'maybe'] } });
    assert.ok(['yes', 'no', 'maybe'].includes(choice.choices[0].message.content), choice.choices[0].message.content);
    assert.equal(choice.choices[0].finish_reason, 'stop');
    const re = await client.chat.completions.create({ messages: user('x'), temperature: 1, seed: 4,
      max_tokens: 16, structured_outputs: { regex: '[a-c]{3}-[0-9]{2}' } });
    assert.match(re.choices[0].message.content, /^[a-c]{3}-[0-9]{2}$/);
    const schema = { type: 'object', properties: { zeta: { type: 'boolean' }, alpha: { enum: ['x', 'y'] } },
      required: ['zeta', 'alpha'], additionalProperties: false };
    const js = await client.chat.completions.create({ messages: user('x'), temperature: 1, seed: 5,
      max_tokens: 40, response_format: { type: 'json_schema', json_schema: { name: 's', schema } } });
    const parsed = JSON.parse(js.choices[0].message.content);
    assert.equal(typeof parsed.zeta, 'boolean');
    assert.ok(['x', 'y'].includes(parsed.alpha));
    // The schema's property order is the generation order.
    assert.ok(js.choices[0].message.content.indexOf('zeta') < js.choices[0].message.content.indexOf('alpha'));
    // Draws that sat out a step because their mask was late (none need have).
    assert.ok((await metric(server.url, 'dsinfer_structured_mask_late_total')) >= 0);
  });
  test('400: malformed JSON and invalid UTF-8 with its byte offset (raw bytes)', async () => {
    const send = (body) => rawRequest(server.port, Buffer.concat([Buffer.from(
      `POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${KEY}\r\n` +
      `Content-Type: application/json\r\nContent-Length: ${body.length}\r\nConnection: close\r\n\r\n`), body]));
    const bad = await send(Buffer.from('{"messages": [}'));
    assert.equal(bad.status, 400);
    assert.match(JSON.parse(bad.body).error.message, /not valid JSON/);
    const utf8 = await send(Buffer.concat([Buffer.from('{"messages": [{"role": "user", "content": "a'),
      Buffer.from([0xff]), Buffer.from('"}]}')]));
    assert.equal(utf8.status, 400);
    assert.equal(JSON.parse(utf8.body).error.message, 'invalid UTF-8 at byte offset 44');
    const notObject = await send(Buffer.from('[1, 2]'));
    assert.equal(notObject.status, 400);
  });
  test('401 without or with a wrong key', async () => {
    const bad = new OpenAI({ apiKey: 'wrong', baseURL: server.url + '/v1', maxRetries: 0 });
    await expectStatus(bad.chat.completions.create({ messages: user('x') }), 401);
    await expectStatus(bad.models.list(), 401);
  });
  test('404 for an unknown model or path; 405 for a wrong method', async () => {
    await expectStatus(client.chat.completions.create({ model: 'gpt-9', messages: user('x') }), 404, /gpt-9/);
    const r = await fetch(server.url + '/v1/nothing');
    assert.equal(r.status, 404);
    assert.equal((await r.json()).error.type, 'not_found_error');
    const m = await fetch(server.url + '/v1/chat/completions', { headers: { Authorization: 'Bearer ' + KEY } });
    assert.equal(m.status, 405);
  });
});

describe('random bodies', () => {
  // User input never causes a 500, a crash or a hang: 400 random mutations of a valid body get
  // 200 or an OpenAI 400 / 404 error, and the server stays up.
  test('mutated chat and completions bodies get 200 or a 4xx error object', async () => {
    let seed = 12345;
    const rand = (n) => { seed = (seed * 1103515245 + 12345) % 2147483648; return seed % n; };
    const values = [null, -1, 0, 1, 2, 1e308, -1e308, 1e20, 0.5, 'x', '', '\u0000', 'none', 'auto', true,
      false, [], {}, [1, 'a'], [[1]], { type: 'text' }, { type: 'json_object' }, { include_usage: true },
      [{ role: 'user', content: 'hi' }], [{ role: 'user', content: [{ type: 'text', text: 'a' }] }],
      [{ role: 'assistant', tool_calls: [{ function: { name: 'f', arguments: '{' } }] }],
      [{ role: 'tool', content: 1 }], { '5': 1 }, { 'x': 1 }, 'x'.repeat(3000)];
    const keys = ['messages', 'prompt', 'model', 'n', 'temperature', 'top_p', 'top_k', 'min_p', 'seed', 'stop',
      'max_tokens', 'min_tokens', 'logprobs', 'top_logprobs', 'logit_bias', 'tools', 'tool_choice',
      'response_format', 'stream_options', 'chat_template_kwargs', 'reasoning_effort', 'echo', 'presence_penalty',
      'repetition_penalty', 'stop_token_ids', 'parallel_tool_calls', 'unknown_key', 'user', 'metadata'];
    const seen = new Map();
    for (let i = 0; i < 400; ++i) {
      const chat = rand(2) === 0;
      const body = chat ? { messages: user('Hi'), max_tokens: 2 } : { prompt: 'Hi', max_tokens: 2 };
      for (let k = 1 + rand(3); k > 0; --k) body[keys[rand(keys.length)]] = values[rand(values.length)];
      if (!Number.isInteger(body.max_tokens) || body.max_tokens > 8) body.max_tokens = 2;
      if (body.n > 4) body.n = 2;
      const r = await fetch(server.url + (chat ? '/v1/chat/completions' : '/v1/completions'), {
        method: 'POST', headers: { Authorization: 'Bearer ' + KEY, 'Content-Type': 'application/json' },
        body: JSON.stringify(body) });
      const text = await r.text();
      seen.set(r.status, (seen.get(r.status) ?? 0) + 1);
      assert.ok([200, 400, 404].includes(r.status), `${r.status} for ${JSON.stringify(body)}: ${text}`);
      if (r.status !== 200 && !body.stream) assert.equal(typeof JSON.parse(text).error.message, 'string');
    }
    assert.ok(seen.get(200) > 0 && seen.get(400) > 0, JSON.stringify([...seen]));
    assert.equal((await fetch(server.url + '/health')).status, 200);
  });
});

describe('aborts and concurrency', () => {
  const running = () => metric(server.url, 'dsinfer_requests_running');
  const open = () => metric(server.url, 'dsinfer_http_requests_open');

  test('a client that aborts a stream frees its request', async () => {
    const before = await metric(server.url, 'dsinfer_client_aborts_total');
    const controller = new AbortController();
    const stream = await client.chat.completions.create(
      { messages: user('Go on forever'), max_tokens: 3000, ignore_eos: true, stream: true },
      { signal: controller.signal });
    let chunks = 0;
    try {
      for await (const _ of stream) { if (++chunks === 3) controller.abort(); }
    } catch (e) {
      // The client may end the iteration quietly or with an abort error.
    }
    assert.ok(chunks >= 3);
    await eventually(async () => (await running()) === 0 && (await open()) === 0, 10000, 'the request to be freed');
    assert.equal(await metric(server.url, 'dsinfer_client_aborts_total'), before + 1);
    assert.equal(await metric(server.url, 'dsinfer_state_memory_used_bytes'), 0);
  });

  test('a client that aborts a non-streamed request frees it', async () => {
    const controller = new AbortController();
    const p = client.chat.completions.create({ messages: user('Long'), max_tokens: 3000, ignore_eos: true },
      { signal: controller.signal });
    await eventually(async () => (await running()) === 1, 10000, 'the request to run');
    controller.abort();
    await assert.rejects(p);
    await eventually(async () => (await running()) === 0 && (await open()) === 0, 10000, 'the request to be freed');
  });

  test('16 concurrent streams each equal their request run alone', async () => {
    const bodies = Array.from({ length: 16 }, (_, i) => ({
      messages: user('Stream number ' + i), max_tokens: 20, seed: 100 + i, ignore_eos: true }));
    const streamed = await Promise.all(bodies.map((b) => streamChat(b)));
    for (let i = 0; i < bodies.length; ++i) {
      const alone = await client.chat.completions.create(bodies[i]);
      assert.equal(streamed[i].choices[0].content, alone.choices[0].message.content, 'stream ' + i);
    }
    assert.equal(await open(), 0);
  });
});
