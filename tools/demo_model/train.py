#!/usr/bin/env python3
"""Trains the demo DeepSeek-V4 (issue 26) on the Debian corpus shards, time-boxed and resumable.

  train.py --corpus build-demo/corpus --out build-demo/run --minutes 9 --total-minutes 18

Every call trains for --minutes of wall time (minus a margin for the final evaluation and the
checkpoint), then saves OUT/ckpt.pt; a second call with the same OUT resumes from it (model,
optimizer, step, elapsed time, RNG). The learning-rate schedule runs over --total-minutes of
training time summed over the calls (linear warm-up, cosine to 10%).

Loss per step: CE(main next token) + --mtp-weight * CE(MTP, token after next) + --indexer-weight *
KL(indexer). The MTP layer is trained jointly in the official structure with the engine's position
convention (dsv4.py). The indexer's top-k has no gradient; its signal is the V3.2-style KL of the
indexer's score distribution (softmax over the visible CSA entries) to the main attention's
distribution over all visible CSA entries (softmax of q.k/sqrt(d) without top-k, mean over heads,
detached), with the indexer's inputs detached so this loss trains the indexer only. For the first
--indexer-dense-steps steps the CSA layers attend to all visible entries (dense warm-up) while
the indexer learns; then they attend to the indexer's top-k. Router bias (noaux_tc) is updated
aux-loss-free from the expert loads (DeepSeek-V3: bias += gamma * sign(mean load - load)).

Logs (stdout and OUT/log.jsonl): train loss; every --eval-every seconds the held-out loss
(nats/token, main and MTP) and the MTP greedy acceptance at k=1: the fraction of positions i where
the MTP draft argmax(MTP row i) equals the main model's own greedy next-next token argmax(main
logits at i+1), teacher-forced on held-out text.

torch 1.13 (CPU) and torch 2.x (CUDA, bf16 autocast) both work.
"""
import argparse
import glob
import json
import lzma
import math
import os
import random
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import dsv4  # noqa: E402

PRESETS = {
    # The shipped demo: hidden 192, experts 128 wide, tied embeddings: 30.8M parameters (6.0M
    # without the embedding); its BF16 safetensors (64 MB) xz-compress to 38.6 MB.
    "demo": dict(),
    # The first run's model (hidden 128, experts 64 wide; 19.1M parameters): held-out loss 5.68.
    "demo128": dict(hidden_size=128, moe_intermediate_size=64),
    # A minute on a CPU: the pipeline check (corpus shard -> train -> export -> dsinfer).
    "smoke": dict(hidden_size=32, num_layers=3, num_heads=2, head_dim=32, rope_head_dim=16,
                  q_lora_rank=32, o_groups=2, o_lora_rank=16, n_routed_experts=4,
                  num_experts_per_tok=2, moe_intermediate_size=32, num_hash_layers=1,
                  sliding_window=16, compress_ratios=[0, 4, 16], index_n_heads=2,
                  index_head_dim=16, index_topk=4),
}


def load_tokens(paths):
    """uint32 LE shards -> one int32 tensor (ids < 2^31; a little-endian host, as x86/arm)."""
    arrs = []
    for p in paths:
        with open(p, "rb") as f:
            arrs.append(torch.frombuffer(bytearray(lzma.decompress(f.read())), dtype=torch.int32))
    return torch.cat(arrs) if arrs else torch.zeros(0, dtype=torch.int32)


def log(out, rec):
    print(json.dumps(rec), flush=True)
    with open(os.path.join(out, "log.jsonl"), "a") as f:
        f.write(json.dumps(rec) + "\n")


def forward_losses(model, tok, ctx, args, aux):
    """tok [B, T+2] -> (main CE, MTP CE, indexer KL)."""
    cfg = model.cfg
    T = tok.shape[1] - 2
    ids, nxt = tok[:, :T], tok[:, 1:T + 1]
    X = model.trunk(ids, ctx, aux)
    z = model.final(model.hc_head, model.norm.weight, X)
    W = model.head_weight()
    D = cfg.hidden_size
    dt = torch.bfloat16 if ctx.autocast else torch.float32
    main = dsv4.chunked_ce(z.reshape(-1, D).to(dt), W, nxt.reshape(-1).long())
    mtp = torch.zeros((), device=tok.device)
    if cfg.num_mtp_layers:
        Y = model.mtp_streams(X, nxt, ctx, aux)
        m = model.mtp[0]
        zm = model.final(m.hc_head, m.norm.weight, Y)
        mtp = dsv4.chunked_ce(zm.reshape(-1, D).to(dt), W, tok[:, 2:].reshape(-1).long())
    kl = torch.stack(aux["indexer_kl"]).mean() if aux["indexer_kl"] else torch.zeros((), device=tok.device)
    return main, mtp, kl


