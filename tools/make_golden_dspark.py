#!/usr/bin/env python3
"""Golden data for DeepSeek-V4.1's DSpark drafter, made with the official V4.1 inference reference.

The oracle is DeepSeek's own `inference/model.py` of DeepSeek-V4.1-Flash (the only reference that
implements the drafter: `DSparkAttention`, `DSparkBlock`, `Transformer.forward_spec`), in the
CPU-runnable vendoring described in tools/reference_v41_official/README.md (the files are not
committed; place them there). The script builds a small V4.1 model with three DSpark stages,
randomizes every parameter (backbone and `mtp.*`) in float32 from a fixed seed, runs the reference
in float32 on CPU, and drives it through the call sequence the reference itself uses in serving
(its `__main__`): the drafter drafts only after a decode step, never right after a prefill.

Call sequence (T = prompt length, S = draft steps, W = sliding window, B = block size):

    Transformer.forward(prompt[:T-1], start_pos=0)                 # prefill all but the last token
    Transformer.forward_spec(ids, taps, start_pos=0)               # seeds every stage's ring: None
    for s in 0..S-1:  p = T-1+s, tok = prompt[T-1] if s == 0 else anchors[s-1]
        logits[s], taps = Transformer.forward(tok, start_pos=p)    # commit tok at p (target decode)
        Transformer.forward_spec(anchors[s], taps, start_pos=p)    # writes ring[p % W] of every
                                                                   # stage, drafts anchors[s] at p+1
    logits[S] = Transformer.forward(anchors[S-1], start_pos=T+S-1)

Oracle fix (the one change to the reference's behaviour, like make_golden_v41.py's): in a decode
step in which a ratio>1 KV source's current group is still incomplete (its compressor returns None),
the reference's Indexer of that layer skips publishing `shared_attn.index_k` but still reads it, so
it scores against the index keys of whichever KV source published last (here layer 6's ratio-1 keys
of the previous step) instead of its own; its prefill path always publishes its own. With more than
one KV source the reference's decode rows then disagree with its own prefill (by up to ~1.7 in the
logits here). The script points `shared_attn.index_k` at the owner's own key cache before each
owner's indexer runs (the prefill path's semantics), checks that this is a no-op on a
single-KV-source config, and checks that with it every decode row equals the reference's own
prefill of the same tokens. reference.json reports what the fix changed; debug.npz keeps the
reference's unfixed outputs too (`*_as_is`).

So for an engine that drafts right after its prefill, the same data reads: prefill the T prompt
tokens (logits[0] is the last prompt row); then for each step s draft with anchor anchors[s] at
position T+s (context: positions <= T+s-1), and commit anchors[s] at T+s (logits[1+s]). The
reference's prefill of T-1 tokens plus one decode step is checked against a single prefill of all
T tokens (the last row's logits and taps; reference.json has the differences).

Writes <out>/D/:
    config.json            composite config (model_type deepseek_v41, text_config with HF names and
                           the DSpark keys; compress_ratios has num_hidden_layers + 3 entries)
    model.safetensors      float32, the reference's state_dict names (`embed.weight`, `layers.N.*`,
                           `norm.weight`, `head.weight`, `mtp.S.*`), without the stages' aliases of
                           the trunk's embed/head; plus `*.ffn.gate.bias_vl` (see EXTRA_TENSORS)
    ids.json               {"prompt": [T ids], "anchors": [S ids], "anchor_positions": [S]}
    logits.npy             float32 [1+S, V]: the last prompt row, then the target logits after
                           committing each anchor
    draft_ids.npy          int32 [S, B]: the drafted ids (greedy: temperature 0)
    draft_logits.npy       float32 [S, B, V]: the Markov-corrected draft logits
    draft_base_logits.npy  float32 [S, B, V]: the head logits before the Markov bias
    confidence.npy         float32 [S, B]: the raw confidence-head outputs (no sigmoid)
    debug.npz              intermediate values for debugging a port (keys in reference.json)
    reference.json         source commits, torch version, config, what was changed, self-checks

Usage (torch with the float8_e8m0fnu / float4_e2m1fn_x2 dtypes, numpy, safetensors; CPU only):
    python3 tools/make_golden_dspark.py OUTDIR
    python3 tools/make_golden_dspark.py OUTDIR --reference DIR   # reference files elsewhere
    python3 tools/make_golden_dspark.py OUTDIR --selftest        # checks + one sequence, no files
    python3 tools/make_golden_dspark.py OUTDIR --hf-reference tools/reference_v41
        # also the backbone through transformers (needs transformers; tools/reference_v41/README.md)
    python3 tools/make_golden_dspark.py OUTDIR --emulate-fp8-cast --compare-run OTHER/D
        # a torch without the float8 dtypes (e.g. Debian's 1.13): kernel_cpu's e4m3 cast emulated
        # (checked against a brute-force rounding); OTHER/D: an earlier run to compare with
"""
import argparse
import importlib
import json
import os
import re
import sys
import types

from dspark_float32_kernels import Float32Kernels  # tools/, the script's folder

HERE = os.path.dirname(os.path.abspath(__file__))
REFERENCE = {
    "upstream": "huggingface.co/deepseek-ai/DeepSeek-V4.1-Flash@"
                "dba1be0a40aa45a94ad051997016db3960a90277 inference/",
    "vendored_copy": "github.com/tenstorrent/tt-metal "
                     "models/demos/deepseek_v3_d_p/reference/deepseek_v41/",
    "files": {
        "model.py": ["702412b85f1b8d93a8e87fe0584fa165766f38ce", 61957],
        "engram.py": ["702412b85f1b8d93a8e87fe0584fa165766f38ce", 8439],
        "vision.py": ["702412b85f1b8d93a8e87fe0584fa165766f38ce", 4758],
        "image_processor.py": ["702412b85f1b8d93a8e87fe0584fa165766f38ce", 8009],
        "kernel_cpu.py": ["b2ee7540c83c2957b3268b0d1095b39e2b75473b", 12725],
    },
}
PKG = "dsinfer_ref41_official"

