// Soak test of `dsinfer serve` (not in CI; bench/soak_server runs it): C concurrent clients keep
// one streaming chat request each in flight for D seconds over keep-alive connections; with
// probability P a client disconnects after a random number of chunks. The requests are drawn from
// V seeded variants whose offline results (`dsinfer generate --input`, the same request schema)
// are computed first. Checks: every finished stream equals its offline text, nothing is lost (a
// stream that we did not cut ends with [DONE]) or duplicated (no chunk after finish_reason, one
// role chunk), and after the clients stop the server holds no request or state (/metrics).
// Prints one JSON line of results (RSS of the server at start and end included).
import { execFileSync, spawn } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';

const arg = (name, fallback) => {
  const i = process.argv.indexOf('--' + name);
  return i > 0 ? process.argv[i + 1] : fallback;
};
const BIN = arg('bin', 'build/bin/dsinfer');
const MODEL = arg('model', 'models/tiny');
const CONNECTIONS = Number(arg('connections', 1000));
const DURATION_S = Number(arg('duration', 600));
const DISCONNECT = Number(arg('disconnect-prob', 0.3));
const VARIANTS = Number(arg('variants', 40));
const THREADS = arg('threads', '0');

const variant = (i) => ({
  messages: [{ role: 'user', content: `Soak request ${i}: tell me something.` }],
  max_tokens: 8 + (i * 7) % 40, seed: 1000 + i, ignore_eos: true, temperature: 0.8,
});

function offlineTexts() {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'dsinfer-soak-'));
  const lines = Array.from({ length: VARIANTS }, (_, i) => JSON.stringify({ id: i, ...variant(i) }));
  fs.writeFileSync(path.join(dir, 'in.jsonl'), lines.join('\n') + '\n');
  execFileSync(BIN, ['generate', '--model', MODEL, '--input', path.join(dir, 'in.jsonl'), '--output',
    path.join(dir, 'out.jsonl'), '--quiet', '--threads', THREADS], { stdio: 'inherit' });
  const texts = [];
  for (const line of fs.readFileSync(path.join(dir, 'out.jsonl'), 'utf8').trim().split('\n')) {
    const j = JSON.parse(line);
    texts[j.id] = j.choices[0].text;
  }
  fs.rmSync(dir, { recursive: true });
  return texts;
}

