#!/usr/bin/env python3
"""Golden data for the DeepSeek-V4 forward pass, made with the transformers reference.

Runs `DeepseekV4ForCausalLM` (transformers 5.17) single-shot (`use_cache=False`, float32, CPU) on small
configs with *every* parameter randomized (norm weights, attention sinks, compressor `position_bias`
(= official `ape`), mHC fn/base/scale, router bias, `tid2eid`, ...), saves the model with
`save_pretrained` (official tensor names) and writes, per config:

    <out>/<name>/config.json, model.safetensors   the model as transformers writes it
    <out>/<name>/ids.json                          {"ids": [...]}
    <out>/<name>/logits.npy                        float32 [T, vocab], the reference logits
    <out>/<name>/inv_freq.json                     the reference RoPE tables (for diagnosis)

Usage (on a machine with transformers >= 5.17 and torch):
    python3 tools/make_golden.py --out tests/data/golden               # configs A and B
    python3 tools/make_golden.py --out /tmp/g --random 3                # 3 random configs
    python3 tools/make_golden.py --out /tmp/g --random 2 --check build/bin/dsinfer
`--check BIN` runs `BIN logits` under several prefill/decode schedules on each written model and
prints max|Δ|/max|ref| against the reference (exit 1 if any exceeds 1e-4).
"""
import argparse
import json
import os
import random
import subprocess
import sys

import numpy as np
import torch

# Many index heads on purpose: the indexer score is a sum of relu terms, so with few heads many
# entries score exactly 0 and top-k picks among exact ties, where torch's order is unspecified.
# Two configs that differ in every dimension (hc_mult != 4, head_dim, rope dims, compress rates,
# window, index top-k < number of compressed entries), long enough to close many HCA windows.
CONFIGS = {
    "A": dict(
        vocab_size=320, hidden_size=64, num_hidden_layers=5, num_attention_heads=4, head_dim=32,
        rope_dim=16, q_lora_rank=24, o_groups=2, o_lora_rank=16, n_routed_experts=8,
        num_experts_per_tok=2, moe_intermediate_size=32, routed_scaling_factor=1.5,
        swiglu_limit=3.0, sliding_window=12,
        layer_types=["sliding_attention", "compressed_sparse_attention", "heavily_compressed_attention",
                     "compressed_sparse_attention", "heavily_compressed_attention"],
        compress_rates={"compressed_sparse_attention": 4, "heavily_compressed_attention": 16},
        mlp_layer_types=["hash_moe", "hash_moe", "moe", "moe", "moe"],
        index_n_heads=16, index_head_dim=16, index_topk=5, hc_mult=3, hc_sinkhorn_iters=7,
        rope_theta=10000.0, compress_rope_theta=40000.0, yarn_factor=4.0, yarn_orig=64,
        seq_len=150),
    "B": dict(
        vocab_size=288, hidden_size=96, num_hidden_layers=4, num_attention_heads=6, head_dim=48,
        rope_dim=8, q_lora_rank=40, o_groups=3, o_lora_rank=20, n_routed_experts=6,
        num_experts_per_tok=3, moe_intermediate_size=48, routed_scaling_factor=2.5,
        swiglu_limit=5.0, sliding_window=20,
        layer_types=["heavily_compressed_attention", "compressed_sparse_attention", "sliding_attention",
                     "compressed_sparse_attention"],
        compress_rates={"compressed_sparse_attention": 8, "heavily_compressed_attention": 32},
        mlp_layer_types=["hash_moe", "moe", "moe", "moe"],
        index_n_heads=12, index_head_dim=24, index_topk=3, hc_mult=2, hc_sinkhorn_iters=20,
        rope_theta=20000.0, compress_rope_theta=160000.0, yarn_factor=8.0, yarn_orig=128,
        seq_len=200),
}


