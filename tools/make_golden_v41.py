#!/usr/bin/env python3
"""Golden data for the DeepSeek-V4.1 forward pass, made with the transformers reference.

The oracle is transformers' `deepseek_v41` modeling file (public transformers repository, source
commit in tools/reference_v41/README.md). transformers 5.17 on the GPU machine lacks the model, so
this script loads the reference modeling file from tools/reference_v41/ (see the README there: the
file is not committed) on top of the installed transformers, shims what 5.17 lacks, and runs
`DeepseekV41ForCausalLM` single-shot (float32, CPU, no cache) on small configs with *every*
parameter randomized. Per config it writes:

    <out>/<name>/config.json          composite config (model_type deepseek_v41, text_config)
    <out>/<name>/model.safetensors    the weights with the official tensor names
                                      (the reference's names less `model.`, `lm_head` -> `head`)
    <out>/<name>/ids.json             {"ids": [...]}
    <out>/<name>/logits.npy           float32 [T, vocab], the reference logits
    <out>/<name>/reference.json       the reference commit, torch / transformers versions, the
                                      oracle fix applied (below) and per-config self-checks;
                                      with Engram, the hash state's constants and hash ids
    <out>/<name>/engram_token_map.json  (Engram configs) the compressed token map the reference
                                      derived from the test tokenizer (EngramTestTokenizer)

Oracle fix (documented in docs/architecture.md "DeepSeek-V4.1"): without a cache the reference
*appends* each KV source's compressed entries and index keys to the previous source's in its
per-forward `shared` dict, so a later group attends a concatenation whose own entries are never
selectable; with a cache (its serving path) each source publishes only its own entries. We take the
cache path's semantics: `shared` drops "compress_kv", "index_k" and "topk_bias" when a KV source
layer starts. The script checks that this changes nothing on a config with a single KV source.

Usage (torch + transformers >= 5.17; no GPU needed):
    python3 tools/make_golden_v41.py OUTDIR                 # configs A and B
    python3 tools/make_golden_v41.py OUTDIR --configs E     # Engram at two layers
    python3 tools/make_golden_v41.py OUTDIR --selftest      # load + one tiny forward, then stop
    python3 tools/make_golden_v41.py OUTDIR --reference DIR # modeling file elsewhere
"""
import argparse
import importlib.util
import json
import os
import sys
import types

REF_COMMIT = "0a2080b43eb64e6d448186a4f3f0bc9c618f4797"
HERE = os.path.dirname(os.path.abspath(__file__))