# Config "A" of make_golden_v41.py (HF text_config names) plus three DSpark stages. The drafter's
# MoE differs from the backbone's in both counts (4 experts top-3 vs 6 top-2) so that a mix-up
# shows. head_dim / index_head_dim are multiples of 32 (the fp8 / fp4 block), head_dim of 16 (the
# compressed KV's fp4 group). Taps on the last three backbone layers (no Engram in this config).
SPEC = dict(
    vocab_size=320, hidden_size=64, num_hidden_layers=8, num_attention_heads=4, head_dim=64,
    qk_rope_head_dim=16, q_lora_rank=32, o_groups=2, o_lora_rank=16, n_routed_experts=6,
    num_experts_per_tok=2, moe_intermediate_size=16, routed_scaling_factor=1.5,
    swiglu_limit=3.0, sliding_window=8,
    compress_ratios=[0, 0, 2, 2, 2, 2, 1, 1, 0, 0, 0], kv_source_layer_ids=[2, 4, 6],
    index_source_layer_ids=[2, 4, 6, 7], candidate_source_layer_id=6,
    candidate_topk_blocks=3, candidate_block_size=2,
    index_n_heads=16, index_head_dim=32, index_topk=4, hc_mult=4, hc_sinkhorn_iters=20,
    rope_theta=10000.0, compress_rope_theta=40000.0, yarn_factor=4.0, yarn_orig=64,
    num_nextn_predict_layers=3, dspark_block_size=5, dspark_noise_token_id=311,
    dspark_target_layer_ids=[5, 6, 7], dspark_markov_rank=16, dspark_n_routed_experts=4,
    dspark_num_experts_per_tok=3)
PROMPT_LEN = 40   # > 4 windows: every ring (backbone and drafter) has wrapped
DRAFT_STEPS = 6
SEED = ord("D")
# Not parameters of the reference model (it builds `gate.bias_vl` only with vision on): the
# release checkpoint carries them and our loader reads them; they never act on text tokens.
EXTRA_TENSORS = "ffn.gate.bias_vl"


def die(msg):
    print(f"make_golden_dspark: {msg}", file=sys.stderr)
    sys.exit(2)


# --------------------------------------------------------------------------------------------
# Loading the reference
# --------------------------------------------------------------------------------------------

def _stub_missing_modules():
    """engram.py imports sympy and image_processor.py imports PIL at module level; only Engram and
    vision use them, and both are off here. Stubbed only when the import fails."""
    shims = []
    try:
        import sympy  # noqa: F401
    except ImportError:
        mod = types.ModuleType("sympy")
        mod.isprime = lambda n: n > 1 and all(n % p for p in range(2, int(n ** 0.5) + 1))
        sys.modules["sympy"] = mod
        shims.append("sympy (stub isprime; Engram only)")
    try:
        import PIL.Image  # noqa: F401
        import PIL.ImageOps  # noqa: F401
    except ImportError:
        pil = types.ModuleType("PIL")
        pil.Image = types.ModuleType("PIL.Image")
        pil.ImageOps = types.ModuleType("PIL.ImageOps")
        sys.modules.update({"PIL": pil, "PIL.Image": pil.Image, "PIL.ImageOps": pil.ImageOps})
        shims.append("PIL (empty stub; vision only)")
    return shims


FP8_DTYPES = ("float8_e4m3fn", "float8_e8m0fnu", "float4_e2m1fn_x2")


def e4m3_round(x, torch):
    """float32 -> the nearest float8_e4m3fn value as float32: round to nearest, ties to even,
    saturating at +-448 (kernel_cpu._to_e4m3_satfinite's result, for a torch without the dtype).
    3 mantissa bits; binades below 2^-6 share the subnormal step 2^-9."""
    x = x.float().clamp(-448.0, 448.0)
    e = torch.floor(torch.log2(x.abs().clamp_min(2.0 ** -6)))
    step = torch.pow(2.0, e - 3)
    return torch.round(x / step) * step  # torch.round: half to even


def check_e4m3_round(torch, gen):
    """The emulation against a brute-force search of all finite e4m3 values (ties to the even
    code), on random values, every exact midpoint, and out-of-range ones."""
    mags = [m * 2.0 ** -9 for m in range(8)]
    mags += [(1 + m / 8) * 2.0 ** (e - 7) for e in range(1, 16) for m in range(8)][:-1]
    grid = torch.tensor(mags, dtype=torch.float64)  # codes 0..126, 448 last
    mids = (grid[1:] + grid[:-1]) / 2
    x = torch.cat([torch.randn(20000, generator=gen, dtype=torch.float64) * s
                   for s in (1e-3, 0.05, 1.0, 30.0, 300.0)] + [mids, grid, -mids,
                  torch.tensor([500.0, -1e4, 0.0, 2.0 ** -12])]).float()
    a = x.double().abs().clamp(max=448.0)
    d = (a.unsqueeze(-1) - grid).abs()
    best = d.min(-1, keepdim=True).values
    cand = (d == best)
    code = torch.where(cand.sum(-1) > 1,
                       torch.where(cand, torch.arange(len(mags)) % 2 == 0, False).int().argmax(-1),
                       cand.int().argmax(-1))
    want = (grid[code] * torch.sign(x.double())).float()
    got = e4m3_round(x, torch)
    assert torch.equal(got, want), "e4m3 emulation differs from the brute-force rounding"
    return int(x.numel())


def install_fp8_emulation(torch):
    """Placeholders for the dtypes model.py names (never a weight's dtype here: every weight is
    float32, so the fp8 / fp4 GEMM branches are not taken; checked by the call counts)."""
    for name, stand_in in zip(FP8_DTYPES, (torch.qint8, torch.quint8, torch.qint32)):
        assert not hasattr(torch, name)
        setattr(torch, name, stand_in)