def random_config(seed):
    r = random.Random(seed)
    layers = r.randint(2, 5)
    types = ["sliding_attention", "compressed_sparse_attention", "heavily_compressed_attention"]
    layer_types = [r.choice(types) for _ in range(layers)]
    n_hash = r.randint(0, layers)
    head_dim = r.choice([16, 24, 32, 40])
    rope_dim = r.choice([d for d in (4, 8, 16) if d <= head_dim])
    heads = r.choice([2, 4, 6])
    o_groups = r.choice([g for g in (1, 2, 3) if heads % g == 0])
    experts = r.randint(3, 8)
    csa, hca = r.choice([2, 4, 8]), r.choice([16, 32])
    yarn_orig = r.choice([32, 64, 128])
    factor = r.choice([2.0, 4.0, 16.0])
    return dict(
        vocab_size=r.randint(100, 400), hidden_size=r.choice([32, 48, 64]), num_hidden_layers=layers,
        num_attention_heads=heads, head_dim=head_dim, rope_dim=rope_dim, q_lora_rank=r.choice([16, 24]),
        o_groups=o_groups, o_lora_rank=r.choice([8, 16]), n_routed_experts=experts,
        num_experts_per_tok=r.randint(1, min(3, experts)), moe_intermediate_size=r.choice([16, 32]),
        routed_scaling_factor=r.choice([1.0, 1.5, 2.5]), swiglu_limit=r.choice([2.0, 10.0]),
        sliding_window=r.choice([4, 8, 16]), layer_types=layer_types,
        compress_rates={"compressed_sparse_attention": csa, "heavily_compressed_attention": hca},
        mlp_layer_types=["hash_moe"] * n_hash + ["moe"] * (layers - n_hash),
        index_n_heads=r.choice([12, 16]), index_head_dim=max(rope_dim, r.choice([8, 16])),
        index_topk=r.choice([2, 3, 6]), hc_mult=r.choice([1, 2, 3, 4]), hc_sinkhorn_iters=r.choice([3, 20]),
        rope_theta=10000.0, compress_rope_theta=r.choice([10000.0, 160000.0]), yarn_factor=factor,
        yarn_orig=yarn_orig, seq_len=min(r.randint(60, 160), int(factor * yarn_orig)))


def build_config(spec):
    from transformers import DeepseekV4Config
    partial = spec["rope_dim"] / spec["head_dim"]
    return DeepseekV4Config(
        vocab_size=spec["vocab_size"], hidden_size=spec["hidden_size"],
        num_hidden_layers=spec["num_hidden_layers"], num_attention_heads=spec["num_attention_heads"],
        num_key_value_heads=1, head_dim=spec["head_dim"], q_lora_rank=spec["q_lora_rank"],
        o_groups=spec["o_groups"], o_lora_rank=spec["o_lora_rank"], n_routed_experts=spec["n_routed_experts"],
        n_shared_experts=1, num_experts_per_tok=spec["num_experts_per_tok"],
        moe_intermediate_size=spec["moe_intermediate_size"],
        routed_scaling_factor=spec["routed_scaling_factor"], swiglu_limit=spec["swiglu_limit"],
        sliding_window=spec["sliding_window"], layer_types=spec["layer_types"],
        compress_rates=spec["compress_rates"], mlp_layer_types=spec["mlp_layer_types"],
        index_n_heads=spec["index_n_heads"], index_head_dim=spec["index_head_dim"],
        index_topk=spec["index_topk"], hc_mult=spec["hc_mult"], hc_sinkhorn_iters=spec["hc_sinkhorn_iters"],
        rope_theta=spec["rope_theta"], compress_rope_theta=spec["compress_rope_theta"],
        partial_rotary_factor=partial,
        max_position_embeddings=int(spec["yarn_factor"] * spec["yarn_orig"]),
        rope_parameters={
            "main": {"rope_type": "default", "rope_theta": spec["rope_theta"],
                     "partial_rotary_factor": partial},
            "compress": {"rope_type": "yarn", "rope_theta": spec["compress_rope_theta"],
                         "factor": spec["yarn_factor"],
                         "original_max_position_embeddings": spec["yarn_orig"],
                         "beta_fast": 32.0, "beta_slow": 1.0, "attention_factor": 1.0,
                         "partial_rotary_factor": partial}},
        rms_norm_eps=1e-6, hc_eps=1e-6, num_nextn_predict_layers=0, tie_word_embeddings=False,
        bos_token_id=0, eos_token_id=1)


