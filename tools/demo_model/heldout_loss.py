#!/usr/bin/env python3
"""Held-out loss (nats/token) of a model dir measured through the engine (`dsinfer logits`).

  heldout_loss.py --dsinfer build/bin/dsinfer --model models/demo \
      --heldout build-demo/corpus/heldout.u32.xz [--windows 4 --length 512] [--max-loss 5.0]

Takes --windows fixed windows (seeded offsets) of --length+1 tokens from the held-out shard (or
from --ids-file, a JSON {"ids": [...]}), runs `dsinfer logits` on the first --length tokens of
each and averages the cross-entropy of the next tokens. Prints one JSON line; with --max-loss
exits 1 above it (the CPU test the issue asks for, once models/demo exists).
--write-ids F saves the chosen windows as JSON (a small file a test can keep under tests/data).
"""
import argparse
import json
import lzma
import os
import random
import subprocess
import tempfile

import numpy as np


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dsinfer", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--heldout", help="heldout.u32.xz")
    ap.add_argument("--ids-file", help='JSON {"windows": [[...], ...]} (as --write-ids writes)')
    ap.add_argument("--windows", type=int, default=4)
    ap.add_argument("--length", type=int, default=512)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--max-loss", type=float)
    ap.add_argument("--write-ids")
    args = ap.parse_args()
    if args.ids_file:
        windows = json.load(open(args.ids_file))["windows"]
    else:
        with open(args.heldout, "rb") as f:
            ids = np.frombuffer(lzma.decompress(f.read()), dtype="<u4")
        rng = random.Random(args.seed)
        starts = [rng.randrange(0, len(ids) - args.length - 1) for _ in range(args.windows)]
        windows = [ids[s:s + args.length + 1].tolist() for s in starts]
    if args.write_ids:
        with open(args.write_ids, "w") as f:
            json.dump({"windows": windows}, f)
    total, n = 0.0, 0
    with tempfile.TemporaryDirectory() as tmp:
        for w in windows:
            p_ids, p_out = os.path.join(tmp, "ids.json"), os.path.join(tmp, "logits.npy")
            with open(p_ids, "w") as f:
                json.dump({"ids": w[:-1]}, f)
            subprocess.run([args.dsinfer, "logits", "--model", args.model, "--ids-file", p_ids,
                            "--out", p_out], check=True)
            lg = np.load(p_out).astype(np.float64)
            m = lg.max(-1, keepdims=True)
            lse = (m[:, 0] + np.log(np.exp(lg - m).sum(-1)))
            tgt = np.array(w[1:])
            total += float((lse - lg[np.arange(len(tgt)), tgt]).sum())
            n += len(tgt)
    res = {"model": args.model, "tokens": n, "heldout_loss": total / n}
    print(json.dumps(res))
    if args.max_loss is not None and res["heldout_loss"] > args.max_loss:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