const rssKb = (pid) => Number(/VmRSS:\s+(\d+)/.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'))[1]);

async function startServer() {
  const proc = spawn(BIN, ['serve', '--model', MODEL, '--port', '0', '--threads', THREADS,
    '--max-queued', String(CONNECTIONS * 2)], { stdio: ['ignore', 'ignore', 'pipe'] });
  let log = '';
  const port = await new Promise((resolve, reject) => {
    proc.stderr.on('data', (d) => {
      log += d;
      const m = /listening on http:\/\/127\.0\.0\.1:(\d+)/.exec(log);
      if (m) resolve(Number(m[1]));
    });
    proc.on('exit', (c) => reject(new Error('server exited ' + c + '\n' + log)));
  });
  for (;;) {
    const ok = await fetch(`http://127.0.0.1:${port}/health`).then((r) => r.status === 200, () => false);
    if (ok) break;
    await new Promise((r) => setTimeout(r, 50));
  }
  return { proc, port };
}

async function metrics(port) {
  const text = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
  const get = (name) => Number(new RegExp('^' + name + ' (\\S+)$', 'm').exec(text)?.[1]);
  return { open: get('dsinfer_http_requests_open'), running: get('dsinfer_requests_running'),
           waiting: get('dsinfer_requests_waiting'), state: get('dsinfer_state_memory_used_bytes'),
           aborts: get('dsinfer_client_aborts_total') };
}

const stats = { started: 0, finished: 0, matched: 0, mismatched: 0, cut: 0, lost: 0, duplicated: 0,
                http_errors: 0, socket_errors: 0, chunks: 0 };
const mismatches = [];

// One streaming request; resolves when it ended (finished, cut by us, or failed).
function oneRequest(agent, port, texts) {
  const v = Math.floor(Math.random() * VARIANTS);
  const body = JSON.stringify({ ...variant(v), stream: true });
  const cutAfter = Math.random() < DISCONNECT ? 1 + Math.floor(Math.random() * 8) : -1;
  ++stats.started;
  return new Promise((resolve) => {
    const req = http.request({ host: '127.0.0.1', port, path: '/v1/chat/completions', method: 'POST', agent,
      headers: { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(body) } }, (res) => {
      if (res.statusCode !== 200) { ++stats.http_errors; res.resume(); res.on('end', resolve); return; }
      let buf = '', text = '', roles = 0, finished = false, done = false, chunks = 0;
      res.setEncoding('utf8');
      res.on('data', (d) => {
        buf += d;
        for (let i; (i = buf.indexOf('\n\n')) >= 0;) {
          const event = buf.slice(0, i);
          buf = buf.slice(i + 2);
          if (!event.startsWith('data: ')) continue;
          const data = event.slice(6);
          if (data === '[DONE]') { done = true; continue; }
          const chunk = JSON.parse(data);
          ++chunks; ++stats.chunks;
          for (const ch of chunk.choices) {
            if (finished || done) ++stats.duplicated;
            if (ch.delta.role) ++roles;
            text += ch.delta.content ?? '';
            if (ch.finish_reason) finished = true;
          }
          if (chunks === cutAfter) { ++stats.cut; req.destroy(); resolve(); return; }
        }
      });
      res.on('end', () => {
        if (!done || !finished) { ++stats.lost; resolve(); return; }
        if (roles !== 1) ++stats.duplicated;
        ++stats.finished;
        if (text === texts[v]) { ++stats.matched; } else {
          ++stats.mismatched;
          if (mismatches.length < 5) mismatches.push({ variant: v, got: text, want: texts[v] });
        }
        resolve();
      });
      res.on('error', () => resolve());
    });
    req.on('error', () => { if (cutAfter < 0) ++stats.socket_errors; resolve(); });
    req.end(body);
  });
}

const texts = offlineTexts();
const { proc, port } = await startServer();
const rssStart = rssKb(proc.pid);
const agent = new http.Agent({ keepAlive: true, maxSockets: Infinity });
const end = Date.now() + DURATION_S * 1000;
const t0 = Date.now();
let maxOpen = 0;
const rssSeries = [];  // MB, every 30 s
let ticks = 0;
const sampler = setInterval(async () => {
  const m = await metrics(port).catch(() => null);
  if (m) maxOpen = Math.max(maxOpen, m.open);
  if (++ticks % 30 === 0) rssSeries.push(Math.round(rssKb(proc.pid) / 102.4) / 10);
}, 1000);
await Promise.all(Array.from({ length: CONNECTIONS }, async () => {
  while (Date.now() < end) await oneRequest(agent, port, texts);
}));
clearInterval(sampler);
const wall = (Date.now() - t0) / 1000;
agent.destroy();
// No stuck requests: everything is freed within 10 s of the last client.
let after = null;
for (let i = 0; i < 200; ++i) {
  after = await metrics(port);
  if (after.open === 0 && after.running === 0 && after.waiting === 0) break;
  await new Promise((r) => setTimeout(r, 50));
}
const rssEnd = rssKb(proc.pid);
proc.kill('SIGTERM');
const code = await new Promise((r) => proc.on('exit', (c) => r(c)));
const result = { connections: CONNECTIONS, duration_s: DURATION_S, wall_s: wall, disconnect_prob: DISCONNECT,
  ...stats, max_open_requests: maxOpen, after, rss_start_mb: rssStart / 1024, rss_end_mb: rssEnd / 1024, rss_every_30s_mb: rssSeries,
  exit_code: code, mismatches };
console.log(JSON.stringify(result));
const ok = stats.mismatched === 0 && stats.lost === 0 && stats.duplicated === 0 && stats.http_errors === 0 &&
  after.open === 0 && after.running === 0 && after.state === 0 && code === 0;
process.exit(ok ? 0 : 1);
