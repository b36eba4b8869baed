#!/usr/bin/env python3
"""Token-id shards of the demo corpus (scripts/build_demo_corpus.sh, step 3).

  make_shards.py --text WORK/text --dsinfer build/bin/dsinfer --tokenizer DIR --out OUT

Tokenizes every OUT-bound chunk WORK/text/<split>/<package>.NNN.txt with `dsinfer tokenize` (our
own Hugging Face-exact tokenizer; the BOS spelling that starts each document becomes id 0) and
writes
  OUT/train_NN.u32.xz   uint32 little-endian token ids, xz, about --shard-tokens ids each
  OUT/heldout.u32.xz    the held-out packages' documents (never trained on)
  OUT/manifest.json     per package: split, license, documents, characters, tokens; per shard:
                        tokens, bytes, sha256
Deterministic: the same text gives the same bytes.
"""
import argparse
import array
import concurrent.futures
import hashlib
import json
import lzma
import os
import subprocess
import sys


def tokenize(dsinfer, tokenizer, path):
    r = subprocess.run([dsinfer, "tokenize", "--tokenizer", tokenizer, "--text-file", path],
                       capture_output=True, check=True)
    return json.loads(r.stdout)["ids"]


def write_shard(path, ids):
    a = array.array("I", ids)
    if sys.byteorder != "little":
        a.byteswap()
    data = lzma.compress(a.tobytes(), preset=9 | lzma.PRESET_EXTREME)
    with open(path, "wb") as f:
        f.write(data)
    return {"file": os.path.basename(path), "tokens": len(ids), "bytes": len(data),
            "sha256": hashlib.sha256(data).hexdigest()}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--text", required=True)
    ap.add_argument("--dsinfer", required=True)
    ap.add_argument("--tokenizer", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--shard-tokens", type=int, default=4_000_000)
    ap.add_argument("--max-train-tokens", type=int, default=0,
                    help="cap on the training tokens (0: all); packages are cut proportionally")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    args = ap.parse_args()
    stats = {s["package"]: s for s in json.load(open(os.path.join(args.text, "extract_stats.json")))}
    os.makedirs(args.out, exist_ok=True)
    per_split = {}
    for split in ("train", "heldout"):
        d = os.path.join(args.text, split)
        files = sorted(os.listdir(d)) if os.path.isdir(d) else []
        paths = [os.path.join(d, f) for f in files]
        with concurrent.futures.ThreadPoolExecutor(args.jobs) as ex:
            toks = list(ex.map(lambda p: tokenize(args.dsinfer, args.tokenizer, p), paths))
        by_pkg = {}
        for f, ids in zip(files, toks):
            by_pkg.setdefault(f.rsplit(".", 2)[0], []).extend(ids)
        per_split[split] = by_pkg
        for pkg, ids in by_pkg.items():
            stats[pkg]["tokens"] = len(ids)
            print("%-22s %-7s tokens %9d" % (pkg, split, len(ids)), file=sys.stderr)

    train = per_split["train"]
    total = sum(len(v) for v in train.values())
    if args.max_train_tokens and total > args.max_train_tokens:
        keep = args.max_train_tokens / total
        for pkg in train:
            ids = train[pkg]
            n = int(len(ids) * keep)
            # cut at a document start (id 0) so no document is split
            while n > 0 and ids[n] != 0:
                n -= 1
            train[pkg] = ids[:n]
            stats[pkg]["tokens_kept"] = n
    stream = []
    for pkg in sorted(train):
        stream.extend(train[pkg])
    # Interleave packages at document granularity is not needed: training samples random windows.
    shards = []
    for i in range(0, len(stream), args.shard_tokens):
        j = min(len(stream), i + args.shard_tokens)
        while j < len(stream) and stream[j] != 0 and j > i + args.shard_tokens // 2:
            j -= 1  # end shards at a document start when one is near
        shards.append((i, j))
    # recompute contiguous boundaries
    bounds, start = [], 0
    for _, j in shards:
        if j > start:
            bounds.append((start, j))
            start = j
    if start < len(stream):
        bounds.append((start, len(stream)))
    files = []
    for n, (i, j) in enumerate(bounds):
        files.append(write_shard(os.path.join(args.out, "train_%02d.u32.xz" % n), stream[i:j]))
        print("wrote %s" % files[-1], file=sys.stderr)
    held = []
    for pkg in sorted(per_split["heldout"]):
        held.extend(per_split["heldout"][pkg])
    files.append(write_shard(os.path.join(args.out, "heldout.u32.xz"), held))
    print("wrote %s" % files[-1], file=sys.stderr)
    manifest = {
        "tokenizer": "DeepSeek-V4 (scripts/prepare_tokenizer.sh), vocab 129280",
        "format": "uint32 little-endian token ids, xz; every document starts with BOS (id 0)",
        "train_tokens": len(stream),
        "heldout_tokens": len(held),
        "packages": list(stats.values()),
        "shards": files,
        "total_bytes": sum(f["bytes"] for f in files),
    }
    with open(os.path.join(args.out, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1)
    print("train %d tokens, heldout %d tokens, %.1f MiB" %
          (len(stream), len(held), manifest["total_bytes"] / 2**20), file=sys.stderr)


if __name__ == "__main__":
    main()
