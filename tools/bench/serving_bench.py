#!/usr/bin/env python3
"""Online serving benchmark of an OpenAI-compatible server (`dsinfer serve`, or any peer).

Requests arrive as a Poisson process at each given rate (requests/s; `inf` sends them all at
once) and stream /v1/completions with token-id prompts of random lengths and a fixed number of
output tokens (`ignore_eos`), as vLLM's `benchmark_serving --dataset-name random` does. Per rate it
reports, as one JSON line: request and output-token throughput, TTFT, TPOT (per request: (e2e -
TTFT) / (output tokens - 1)), inter-token latency (the gaps between streamed chunks, each chunk one
or more tokens; `tokens_per_chunk` says how many on average), end-to-end latency (mean, p50, p90,
p99), and goodput: the finished requests per second that met every SLO given (`--slo-ttft-ms`,
`--slo-tpot-ms`).

Needs Python 3 with aiohttp (the GPU machine has it). Example:
  python3 tools/bench/serving_bench.py --url http://127.0.0.1:8000 --rates 2,8,inf \
      --num-prompts 200 --input-len 512 --output-len 128 --slo-ttft-ms 500 --slo-tpot-ms 50
"""
import argparse
import asyncio
import json
import math
import random
import sys
import time

import aiohttp


def percentile(xs, p):
    if not xs:
        return 0.0
    s = sorted(xs)
    k = (len(s) - 1) * p / 100.0
    f = math.floor(k)
    c = min(f + 1, len(s) - 1)
    return s[f] + (s[c] - s[f]) * (k - f)


def summary(xs, scale=1e3):
    return {
        "mean": (sum(xs) / len(xs) * scale) if xs else 0.0,
        "p50": percentile(xs, 50) * scale,
        "p90": percentile(xs, 90) * scale,
        "p99": percentile(xs, 99) * scale,
    }


class Result:
    def __init__(self):
        self.ok = False
        self.error = ""
        self.ttft = 0.0
        self.e2e = 0.0
        self.gaps = []
        self.chunks = 0
        self.output_tokens = 0
        self.prompt_tokens = 0