def load_reference(ref_dir):
    for name, (_, chars) in REFERENCE["files"].items():
        path = os.path.join(ref_dir, name)
        if not os.path.exists(path):
            die(f"{path} is missing: copy the reference files there "
                f"(tools/reference_v41_official/README.md)")
        with open(path, encoding="utf-8") as f:
            n = len(f.read())
        if n != chars:
            die(f"{path} has {n} characters, the stored version has {chars}")
    shims = _stub_missing_modules()
    pkg = types.ModuleType(PKG)
    pkg.__path__ = [os.path.abspath(ref_dir)]
    sys.modules[PKG] = pkg
    ref = importlib.import_module(PKG + ".model")
    kernel = importlib.import_module(PKG + ".kernel_cpu")
    return ref, kernel, shims


def save_safetensors(tensors, path, torch):
    """The safetensors library's file when it is installed; else the same bytes written here
    (float32 only: compact JSON header, keys in name order, space-padded to 8 bytes)."""
    try:
        import safetensors
        from safetensors.torch import save_file
    except ImportError:
        save_file = None
    if save_file is not None:
        save_file(tensors, path)
        return f"safetensors {safetensors.__version__}"
    import struct
    header, blobs, off = {}, [], 0
    for k in sorted(tensors):
        t = tensors[k]
        assert t.dtype == torch.float32, (k, t.dtype)
        b = t.contiguous().numpy().astype("<f4").tobytes()
        header[k] = {"dtype": "F32", "shape": list(t.shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)
    return "built-in writer (safetensors not installed)"


def read_safetensors_f32(path):
    import struct
    import numpy as np
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    header.pop("__metadata__", None)
    return {k: np.frombuffer(data[v["data_offsets"][0]:v["data_offsets"][1]], "<f4")
            .reshape(v["shape"]) for k, v in header.items()}


def compare_run(other_dir, res, res_raw, tensors):
    """This run against an earlier run's D dir (another machine or torch): the weights, and the
    results with or without the oracle fix, whichever that run made."""
    import numpy as np
    with open(os.path.join(other_dir, "reference.json")) as f:
        other = json.load(f)
    mine = res if "oracle_fix" in other else res_raw
    out = {"torch": other.get("torch"), "fp8_cast": other.get("fp8_cast", "torch float8"),
           "had_oracle_fix": "oracle_fix" in other}
    w = read_safetensors_f32(os.path.join(other_dir, "model.safetensors"))
    assert sorted(w) == sorted(tensors), "the other run has other tensors"
    out["weights_bit_equal"] = all(np.array_equal(w[k], tensors[k].numpy()) for k in w)
    for name in ("logits", "draft_logits", "draft_base_logits", "confidence"):
        theirs = np.load(os.path.join(other_dir, name + ".npy"))
        out[name + "_max_abs_diff"] = float(np.abs(theirs - mine[name]).max())
    theirs = np.load(os.path.join(other_dir, "draft_ids.npy"))
    out["draft_ids_equal"] = bool(np.array_equal(theirs, mine["draft_ids"]))
    out["its_cross_check_transformers_backbone"] = other.get("cross_check_transformers_backbone")
    return out


# --------------------------------------------------------------------------------------------
# The model
# --------------------------------------------------------------------------------------------

def model_args(ref, spec):
    """ModelArgs (the reference's config-JSON names) for the HF-named spec."""
    return ref.ModelArgs(
        max_batch_size=1, max_seq_len=int(spec["yarn_factor"] * spec["yarn_orig"]),
        temperature=0.0, dtype="bf16", expert_dtype=None,
        vocab_size=spec["vocab_size"], dim=spec["hidden_size"],
        moe_inter_dim=spec["moe_intermediate_size"], n_layers=spec["num_hidden_layers"],
        n_mtp_layers=spec["num_nextn_predict_layers"], n_heads=spec["num_attention_heads"],
        n_routed_experts=spec["n_routed_experts"], n_shared_experts=1,
        n_activated_experts=spec["num_experts_per_tok"], score_func="sqrtsoftplus",
        gate_temp=1.0, norm_topk_prob=True, route_scale=spec["routed_scaling_factor"],
        swiglu_limit=spec["swiglu_limit"], q_lora_rank=spec["q_lora_rank"],
        head_dim=spec["head_dim"], rope_head_dim=spec["qk_rope_head_dim"], norm_eps=1e-20,
        o_groups=spec["o_groups"], o_lora_rank=spec["o_lora_rank"],
        window_size=spec["sliding_window"], compress_ratios=tuple(spec["compress_ratios"]),
        kv_source_layers=tuple(spec["kv_source_layer_ids"]),
        index_source_layers=tuple(spec["index_source_layer_ids"]),
        compress_rope_theta=spec["compress_rope_theta"], original_seq_len=int(spec["yarn_orig"]),
        rope_theta=spec["rope_theta"], rope_factor=spec["yarn_factor"], beta_fast=32, beta_slow=1,
        index_n_heads=spec["index_n_heads"], index_head_dim=spec["index_head_dim"],
        index_topk=spec["index_topk"], candidate_source_layer=spec["candidate_source_layer_id"],
        candidate_topk_blocks=spec["candidate_topk_blocks"],
        candidate_block_size=spec["candidate_block_size"], hc_mult=spec["hc_mult"],
        hc_sinkhorn_iters=spec["hc_sinkhorn_iters"], hc_eps=1e-6,
        dspark_block_size=spec["dspark_block_size"],
        dspark_noise_token_id=spec["dspark_noise_token_id"],
        dspark_target_layer_ids=tuple(spec["dspark_target_layer_ids"]),
        dspark_markov_rank=spec["dspark_markov_rank"],
        dspark_n_routed_experts=spec["dspark_n_routed_experts"],
        dspark_n_activated_experts=spec["dspark_num_experts_per_tok"])


def randomize(model, gen, torch):
    """Every parameter, in named_parameters order (shared embed/head once), with
    make_golden_v41.py's scales: activations O(1), softmaxes not saturated."""
    names = []
    with torch.no_grad():
        for name, p in model.named_parameters():
            assert p.dtype == torch.float32, (name, p.dtype)
            leaf = name.split(".")[-1]
            n = lambda *shape: torch.randn(*shape, generator=gen)  # noqa: E731
            if leaf == "attn_sink":
                p.copy_(n(p.shape))
            elif leaf.endswith("_fn"):
                p.copy_(0.2 * n(p.shape))
            elif leaf.endswith("_base"):
                p.copy_(0.5 * n(p.shape))
            elif leaf.endswith("_scale"):
                p.copy_(1.0 + 0.3 * n(p.shape))
            elif p.dim() == 1 and "norm" in name:
                p.copy_(1.0 + 0.2 * n(p.shape))
            elif leaf == "bias":
                p.copy_(0.3 * n(p.shape))
            elif name.endswith("embed.weight"):
                p.copy_(n(p.shape))
            elif p.dim() == 2:
                p.copy_(n(p.shape) / p.shape[1] ** 0.5)
            else:
                raise RuntimeError(f"parameter {name} {tuple(p.shape)} not randomized")
            names.append(name)
    return names


def make_model(ref, spec, seed, torch):
    torch.manual_seed(seed)
    args = model_args(ref, spec)
    model = ref.Transformer(args)
    model = model.float().eval()
    bad = [(n, p.dtype) for n, p in model.named_parameters() if p.dtype != torch.float32]
    assert not bad, f"non-float32 parameters after .float(): {bad}"
    gen = torch.Generator().manual_seed(seed)
    randomize(model, gen, torch)
    return args, model, gen


def check_structure(model, spec, ref):
    n = spec["num_hidden_layers"]
    assert len(model.layers) == n and len(model.mtp) == spec["num_nextn_predict_layers"]
    for l, layer in enumerate(model.layers):
        a = layer.attn
        assert a.compress_ratio == spec["compress_ratios"][l], l
        assert (a.compressor is not None) == (l in spec["kv_source_layer_ids"]), l
        assert (a.indexer is not None) == (l in spec["index_source_layer_ids"]), l
        assert layer.engram is None
        assert layer.ffn.n_routed_experts == spec["n_routed_experts"]
        assert layer.ffn.gate.topk == spec["num_experts_per_tok"]
    for s, blk in enumerate(model.mtp):
        assert isinstance(blk, ref.DSparkBlock) and isinstance(blk.attn, ref.DSparkAttention)
        assert blk.attn.compress_ratio == 0 and blk.attn.compressor is None
        assert blk.attn.indexer is None and blk.engram is None
        assert blk.ffn.n_routed_experts == spec["dspark_n_routed_experts"]
        assert blk.ffn.gate.topk == spec["dspark_num_experts_per_tok"]
        assert blk.block_size == spec["dspark_block_size"] and blk.temperature == 0
        assert blk.embed is model.embed and blk.head is model.head
        assert hasattr(blk, "main_proj") == (s == 0)
        assert hasattr(blk, "markov_head") == (s == len(model.mtp) - 1)
    assert tuple(model.target_layer_ids) == tuple(spec["dspark_target_layer_ids"])


# --------------------------------------------------------------------------------------------
# Driving the reference
# --------------------------------------------------------------------------------------------

class IndexKeyFix:
    """The oracle fix (module docstring): each index-key owner reads its own key cache."""

    def __init__(self, ref):
        self.ref, self.orig = ref, ref.Indexer.forward

    def install(self):
        ref, orig = self.ref, self.orig

        def forward(ix, x, qr, latent, start_pos, offset):
            if ix.owns_k:
                ref.shared_attn.index_k = ix.k_cache
            return orig(ix, x, qr, latent, start_pos, offset)
        ref.Indexer.forward = forward

    def remove(self):
        self.ref.Indexer.forward = self.orig


def make_ids(spec, gen, torch):
    pool = [i for i in range(spec["vocab_size"]) if i != spec["dspark_noise_token_id"]]
    pick = torch.randint(0, len(pool), (PROMPT_LEN + DRAFT_STEPS,), generator=gen).tolist()
    return [pool[i] for i in pick[:PROMPT_LEN]], [pool[i] for i in pick[PROMPT_LEN:]]


def decode_vs_prefill(model, prompt, anchors, res, torch):
    """Each decode row of the sequence against a prefill (start_pos 0) of the same tokens: the
    last row's logits (rows 0..S) and taps (rows 0..S-1). Returns the per-row max |diff| and the
    prefill of the T prompt tokens (last row's logits and taps)."""
    import numpy as np
    seq, T = prompt + anchors, len(prompt)
    d_logits, d_taps, first = [], [], None
    for n in range(T, T + len(anchors) + 1):
        _, logits, hidden = model(torch.tensor([seq[:n]], dtype=torch.long), 0)
        lg, tp = logits[0].float().numpy(), hidden[0, -1].float().view(3, -1).numpy()
        first = first or (lg, tp)
        d_logits.append(float(np.abs(lg - res["logits"][n - T]).max()))
        if n - T < len(anchors):
            d_taps.append(float(np.abs(tp - res["taps"][n - T]).max()))
    return d_logits, d_taps, first


class Taps:
    """Forward hooks that record the drafter's intermediates during forward_spec."""

    def __init__(self, model):
        self.model, self.active, self.rec = model, False, {}
        last = model.mtp[-1]
        hooks = [
            model.head.register_forward_hook(self._head),
            last.markov_head.register_forward_hook(self._markov),
            last.norm.register_forward_pre_hook(self._xh),
            model.mtp[0].main_norm.register_forward_hook(self._main_x),
        ]
        for s, blk in enumerate(model.mtp):
            hooks.append(blk.register_forward_hook(self._stage(s)))
        self.hooks = hooks

    def start(self):
        self.active, self.rec = True, {"markov_bias": [], "markov_embed": [], "stage_out": {}}

    def stop(self):
        self.active = False
        return self.rec

    def _head(self, mod, inp, out):
        if self.active:  # forward_head's trunk-head call, before the Markov bias is added in place
            self.rec["base_logits"] = out.detach().clone()

    def _markov(self, mod, inp, out):
        if self.active:
            self.rec["markov_bias"].append(out[0].detach().clone())
            self.rec["markov_embed"].append(out[1].detach().clone())

    def _xh(self, mod, inp):
        if self.active:
            self.rec["xh"] = inp[0].detach().clone()

    def _main_x(self, mod, inp, out):
        if self.active:
            self.rec["main_x"] = out.detach().clone()

    def _stage(self, s):
        def hook(mod, inp, out):
            if self.active:
                self.rec["stage_out"][s] = out[0].detach().clone()
        return hook


def run_sequence(model, prompt, anchors, torch):
    """The serving call sequence (module docstring). Returns every recorded array (numpy)."""
    import numpy as np
    T, S = len(prompt), len(anchors)
    taps = Taps(model)
    tensor = lambda ids: torch.tensor([ids], dtype=torch.long)  # noqa: E731
    out = {"logits": [], "draft_ids": [], "draft_logits": [], "draft_base_logits": [],
           "confidence": [], "taps": [], "main_x": [], "xh": [], "markov_bias": [],
           "markov_embed": [], "stage_out": [], "ring": []}
    ids, _, hidden = model(tensor(prompt[:T - 1]), 0)
    assert hidden.shape == (1, T - 1, 3 * model.embed.dim), hidden.shape
    assert model.forward_spec(ids, hidden, 0) is None
    for s in range(S):
        p = T - 1 + s
        tok = prompt[T - 1] if s == 0 else anchors[s - 1]
        _, logits, hidden = model(tensor([tok]), p)
        out["logits"].append(logits[0].float())
        out["taps"].append(hidden[0, 0].float().view(3, -1))
        taps.start()
        result = model.forward_spec(torch.tensor([anchors[s]], dtype=torch.long), hidden, p)
        rec = taps.stop()
        assert result is not None
        output_ids, dlogits, conf = result
        assert int(output_ids[0, 0]) == anchors[s]
        out["draft_ids"].append(output_ids[0, 1:].clone())
        out["draft_logits"].append(dlogits[0].float().clone())
        out["draft_base_logits"].append(rec["base_logits"][0].float())
        out["confidence"].append(conf[0].float().clone())
        out["main_x"].append(rec["main_x"][0, 0].float())
        out["xh"].append(rec["xh"][0].float())
        out["markov_bias"].append(torch.stack([b[0] for b in rec["markov_bias"]]).float())
        out["markov_embed"].append(torch.stack([e[0] for e in rec["markov_embed"]]).float())
        out["stage_out"].append(torch.stack([rec["stage_out"][i][0].float()
                                             for i in range(len(model.mtp))]))
        out["ring"].append(torch.stack([blk.attn.window_kv_cache[0].float().clone()
                                        for blk in model.mtp]))
    _, logits, _ = model(tensor([anchors[-1]]), T - 1 + S)
    out["logits"].append(logits[0].float())
    for h in taps.hooks:
        h.remove()
    return {k: np.stack([t.numpy() for t in v]) for k, v in out.items()}


def self_checks(res, model, spec, torch):
    """Assertions on one run's results; returns the figures for reference.json."""
    import numpy as np
    S, B, V = res["draft_logits"].shape
    assert B == spec["dspark_block_size"] and V == spec["vocab_size"]
    for k in ("logits", "draft_logits", "draft_base_logits", "confidence", "ring", "stage_out"):
        assert np.isfinite(res[k]).all(), f"non-finite {k}"
    # the drafts are the argmax of the corrected logits (greedy sampling, temperature 0)
    assert np.array_equal(res["draft_ids"], res["draft_logits"].argmax(-1)), "draft != argmax"
    # corrected = base + Markov bias of the previous token (anchor for slot 0, then the drafts)
    assert np.array_equal(res["draft_logits"], res["draft_base_logits"] + res["markov_bias"])
    last = model.mtp[-1]
    emb = last.markov_head.embed.weight.detach().float().numpy()
    mhead = last.markov_head.head.weight.detach().float().numpy()
    conf_w = last.confidence_head.proj.weight.detach().float().numpy()[0]
    return emb, mhead, conf_w


def check_markov_and_confidence(res, anchors, emb, mhead, conf_w):
    import numpy as np
    worst_bias, worst_conf = 0.0, 0.0
    for s in range(len(anchors)):
        prev = [anchors[s]] + [int(t) for t in res["draft_ids"][s][:-1]]
        assert np.array_equal(res["markov_embed"][s], emb[prev]), "Markov embed rows"
        bias = emb[prev].astype(np.float64) @ mhead.T.astype(np.float64)
        worst_bias = max(worst_bias, float(np.abs(bias - res["markov_bias"][s]).max()))
        feat = np.concatenate([res["xh"][s], emb[prev]], axis=-1).astype(np.float64)
        worst_conf = max(worst_conf, float(np.abs(feat @ conf_w - res["confidence"][s]).max()))
    assert worst_bias < 1e-4 and worst_conf < 1e-4, (worst_bias, worst_conf)
    return {"markov_bias_recomputed_max_abs_diff": worst_bias,
            "confidence_recomputed_max_abs_diff": worst_conf}


# --------------------------------------------------------------------------------------------
# Writing
# --------------------------------------------------------------------------------------------

MTP_ALIAS = re.compile(r"^mtp\.\d+\.(embed|head)\.weight$")


def tensors_to_save(model, spec, torch):
    """The state_dict under the reference's names, minus each stage's alias of the trunk's
    embed / head (the release checkpoint has none), plus EXTRA_TENSORS."""
    tensors = {}
    for k, v in model.state_dict().items():
        if MTP_ALIAS.match(k):
            trunk = model.embed.weight if k.endswith("embed.weight") else model.head.weight
            assert v.data_ptr() == trunk.data_ptr(), f"{k} is not the trunk's tensor"
            continue
        tensors[k] = v.detach().float().contiguous().clone()
    gen = torch.Generator().manual_seed(SEED + 1)
    prefixes = [f"layers.{l}." for l in range(spec["num_hidden_layers"])]
    prefixes += [f"mtp.{s}." for s in range(spec["num_nextn_predict_layers"])]
    for p in prefixes:
        e = spec["n_routed_experts"] if p.startswith("layers.") else spec["dspark_n_routed_experts"]
        assert p + "ffn.gate.bias" in tensors and p + EXTRA_TENSORS not in tensors
        tensors[p + EXTRA_TENSORS] = 0.3 * torch.randn(e, generator=gen)
    assert "embed.weight" in tensors and "head.weight" in tensors and "norm.weight" in tensors
    return tensors


def config_json(spec):
    text = {k: v for k, v in spec.items() if k not in ("yarn_factor", "yarn_orig")}
    text.update(model_type="deepseek_v41_text", num_key_value_heads=1, n_shared_experts=1,
                hidden_act="silu", scoring_func="sqrtsoftplus", topk_method="noaux_tc",
                norm_topk_prob=True, gate_temp=1.0, rms_norm_eps=1e-20, hc_eps=1e-6,
                engram_layer_ids=[], tie_word_embeddings=False, bos_token_id=0, eos_token_id=1,
                max_position_embeddings=int(spec["yarn_factor"] * spec["yarn_orig"]),
                rope_scaling={"rope_type": "yarn", "factor": spec["yarn_factor"],
                              "original_max_position_embeddings": spec["yarn_orig"],
                              "beta_fast": 32.0, "beta_slow": 1.0})
    n_layers = spec["num_hidden_layers"] + spec["num_nextn_predict_layers"]
    assert len(text["compress_ratios"]) == n_layers
    return {"model_type": "deepseek_v41", "architectures": ["DeepseekV41ForCausalLM"],
            "text_config": text}


def hf_cross_check(hf_dir, tensors, prompt, anchors, torch):
    """The same backbone weights through transformers' deepseek_v41 (the oracle of
    make_golden_v41.py, which our engine matches on configs A and E), single-shot over prompt +
    anchors with make_golden_v41's oracle fix: the rows T-1..T-1+S against logits.npy. Reported,
    not asserted: the golden data is the official reference's."""
    import numpy as np
    sys.path.insert(0, HERE)
    import make_golden_v41 as g
    mod, cfg_mod, shims = g.load_reference(hf_dir)
    n = SPEC["num_hidden_layers"]
    spec = {k: v for k, v in SPEC.items() if not k.startswith("dspark_")}
    spec.update(num_nextn_predict_layers=0, compress_ratios=SPEC["compress_ratios"][:n],
                seq_len=len(prompt) + len(anchors))
    cfg = g.build_config(cfg_mod, spec)
    model = mod.DeepseekV41ForCausalLM(cfg).float().eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            p.copy_(tensors[g.official_name(name)])
    undo = g.install_oracle_fix(mod)
    logits = g.forward_logits(model, torch.tensor([prompt + anchors]), spec["sliding_window"],
                              torch)
    undo()
    return logits[len(prompt) - 1:].numpy().astype(np.float32), shims


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--reference", default=os.path.join(HERE, "reference_v41_official"))
    ap.add_argument("--selftest", action="store_true", help="checks and one sequence, no files")
    ap.add_argument("--emulate-fp8-cast", action="store_true",
                    help="for a torch without the float8 dtypes: emulate kernel_cpu's e4m3 cast")
    ap.add_argument("--compare-run", default=None,
                    help="an earlier run's D dir to compare with (reported in reference.json)")
    ap.add_argument("--hf-reference", default=None,
                    help="also run the backbone through transformers' modeling file in this dir "
                         "(tools/reference_v41) and report the difference in reference.json")
    args = ap.parse_args()
    import numpy as np
    import torch
    torch.set_default_dtype(torch.float32)
    missing = [n for n in FP8_DTYPES if not hasattr(torch, n)]
    fp8_cast = f"torch.float8_e4m3fn (torch {torch.__version__})"
    if missing:
        if not args.emulate_fp8_cast:
            die(f"torch {torch.__version__} lacks {missing}: use a newer torch, or "
                f"--emulate-fp8-cast")
        install_fp8_emulation(torch)
    ref, kernel, shims = load_reference(args.reference)
    if missing:
        n_checked = check_e4m3_round(torch, torch.Generator().manual_seed(11))
        kernel._to_e4m3_satfinite = lambda x: e4m3_round(x, torch)
        fp8_cast = (f"emulated (torch {torch.__version__} lacks {missing}): "
                    f"kernel_cpu._to_e4m3_satfinite replaced by e4m3_round, checked against a "
                    f"brute-force e4m3 rounding on {n_checked} values")
        shims.append("fp8 dtypes: " + fp8_cast)
    k32 = Float32Kernels(ref, kernel, torch)
    kernel_checks = k32.check(torch.Generator().manual_seed(7))
    k32.install()
    print(f"reference loaded (torch {torch.__version__}); stubs: {', '.join(shims) or 'none'}; "
          f"kernel twins: {kernel_checks}", flush=True)

    spec = SPEC
    fix = IndexKeyFix(ref)

    # The oracle fix is a no-op with a single KV source (no other layer's keys to read).
    single = dict(SPEC, compress_ratios=[0, 2, 2, 2, 2, 2, 2, 2, 0, 0, 0],
                  kv_source_layer_ids=[1], index_source_layer_ids=[1, 4],
                  candidate_source_layer_id=1)
    single_res = []
    for installed in (False, True):
        fix.install() if installed else fix.remove()
        _, m1, g1 = make_model(ref, single, SEED, torch)
        check_structure(m1, single, ref)
        single_res.append(run_sequence(m1, *make_ids(single, g1, torch), torch))
    for k in single_res[0]:
        assert np.array_equal(single_res[0][k], single_res[1][k]), f"fix changed single-source {k}"

    # Config D as the reference is (kept for the record), then with the fix (the golden data).
    fix.remove()
    _, model_raw, gen_raw = make_model(ref, spec, SEED, torch)
    prompt, anchors = make_ids(spec, gen_raw, torch)
    res_raw = run_sequence(model_raw, prompt, anchors, torch)
    raw_logits_vs_prefill, raw_taps_vs_prefill, _ = decode_vs_prefill(
        model_raw, prompt, anchors, res_raw, torch)
    fix.install()
    margs, model, gen = make_model(ref, spec, SEED, torch)
    check_structure(model, spec, ref)
    assert make_ids(spec, gen, torch) == (prompt, anchors)

    res = run_sequence(model, prompt, anchors, torch)
    emb, mhead, conf_w = self_checks(res, model, spec, torch)
    figures = check_markov_and_confidence(res, anchors, emb, mhead, conf_w)
    assert k32.calls["act_quant_linear"] == 0 and k32.calls["fp8_gemm"] == 0
    assert k32.calls["fp4_gemm"] == 0 and k32.calls["fp4_act_quant_other"] == 0
    assert k32.calls["act_quant_inplace"] > 0 and k32.calls["fp4_act_quant_inplace"] > 0

    # Every decode row against the reference's own prefill of the same tokens (row 0: the
    # prefill of T-1 tokens plus one decode step against one prefill of all T tokens).
    fixed_logits_vs_prefill, fixed_taps_vs_prefill, (full_logits, full_taps) = decode_vs_prefill(
        model, prompt, anchors, res, torch)
    assert max(fixed_logits_vs_prefill) < 1e-3, fixed_logits_vs_prefill
    assert max(fixed_taps_vs_prefill) < 1e-3, fixed_taps_vs_prefill
    assert int(full_logits.argmax()) == int(res["logits"][0].argmax())
    fix_effect = {
        "single_source_no_op_bit_equal": True,
        "as_is_decode_vs_own_prefill_logits_max_abs_diff_per_row": raw_logits_vs_prefill,
        "as_is_decode_vs_own_prefill_taps_max_abs_diff_per_row": raw_taps_vs_prefill,
        "fixed_decode_vs_own_prefill_logits_max_abs_diff_per_row": fixed_logits_vs_prefill,
        "fixed_decode_vs_own_prefill_taps_max_abs_diff_per_row": fixed_taps_vs_prefill,
        "fix_changed_logits_max_abs_per_row":
            np.abs(res["logits"] - res_raw["logits"]).max(axis=-1).tolist(),
        "as_is_draft_ids": res_raw["draft_ids"].tolist(),
        "fix_changed_draft_ids": not np.array_equal(res["draft_ids"], res_raw["draft_ids"]),
    }
    d_logits, d_taps = fixed_logits_vs_prefill[0], fixed_taps_vs_prefill[0]

    # Determinism: a fresh model from the same seed, the same sequence, the same bits.
    _, model2, _ = make_model(ref, spec, SEED, torch)
    res2 = run_sequence(model2, prompt, anchors, torch)
    for k in res:
        assert np.array_equal(res[k], res2[k]), f"second run differs in {k}"
    print(f"self-checks passed: drafts {res['draft_ids'].tolist()} (as is: "
          f"{res_raw['draft_ids'].tolist()}); decode vs own prefill, logits per row: fixed "
          f"{[f'{v:.1e}' for v in fixed_logits_vs_prefill]}, as is "
          f"{[f'{v:.1e}' for v in raw_logits_vs_prefill]}; {figures}", flush=True)
    if args.selftest:
        return

    d = os.path.join(args.out, "D")
    os.makedirs(d, exist_ok=True)
    tensors = tensors_to_save(model, spec, torch)
    writer = save_safetensors(tensors, os.path.join(d, "model.safetensors"), torch)
    compared = compare_run(args.compare_run, res, res_raw, tensors) if args.compare_run else None
    if compared:
        print(f"compared with {args.compare_run}: {compared}", flush=True)
    cross = None
    if args.hf_reference:
        import transformers
        hf_rows, hf_shims = hf_cross_check(args.hf_reference, tensors, prompt, anchors, torch)
        diff = np.abs(hf_rows - res["logits"]).max(axis=-1)
        cross = {"oracle": "transformers deepseek_v41 (tools/reference_v41), single shot over "
                           "prompt + anchors, make_golden_v41's oracle fix",
                 "transformers": transformers.__version__, "shims": hf_shims,
                 "logits_rows_max_abs_diff": diff.tolist(),
                 "argmax_agree": (hf_rows.argmax(-1) == res["logits"].argmax(-1)).tolist()}
        print(f"transformers backbone vs official reference: max|diff| per row "
              f"{[f'{v:.2e}' for v in diff]}", flush=True)
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(config_json(spec), f, indent=2)
    T = PROMPT_LEN
    with open(os.path.join(d, "ids.json"), "w") as f:
        json.dump({"prompt": prompt, "anchors": anchors,
                   "anchor_positions": [T + s for s in range(DRAFT_STEPS)]}, f)
    np.save(os.path.join(d, "logits.npy"), res["logits"].astype(np.float32))
    np.save(os.path.join(d, "draft_ids.npy"), res["draft_ids"].astype(np.int32))
    np.save(os.path.join(d, "draft_logits.npy"), res["draft_logits"].astype(np.float32))
    np.save(os.path.join(d, "draft_base_logits.npy"), res["draft_base_logits"].astype(np.float32))
    np.save(os.path.join(d, "confidence.npy"), res["confidence"].astype(np.float32))
    debug = {
        "taps_last_prompt": res["taps"][0],          # [3, D]
        "main_x_last_prompt": res["main_x"][0],      # [D]
        "taps": res["taps"],                         # [S, 3, D]
        "main_x": res["main_x"],                     # [S, D]
        "xh": res["xh"],                             # [S, B, D]
        "markov_bias": res["markov_bias"],           # [S, B, V]
        "markov_embed": res["markov_embed"],         # [S, B, r]
        "stage_out": res["stage_out"],               # [S, stages, B, hc, D]
        "ring": res["ring"],                         # [S, stages, W, head_dim]
        "full_prefill_last_logits": full_logits,     # [V]
        "full_prefill_taps_last": full_taps,         # [3, D]
        "logits_as_is": res_raw["logits"],           # [1+S, V] without the oracle fix
        "draft_ids_as_is": res_raw["draft_ids"],     # [S, B]
        "draft_logits_as_is": res_raw["draft_logits"],  # [S, B, V]
        "confidence_as_is": res_raw["confidence"],   # [S, B]
    }
    np.savez(os.path.join(d, "debug.npz"),
             **{k: v.astype(np.float32 if v.dtype.kind == "f" else np.int32)
                for k, v in debug.items()})
    mtp = {k: list(v.shape) for k, v in tensors.items() if k.startswith("mtp.")}

    def margin(x):  # how far the argmax is from a tie, for a port's tolerance
        top = np.sort(x, axis=-1)
        return float((top[..., -1] - top[..., -2]).min())
    meta = {
        "reference": REFERENCE, "torch": torch.__version__, "numpy": np.__version__,
        "seed": SEED, "config": spec, "prompt_len": T, "draft_steps": DRAFT_STEPS,
        "model_args": {k: (list(v) if isinstance(v, tuple) else v)
                       for k, v in vars(margs).items()},
        "call_sequence": [
            "Transformer.forward(prompt[:T-1], start_pos=0)",
            "Transformer.forward_spec(argmax, taps[1,T-1,3D], start_pos=0) -> None: each stage's "
            "DSparkAttention writes main_kv of positions 0..T-2 (the last W) into its ring",
            "for s in 0..S-1 (p = T-1+s; tok = prompt[T-1] if s == 0 else anchors[s-1]): "
            "Transformer.forward([tok], start_pos=p) -> logits.npy[s], taps[1,1,3D]; "
            "Transformer.forward_spec([anchors[s]], taps, start_pos=p): each stage writes "
            "main_kv(p) into ring slot p % W, then drafts the block [anchors[s], noise x (B-1)] "
            "at positions p+1..p+B over its ring (min(W, p+1) slots) plus the block's own keys",
            "Transformer.forward([anchors[S-1]], start_pos=T+S-1) -> logits.npy[S]",
        ],
        "why_not_draft_after_prefill": "the reference's forward_spec at start_pos 0 only seeds "
            "the rings and returns None (get_dspark_topk_idxs asserts start_pos > 0); its "
            "__main__ drafts after each decode step. Prefill of T-1 tokens + one decode step is "
            "the reference's form of 'prefill T tokens, then draft'; checked against one prefill "
            "of all T tokens below.",
        "dtypes": {
            "weights": "float32 (ModelArgs dtype='bf16', expert_dtype=None, then model.float(): "
                       "every Linear takes F.linear, no activation quantization)",
            "activations": "float32 everywhere (torch default dtype float32)",
            "kept_quantization": "in-place fp8 e4m3 QDQ (32-blocks, ue8m0 scales) of the window "
                                 "KV rows, of each stage's main_kv ring rows and block KV; "
                                 "in-place fp4 QDQ of the indexer's q and k (32, ue8m0) and "
                                 "of the compressed KV (16, e4m3 scales)",
            "bf16_in_reference_replaced": [
                "kernel_cpu.act_quant asserts bf16 input: float32 twin (same QDQ)",
                "kernel_cpu.fp4_act_quant asserts bf16 input: float32 twin (same QDQ)",
                "kernel_cpu.sparse_attn casts the probabilities to bf16 before PV and returns "
                "bf16: float32 twin without those two roundings",
                "Linear weights created bf16 (Compressor.wkv at ratio 1, Indexer.weights_proj / "
                "wk, Attention.wo_a, and every Linear under dtype='bf16'): cast to float32 by "
                "model.float() before randomizing",
            ],
        },
        "oracle_fix": "Indexer.forward of an index-key owner first points shared_attn.index_k "
                      "at its own k_cache (as is, a ratio>1 owner whose group is incomplete in a "
                      "decode step reads the keys of the KV source that published last)",
        "oracle_fix_checks": fix_effect,
        "kernel_call_counts": k32.calls,
        "shims": shims,
        "extra_tensors": f"'*.{EXTRA_TENSORS}' for every layer and stage (random, unused: the "
                         "reference builds them only with vision on; the release checkpoint "
                         "and our loader carry them)",
        "dropped_aliases": "mtp.S.embed.weight / mtp.S.head.weight (the trunk's tensors, "
                           "assigned to every stage by Transformer.__init__)",
        "mtp_tensors": mtp,
        "self_checks": dict(
            kernel_checks, **figures,
            drafts_are_argmax_of_corrected_logits=True,
            corrected_equals_base_plus_markov_bias=True, all_finite=True,
            deterministic_second_run_bit_equal=True,
            prefill_T_minus_1_plus_decode_vs_full_prefill_logits_max_abs_diff=d_logits,
            prefill_T_minus_1_plus_decode_vs_full_prefill_taps_max_abs_diff=d_taps),
        "debug_npz": {k: list(v.shape) for k, v in debug.items()},
        "cross_check_transformers_backbone": cross,
        "compared_with_run": compared,
        "fp8_cast": fp8_cast,
        "safetensors_writer": writer,
        "figures": {"max_abs_logit": float(np.abs(res["logits"]).max()),
                    "max_abs_draft_logit": float(np.abs(res["draft_logits"]).max()),
                    "max_abs_markov_bias": float(np.abs(res["markov_bias"]).max()),
                    "min_top1_top2_margin_draft_logits": margin(res["draft_logits"]),
                    "min_top1_top2_margin_target_logits": margin(res["logits"]),
                    "confidence": res["confidence"].tolist(),
                    "target_argmax": res["logits"].argmax(-1).tolist()},
    }
    with open(os.path.join(d, "reference.json"), "w") as f:
        json.dump(meta, f, indent=2)
    for k, v in mtp.items():
        print(f"  {k} {v}")
    print(f"D: T={T} S={DRAFT_STEPS} -> {d}", flush=True)


if __name__ == "__main__":
    main()
