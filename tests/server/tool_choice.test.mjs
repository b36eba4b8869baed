// Forced tool calls end to end on the tiny (random) model at temperature 1: tool_choice "required"
// and a named function make every reply a DSML tool-call block, so each seed ends with
// finish_reason "tool_calls" and parsed tool_calls whose arguments follow the tool's JSON schema;
// parallel_tool_calls false gives one call; a thinking chat is forced after </think>; a streamed
// reply equals the unstreamed one; strict tools under tool_choice auto keep free text but calls
// that follow the schema; and `dsinfer generate --input` takes the same request keys.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';

import { BIN, MODEL, OpenAI, killAll, startServer, stopServer } from './server_util.mjs';

let server;
let client;

before(async () => {
  server = await startServer();
  client = new OpenAI({ apiKey: 'none', baseURL: server.url + '/v1', maxRetries: 0, timeout: 120000 });
});

after(async () => {
  try {
    await stopServer(server);
  } finally {
    killAll();
  }
});

const user = (text) => [{ role: 'user', content: text }];

const tools = [
  { type: 'function', function: { name: 'get_weather', description: 'Weather of a city',
    parameters: { type: 'object', properties: {
      city: { type: 'string', maxLength: 12 },
      days: { type: 'integer', minimum: 1, maximum: 14 },
      unit: { type: 'string', enum: ['celsius', 'fahrenheit'] },
      hourly: { type: 'boolean' },
      tags: { type: 'array', items: { type: 'string', enum: ['rain', 'wind'] }, maxItems: 2 } },
    required: ['city', 'days'], additionalProperties: false } } },
  { type: 'function', function: { name: 'get_time', description: 'Time in a zone',
    parameters: { type: 'object', properties: { zone: { type: 'string', enum: ['UTC', 'CET'] } },
      required: ['zone'] } } },
  { type: 'function', function: { name: 'ping', description: 'No arguments' } },
];

// The checks a JSON schema validator would make for these three schemas.
function validate(call) {
  assert.equal(call.type, 'function');
  assert.match(call.id, /^call_/);
  const { name } = call.function;
  const args = JSON.parse(call.function.arguments);
  assert.equal(typeof args, 'object');
  assert.ok(!Array.isArray(args) && args !== null);
  const keys = Object.keys(args);
  if (name === 'ping') {
    assert.deepEqual(keys, []);
  } else if (name === 'get_time') {
    assert.deepEqual(keys, ['zone']);
    assert.ok(['UTC', 'CET'].includes(args.zone));
  } else {
    assert.equal(name, 'get_weather');
    for (const k of keys) assert.ok(['city', 'days', 'unit', 'hourly', 'tags'].includes(k), k);
    assert.equal(typeof args.city, 'string');
    assert.ok([...args.city].length <= 12, args.city);
    assert.ok(Number.isInteger(args.days) && args.days >= 1 && args.days <= 14, String(args.days));
    if ('unit' in args) assert.ok(['celsius', 'fahrenheit'].includes(args.unit));
    if ('hourly' in args) assert.equal(typeof args.hourly, 'boolean');
    if ('tags' in args) {
      assert.ok(Array.isArray(args.tags) && args.tags.length <= 2);
      for (const t of args.tags) assert.ok(['rain', 'wind'].includes(t));
    }
  }
  return name;
}

const SEEDS = [1, 2, 3, 4, 5, 6];

