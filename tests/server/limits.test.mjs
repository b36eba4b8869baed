// `dsinfer serve` limits and shutdown, each on its own server: 413 for a body over --max-body-mb,
// 429 once --max-running + --max-queued sequences are held, and the drain on SIGTERM (in-flight
// streams finish, a request on a kept-alive connection gets 503, new connections are refused,
// the process exits 0; past --drain-timeout the rest end with finish_reason "abort").
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { after, describe, test } from 'node:test';

import { BIN, MODEL, OpenAI, eventually, killAll, metric, rawRequest, sleep, spawnServer, startServer,
  stopServer } from './server_util.mjs';

after(killAll);  // a failed test leaves no server behind

const user = (text) => [{ role: 'user', content: text }];
const clientOf = (server) => new OpenAI({ apiKey: 'none', baseURL: server.url + '/v1', maxRetries: 0 });

describe('limits', () => {
  test('413 for a body over the limit', async () => {
    const server = await startServer(['--max-body-mb', '1']);
    try {
      const client = clientOf(server);
      await assert.rejects(client.chat.completions.create({ messages: user('x'.repeat(2 << 20)) }),
        (e) => e.status === 413);
      // The server is fine afterwards.
      const r = await client.chat.completions.create({ messages: user('x'), max_tokens: 2 });
      assert.equal(r.usage.completion_tokens <= 2, true);
    } finally {
      await stopServer(server);
    }
  });

  test('429 when the queue is full, and admission again once it drains', async () => {
    const server = await startServer(['--max-running', '1', '--max-queued', '1']);
    try {
      const client = clientOf(server);
      const long = { messages: user('Long'), max_tokens: 3000, ignore_eos: true, stream: true };
      const controllers = [new AbortController(), new AbortController()];
      const streams = [];
      for (const c of controllers) streams.push(await client.chat.completions.create(long, { signal: c.signal }));
      await assert.rejects(client.chat.completions.create({ messages: user('x'), max_tokens: 2 }),
        (e) => e.status === 429 && /queue is full/.test(e.message));
      await assert.rejects(client.chat.completions.create({ messages: user('x'), max_tokens: 2, n: 2 }),
        (e) => e.status === 429);
      for (const c of controllers) c.abort();
      await eventually(async () => (await metric(server.url, 'dsinfer_http_requests_open')) === 0, 10000,
        'the aborted streams to be freed');
      const r = await client.chat.completions.create({ messages: user('x'), max_tokens: 2 });
      assert.ok(r.choices.length === 1);
      assert.ok((await metric(server.url, 'dsinfer_requests_total{endpoint="/v1/chat/completions",status="429"}')) >= 2);
    } finally {
      await stopServer(server);
    }
  });
});

describe('drain on SIGTERM', () => {
  test('in-flight streams finish, kept-alive connections get 503, then exit 0', async () => {
    const server = await startServer(['--drain-timeout', '60']);
    const client = clientOf(server);
    // A kept-alive connection that has served one request.
    const first = await rawRequest(server.port, 'GET /health HTTP/1.1\r\nHost: x\r\n\r\n');
    assert.equal(first.status, 200);
    const body = { messages: user('Drain me'), max_tokens: 60, seed: 1, ignore_eos: true };
    const alone = await client.chat.completions.create(body);
    const stream = await client.chat.completions.create({ ...body, stream: true });
    const iterator = stream[Symbol.asyncIterator]();
    let text = '';
    const firstChunk = await iterator.next();
    text += firstChunk.value.choices[0]?.delta?.content ?? '';
    server.proc.kill('SIGTERM');
    await eventually(() => /draining/.test(server.log()), 5000, 'the drain to start');
    const during = await rawRequest(server.port, 'GET /v1/models HTTP/1.1\r\nHost: x\r\n\r\n', first.socket);
    assert.equal(during.status, 503);
    assert.match(JSON.parse(during.body).error.message, /shutting down/);
    let finish = null;
    for (let r = await iterator.next(); !r.done; r = await iterator.next()) {
      for (const ch of r.value.choices) { text += ch.delta.content ?? ''; finish = ch.finish_reason ?? finish; }
    }
    assert.equal(finish, 'length');
    assert.equal(text, alone.choices[0].message.content, 'the drained stream is complete');
    const { code } = await server.exited;
    assert.equal(code, 0, server.log());
    await assert.rejects(fetch(server.url + '/health'));
  });

  test('past the drain deadline the rest are aborted', async () => {
    const server = await startServer(['--drain-timeout', '1']);
    const client = clientOf(server);
    const stream = await client.chat.completions.create(
      { messages: user('Forever'), max_tokens: 4000, ignore_eos: true, stream: true });
    let finish = null;
    const reading = (async () => {
      for await (const chunk of stream) for (const ch of chunk.choices) finish = ch.finish_reason ?? finish;
    })();
    await sleep(200);
    server.proc.kill('SIGTERM');
    await reading;
    assert.equal(finish, 'abort');
    const { code } = await server.exited;
    assert.equal(code, 0, server.log());
  });
});

describe('start-up', () => {
  test('bad usage exits 2 and a model that cannot load exits 1, each with one error line', () => {
    const run = (...args) => spawnSync(BIN, ['serve', ...args], { encoding: 'utf8', timeout: 60000 });
    const cases = [
      [[], 2, /--model is required/],
      [['--model', MODEL, '--port', '70000'], 2, /--port must be in \[0, 65535\], got 70000/],
      [['--model', MODEL, '--host', 'not-an-address', '--port', '0'], 2, /not an IP address/],
      [['--model', MODEL, '--max-queued', '-1', '--port', '0'], 2, /--max-queued must be >= 0/],
      [['--model', '/nonexistent/model', '--host', '127.0.0.1', '--port', '0'], 1, /dsinfer serve: .*nonexistent/],
    ];
    for (const [args, code, pattern] of cases) {
      const r = run(...args);
      assert.equal(r.status, code, args.join(' ') + ':\n' + r.stderr);
      assert.match(r.stderr, pattern);
    }
  });
});

describe('loading', () => {
  // The port is bound before the model loads. How long loading takes depends on the machine, so
  // the 503s are usually, not always, seen; every answer before the first 200 must be one.
  test('/health and requests get 503 "loading" until the model is ready', async () => {
    const proc = spawnServer(['--model', MODEL, '--host', '127.0.0.1', '--port', '0', '--threads', '1']);
    let log = '';
    const port = await new Promise((resolve) => proc.stderr.on('data', (d) => {
      log += d;
      const m = /listening on http:\/\/127\.0\.0\.1:(\d+)/.exec(log);
      if (m) resolve(Number(m[1]));
    }));
    const statuses = [];
    try {
      for (const end = Date.now() + 60000; Date.now() < end; await sleep(5)) {
        const r = await fetch(`http://127.0.0.1:${port}/v1/models`);
        statuses.push(r.status);
        if (r.status === 200) break;
        assert.equal(r.status, 503);
        assert.equal((await r.json()).error.message, 'the model is loading');
      }
    } finally {
      const exited = new Promise((r) => proc.on('exit', r));
      proc.kill('SIGTERM');
      await exited;
    }
    assert.equal(statuses.at(-1), 200, log);
  });
});
