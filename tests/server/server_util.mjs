// Helpers of the server end-to-end tests: start `dsinfer serve` on a free loopback port (--port 0,
// the port read from its "listening on" line), wait until it is ready, stop it; raw HTTP for what
// the openai client cannot send (bad bytes, wrong methods, a kept-alive socket).
import { spawn } from 'node:child_process';
import { createRequire } from 'node:module';
import assert from 'node:assert/strict';
import net from 'node:net';

const require = createRequire(process.env.DSINFER_NPM_DIR + '/package.json');
export const { OpenAI } = require('openai');

export const BIN = process.env.DSINFER_BIN;
export const MODEL = process.env.DSINFER_SERVER_MODEL;

// Every server this process starts is killed when it ends, whatever failed (no orphans).
const children = new Set();
export const killAll = () => { for (const p of children) if (p.exitCode === null) p.kill('SIGKILL'); };
process.on('exit', killAll);
for (const signal of ['SIGTERM', 'SIGINT']) process.on(signal, () => { killAll(); process.exit(1); });

// `dsinfer serve ARGS` as a child that is killed at exit.
export function spawnServer(args) {
  const proc = spawn(BIN, ['serve', ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
  children.add(proc);
  proc.on('exit', () => children.delete(proc));
  return proc;
}

// Starts a server; resolves to {proc, port, url, log()} once /health is 200.
export async function startServer(extraArgs = []) {
  const args = ['serve', '--model', MODEL, '--host', '127.0.0.1', '--port', '0', '--threads', '1',
                ...extraArgs];
  const proc = spawnServer(args.slice(1));
  let log = '';
  proc.stdout.on('data', (d) => { log += d; });
  const port = await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error('no "listening on" line:\n' + log)), 30000);
    proc.stderr.on('data', (d) => {
      log += d;
      const m = /listening on http:\/\/127\.0\.0\.1:(\d+)/.exec(log);
      if (m) { clearTimeout(timer); resolve(Number(m[1])); }
    });
    proc.on('exit', (code) => reject(new Error(`server exited ${code}:\n${log}`)));
  });
  const url = `http://127.0.0.1:${port}`;
  for (let i = 0; ; ++i) {
    const r = await fetch(url + '/health').catch(() => null);
    if (r && r.status === 200) break;
    if (i > 600) throw new Error('server not ready:\n' + log);
    await sleep(50);
  }
  const exited = new Promise((resolve) => proc.on('exit', (code, signal) => resolve({ code, signal })));
  return { proc, port, url, exited, log: () => log };
}

export async function stopServer(server) {
  if (server.proc.exitCode === null) server.proc.kill('SIGTERM');
  const timer = setTimeout(() => server.proc.kill('SIGKILL'), 20000);
  const result = await server.exited;
  clearTimeout(timer);
  return result;
}

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// A raw HTTP/1.1 exchange on a socket (kept open for the caller when `socket` is given).
export function rawRequest(port, bytes, socket = null) {
  return new Promise((resolve, reject) => {
    const s = socket || net.connect(port, '127.0.0.1');
    let data = Buffer.alloc(0);
    const onData = (d) => {
      data = Buffer.concat([data, d]);
      const text = data.toString('latin1');
      const head = text.indexOf('\r\n\r\n');
      if (head < 0) return;
      const m = /content-length: (\d+)/i.exec(text.slice(0, head));
      if (m && data.length >= head + 4 + Number(m[1])) {
        s.off('data', onData);
        const status = Number(text.slice(9, 12));
        resolve({ status, head: text.slice(0, head), body: data.slice(head + 4).toString('utf8'), socket: s });
      }
    };
    s.on('data', onData);
    s.once('error', reject);
    s.write(bytes);
  });
}

// A metric's value from /metrics (the first sample whose name and labels start with `prefix`).
export async function metric(url, prefix) {
  const text = await (await fetch(url + '/metrics')).text();
  for (const line of text.split('\n')) {
    if (line.startsWith(prefix + ' ') || line.startsWith(prefix + '{')) {
      return Number(line.slice(line.lastIndexOf(' ') + 1));
    }
  }
  return NaN;
}

// Polls until `f()` is true (or fails after `ms`).
export async function eventually(f, ms, what) {
  const end = Date.now() + ms;
  while (!(await f())) {
    if (Date.now() > end) throw new Error('timed out waiting for ' + what);
    await sleep(50);
  }
}

// The client call rejects with an HTTP error of this status; its message matches `pattern` and its
// OpenAI error object names `param` (each when given).
export async function expectStatus(promise, status, pattern, param) {
  await assert.rejects(promise, (e) => {
    assert.equal(e.status, status, e.message);
    if (pattern) assert.match(e.message, pattern);
    if (param !== undefined) assert.equal(e.error?.param ?? e.param, param);
    return true;
  });
}