@torch.no_grad()
def randomize(model, gen):
    cfg = model.config
    for name, p in model.named_parameters():
        leaf = name.split(".")[-1]
        n = lambda *shape: torch.randn(*shape, generator=gen)
        if p.dim() == 1 and ("norm" in name):
            p.copy_(1.0 + 0.2 * n(p.shape))
        elif leaf == "sinks":
            p.copy_(n(p.shape))
        elif leaf == "position_bias":
            p.copy_(0.5 * n(p.shape))
        elif leaf in ("fn", "hc_fn"):
            p.copy_(0.2 * n(p.shape))
        elif leaf in ("base", "hc_base"):
            p.copy_(0.5 * n(p.shape))
        elif leaf in ("scale", "hc_scale"):
            p.copy_(1.0 + 0.3 * n(p.shape))
        elif leaf == "gate_up_proj":
            p.copy_(n(p.shape) / p.shape[-1] ** 0.5)
        elif leaf == "down_proj" and p.dim() == 3:
            p.copy_(n(p.shape) / p.shape[-1] ** 0.5)
        elif name.endswith("embed_tokens.weight"):
            p.copy_(n(p.shape))
        elif p.dim() == 2:
            p.copy_(n(p.shape) / p.shape[1] ** 0.5)
        else:
            raise RuntimeError(f"parameter {name} {tuple(p.shape)} not randomized")
    for name, b in model.named_buffers():
        if name.endswith("e_score_correction_bias"):
            b.copy_(0.3 * torch.randn(b.shape, generator=gen))
        elif name.endswith("tid2eid"):
            v, k = b.shape
            rows = [torch.randperm(cfg.n_routed_experts, generator=gen)[:k] for _ in range(v)]
            b.copy_(torch.stack(rows))


def make(name, spec, out_dir, seed):
    from transformers import DeepseekV4ForCausalLM
    torch.manual_seed(seed)
    cfg = build_config(spec)
    model = DeepseekV4ForCausalLM(cfg).float().eval()
    gen = torch.Generator().manual_seed(seed)
    randomize(model, gen)
    d = os.path.join(out_dir, name)
    os.makedirs(d, exist_ok=True)
    model.save_pretrained(d, safe_serialization=True)
    for extra in ("generation_config.json",):
        if os.path.exists(os.path.join(d, extra)):
            os.remove(os.path.join(d, extra))
    ids = torch.randint(0, cfg.vocab_size, (1, spec["seq_len"]), generator=gen)
    with torch.no_grad():
        logits = model(input_ids=ids, use_cache=False).logits[0].float().numpy()
    np.save(os.path.join(d, "logits.npy"), logits.astype(np.float32))
    with open(os.path.join(d, "ids.json"), "w") as f:
        json.dump({"ids": ids[0].tolist()}, f)
    rot = model.model.rotary_emb
    with open(os.path.join(d, "inv_freq.json"), "w") as f:
        json.dump({k: getattr(rot, f"{k}_inv_freq").tolist() for k in ("main", "compress")}, f)
    print(f"{name}: T={spec['seq_len']} vocab={cfg.vocab_size} max|logit|={np.abs(logits).max():.3f}",
          flush=True)
    return d


def check(binary, d, seq_len):
    ref = np.load(os.path.join(d, "logits.npy"))
    worst = 0.0
    schedules = [[], ["--prefill", str(seq_len // 2)], ["--chunks", "7,13,1,29,2"]]
    for sched in schedules:
        out = os.path.join(d, "ours.npy")
        r = subprocess.run([binary, "logits", "--model", d, "--ids-file", os.path.join(d, "ids.json"),
                            "--out", out] + sched, capture_output=True, text=True)
        if r.returncode != 0:
            print(f"  {d} {sched}: FAILED rc={r.returncode}: {r.stderr.strip()}")
            return float("inf")
        ours = np.load(out)
        os.remove(out)
        err = float(np.abs(ours - ref).max() / np.abs(ref).max())
        top1 = float((ours.argmax(-1) == ref.argmax(-1)).mean())
        print(f"  {os.path.basename(d)} {' '.join(sched) or 'whole'}: rel err {err:.2e}, top-1 {top1:.4f}")
        worst = max(worst, err)
    return worst


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--configs", default="A,B")
    ap.add_argument("--random", type=int, default=0, help="also make N random configs (seeds 1000..)")
    ap.add_argument("--check", default=None, help="dsinfer binary to compare against the reference")
    args = ap.parse_args()
    torch.set_default_dtype(torch.float32)
    made = []
    for name in [c for c in args.configs.split(",") if c]:
        made.append((make(name, CONFIGS[name], args.out, seed=ord(name[0])), CONFIGS[name]["seq_len"]))
    for i in range(args.random):
        spec = random_config(1000 + i)
        made.append((make(f"random{i}", spec, args.out, seed=1000 + i), spec["seq_len"]))
    if args.check:
        worst = max(check(args.check, d, n) for d, n in made)
        print(f"worst relative error: {worst:.2e}")
        sys.exit(0 if worst <= 1e-4 else 1)


if __name__ == "__main__":
    main()