# Two configs with the release's structure shrunk, differing in every dimension. Many index heads
# so that the indexer's relu sums rarely tie (docs/architecture.md §3); head_dim a multiple of 32
# and index_head_dim a multiple of 32 so the FP8 / FP4 fake-quant runs (the reference skips shapes
# it cannot block).
CONFIGS = {
    "A": dict(
        vocab_size=320, hidden_size=64, num_hidden_layers=8, num_attention_heads=4, head_dim=64,
        qk_rope_head_dim=16, q_lora_rank=32, o_groups=2, o_lora_rank=16, n_routed_experts=6,
        num_experts_per_tok=2, moe_intermediate_size=32, routed_scaling_factor=1.5,
        swiglu_limit=3.0, sliding_window=8,
        compress_ratios=[0, 0, 2, 2, 2, 2, 1, 1], kv_source_layer_ids=[2, 4, 6],
        index_source_layer_ids=[2, 4, 6, 7], candidate_source_layer_id=6,
        candidate_topk_blocks=3, candidate_block_size=2,
        index_n_heads=16, index_head_dim=32, index_topk=4, hc_mult=4, hc_sinkhorn_iters=20,
        rope_theta=10000.0, compress_rope_theta=40000.0, yarn_factor=4.0, yarn_orig=64,
        seq_len=120),
    "B": dict(
        vocab_size=288, hidden_size=96, num_hidden_layers=6, num_attention_heads=6, head_dim=96,
        qk_rope_head_dim=8, q_lora_rank=40, o_groups=3, o_lora_rank=20, n_routed_experts=5,
        num_experts_per_tok=3, moe_intermediate_size=48, routed_scaling_factor=2.5,
        swiglu_limit=5.0, sliding_window=12,
        compress_ratios=[0, 2, 2, 1, 1, 1], kv_source_layer_ids=[1, 3],
        index_source_layer_ids=[1, 3, 5], candidate_source_layer_id=3,
        candidate_topk_blocks=4, candidate_block_size=4,
        index_n_heads=12, index_head_dim=64, index_topk=6, hc_mult=3, hc_sinkhorn_iters=7,
        rope_theta=20000.0, compress_rope_theta=160000.0, yarn_factor=8.0, yarn_orig=32,
        seq_len=150),
}
# Engram at two layers (the first, window-only, and a Reindex layer) of a smaller model (hc 3, a
# ratio-2 group with a Reindex layer, a ratio-1 group with the candidate source then a Reindex
# layer): 4-grams (a 3-token look-back) over 2 hash heads, tables of a few hundred rows (primes
# above engram_vocab_size = 30), 32 channels per row; 16 index heads (rare relu-sum ties, as in
# A); about 0.9 MB of F32 weights. engram_num_embeddings (the sum of each
# layer's primes) and engram_compressed_vocab_size (from the test tokenizer below) are filled in
# by engram_spec().
CONFIGS["E"] = dict(
    vocab_size=200, hidden_size=32, num_hidden_layers=5, num_attention_heads=2, head_dim=64,
    qk_rope_head_dim=16, q_lora_rank=24, o_groups=2, o_lora_rank=16, n_routed_experts=3,
    num_experts_per_tok=2, moe_intermediate_size=16, routed_scaling_factor=1.5,
    swiglu_limit=3.0, sliding_window=6,
    compress_ratios=[0, 2, 2, 1, 1], kv_source_layer_ids=[1, 3],
    index_source_layer_ids=[1, 2, 3, 4], candidate_source_layer_id=3,
    candidate_topk_blocks=2, candidate_block_size=2,
    index_n_heads=16, index_head_dim=32, index_topk=3, hc_mult=3, hc_sinkhorn_iters=10,
    rope_theta=10000.0, compress_rope_theta=40000.0, yarn_factor=4.0, yarn_orig=64,
    engram_layer_ids=[0, 2], engram_vocab_size=30, engram_max_ngram_size=4, engram_n_heads=2,
    engram_head_dim=32, engram_pad_id=2,
    seq_len=80)
# A single-source config for the oracle-fix self-check (the fix must be a no-op there).
SINGLE_SOURCE = dict(CONFIGS["A"], compress_ratios=[0, 2, 2, 2, 2, 2, 2, 2],
                     kv_source_layer_ids=[1], index_source_layer_ids=[1, 4],
                     candidate_source_layer_id=1, seq_len=40)


def die(msg):
    print(f"make_golden_v41: {msg}", file=sys.stderr)
    sys.exit(2)


# --------------------------------------------------------------------------------------------
# Loading the reference on top of the installed transformers
# --------------------------------------------------------------------------------------------

