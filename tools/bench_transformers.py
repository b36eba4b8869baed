#!/usr/bin/env python3
"""Times the transformers `deepseek_v4` reference (bf16, eager) on the flash-l8 stack: V4-Flash real
dimensions, the first 8 layers of its schedule (SWA, SWA, then CSA/HCA; layers 0-2 hash-routed) —
the configuration `dsinfer bench --preset flash-l8` measures, so that docs/perf.md can state the
speedup over the reference on the same config.

Weights are random (normal, per-tensor scales as tools/make_golden.py uses, on the device), bf16:
about 106 GB, so one H200 holds the model. The timing depends on the values only through the
routing. Prints JSON lines like `dsinfer bench`:

    {"bench": "reference_prefill", "tokens": T, "seconds": ..., "tok_per_s": ...}
    {"bench": "reference_decode", "batch": B, "context": C, "step_ms": ..., "tok_per_s": ...}

Decode runs transformers' cached path (its CSA results are not trusted elsewhere in this repo; its
work per step is what is timed here). Usage, on the GPU machine:
    python3 tools/bench_transformers.py [--layers 8] [--prefill 8192] [--context 4096] [--batches 1]
"""
import argparse
import json
import os
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_golden import build_config  # noqa: E402  (the one DeepseekV4Config construction)

FLASH_TYPES = ["sliding_attention", "sliding_attention"] + [
    "compressed_sparse_attention", "heavily_compressed_attention"] * 3


def flash_spec(layers):
    types = (FLASH_TYPES * ((layers + 7) // 8))[:layers]
    return dict(
        vocab_size=129280, hidden_size=4096, num_hidden_layers=layers, num_attention_heads=64,
        head_dim=512, rope_dim=64, q_lora_rank=1024, o_groups=8, o_lora_rank=1024,
        n_routed_experts=256, num_experts_per_tok=6, moe_intermediate_size=2048,
        routed_scaling_factor=1.5, swiglu_limit=10.0, sliding_window=128, layer_types=types,
        compress_rates={"compressed_sparse_attention": 4, "heavily_compressed_attention": 128},
        mlp_layer_types=["hash_moe" if i < 3 else "moe" for i in range(layers)],
        index_n_heads=64, index_head_dim=128, index_topk=512, hc_mult=4, hc_sinkhorn_iters=20,
        rope_theta=10000.0, compress_rope_theta=160000.0, yarn_factor=16.0, yarn_orig=65536)


@torch.no_grad()
def randomize(model, gen):
    """make_golden.randomize's rules, generated on the device 64 M values at a time (the experts'
    w1+w3 of one layer alone are 8.6 GB in bf16)."""
    E = model.config.n_routed_experts
    for name, p in model.named_parameters():
        leaf = name.split(".")[-1]
        if p.dim() == 1 and "norm" in name:
            mul, add = 0.2, 1.0
        elif leaf in ("sinks",) or name.endswith("embed_tokens.weight"):
            mul, add = 1.0, 0.0
        elif leaf == "position_bias":
            mul, add = 0.5, 0.0
        elif leaf in ("fn", "hc_fn"):
            mul, add = 0.2, 0.0
        elif leaf in ("base", "hc_base"):
            mul, add = 0.5, 0.0
        elif leaf in ("scale", "hc_scale"):
            mul, add = 0.3, 1.0
        elif p.dim() >= 2:
            mul, add = p.shape[-1] ** -0.5, 0.0
        else:
            raise RuntimeError(f"parameter {name} {tuple(p.shape)} not randomized")
        for part in p.view(-1).split(1 << 26):
            r = torch.randn(part.shape, generator=gen, device=p.device, dtype=torch.float32)
            part.copy_((add + mul * r).to(p.dtype))
    for name, b in model.named_buffers():
        if name.endswith("e_score_correction_bias"):
            b.copy_(0.3 * torch.randn(b.shape, generator=gen, device=b.device))
        elif name.endswith("tid2eid"):
            v, k = b.shape
            keys = torch.rand(v, E, generator=gen, device=b.device)
            b.copy_(keys.argsort(dim=1)[:, :k].to(b.dtype))


def timed(fn):
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    out = fn()
    torch.cuda.synchronize()
    return time.perf_counter() - t0, out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--layers", type=int, default=8)
    ap.add_argument("--prefill", type=int, default=8192, help="prefill tokens (0: skip)")
    ap.add_argument("--context", type=int, default=4096, help="decode context")
    ap.add_argument("--batches", default="1")
    ap.add_argument("--steps", type=int, default=10)
    args = ap.parse_args()

    from transformers import DeepseekV4ForCausalLM
    cfg = build_config(flash_spec(args.layers))
    cfg.max_position_embeddings = 1048576
    t_build = time.perf_counter()
    with torch.device("cuda"):
        model = DeepseekV4ForCausalLM._from_config(cfg, torch_dtype=torch.bfloat16)
    model.eval()
    gen = torch.Generator(device="cuda")
    gen.manual_seed(1)
    randomize(model, gen)
    params = sum(p.numel() for p in model.parameters())
    print(json.dumps({"bench": "reference_setup", "device": torch.cuda.get_device_name(),
                      "layers": args.layers, "params": params,
                      "weight_GB": round(params * 2 / 1e9, 2),
                      "build_s": round(time.perf_counter() - t_build, 1),
                      "torch": torch.__version__}), flush=True)
    ids_gen = torch.Generator(device="cuda")
    ids_gen.manual_seed(2)

    def ids(b, t):
        return torch.randint(2, cfg.vocab_size, (b, t), generator=ids_gen, device="cuda")

    with torch.no_grad():
        if args.prefill > 0:
            x = ids(1, args.prefill)
            try:
                timed(lambda: model(input_ids=x[:, :256], use_cache=False))  # warm-up
                secs, _ = timed(lambda: model(input_ids=x, use_cache=False).logits[:, -1])
                print(json.dumps({"bench": "reference_prefill", "tokens": args.prefill,
                                  "seconds": round(secs, 4),
                                  "tok_per_s": round(args.prefill / secs)}), flush=True)
            except torch.cuda.OutOfMemoryError as e:
                print(json.dumps({"bench": "reference_prefill", "tokens": args.prefill,
                                  "error": "out of memory: " + str(e).splitlines()[0]}), flush=True)
            del x
            torch.cuda.empty_cache()
        for b in [int(v) for v in args.batches.split(",") if v]:
            try:
                x = ids(b, args.context)
                out = model(input_ids=x, use_cache=True)
                cache = out.past_key_values
                nxt = out.logits[:, -1].argmax(-1, keepdim=True)
                del out
                times = []
                for step in range(args.steps + 2):
                    secs, out = timed(lambda: model(input_ids=nxt, past_key_values=cache,
                                                    use_cache=True))
                    cache = out.past_key_values
                    nxt = out.logits[:, -1].argmax(-1, keepdim=True)
                    if step >= 2:
                        times.append(secs)
                times.sort()
                ms = 1e3 * times[len(times) // 2]
                print(json.dumps({"bench": "reference_decode", "batch": b, "context": args.context,
                                  "step_ms": round(ms, 2), "tok_per_s": round(b * 1e3 / ms, 1)}),
                      flush=True)
                del cache, out, x
                torch.cuda.empty_cache()
            except torch.cuda.OutOfMemoryError as e:
                print(json.dumps({"bench": "reference_decode", "batch": b, "context": args.context,
                                  "error": "out of memory: " + str(e).splitlines()[0]}), flush=True)


if __name__ == "__main__":
    main()
