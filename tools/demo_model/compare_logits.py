#!/usr/bin/env python3
"""Top-1 agreement and mean KL(p || q) between two float32 logits .npy files [T, vocab] (p: the
reference, e.g. the CPU's; q: e.g. the GPU's). Prints one JSON line.

  compare_logits.py REF.npy OTHER.npy
"""
import json
import sys

import numpy as np


def log_softmax(x):
    x = x.astype(np.float64)
    m = x.max(axis=1, keepdims=True)
    return x - m - np.log(np.exp(x - m).sum(axis=1, keepdims=True))


def main():
    p = np.load(sys.argv[1])
    q = np.load(sys.argv[2])
    assert p.shape == q.shape, (p.shape, q.shape)
    lp, lq = log_softmax(p), log_softmax(q)
    kl = (np.exp(lp) * (lp - lq)).sum(axis=1)
    print(json.dumps({"rows": int(p.shape[0]), "top1_agreement": float((p.argmax(1) == q.argmax(1)).mean()),
                      "mean_kl": float(kl.mean()), "max_kl": float(kl.max()),
                      "max_abs_diff": float(np.abs(p - q).max())}))


if __name__ == "__main__":
    main()