@torch.no_grad()
def evaluate(model, windows, args, device, use_autocast):
    """Held-out main / MTP loss (nats/token), MTP k=1 greedy acceptance and MTP top-1 accuracy."""
    model.eval()
    cfg = model.cfg
    tot = {"main": 0.0, "mtp": 0.0, "n": 0, "acc_hits": 0, "acc_n": 0, "mtp_top1": 0}
    for tok in windows:
        tok = tok.to(device).long().unsqueeze(0)
        T = tok.shape[1] - 2
        ctx = dsv4.Ctx(cfg, T, device, False, use_autocast)
        aux = dsv4.new_aux()
        with amp(device, use_autocast):
            X = model.trunk(tok[:, :T], ctx, aux)
            z = model.final(model.hc_head, model.norm.weight, X)
            lg = model.logits(z)[0]  # [T, V]
            main = torch.nn.functional.cross_entropy(lg, tok[0, 1:T + 1], reduction="sum")
            Y = model.mtp_streams(X, tok[:, 1:T + 1], ctx, aux)
            m = model.mtp[0]
            lm = model.logits(model.final(m.hc_head, m.norm.weight, Y))[0]
            mtp = torch.nn.functional.cross_entropy(lm, tok[0, 2:], reduction="sum")
        g_main = lg.argmax(-1)  # main greedy token after position i
        g_mtp = lm.argmax(-1)   # MTP draft for the token after i+1
        tot["acc_hits"] += int((g_mtp[:-1] == g_main[1:]).sum())
        tot["acc_n"] += T - 1
        tot["mtp_top1"] += int((g_mtp == tok[0, 2:]).sum())
        tot["main"] += float(main)
        tot["mtp"] += float(mtp)
        tot["n"] += T
    model.train()
    return {"heldout_loss": tot["main"] / tot["n"], "heldout_mtp_loss": tot["mtp"] / tot["n"],
            "mtp_accept_k1": tot["acc_hits"] / tot["acc_n"], "mtp_top1": tot["mtp_top1"] / tot["n"]}


def amp(device, enabled):
    if enabled:
        return torch.autocast(device_type="cuda", dtype=torch.bfloat16)
    import contextlib
    return contextlib.nullcontext()