def _shim_missing(torch):
    """Install what the reference imports and transformers 5.17 may lack. Each shim is used only
    when the import fails; none changes the forward math."""
    import transformers
    import transformers.utils as tutils
    import transformers.utils.generic as generic
    shims = []

    try:
        import transformers.utils.output_capturing  # noqa: F401
    except ImportError:
        mod = types.ModuleType("transformers.utils.output_capturing")
        mod.OutputRecorder = getattr(generic, "OutputRecorder", None) or (
            type("OutputRecorder", (), {"__init__": lambda self, *a, **k: None}))
        cap = getattr(generic, "capture_outputs", None) or getattr(generic, "check_model_inputs", None)
        mod.capture_outputs = cap if cap is not None else (lambda f=None, **k: f if f else (lambda g: g))
        sys.modules["transformers.utils.output_capturing"] = mod
        shims.append("utils.output_capturing")
    if not hasattr(generic, "maybe_autocast"):
        generic.maybe_autocast = lambda device_type="cpu", enabled=True, **k: torch.autocast(
            device_type=device_type, enabled=enabled)
        shims.append("generic.maybe_autocast")
    if not hasattr(generic, "merge_with_config_defaults"):
        generic.merge_with_config_defaults = lambda f: f
        shims.append("generic.merge_with_config_defaults")
    try:
        import transformers.initialization  # noqa: F401
    except ImportError:
        mod = types.ModuleType("transformers.initialization")
        mod.normal_ = lambda t, mean=0.0, std=1.0: torch.nn.init.normal_(t, mean, std)
        mod.zeros_ = torch.nn.init.zeros_
        mod.ones_ = torch.nn.init.ones_
        mod.copy_ = lambda t, s: t.copy_(s)
        sys.modules["transformers.initialization"] = mod
        transformers.initialization = mod
        shims.append("initialization")
    import transformers.cache_utils as cu
    if not hasattr(cu, "DynamicSlidingWindowLayer"):
        cu.DynamicSlidingWindowLayer = type("DynamicSlidingWindowLayer", (), {
            "__init__": lambda self, sliding_window=None, **k: None})
        shims.append("cache_utils.DynamicSlidingWindowLayer")
    try:
        import sympy  # noqa: F401
    except ImportError:  # only the Engram layout uses isprime
        mod = types.ModuleType("sympy")
        mod.isprime = lambda n: n > 1 and all(n % p for p in range(2, int(n ** 0.5) + 1))
        sys.modules["sympy"] = mod
        shims.append("sympy.isprime")
    from transformers import activations
    try:
        activations.ACT2FN["sqrtsoftplus"]
    except KeyError:
        class SqrtSoftplus(torch.nn.Module):
            def forward(self, x):
                return torch.nn.functional.softplus(x).sqrt()
        activations.ACT2FN["sqrtsoftplus"] = SqrtSoftplus
        activations.ACT2CLS["sqrtsoftplus"] = SqrtSoftplus
        shims.append("ACT2FN[sqrtsoftplus]")
    from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS
    if not hasattr(ALL_ATTENTION_FUNCTIONS, "get_interface"):
        def get_interface(self, implementation, default):
            return default if implementation in (None, "eager") else self[implementation]
        type(ALL_ATTENTION_FUNCTIONS).get_interface = get_interface
        shims.append("AttentionInterface.get_interface")
    # Docstring generation knows nothing of a model type 5.17 has not registered; it does not
    # touch the math, so it is replaced by identity while the reference module is executed.
    real_auto_docstring = tutils.auto_docstring

    def auto_docstring(obj=None, **kwargs):
        return obj if obj is not None else (lambda o: o)
    tutils.auto_docstring = auto_docstring
    return shims, (tutils, real_auto_docstring)


DEFAULTS = dict(num_key_value_heads=1, attention_bias=False, attention_dropout=0.0,
                n_shared_experts=1, scoring_func="sqrtsoftplus", gate_temp=1.0,
                norm_topk_prob=True, topk_method="noaux_tc", hc_eps=1e-6,
                engram_layer_ids=[], engram_num_embeddings=[], engram_vocab_size=16000000,
                engram_max_ngram_size=4, engram_n_heads=8, engram_head_dim=256,
                engram_pad_id=2, engram_compressed_vocab_size=99092,
                num_nextn_predict_layers=0, dspark_block_size=5,
                dspark_noise_token_id=128799, dspark_target_layer_ids=[],
                dspark_markov_rank=256, dspark_n_routed_experts=128,
                dspark_num_experts_per_tok=3, hidden_act="silu",
                initializer_range=0.02, rms_norm_eps=1e-20, output_router_logits=False,
                router_aux_loss_coef=0.001, router_jitter_noise=0.0)
PASSTHROUGH = ("tie_word_embeddings", "bos_token_id", "eos_token_id", "pad_token_id")


def full_spec(kw):
    """The config's attributes: the given ones, DEFAULTS for the rest, and layer_types."""
    spec = dict(DEFAULTS)
    spec.update(kw)
    n = spec["num_hidden_layers"]
    spec["layer_types"] = ["shared_compressed_attention" if i in spec["kv_source_layer_ids"]
                           else "sliding_attention" for i in range(n)]
    return spec