describe('tool_choice forces a DSML tool call', () => {
  test('"required": every seed calls tools with schema-valid arguments', async () => {
    const names = new Set();
    for (const seed of SEEDS) {
      const r = await client.chat.completions.create({ messages: user('Weather in Paris?'), tools,
        tool_choice: 'required', temperature: 1, seed, max_tokens: 600 });
      const choice = r.choices[0];
      assert.equal(choice.finish_reason, 'tool_calls', JSON.stringify(choice));
      assert.ok(choice.message.tool_calls.length >= 1);
      assert.ok(!choice.message.content, 'no content before the block');
      for (const call of choice.message.tool_calls) names.add(validate(call));
    }
    assert.ok(names.size >= 2, 'the model chose among the tools: ' + [...names]);
  });

  test('a named function: only that function; parallel_tool_calls false: one call', async () => {
    for (const seed of SEEDS) {
      const r = await client.chat.completions.create({ messages: user('Weather?'), tools, temperature: 1,
        seed, max_tokens: 600, tool_choice: { type: 'function', function: { name: 'get_weather' } } });
      assert.equal(r.choices[0].finish_reason, 'tool_calls', JSON.stringify(r.choices[0]));
      for (const call of r.choices[0].message.tool_calls) assert.equal(validate(call), 'get_weather');
      const one = await client.chat.completions.create({ messages: user('Time?'), tools, temperature: 1,
        seed, max_tokens: 600, tool_choice: 'required', parallel_tool_calls: false });
      assert.equal(one.choices[0].finish_reason, 'tool_calls');
      assert.equal(one.choices[0].message.tool_calls.length, 1);
      validate(one.choices[0].message.tool_calls[0]);
    }
  });

  test('streamed tool calls equal the unstreamed reply; n > 1 forces every choice', async () => {
    const body = { messages: user('Weather in Paris?'), tools, tool_choice: 'required', temperature: 1,
      seed: 11, max_tokens: 600, n: 2 };
    const whole = await client.chat.completions.create(body);
    const stream = await client.chat.completions.create({ ...body, stream: true });
    const got = [{ calls: [], finish: null }, { calls: [], finish: null }];
    for await (const chunk of stream) {
      for (const ch of chunk.choices) {
        for (const t of ch.delta.tool_calls ?? []) got[ch.index].calls.push(t);
        if (ch.finish_reason) got[ch.index].finish = ch.finish_reason;
      }
    }
    for (const i of [0, 1]) {
      const c = whole.choices.find((x) => x.index === i);
      assert.equal(c.finish_reason, 'tool_calls');
      assert.equal(got[i].finish, 'tool_calls');
      assert.deepEqual(got[i].calls.map((t) => [t.function.name, t.function.arguments]),
        c.message.tool_calls.map((t) => [t.function.name, t.function.arguments]));
      c.message.tool_calls.forEach(validate);
    }
  });

  test('a thinking chat is forced after </think> (biased to come first)', async () => {
    for (const seed of SEEDS.slice(0, 3)) {
      const r = await client.chat.completions.create({ messages: user('Weather in Paris?'), tools,
        tool_choice: 'required', thinking: true, logit_bias: { 128822: 100 }, temperature: 1, seed,
        max_tokens: 600 });
      const choice = r.choices[0];
      assert.equal(choice.finish_reason, 'tool_calls', JSON.stringify(choice));
      assert.equal(r.usage.completion_tokens_details.reasoning_tokens, 1, 'the </think> token');
      choice.message.tool_calls.forEach(validate);
    }
  });

  test('strict tools under tool_choice auto: free text, and calls that follow the schema', async () => {
    const strict = [{ ...tools[0], function: { ...tools[0].function, strict: true } }];
    const plain = await client.chat.completions.create({ messages: user('Hi'), tools: strict,
      temperature: 1, seed: 1, max_tokens: 8 });
    assert.equal(plain.choices[0].finish_reason, 'length');
    assert.ok(plain.choices[0].message.content.length > 0);
    // Biased toward "\n\n", "<" and ｜DSML｜, the random model soon opens a block; the call
    // follows the schema.
    for (const seed of SEEDS.slice(0, 3)) {
      const r = await client.chat.completions.create({ messages: user('Weather?'), tools: strict,
        temperature: 1, seed, max_tokens: 400, parallel_tool_calls: false,
        logit_bias: { 271: 100, 30: 100, 128825: 100 } });
      assert.equal(r.choices[0].finish_reason, 'tool_calls', JSON.stringify(r.choices[0]));
      assert.equal(r.choices[0].message.tool_calls.length, 1);
      assert.equal(validate(r.choices[0].message.tool_calls[0]), 'get_weather');
    }
  });

  test('400s: a named function that is not a tool, no tools, another constraint', async () => {
    const expect400 = (p, re) => assert.rejects(p, (e) => e.status === 400 && re.test(e.message));
    await expect400(client.chat.completions.create({ messages: user('x'), tools,
      tool_choice: { type: 'function', function: { name: 'nope' } } }), /"nope", which is not in "tools"/);
    await expect400(client.chat.completions.create({ messages: user('x'), tool_choice: 'required' }),
      /needs a non-empty "tools"/);
    await expect400(client.chat.completions.create({ messages: user('x'), tools, tool_choice: 'required',
      response_format: { type: 'json_object' } }), /cannot be combined/);
    await expect400(client.chat.completions.create({ messages: user('x'), tool_choice: 'required',
      tools: [{ type: 'function', function: { name: 'f', parameters: { type: 'object',
        properties: { a: { not: {} } } } } }] }), /tool "f": parameter "a"/);
  });
});

test('dsinfer generate --input: the same keys force the call', () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'dsinfer-tools-'));
  const input = path.join(dir, 'in.jsonl');
  const lines = SEEDS.map((seed) => JSON.stringify({ messages: user('Weather in Paris?'), tools,
    tool_choice: seed % 2 ? 'required' : { type: 'function', function: { name: 'get_time' } },
    temperature: 1, seed, max_tokens: 600 }));
  fs.writeFileSync(input, lines.join('\n') + '\n');
  const out = path.join(dir, 'out.jsonl');
  execFileSync(BIN, ['generate', '--model', MODEL, '--input', input, '--output', out, '--threads', '1'],
    { stdio: ['ignore', 'ignore', 'pipe'] });
  const results = fs.readFileSync(out, 'utf8').trim().split('\n').map((l) => JSON.parse(l));
  assert.equal(results.length, SEEDS.length);
  results.forEach((r, i) => {
    const ch = r.choices[0];
    assert.equal(ch.finish_reason, 'tool_calls', JSON.stringify(ch));
    assert.ok(ch.message.tool_calls.length >= 1);
    for (const call of ch.message.tool_calls) {
      const name = validate(call);
      if (SEEDS[i] % 2 === 0) assert.equal(name, 'get_time');
    }
  });
  fs.rmSync(dir, { recursive: true, force: true });
});