async def one_request(session, url, model, prompt, output_len, headers):
    body = {
        "model": model,
        "prompt": prompt,
        "max_tokens": output_len,
        "ignore_eos": True,
        "temperature": 0.0,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    r = Result()
    start = time.perf_counter()
    last = None
    try:
        async with session.post(url + "/v1/completions", json=body, headers=headers) as resp:
            if resp.status != 200:
                r.error = f"HTTP {resp.status}: {(await resp.text())[:200]}"
                return r
            buf = b""
            async for data in resp.content.iter_any():
                buf += data
                while b"\n\n" in buf:
                    event, buf = buf.split(b"\n\n", 1)
                    for line in event.split(b"\n"):
                        if not line.startswith(b"data: "):
                            continue
                        payload = line[6:].strip()
                        if payload == b"[DONE]":
                            continue
                        j = json.loads(payload)
                        if j.get("usage"):
                            r.output_tokens = j["usage"].get("completion_tokens", 0)
                            r.prompt_tokens = j["usage"].get("prompt_tokens", 0)
                        choices = j.get("choices") or []
                        if not choices or not choices[0].get("text"):
                            continue
                        now = time.perf_counter()
                        if last is None:
                            r.ttft = now - start
                        else:
                            r.gaps.append(now - last)
                        last = now
                        r.chunks += 1
            r.e2e = time.perf_counter() - start
            r.ok = r.chunks > 0 and r.output_tokens > 0
            if not r.ok:
                r.error = "no tokens streamed"
    except (aiohttp.ClientError, asyncio.TimeoutError, json.JSONDecodeError) as e:
        r.error = repr(e)
    return r


async def run_rate(args, rate, prompts, out_lens):
    rng = random.Random(args.seed + 7)
    headers = {"Authorization": f"Bearer {args.api_key}"} if args.api_key else {}
    timeout = aiohttp.ClientTimeout(total=args.timeout)
    conn = aiohttp.TCPConnector(limit=0)
    sem = asyncio.Semaphore(args.max_concurrency) if args.max_concurrency > 0 else None

    async def guarded(session, p, n):
        if sem is None:
            return await one_request(session, args.url, args.model, p, n, headers)
        async with sem:
            return await one_request(session, args.url, args.model, p, n, headers)

    async with aiohttp.ClientSession(timeout=timeout, connector=conn) as session:
        tasks = []
        start = time.perf_counter()
        for p, n in zip(prompts, out_lens):
            tasks.append(asyncio.create_task(guarded(session, p, n)))
            if math.isfinite(rate):
                await asyncio.sleep(rng.expovariate(rate))
        results = await asyncio.gather(*tasks)
        wall = time.perf_counter() - start
    good = [r for r in results if r.ok]
    ttft = [r.ttft for r in good]
    tpot = [(r.e2e - r.ttft) / (r.output_tokens - 1) for r in good if r.output_tokens > 1]
    gaps = [g for r in good for g in r.gaps]
    e2e = [r.e2e for r in good]
    out_tokens = sum(r.output_tokens for r in good)
    chunks = sum(r.chunks for r in good)

    def meets(r):
        if args.slo_ttft_ms > 0 and r.ttft * 1e3 > args.slo_ttft_ms:
            return False
        if args.slo_tpot_ms > 0 and r.output_tokens > 1:
            if (r.e2e - r.ttft) / (r.output_tokens - 1) * 1e3 > args.slo_tpot_ms:
                return False
        return True

    errors = [r.error for r in results if not r.ok]
    return {
        "rate": rate if math.isfinite(rate) else "inf",
        "num_prompts": len(prompts),
        "completed": len(good),
        "failed": len(errors),
        "first_error": errors[0] if errors else "",
        "wall_s": wall,
        "request_throughput": len(good) / wall,
        "output_throughput": out_tokens / wall,
        "total_token_throughput": (out_tokens + sum(r.prompt_tokens for r in good)) / wall,
        "tokens_per_chunk": out_tokens / chunks if chunks else 0.0,
        "ttft_ms": summary(ttft),
        "tpot_ms": summary(tpot),
        "itl_ms": summary(gaps),
        "e2e_ms": summary(e2e),
        "slo": {"ttft_ms": args.slo_ttft_ms, "tpot_ms": args.slo_tpot_ms},
        "goodput": sum(1 for r in good if meets(r)) / wall,
        "slo_attainment": sum(1 for r in good if meets(r)) / len(prompts),
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--url", default="http://127.0.0.1:8000")
    ap.add_argument("--model", default="", help="the served model name (default: /v1/models' first)")
    ap.add_argument("--api-key", default="")
    ap.add_argument("--rates", default="1,4,inf", help="comma-separated requests/s; inf: all at once")
    ap.add_argument("--num-prompts", type=int, default=100)
    ap.add_argument("--input-len", type=int, default=512)
    ap.add_argument("--output-len", type=int, default=128)
    ap.add_argument("--range-ratio", type=float, default=0.0,
                    help="lengths uniform in [len * (1 - r), len * (1 + r)] (default: fixed)")
    ap.add_argument("--vocab-low", type=int, default=1000)
    ap.add_argument("--vocab-high", type=int, default=100000)
    ap.add_argument("--max-concurrency", type=int, default=0, help="0: unbounded")
    ap.add_argument("--slo-ttft-ms", type=float, default=0.0)
    ap.add_argument("--slo-tpot-ms", type=float, default=0.0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--timeout", type=float, default=3600.0)
    ap.add_argument("--warmup", type=int, default=4, help="requests sent first, not measured")
    ap.add_argument("--tag", default="", help="a JSON object merged into each result line")
    args = ap.parse_args()

    async def go():
        if not args.model:
            async with aiohttp.ClientSession() as s:
                async with s.get(args.url + "/v1/models") as resp:
                    args.model = (await resp.json())["data"][0]["id"]
        rng = random.Random(args.seed)

        def lengths(base, count):
            lo = max(1, int(base * (1 - args.range_ratio)))
            hi = max(lo, int(base * (1 + args.range_ratio)))
            return [rng.randint(lo, hi) for _ in range(count)]

        if args.warmup > 0:
            warm = [[rng.randint(args.vocab_low, args.vocab_high) for _ in range(16)]
                    for _ in range(args.warmup)]
            await run_rate(args, math.inf, warm, [8] * args.warmup)
        tag = json.loads(args.tag) if args.tag else {}
        for text in args.rates.split(","):
            rate = math.inf if text.strip() == "inf" else float(text)
            in_lens = lengths(args.input_len, args.num_prompts)
            out_lens = lengths(args.output_len, args.num_prompts)
            prompts = [[rng.randint(args.vocab_low, args.vocab_high) for _ in range(n)]
                       for n in in_lens]
            res = await run_rate(args, rate, prompts, out_lens)
            res.update({"input_len": args.input_len, "output_len": args.output_len,
                        "range_ratio": args.range_ratio, "max_concurrency": args.max_concurrency})
            res.update(tag)
            print(json.dumps(res), flush=True)
            if res["failed"]:
                print(f"serving_bench: {res['failed']} requests failed: {res['first_error']}",
                      file=sys.stderr)

    asyncio.run(go())


if __name__ == "__main__":
    main()