def lr_at(args, step, elapsed):
    warm = min(1.0, (step + 1) / args.warmup_steps)
    frac = min(1.0, elapsed / (args.total_minutes * 60.0))
    return args.lr * warm * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * frac)))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--corpus", required=True, help="dir with train_*.u32.xz and heldout.u32.xz")
    ap.add_argument("--out", required=True, help="run dir: ckpt.pt, log.jsonl, summary.json")
    ap.add_argument("--preset", default="demo", choices=sorted(PRESETS))
    ap.add_argument("--minutes", type=float, default=9.0, help="wall time of this call")
    ap.add_argument("--total-minutes", type=float, default=18.0, help="LR schedule length (all calls)")
    ap.add_argument("--max-steps", type=int, default=0, help="stop after this many steps (0: time only)")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--seq", type=int, default=1024)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--weight-decay", type=float, default=0.1)
    ap.add_argument("--warmup-steps", type=int, default=100)
    ap.add_argument("--mtp-weight", type=float, default=0.3)
    ap.add_argument("--indexer-weight", type=float, default=1.0)
    ap.add_argument("--indexer-dense-steps", type=int, default=200)
    ap.add_argument("--bias-gamma", type=float, default=1e-3)
    ap.add_argument("--eval-every", type=float, default=120.0, help="seconds")
    ap.add_argument("--eval-windows", type=int, default=16)
    ap.add_argument("--save-every", type=float, default=180.0, help="seconds")
    ap.add_argument("--margin", type=float, default=45.0, help="seconds kept for the final eval + save")
    ap.add_argument("--device", default="auto")
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()

    t_start = time.time()
    device = ("cuda" if torch.cuda.is_available() else "cpu") if args.device == "auto" else args.device
    use_autocast = device == "cuda"
    if args.threads:
        torch.set_num_threads(args.threads)
    if device == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
    os.makedirs(args.out, exist_ok=True)
    ckpt_path = os.path.join(args.out, "ckpt.pt")

    state = None
    if os.path.exists(ckpt_path):
        state = dsv4.load_checkpoint(ckpt_path)
        cfg = dsv4.Config.from_json(state["config"])
    else:
        cfg = dsv4.Config(**PRESETS[args.preset])
    torch.manual_seed(args.seed)
    model = dsv4.DeepseekV4(cfg, seed=args.seed).to(device)
    decay, no_decay = [], []
    for n, p in model.named_parameters():
        (decay if p.dim() >= 2 and not n.endswith("fn") else no_decay).append(p)
    opt_kw = dict(lr=args.lr, betas=(0.9, 0.95), eps=1e-8)
    try:
        opt = torch.optim.AdamW([{"params": decay, "weight_decay": args.weight_decay},
                                 {"params": no_decay, "weight_decay": 0.0}],
                                fused=(device == "cuda"), **opt_kw)
    except TypeError:  # torch 1.13: no fused AdamW
        opt = torch.optim.AdamW([{"params": decay, "weight_decay": args.weight_decay},
                                 {"params": no_decay, "weight_decay": 0.0}], **opt_kw)
    step, elapsed = 0, 0.0
    if state is not None:
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["optimizer"])
        step, elapsed = state["step"], state["elapsed"]
        random.setstate(state["py_rng"])
        torch.set_rng_state(state["torch_rng"])
        log(args.out, {"event": "resume", "step": step, "elapsed_s": round(elapsed, 1)})
    else:
        random.seed(args.seed)
    n_params = sum(p.numel() for p in model.parameters())
    log(args.out, {"event": "start", "device": device, "torch": torch.__version__,
                   "params": n_params, "non_embedding_params": n_params - model.embed.weight.numel(),
                   "config": cfg.to_json(), "args": vars(args)})

    train = load_tokens(sorted(glob.glob(os.path.join(args.corpus, "train_*.u32.xz"))))
    held = load_tokens([os.path.join(args.corpus, "heldout.u32.xz")])
    T = args.seq
    train_dev = train.to(device)
    g = torch.Generator().manual_seed(1234)  # fixed held-out windows
    starts = torch.randint(0, len(held) - T - 2, (args.eval_windows,), generator=g)
    windows = [held[s:s + T + 2] for s in starts.tolist()]
    log(args.out, {"event": "data", "train_tokens": len(train), "heldout_tokens": len(held),
                   "tokens_per_step": args.batch * T})

    def save():
        tmp = ckpt_path + ".tmp"
        torch.save({"config": cfg.to_json(), "model": model.state_dict(),
                    "optimizer": opt.state_dict(), "step": step, "elapsed": elapsed,
                    "py_rng": random.getstate(), "torch_rng": torch.get_rng_state()}, tmp)
        os.replace(tmp, ckpt_path)

    budget = args.minutes * 60.0 - args.margin
    last_eval = last_save = time.time()
    t_loop = time.time()
    tokens_seen = 0
    model.train()
    while True:
        now = time.time()
        if now - t_start >= budget or (args.max_steps and step >= args.max_steps):
            break
        lr = lr_at(args, step, elapsed)
        for grp in opt.param_groups:
            grp["lr"] = lr
        off = torch.randint(0, len(train) - T - 2, (args.batch,), device=device)
        tok = train_dev[off[:, None] + torch.arange(T + 2, device=device)[None, :]].long()
        ctx = dsv4.Ctx(cfg, T, device, True, use_autocast, dense_csa=step < args.indexer_dense_steps)
        aux = dsv4.new_aux()
        with amp(device, use_autocast):
            main, mtp, kl = forward_losses(model, tok, ctx, args, aux)
            loss = main + args.mtp_weight * mtp + args.indexer_weight * kl
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        with torch.no_grad():  # aux-loss-free balancing of the bias-routed layers
            for moe, load in aux["load"]:
                moe.bias += args.bias_gamma * torch.sign(load.mean() - load)
        step += 1
        tokens_seen += args.batch * T
        t1 = time.time()
        elapsed += t1 - now
        if step % 20 == 0 or step == 1:
            log(args.out, {"step": step, "loss": round(float(main), 4), "mtp_loss": round(float(mtp), 4),
                           "indexer_kl": round(float(kl), 4), "lr": lr,
                           "tok_per_s": round(tokens_seen / (t1 - t_loop)), "elapsed_s": round(elapsed, 1)})
        if t1 - last_eval >= args.eval_every:
            log(args.out, dict(step=step, **evaluate(model, windows, args, device, use_autocast)))
            last_eval = time.time()
        if t1 - last_save >= args.save_every:
            save()
            last_save = time.time()
    save()
    res = dict(step=step, elapsed_s=round(elapsed, 1), **evaluate(model, windows, args, device, use_autocast))
    log(args.out, dict(event="final", **res))
    with open(os.path.join(args.out, "summary.json"), "w") as f:
        json.dump(res, f, indent=1)


if __name__ == "__main__":
    main()
