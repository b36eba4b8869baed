#!/usr/bin/env python3
"""Checks the PyTorch definition (dsv4.py) against the engine: same weights, same logits.

  check_engine.py --dsinfer build/bin/dsinfer [--work /tmp/dsv4-check] [--tied] [--ckpt CKPT]

Builds a small random DeepSeek-V4 with every part (SWA, CSA with an indexer whose top-k is smaller
than the visible entries, HCA, a hash layer, bias-routed layers, shared expert, mHC, MTP) with
weights spread like the engine's init-model (so attention, routing and selection are far from
uniform), rounds the BF16-stored parameters to BF16, exports it (export.py), runs
`dsinfer logits` on a token sequence (one prefill, and again as chunks + decode) and compares with
the PyTorch fp32 logits. With --ckpt the trained checkpoint is checked instead.
Prints one JSON line; exit 1 when the relative difference exceeds --tol.

The MTP draft logits: `dsinfer logits` does not expose them; with --mtp-tool (a build of
tools/demo_model/mtp_logits.cc, scripts/check_demo_model.sh compiles it when the build tree's
libraries are there) the PyTorch MTP logits (rows 0..T-2) are compared with the engine's
Model::ForwardMtp too.
"""
import argparse
import json
import math
import os
import subprocess
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import dsv4  # noqa: E402
import export  # noqa: E402

CHECK = dict(hidden_size=64, num_layers=4, num_heads=4, head_dim=32, rope_head_dim=16,
             q_lora_rank=48, o_groups=2, o_lora_rank=32, n_routed_experts=8,
             num_experts_per_tok=2, moe_intermediate_size=32, num_hash_layers=1,
             sliding_window=16, compress_ratios=[0, 4, 16, 4], index_n_heads=4,
             index_head_dim=32, index_topk=4)


def randomize_(model, seed):
    """Engine-like random weights: linears N(0, 1/in), norms 1 + N(0, 0.1), mHC per init-model."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, t in dsv4.official_state(model).items():
            if not t.is_floating_point():
                continue
            r = torch.randn(t.shape, generator=g)
            if name == "embed.weight":
                t.copy_(r)
            elif name.endswith(("_fn",)):
                t.copy_(r * 0.1)
            elif name.endswith("_base"):
                t.copy_(r * 0.5)
            elif name.endswith("_scale"):
                t.copy_(1 + 0.2 * r)
            elif name.endswith(("attn_sink",)):
                t.copy_(r)
            elif name.endswith("ape"):
                t.copy_(0.5 * r)
            elif name.endswith("gate.bias"):
                t.copy_(0.1 * r)
            elif t.dim() == 1:  # norm weights
                t.copy_(1 + 0.1 * r)
            else:
                t.copy_(r / math.sqrt(t.shape[-1]))


def torch_logits(model, ids):
    cfg = model.cfg
    T = len(ids)
    ctx = dsv4.Ctx(cfg, T, "cpu", False, False)
    aux = dsv4.new_aux()
    with torch.no_grad():
        x = torch.tensor([ids])
        X = model.trunk(x, ctx, aux)
        main = model.logits(model.final(model.hc_head, model.norm.weight, X))[0]
        mtp = None
        if cfg.num_mtp_layers:
            # MTP rows 0..T-2: row i pairs the streams at i with t_{i+1}, at position i.
            ctx2 = dsv4.Ctx(cfg, T - 1, "cpu", False, False)
            Y = model.mtp_streams(X[:, :T - 1], x[:, 1:], ctx2, aux)
            m = model.mtp[0]
            mtp = model.logits(model.final(m.hc_head, m.norm.weight, Y))[0]
    return main.numpy(), None if mtp is None else mtp.numpy()


def engine_logits(dsinfer, model_dir, ids, work, extra=()):
    ids_path = os.path.join(work, "ids.json")
    out = os.path.join(work, "logits.npy")
    with open(ids_path, "w") as f:
        json.dump({"ids": ids}, f)
    subprocess.run([dsinfer, "logits", "--model", model_dir, "--ids-file", ids_path, "--out", out,
                    *extra], check=True)
    return np.load(out)


def compare(a, b):
    d = np.abs(a - b)
    return {"max_abs_diff": float(d.max()), "max_abs_logit": float(np.abs(b).max()),
            "rel_max": float(d.max() / np.abs(b).max()),
            "rel_l2": float(np.linalg.norm(a - b) / np.linalg.norm(b)),
            "argmax_agree": float((a.argmax(-1) == b.argmax(-1)).mean())}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dsinfer", required=True)
    ap.add_argument("--work", default="/tmp/dsv4-check")
    ap.add_argument("--tied", action="store_true", help="tie_word_embeddings (the demo's choice)")
    ap.add_argument("--ckpt", help="check this trained checkpoint instead of a random model")
    ap.add_argument("--demo-config", action="store_true",
                    help="a random model of the demo config itself (dsv4.Config(); use --length 300)")
    ap.add_argument("--length", type=int, default=100)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--tol", type=float, default=1e-3)
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--mtp-tool", help="a built tools/demo_model/mtp_logits: also compare the MTP "
                    "draft logits with the engine's ForwardMtp")
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    os.makedirs(args.work, exist_ok=True)
    if args.ckpt:
        model = export.load_ckpt(args.ckpt)
    else:
        torch.manual_seed(args.seed)
        cfg = dsv4.Config() if args.demo_config else dsv4.Config(tie_word_embeddings=args.tied, **CHECK)
        model = dsv4.DeepseekV4(cfg, seed=args.seed)
        randomize_(model, args.seed)
    model.eval()
    export.round_to_bf16_(model)
    model_dir = os.path.join(args.work, "model")
    export.export_model(model, model_dir)
    g = torch.Generator().manual_seed(args.seed + 1)
    ids = torch.randint(2, 5000, (args.length,), generator=g).tolist()
    main_t, mtp_t = torch_logits(model, ids)
    eng = engine_logits(args.dsinfer, model_dir, ids, args.work)
    eng_chunked = engine_logits(args.dsinfer, model_dir, ids, args.work,
                                ["--chunks", "%d,%d" % (args.length // 3, args.length // 5)])
    cfg = model.cfg
    csa_rows = sum(1 for t in range(args.length) if (t + 1) // cfg.csa_rate > cfg.index_topk)
    name = "ckpt" if args.ckpt else "demo-config" if args.demo_config else \
        ("check-tied" if args.tied else "check-untied")
    res = {"config": name,
           "tokens": args.length, "rows_where_indexer_selects": csa_rows,
           "torch_vs_engine": compare(main_t, eng),
           "engine_prefill_vs_chunked": compare(eng_chunked, eng)}
    ok = res["torch_vs_engine"]["rel_max"] <= args.tol
    if mtp_t is not None and args.mtp_tool:
        main_p, mtp_p = os.path.join(args.work, "main_tool.npy"), os.path.join(args.work, "mtp_tool.npy")
        subprocess.run([args.mtp_tool, model_dir, ",".join(map(str, ids)), main_p, mtp_p], check=True)
        res["torch_vs_engine_mtp"] = compare(mtp_t, np.load(mtp_p))
        res["engine_main_tool_vs_cli"] = compare(np.load(main_p), eng)
        ok = ok and res["torch_vs_engine_mtp"]["rel_max"] <= args.tol
    elif mtp_t is not None:
        res["torch_mtp_argmax_first_rows"] = mtp_t.argmax(-1)[:8].tolist()
    print(json.dumps(res))
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