def _config_module(torch):
    """`configuration_deepseek_v41`: the reference's config is a strict dataclass of a newer
    transformers; this stand-in carries the same fields (all passed explicitly by the configs
    above, so none of the reference's defaults-derivation is needed) on a plain PretrainedConfig."""
    from transformers import PretrainedConfig

    class DeepseekV41TextConfig(PretrainedConfig):
        model_type = "deepseek_v41_text"
        base_config_key = "text_config"
        attribute_map = {"num_local_experts": "n_routed_experts",
                         "intermediate_size": "moe_intermediate_size"}

        def __init__(self, **kw):
            spec = full_spec(kw)
            passthrough = {k: spec.pop(k) for k in PASSTHROUGH if k in spec}
            # transformers 5.x's PretrainedConfig.__init__ may drop attributes set before it:
            # set them before (for anything it reads) and again after. (build_config also keeps
            # them as class attributes, for copies of the config that drop them.)
            def assign():
                for k, v in spec.items():
                    setattr(self, k, v)
            assign()
            super().__init__(**passthrough)
            assign()
            missing = [k for k in spec if not hasattr(self, k)]
            assert not missing, f"config attributes lost: {missing}"

    class DeepseekV41Config(DeepseekV41TextConfig):
        model_type = "deepseek_v41"

        def get_text_config(self, *args, **kwargs):
            return self

    for k, v in DEFAULTS.items():  # class-level defaults too (see build_config)
        setattr(DeepseekV41TextConfig, k, v)
    mod = types.ModuleType("transformers.models.deepseek_v41.configuration_deepseek_v41")
    mod.DeepseekV41TextConfig = DeepseekV41TextConfig
    mod.DeepseekV41Config = DeepseekV41Config
    return mod


