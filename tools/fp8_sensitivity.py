#!/usr/bin/env python3
"""How far a DeepSeek-V4 model's CPU logits move when its fp32 weights move by at most one ulp.

The GPU and the CPU compute the same forward with fp32 sums in other orders, about 1e-7 apart
per value. With the FP8 cache (`--kv-cache-dtype fp8`) such a difference can flip an e4m3 code
of a K=V value (a 6-12% step), and the model carries that on. This tool measures the CPU against
itself under a perturbation of that size, so that a GPU-vs-CPU gap can be read against it: a gap
of the same order is the model's conditioning, a much larger one a fault.

  tools/fp8_sensitivity.py --dsinfer build/bin/dsinfer --config config.json [--tokens 150]
      [--kv-cache-dtype fp8] [--seeds 1,2] [--work DIR]

It writes the config's random model (`init-model --config`, f32, seed 19), copies with every
non-expert f32 weight moved by -1, 0 or +1 ulp (per seed), runs `logits` (one prefill) on each and
prints one JSON line per seed: the relative error (max |a - b| / max |b|, the GPU tests'
measure), the share of rows whose top-1 agrees, and the first row more than 1e-3 apart.
Standard library only.
"""
import argparse
import array
import json
import os
import random
import shutil
import struct
import subprocess
import sys
import tempfile


def read_safetensors(path):
    with open(path, "rb") as f:
        data = bytearray(f.read())
    n = struct.unpack("<Q", data[:8])[0]
    return data, json.loads(data[8:8 + n]), 8 + n


def perturb(src, dst, seed):
    """dst: src's model with each non-expert f32 weight moved by -1, 0 or +1 ulp."""
    os.makedirs(dst, exist_ok=True)
    shutil.copy(os.path.join(src, "config.json"), dst)
    data, header, base = read_safetensors(os.path.join(src, "model.safetensors"))
    rng = random.Random(seed)
    for name, t in header.items():
        if name == "__metadata__" or t["dtype"] != "F32" or "experts" in name:
            continue
        lo, hi = t["data_offsets"]
        bits = array.array("i")
        bits.frombytes(bytes(data[base + lo:base + hi]))
        for i in range(len(bits)):
            bits[i] += rng.choice((-1, 0, 1))
        data[base + lo:base + hi] = bits.tobytes()
    with open(os.path.join(dst, "model.safetensors"), "wb") as f:
        f.write(data)


def read_npy(path):
    """The float32 values of a version-1 .npy (dsinfer logits' output), flat."""
    with open(path, "rb") as f:
        data = f.read()
    header_len = struct.unpack("<H", data[8:10])[0]
    values = array.array("f")
    values.frombytes(data[10 + header_len:])
    return values


def compare(a, b, vocab):
    diff = max(abs(x - y) for x, y in zip(a, b))
    ref = max(abs(y) for y in b)
    rows = len(b) // vocab
    agree, first = 0, None
    for r in range(rows):
        ra, rb = a[r * vocab:(r + 1) * vocab], b[r * vocab:(r + 1) * vocab]
        agree += max(range(vocab), key=ra.__getitem__) == max(range(vocab), key=rb.__getitem__)
        if first is None and max(abs(x - y) for x, y in zip(ra, rb)) > 1e-3 * max(map(abs, rb)):
            first = r
    return diff / max(ref, 1e-30), agree / rows, first


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dsinfer", required=True)
    ap.add_argument("--config", required=True, help="a DeepSeek-V4 config.json")
    ap.add_argument("--tokens", type=int, default=150)
    ap.add_argument("--kv-cache-dtype", default="fp8")
    ap.add_argument("--seeds", default="1,2")
    ap.add_argument("--work", help="scratch dir (default: a temporary one)")
    args = ap.parse_args()
    work = args.work or tempfile.mkdtemp(prefix="fp8_sensitivity_")
    vocab = json.load(open(args.config))["vocab_size"]

    def run(*cmd):
        r = subprocess.run([args.dsinfer, *cmd], capture_output=True, text=True)
        if r.returncode != 0:
            sys.exit(f"dsinfer {' '.join(cmd)}: {r.stderr.strip()}")

    base = os.path.join(work, "base")
    run("init-model", "--config", args.config, "--seed", "19", "--weights", "f32", "--out", base)
    ids = os.path.join(work, "ids.json")
    with open(ids, "w") as f:
        json.dump({"ids": [(i * 7919 + 11) % vocab for i in range(args.tokens)]}, f)

    def logits(model):
        out = os.path.join(model, "logits.npy")
        run("logits", "--model", model, "--ids-file", ids, "--out", out, "--prefill",
            str(args.tokens), "--kv-cache-dtype", args.kv_cache_dtype)
        return read_npy(out)

    ref = logits(base)
    for seed in (int(s) for s in args.seeds.split(",")):
        moved = os.path.join(work, f"moved_{seed}")
        perturb(base, moved, seed)
        rel, top1, first = compare(logits(moved), ref, vocab)
        print(json.dumps({"seed": seed, "kv_cache_dtype": args.kv_cache_dtype, "rel_err": rel,
                          "top1": top1, "first_row_apart": first}))


if __name__ == "__main__":
    main()