def load_reference(ref_dir):
    import torch
    path = os.path.join(ref_dir, "modeling_deepseek_v41.py")
    if not os.path.exists(path):
        die(f"{path} is missing: copy the reference modeling file there "
            f"(tools/reference_v41/README.md, commit {REF_COMMIT})")
    import transformers
    import transformers.models
    shims, (tutils, real_auto_docstring) = _shim_missing(torch)
    pkg_name = "transformers.models.deepseek_v41"
    pkg = types.ModuleType(pkg_name)
    pkg.__path__ = [ref_dir]
    sys.modules[pkg_name] = pkg
    cfg = _config_module(torch)
    sys.modules[cfg.__name__] = cfg
    spec = importlib.util.spec_from_file_location(pkg_name + ".modeling_deepseek_v41", path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    try:
        spec.loader.exec_module(mod)
    finally:
        tutils.auto_docstring = real_auto_docstring
    return mod, cfg, shims


# --------------------------------------------------------------------------------------------
# Configs, weights, the forward
# --------------------------------------------------------------------------------------------

class EngramTestTokenizer:
    """The tokenizer the Engram hash state is bound to in config E (the reference derives its
    compressed token map from a tokenizer's decoded tokens). Token i decodes to a word in one of
    several spellings that the reference's normalizer collapses (case, accents, whitespace runs,
    leading/trailing whitespace), plus a lone space, whitespace-only tokens and partial UTF-8
    byte tokens (keyed by their raw form)."""

    WORDS = ["the", "cat", "sat", "on", "mat", "naïve", "café", "über", "x", "déjà", "a", "of"]
    FORMS = [lambda w: w, lambda w: " " + w, lambda w: w.upper(), lambda w: w.capitalize(),
             lambda w: w + "\n", lambda w: "\t " + w, lambda w: "  " + w.upper() + " ",
             lambda w: w + w]

    def __init__(self, size):
        texts = []
        for i in range(size):
            if i % 29 == 0:
                texts.append(" ")
            elif i % 31 == 0:
                texts.append("\n\n")
            elif i % 37 == 0:
                texts.append("\ufffd")  # a partial byte token
            else:
                w = self.WORDS[i % len(self.WORDS)]
                texts.append(self.FORMS[(i // len(self.WORDS)) % len(self.FORMS)](w))
        self.texts = texts
        outer = self

        class Backend:
            def decode(self, ids, skip_special_tokens=False):
                return outer.texts[ids[0]]

            def id_to_token(self, i):
                return f"<0x{i:02X}>"
        self.backend_tokenizer = Backend()

    def __len__(self):
        return len(self.texts)


def engram_spec(mod, spec):
    """Fills in engram_num_embeddings (each layer's table holds exactly its primes' buckets) and
    engram_compressed_vocab_size (the test tokenizer's), as the reference derives them."""
    if not spec.get("engram_layer_ids"):
        return spec
    spec = dict(spec)
    probe = types.SimpleNamespace(**dict(full_spec(spec), engram_num_embeddings=[]))
    layout = mod.EngramLayout.from_config(probe)
    spec["engram_num_embeddings"] = [sum(p for per in layer for p in per)
                                     for layer in layout.primes]
    _, n = mod.build_compressed_token_map(EngramTestTokenizer(spec["vocab_size"]))
    spec["engram_compressed_vocab_size"] = n
    return spec


def build_config(cfg_mod, spec):
    partial = spec["qk_rope_head_dim"] / spec["head_dim"]
    keys = [k for k in spec if k not in ("seq_len", "yarn_factor", "yarn_orig")]
    kw = {k: spec[k] for k in keys}
    kw.update(
        max_position_embeddings=int(spec["yarn_factor"] * spec["yarn_orig"]),
        rope_parameters={
            "main": {"rope_type": "default", "rope_theta": spec["rope_theta"],
                     "partial_rotary_factor": partial},
            "compress": {"rope_type": "yarn", "rope_theta": spec["compress_rope_theta"],
                         "factor": spec["yarn_factor"],
                         "original_max_position_embeddings": spec["yarn_orig"],
                         "beta_fast": 32.0, "beta_slow": 1.0, "attention_factor": 1.0,
                         "partial_rotary_factor": partial}},
        rms_norm_eps=1e-20, hc_eps=1e-6, tie_word_embeddings=False, bos_token_id=0,
        eos_token_id=1)
    # Every value also as a class attribute of a subclass made for this config: transformers 5.17
    # lost instance attributes it does not know (attention_dropout) when the model took the config.
    attrs = {k: v for k, v in full_spec(kw).items() if k not in PASSTHROUGH}
    cls = type("DeepseekV41Config", (cfg_mod.DeepseekV41Config,), attrs)
    cfg = cls(**kw)
    cfg._attn_implementation = "eager"
    return cfg


def randomize(model, gen, torch):
    with torch.no_grad():
        for name, p in model.named_parameters():
            leaf = name.split(".")[-1]
            n = lambda *shape: torch.randn(*shape, generator=gen)  # noqa: E731
            if ".engram.embed." in name and leaf == "scale":
                p.fill_(1.0)  # the fp8 rows' scales: unused by a float table (the reference's init)
            elif leaf in ("q_weight", "k_weight"):
                p.copy_(1.0 + 0.3 * n(p.shape))
            elif p.dim() == 1 and "norm" in name:
                p.copy_(1.0 + 0.2 * n(p.shape))
            elif leaf == "attn_sink":
                p.copy_(n(p.shape))
            elif leaf.endswith("_fn"):
                p.copy_(0.2 * n(p.shape))
            elif leaf.endswith("_base"):
                p.copy_(0.5 * n(p.shape))
            elif leaf.endswith("_scale"):
                p.copy_(1.0 + 0.3 * n(p.shape))
            elif leaf in ("bias", "bias_vl"):
                p.copy_(0.3 * n(p.shape))
            elif name.endswith("embed.weight"):
                p.copy_(n(p.shape))
            elif p.dim() == 2:
                p.copy_(n(p.shape) / p.shape[1] ** 0.5)
            else:
                raise RuntimeError(f"parameter {name} {tuple(p.shape)} not randomized")


def official_name(name):
    if name == "lm_head.weight":
        return "head.weight"
    return name[len("model."):] if name.startswith("model.") else name


def install_oracle_fix(mod):
    """Each KV source starts its group afresh in `shared` (the cache path's semantics)."""
    attn_cls = mod.DeepseekV41Attention
    original = attn_cls.forward

    def forward(self, hidden_states, position_embeddings, attention_mask, past_key_values,
                shared, **kwargs):
        if self.is_kv_source and past_key_values is None:
            for key in ("compress_kv", "index_k", "topk_bias"):
                shared.pop(key, None)
        return original(self, hidden_states, position_embeddings, attention_mask,
                        past_key_values, shared, **kwargs)
    attn_cls.forward = forward
    return lambda: setattr(attn_cls, "forward", original)


def forward_logits(model, ids, window, torch):
    T = ids.shape[1]
    i = torch.arange(T).view(-1, 1)
    j = torch.arange(T).view(1, -1)
    allowed = (j <= i) & (j > i - window)
    mask = torch.zeros(1, 1, T, T).masked_fill(~allowed, float("-inf"))
    pos = torch.arange(T).unsqueeze(0)
    with torch.no_grad():
        out = model(input_ids=ids, position_ids=pos, attention_mask={"sliding_attention": mask},
                    use_cache=False)
    return out.logits[0].float()


def make_model(mod, cfg_mod, spec, seed, torch):
    torch.manual_seed(seed)
    cfg = build_config(cfg_mod, spec)
    model = mod.DeepseekV41ForCausalLM(cfg).float().eval()
    gen = torch.Generator().manual_seed(seed)
    randomize(model, gen, torch)
    if spec.get("engram_layer_ids"):
        model.model.bind_tokenizer(EngramTestTokenizer(spec["vocab_size"]))
    ids = torch.randint(0, spec["vocab_size"], (1, spec["seq_len"]), generator=gen)
    return cfg, model, ids


def check_structure(model, spec):
    """Assertions that the reference built the schedule we asked for."""
    layers = model.model.layers
    assert len(layers) == spec["num_hidden_layers"], len(layers)
    for l, layer in enumerate(layers):
        a = layer.attn
        assert a.compress_ratio == spec["compress_ratios"][l], (l, a.compress_ratio)
        assert (a.compressor is not None) == (l in spec["kv_source_layer_ids"]), l
        assert (a.indexer is not None) == (l in spec["index_source_layer_ids"]), l
        assert (layer.engram is not None) == (l in spec.get("engram_layer_ids", [])), l
        assert a.wq_b.weight.shape == (spec["num_attention_heads"] * spec["head_dim"],
                                       spec["q_lora_rank"])
    rot = model.model.rotary_emb
    assert rot.main_inv_freq.numel() == spec["qk_rope_head_dim"] // 2, rot.main_inv_freq.shape
    assert rot.compress_inv_freq.numel() == spec["qk_rope_head_dim"] // 2


def write_model(out_dir, name, cfg, spec, model, ids, logits, meta, torch):
    import numpy as np
    from safetensors.torch import save_file
    d = os.path.join(out_dir, name)
    os.makedirs(d, exist_ok=True)
    tensors = {}
    for k, v in model.state_dict().items():
        if "rotary" in k or k.endswith("inv_freq"):
            continue
        tensors[official_name(k)] = v.detach().contiguous().float().clone()
    assert "embed.weight" in tensors and "head.weight" in tensors and "norm.weight" in tensors
    save_file(tensors, os.path.join(d, "model.safetensors"))
    text = {k: v for k, v in spec.items() if k not in ("seq_len", "yarn_factor", "yarn_orig")}
    text.update(model_type="deepseek_v41_text", num_key_value_heads=1, hidden_act="silu",
                scoring_func="sqrtsoftplus", topk_method="noaux_tc", norm_topk_prob=True,
                gate_temp=1.0, rms_norm_eps=1e-20, hc_eps=1e-6,
                engram_layer_ids=spec.get("engram_layer_ids", []),
                num_nextn_predict_layers=0, tie_word_embeddings=False, bos_token_id=0,
                eos_token_id=1, max_position_embeddings=cfg.max_position_embeddings,
                rope_scaling={"rope_type": "yarn", "factor": spec["yarn_factor"],
                              "original_max_position_embeddings": spec["yarn_orig"],
                              "beta_fast": 32.0, "beta_slow": 1.0})
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump({"model_type": "deepseek_v41", "architectures": ["DeepseekV41ForCausalLM"],
                   "text_config": text}, f, indent=2)
    np.save(os.path.join(d, "logits.npy"), logits.numpy().astype(np.float32))
    with open(os.path.join(d, "ids.json"), "w") as f:
        json.dump({"ids": ids[0].tolist()}, f)
    state = model.model.engram_hash_state
    if state is not None:
        # The compressed token map the reference derived from the test tokenizer: what a model
        # dir carries for the engine (docs/architecture.md "DeepSeek-V4.1", Engram).
        with open(os.path.join(d, "engram_token_map.json"), "w") as f:
            json.dump({"compressed_vocab_size": int(spec["engram_compressed_vocab_size"]),
                       "token_map": [int(v) for v in state.token_map.tolist()]}, f)
        # The hash state's derived constants and the hash ids of the sequence, for the unit
        # tests of the hasher.
        fresh = type(state)(cfg, EngramTestTokenizer(spec["vocab_size"]))
        hashes = fresh(ids, torch.arange(ids.shape[1]).unsqueeze(0), None)[0]
        meta = dict(meta, engram={
            "pad_id": int(fresh.pad_id), "primes": fresh.primes.tolist(),
            "offsets": fresh.offsets.tolist(), "multipliers": fresh.multipliers.tolist(),
            "hash_ids": hashes.tolist()})
    with open(os.path.join(d, "reference.json"), "w") as f:
        json.dump(meta, f, indent=2)
    return d


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--reference", default=os.path.join(HERE, "reference_v41"))
    ap.add_argument("--configs", default="A,B")
    ap.add_argument("--selftest", action="store_true", help="load, one tiny forward, stop")
    args = ap.parse_args()
    import torch
    import transformers
    torch.set_default_dtype(torch.float32)
    mod, cfg_mod, shims = load_reference(args.reference)
    print(f"reference loaded (torch {torch.__version__}, transformers {transformers.__version__}); "
          f"shims: {', '.join(shims) or 'none'}", flush=True)

    # Self-check 1: the oracle fix is a no-op with a single KV source.
    cfg, model, ids = make_model(mod, cfg_mod, SINGLE_SOURCE, 5, torch)
    check_structure(model, SINGLE_SOURCE)
    plain = forward_logits(model, ids, SINGLE_SOURCE["sliding_window"], torch)
    undo = install_oracle_fix(mod)
    fixed = forward_logits(model, ids, SINGLE_SOURCE["sliding_window"], torch)
    assert torch.equal(plain, fixed), "the oracle fix changed a single-source model"
    assert torch.isfinite(plain).all()
    print(f"self-check: single-source logits {tuple(plain.shape)} unchanged by the oracle fix",
          flush=True)
    if args.selftest:
        undo()
        return

    os.makedirs(args.out, exist_ok=True)
    for name in [c for c in args.configs.split(",") if c]:
        spec = engram_spec(mod, CONFIGS[name])
        seed = ord(name[0])
        cfg, model, ids = make_model(mod, cfg_mod, spec, seed, torch)
        check_structure(model, spec)
        logits = forward_logits(model, ids, spec["sliding_window"], torch)
        assert logits.shape == (spec["seq_len"], spec["vocab_size"]), logits.shape
        assert torch.isfinite(logits).all(), "non-finite reference logits"
        # Determinism of the reference itself, and that the multi-source fix matters here.
        again = forward_logits(model, ids, spec["sliding_window"], torch)
        assert torch.equal(logits, again), "reference forward is not deterministic"
        undo()
        unfixed = forward_logits(model, ids, spec["sliding_window"], torch)
        install_oracle_fix(mod)
        fix_delta = float((unfixed - logits).abs().max())
        meta = {"reference_commit": REF_COMMIT, "torch": torch.__version__,
                "transformers": transformers.__version__, "shims": shims,
                "oracle_fix": "shared compress_kv/index_k/topk_bias reset at each KV source",
                "max_abs_change_from_fix": fix_delta, "seed": seed}
        d = write_model(args.out, name, cfg, spec, model, ids, logits, meta, torch)
        print(f"{name}: T={spec['seq_len']} vocab={spec['vocab_size']} "
              f"max|logit|={float(logits.abs().max()):.3f} fix changed logits by {fix_delta:.3e} "
              f"-> {d}", flush=True)


if __name__ == "__main__":
    main()
