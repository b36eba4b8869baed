"""A compact PyTorch DeepSeek-V4 for training the demo model (issue 26).

The math mirrors the engine's CPU forward (src/model/deepseek_v4/, the reference the exported model
is checked against by check_engine.py) and the spec (docs: /work/shared/reference/
deepseek-v4-spec.md §2): mHC with Sinkhorn (§2.3), interleaved RoPE on the trailing dims with the
main / compress (YaRN) tables (§2.4), MQA attention with a per-head sink over the 'window ∪
compressed' key set (§2.5), the overlapping CSA compressor and the HCA compressor (§2.6, §2.8), the
lightning indexer with top-k (§2.7), hash-routed and bias-routed sqrt-softplus MoE with a shared
expert and the SwiGLU clamp (§2.10), and the MTP layer (§2.11: row i pairs the main streams of
position i with token t_{i+1}, processed at position i, predicts t_{i+2}).

Everything is computed for whole sequences at once (training is single-shot), with dense masked
attention: query t sees raw keys t-W+1..t, compressed entries w < (t+1)//m (CSA: only the
indexer's top-k of them; HCA: all). Like the engine's CPU path there is no FP8/FP4 simulation: the
shipped weights are BF16 and the engine computes in fp32.

Works with torch 1.13 (CPU, the local check) and torch 2.x + CUDA (autocast bf16). Parameters that
the reference keeps in fp32 math (mHC, router, compressor pooling, norms) run outside autocast.
"""
import contextlib
import dataclasses
import json
import math
from typing import List, Optional

import torch
import torch.nn as nn
import torch.nn.functional as F


@dataclasses.dataclass
class Config:
    vocab_size: int = 129280
    hidden_size: int = 192
    num_layers: int = 6
    num_heads: int = 4
    head_dim: int = 64
    rope_head_dim: int = 16
    q_lora_rank: int = 128
    o_groups: int = 2
    o_lora_rank: int = 64
    n_routed_experts: int = 8
    num_experts_per_tok: int = 2
    moe_intermediate_size: int = 128
    n_shared_experts: int = 1
    num_hash_layers: int = 2
    routed_scaling_factor: float = 1.5
    swiglu_limit: float = 10.0
    sliding_window: int = 128
    compress_ratios: List[int] = dataclasses.field(default_factory=lambda: [0, 0, 4, 128, 4, 128])
    mtp_compress_ratio: int = 0
    num_mtp_layers: int = 1
    index_n_heads: int = 4
    index_head_dim: int = 32
    index_topk: int = 64
    hc_mult: int = 4
    hc_sinkhorn_iters: int = 20
    hc_eps: float = 1e-6
    rms_norm_eps: float = 1e-6
    rope_theta: float = 10000.0
    compress_rope_theta: float = 160000.0
    yarn_factor: float = 16.0
    yarn_original_max_position_embeddings: int = 65536
    yarn_beta_fast: float = 32.0
    yarn_beta_slow: float = 1.0
    max_position_embeddings: int = 65536
    tie_word_embeddings: bool = True
    bos_token_id: int = 0
    eos_token_id: int = 1

    @property
    def csa_rate(self):
        return 4

    def to_json(self):
        return dataclasses.asdict(self)

    @staticmethod
    def from_json(d):
        return Config(**d)

    def hf_config(self):
        """config.json in the HF layout, with the modern and the legacy keys (as the engine's
        DeepseekV4ConfigToJson writes them)."""
        c = self
        ratios = list(c.compress_ratios) + ([c.mtp_compress_ratio] if c.num_mtp_layers else [])
        hca = [r for r in c.compress_ratios if r not in (0, c.csa_rate)]
        yarn = {"type": "yarn", "factor": c.yarn_factor,
                "original_max_position_embeddings": c.yarn_original_max_position_embeddings,
                "beta_fast": c.yarn_beta_fast, "beta_slow": c.yarn_beta_slow}
        partial = c.rope_head_dim / c.head_dim
        compress = {"rope_type": "yarn", "rope_theta": c.compress_rope_theta,
                    "partial_rotary_factor": partial, "factor": c.yarn_factor,
                    "original_max_position_embeddings": c.yarn_original_max_position_embeddings,
                    "beta_fast": c.yarn_beta_fast, "beta_slow": c.yarn_beta_slow,
                    "attention_factor": 1.0}
        return {
            "architectures": ["DeepseekV4ForCausalLM"],
            "model_type": "deepseek_v4",
            "vocab_size": c.vocab_size,
            "hidden_size": c.hidden_size,
            "num_hidden_layers": c.num_layers,
            "num_attention_heads": c.num_heads,
            "num_key_value_heads": 1,
            "head_dim": c.head_dim,
            "qk_rope_head_dim": c.rope_head_dim,
            "q_lora_rank": c.q_lora_rank,
            "o_groups": c.o_groups,
            "o_lora_rank": c.o_lora_rank,
            "n_routed_experts": c.n_routed_experts,
            "n_shared_experts": c.n_shared_experts,
            "num_experts_per_tok": c.num_experts_per_tok,
            "moe_intermediate_size": c.moe_intermediate_size,
            "scoring_func": "sqrtsoftplus",
            "topk_method": "noaux_tc",
            "norm_topk_prob": True,
            "routed_scaling_factor": c.routed_scaling_factor,
            "swiglu_limit": c.swiglu_limit,
            "sliding_window": c.sliding_window,
            "rope_theta": c.rope_theta,
            "compress_rope_theta": c.compress_rope_theta,
            "rope_scaling": yarn,
            "max_position_embeddings": c.max_position_embeddings,
            "index_n_heads": c.index_n_heads,
            "index_head_dim": c.index_head_dim,
            "index_topk": c.index_topk,
            "hc_mult": c.hc_mult,
            "hc_sinkhorn_iters": c.hc_sinkhorn_iters,
            "hc_eps": c.hc_eps,
            "rms_norm_eps": c.rms_norm_eps,
            "num_nextn_predict_layers": c.num_mtp_layers,
            "compress_ratios": ratios,
            "compress_rates": {"compressed_sparse_attention": c.csa_rate,
                               "heavily_compressed_attention": hca[0] if hca else 128},
            "num_hash_layers": c.num_hash_layers,
            "layer_types": ["sliding_attention" if r == 0 else
                            "compressed_sparse_attention" if r == c.csa_rate else
                            "heavily_compressed_attention" for r in c.compress_ratios],
            "mlp_layer_types": ["hash_moe" if l < c.num_hash_layers else "moe"
                                for l in range(c.num_layers)],
            "rope_parameters": {"main": {"rope_type": "default", "rope_theta": c.rope_theta,
                                         "partial_rotary_factor": partial},
                                "compress": compress},
            "bos_token_id": c.bos_token_id,
            "eos_token_id": c.eos_token_id,
            "tie_word_embeddings": c.tie_word_embeddings,
            "hidden_act": "silu",
            "torch_dtype": "bfloat16",
        }


def no_autocast(device_type):
    """fp32 math inside an autocast region (mHC, router, compressor pooling)."""
    if device_type == "cuda":
        active = torch.is_autocast_enabled()
    elif device_type == "cpu":
        active = torch.is_autocast_cpu_enabled()
    else:
        active = False
    return torch.autocast(device_type=device_type, enabled=False) if active else contextlib.nullcontext()


# ---------------------------------------------------------------------------------------------
# RoPE (spec §2.4; engine rope_table.cc / ops.cc Rope): interleaved pairs on the trailing dims.

def inv_freq(base, dim, yarn=None):
    half = dim // 2
    pos_freq = [float(torch.tensor(float(base), dtype=torch.float32).double() **
                      float(torch.tensor(2 * i / dim, dtype=torch.float32)))
                for i in range(half)]
    pos_freq = torch.tensor(pos_freq, dtype=torch.float32)
    if yarn is None:
        return 1.0 / pos_freq
    factor, orig, beta_fast, beta_slow = yarn

    def corr(rot):
        return (dim * math.log(orig / (rot * 2 * math.pi))) / (2 * math.log(base))
    low, high = math.floor(corr(beta_fast)), math.ceil(corr(beta_slow))
    low, high = max(low, 0.0), min(high, float(dim - 1))
    if low == high:
        high += 0.001
    ramp = torch.clamp(torch.tensor([(i - low) / (high - low) for i in range(half)],
                                    dtype=torch.float32), 0, 1)
    ef = 1.0 - ramp  # as the engine: interpolation * (1 - ef) + extrapolation * ef
    extra = 1.0 / pos_freq
    inter = 1.0 / (torch.tensor(float(factor), dtype=torch.float32) * pos_freq)
    return inter * (1.0 - ef) + extra * ef


def rope_cos_sin(freqs, positions):
    """cos/sin [len(positions), half] fp32: angle in fp32, trig in fp64 (as the engine)."""
    ang = positions.to(torch.float32)[:, None] * freqs[None, :].to(positions.device)
    ang = ang.double()
    return torch.cos(ang).float(), torch.sin(ang).float()


def apply_rope(x, cos, sin, rd, inverse=False):
    """x [..., T, (heads,) d]: rotates x[..., d-rd:] pairwise; cos/sin [T, rd/2] broadcast over
    the dims between T and d (pass them already shaped)."""
    nope, r = x[..., :-rd], x[..., -rd:]
    a, b = r[..., 0::2], r[..., 1::2]
    if inverse:
        sin = -sin
    ra = a * cos - b * sin
    rb = a * sin + b * cos
    r = torch.stack([ra, rb], dim=-1).flatten(-2)
    return torch.cat([nope, r.to(x.dtype)], dim=-1)


def rms_norm(x, w, eps):
    xf = x.float()
    y = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)
    return y * w.float() if w is not None else y


# ---------------------------------------------------------------------------------------------
# Modules. Parameter names = official tensor names minus the '.weight' suffix conventions.

class Linear(nn.Module):
    def __init__(self, out_f, in_f, std=0.02):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(out_f, in_f) * std)

    def forward(self, x):
        return F.linear(x, self.weight)


class Norm(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(n))


class HyperConn(nn.Module):
    """hc_{attn,ffn}_{fn,base,scale} (spec §2.3)."""

    def __init__(self, cfg):
        super().__init__()
        hc, D = cfg.hc_mult, cfg.hidden_size
        mix = (2 + hc) * hc
        self.fn = nn.Parameter(torch.randn(mix, hc * D) * 0.01)
        base = torch.zeros(mix)
        base[:hc] = math.log(0.25 / 0.75)          # pre = 1/4 each: u = mean of the streams
        base[2 * hc:] = 3.0 * torch.eye(hc).flatten()  # comb near the identity: a plain residual
        self.base = nn.Parameter(base)
        self.scale = nn.Parameter(torch.ones(3))


class HyperHead(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        hc, D = cfg.hc_mult, cfg.hidden_size
        self.fn = nn.Parameter(torch.randn(hc, hc * D) * 0.01)
        self.base = nn.Parameter(torch.full((hc,), math.log(0.25 / 0.75)))
        self.scale = nn.Parameter(torch.ones(1))


def hc_mix(fn, X, eps):
    B, T, hc, D = X.shape
    flat = X.reshape(B, T, hc * D).float()
    flat = flat * torch.rsqrt(flat.pow(2).mean(-1, keepdim=True) + eps)
    return F.linear(flat, fn.float())


def hc_pre(p, cfg, X):
    hc = cfg.hc_mult
    with no_autocast(X.device.type):
        m = hc_mix(p.fn, X, cfg.rms_norm_eps)
        pre = torch.sigmoid(m[..., :hc] * p.scale[0] + p.base[:hc]) + cfg.hc_eps
        post = 2.0 * torch.sigmoid(m[..., hc:2 * hc] * p.scale[1] + p.base[hc:2 * hc])
        C = (m[..., 2 * hc:] * p.scale[2] + p.base[2 * hc:]).unflatten(-1, (hc, hc))
        eps = cfg.hc_eps
        C = torch.softmax(C, dim=-1) + eps
        C = C / (C.sum(-2, keepdim=True) + eps)
        for _ in range(cfg.hc_sinkhorn_iters - 1):
            C = C / (C.sum(-1, keepdim=True) + eps)
            C = C / (C.sum(-2, keepdim=True) + eps)
        u = (pre.unsqueeze(-1) * X.float()).sum(-2)
    return u, post, C


def hc_post(y, X, post, C):
    with no_autocast(X.device.type):
        # Xnew[k] = post[k] * y + sum_j C[j][k] * X[j]
        return post.unsqueeze(-1) * y.float().unsqueeze(-2) + torch.einsum("btjk,btjd->btkd", C, X.float())


def hc_head(p, cfg, X):
    hc = cfg.hc_mult
    with no_autocast(X.device.type):
        m = hc_mix(p.fn, X, cfg.rms_norm_eps)
        pre = torch.sigmoid(m * p.scale[0] + p.base) + cfg.hc_eps
        return (pre.unsqueeze(-1) * X.float()).sum(-2)


class Compressor(nn.Module):
    """attn.compressor.* / attn.indexer.compressor.* (spec §2.6, §2.8)."""

    def __init__(self, cfg, rate, dim, overlap):
        super().__init__()
        width = 2 * dim if overlap else dim
        self.rate, self.dim, self.overlap = rate, dim, overlap
        self.wkv = Linear(width, cfg.hidden_size)
        self.wgate = Linear(width, cfg.hidden_size)
        self.ape = nn.Parameter(torch.zeros(rate, width))
        self.norm = Norm(dim)

    def forward(self, cfg, x, rope_freqs):
        """x [B, T, D] -> entries [B, T // rate, dim] (RMSNorm, RoPE at position rate*w)."""
        B, T, _ = x.shape
        m, dim = self.rate, self.dim
        nW = T // m
        if nW == 0:
            return x.new_zeros(B, 0, dim).float()
        xs = x[:, :nW * m]
        kv = self.wkv(xs).float()
        g = self.wgate(xs).float()
        with no_autocast(x.device.type):
            ape = self.ape.float().repeat(nW, 1)  # position p: ape[p % m]
            g = g + ape
            kv = kv.view(B, nW, m, -1)
            g = g.view(B, nW, m, -1)
            if self.overlap:
                A, Bv = kv[..., :dim], kv[..., dim:]
                GA, GB = g[..., :dim], g[..., dim:]
                A_prev = torch.cat([torch.zeros_like(A[:, :1]), A[:, :-1]], dim=1)
                GA_prev = torch.cat([torch.full_like(GA[:, :1], float("-inf")), GA[:, :-1]], dim=1)
                vals = torch.cat([A_prev, Bv], dim=2)
                scores = torch.cat([GA_prev, GB], dim=2)
            else:
                vals, scores = kv, g
            w = torch.softmax(scores, dim=2)
            ent = (w * vals).sum(2)  # [B, nW, dim]
            ent = rms_norm(ent, self.norm.weight, cfg.rms_norm_eps)
            pos = torch.arange(nW, device=x.device) * m
            cos, sin = rope_cos_sin(rope_freqs, pos)
            ent = apply_rope(ent, cos, sin, cfg.rope_head_dim)
        return ent


class Indexer(nn.Module):
    """attn.indexer.* (spec §2.7)."""

    def __init__(self, cfg, rate):
        super().__init__()
        self.wq_b = Linear(cfg.index_n_heads * cfg.index_head_dim, cfg.q_lora_rank)
        self.weights_proj = Linear(cfg.index_n_heads, cfg.hidden_size)
        self.compressor = Compressor(cfg, rate, cfg.index_head_dim, True)


class Attention(nn.Module):
    def __init__(self, cfg, rate):
        super().__init__()
        D, H, d = cfg.hidden_size, cfg.num_heads, cfg.head_dim
        self.rate = rate
        self.wq_a = Linear(cfg.q_lora_rank, D)
        self.q_norm = Norm(cfg.q_lora_rank)
        self.wq_b = Linear(H * d, cfg.q_lora_rank)
        self.wkv = Linear(d, D)
        self.kv_norm = Norm(d)
        self.wo_a = Linear(cfg.o_groups * cfg.o_lora_rank, H * d // cfg.o_groups)
        self.wo_b = Linear(D, cfg.o_groups * cfg.o_lora_rank,
                           std=0.02 / math.sqrt(2 * (cfg.num_layers + 1)))
        self.attn_sink = nn.Parameter(torch.zeros(H))
        self.compressor = Compressor(cfg, rate, d, rate == cfg.csa_rate) if rate else None
        self.indexer = Indexer(cfg, rate) if rate == cfg.csa_rate else None

    def forward(self, cfg, x, ctx, aux):
        B, T, D = x.shape
        H, d, rd = cfg.num_heads, cfg.head_dim, cfg.rope_head_dim
        eps = cfg.rms_norm_eps
        freqs = ctx.main if self.rate == 0 else ctx.compress
        cos, sin = rope_cos_sin(freqs, ctx.positions)  # [T, rd/2]
        cq = rms_norm(self.wq_a(x), self.q_norm.weight, eps).to(x.dtype)
        q = self.wq_b(cq).view(B, T, H, d)
        q = rms_norm(q, None, eps)
        q = apply_rope(q, cos[:, None], sin[:, None], rd)  # [B, T, H, d] fp32
        kv = rms_norm(self.wkv(x), self.kv_norm.weight, eps)
        kv = apply_rope(kv, cos, sin, rd)  # [B, T, d] fp32
        dt = torch.bfloat16 if ctx.autocast else torch.float32
        scale = 1.0 / math.sqrt(d)
        qh = q.transpose(1, 2).to(dt)  # [B, H, T, d]
        kvd = kv.to(dt)
        s_win = torch.matmul(qh, kvd.transpose(-1, -2).unsqueeze(1)).float() * scale  # [B,H,T,T]
        t_idx = torch.arange(T, device=x.device)
        s_idx = t_idx
        win_mask = (s_idx[None, :] <= t_idx[:, None]) & (s_idx[None, :] > t_idx[:, None] - cfg.sliding_window)
        s_win = s_win.masked_fill(~win_mask, float("-inf"))
        parts = [s_win]
        ent = None
        if self.compressor is not None:
            ent = self.compressor(cfg, x, ctx.compress)  # [B, nW, d] fp32
            nW = ent.shape[1]
            s_cmp = torch.matmul(qh, ent.to(dt).transpose(-1, -2).unsqueeze(1)).float() * scale
            visible = (torch.arange(nW, device=x.device)[None, :] <
                       ((ctx.positions + 1) // self.rate)[:, None])  # [T, nW]
            sel = visible
            if self.indexer is not None and nW > 0:
                sel = self.index_select(cfg, x, cq, ctx, visible, s_cmp, aux)
            s_cmp = s_cmp.masked_fill(~sel, float("-inf"))
            parts.append(s_cmp)
        sink = self.attn_sink.float().view(1, H, 1, 1).expand(B, H, T, 1)
        logits = torch.cat(parts + [sink], dim=-1)
        p = torch.softmax(logits, dim=-1)
        o = torch.matmul(p[..., :T].to(dt), kvd.unsqueeze(1)).float()
        if ent is not None:
            nW = ent.shape[1]
            o = o + torch.matmul(p[..., T:T + nW].to(dt), ent.to(dt).unsqueeze(1)).float()
        o = o.transpose(1, 2)  # [B, T, H, d]
        o = apply_rope(o, cos[:, None], sin[:, None], rd, inverse=True)
        G, olr = cfg.o_groups, cfg.o_lora_rank
        og = o.reshape(B, T, G, H * d // G).to(dt)
        wa = self.wo_a.weight.view(G, olr, H * d // G).to(dt)
        z = torch.einsum("btgc,grc->btgr", og, wa)
        return self.wo_b(z.reshape(B, T, G * olr))

    def index_select(self, cfg, x, cq, ctx, visible, s_cmp, aux):
        """The indexer's top-k over the visible CSA entries, and its training signal."""
        idx = self.indexer
        B, T, _ = x.shape
        IH, Id, rd = cfg.index_n_heads, cfg.index_head_dim, cfg.rope_head_dim
        # The indexer learns from its own loss only (V3.2): its inputs are detached.
        xd, cqd = (x.detach(), cq.detach()) if ctx.training else (x, cq)
        keys = idx.compressor(cfg, xd, ctx.compress)  # [B, nW, Id]
        nW = keys.shape[1]
        cos, sin = rope_cos_sin(ctx.compress, ctx.positions)
        qi = idx.wq_b(cqd).view(B, T, IH, Id).float()
        qi = apply_rope(qi, cos[:, None], sin[:, None], rd)
        wi = idx.weights_proj(xd).float() / math.sqrt(IH)  # [B, T, IH]
        with no_autocast(x.device.type):
            dots = torch.einsum("bthc,bwc->bthw", qi, keys.float())
            score = (F.relu(dots) / math.sqrt(Id) * wi.unsqueeze(-1)).sum(2)  # [B, T, nW]
        score = score.masked_fill(~visible, float("-inf"))
        k = min(cfg.index_topk, nW)
        if ctx.dense_csa:
            sel = visible.expand(B, T, nW)
        else:
            # Ties (relu makes exact zeros common) go to the lower index, as in the engine.
            top = torch.sort(score, dim=-1, descending=True, stable=True).indices[..., :k]
            sel = torch.zeros(B, T, nW, dtype=torch.bool, device=x.device)
            sel.scatter_(-1, top, True)
            sel = sel & visible
        if ctx.training:
            # KL(p_attn || p_index) over the visible entries, rows with at least 2 visible:
            # p_attn = the main heads' attention over ALL visible entries (no top-k), head mean.
            rows = visible.sum(-1) >= 2  # [T]
            if rows.any():
                with torch.no_grad():
                    tgt = torch.softmax(s_cmp.detach().masked_fill(~visible, float("-inf")), dim=-1)
                    tgt = tgt.mean(1)  # [B, T, nW]
                logp = torch.log_softmax(score, dim=-1)
                kl = tgt * (torch.log(tgt.clamp_min(1e-20)) - logp.masked_fill(~visible, 0.0))
                kl = kl.masked_fill(~visible, 0.0).sum(-1)  # [B, T]
                aux["indexer_kl"].append(kl[:, rows].mean())
        return sel.unsqueeze(1)  # [B, 1, T, nW]


class Expert(nn.Module):
    def __init__(self, cfg, I, down_std):
        super().__init__()
        D = cfg.hidden_size
        self.w1 = Linear(I, D)
        self.w3 = Linear(I, D)
        self.w2 = Linear(D, I, std=down_std)


def swiglu(cfg, g, u):
    lim = cfg.swiglu_limit
    if lim > 0:
        g = torch.clamp(g, max=lim)
        u = torch.clamp(u, -lim, lim)
    return F.silu(g) * u


class MoE(nn.Module):
    def __init__(self, cfg, hash_layer, seed):
        super().__init__()
        D, E, I = cfg.hidden_size, cfg.n_routed_experts, cfg.moe_intermediate_size
        down = 0.02 / math.sqrt(2 * (cfg.num_layers + 1))
        self.gate = Linear(E, D)
        self.hash = hash_layer
        if hash_layer:
            # tid2eid: K distinct experts per token id, a fixed seeded table (not trained).
            g = torch.Generator().manual_seed(seed)
            t = torch.argsort(torch.rand(cfg.vocab_size, E, generator=g), dim=-1)[:, :cfg.num_experts_per_tok]
            self.register_buffer("tid2eid", t.to(torch.int32))
        else:
            # noaux_tc bias: used for selection only, updated by load balance (not by gradients).
            self.register_buffer("bias", torch.zeros(E))
        # Stacked expert weights (exported as experts.{e}.w1/w3/w2).
        self.w1 = nn.Parameter(torch.randn(E, I, D) * 0.02)
        self.w3 = nn.Parameter(torch.randn(E, I, D) * 0.02)
        self.w2 = nn.Parameter(torch.randn(E, D, I) * down)
        self.shared_experts = Expert(cfg, I, down) if cfg.n_shared_experts else None

    def forward(self, cfg, x, ids, aux):
        B, T, D = x.shape
        E, K = cfg.n_routed_experts, cfg.num_experts_per_tok
        with no_autocast(x.device.type):
            logits = F.linear(x.float(), self.gate.weight.float())
            scores = torch.sqrt(F.softplus(logits))
            if self.hash:
                sel = self.tid2eid[ids].long()
            else:
                sel = torch.sort(scores + self.bias, dim=-1, descending=True,
                                 stable=True).indices[..., :K]  # ties: lower index first
                if self.training:
                    aux["load"].append((self, torch.bincount(sel.flatten(), minlength=E).float()))
            w = scores.gather(-1, sel)
            w = w / (w.sum(-1, keepdim=True) + 1e-20) * cfg.routed_scaling_factor
            route = torch.zeros(B, T, E, device=x.device, dtype=torch.float32).scatter(-1, sel, w)
        # Every expert over every token (tiny experts: dense is faster than gathering), weighted
        # by the routing weight (0 off the selection: no gradient there).
        dt = x.dtype
        g = torch.einsum("btd,eid->btei", x, self.w1.to(dt))
        u = torch.einsum("btd,eid->btei", x, self.w3.to(dt))
        h = swiglu(cfg, g.float(), u.float()) * route.unsqueeze(-1)
        y = torch.einsum("btei,edi->btd", h.to(dt), self.w2.to(dt)).float()
        if self.shared_experts is not None:
            s = self.shared_experts
            hs = swiglu(cfg, s.w1(x).float(), s.w3(x).float())
            y = y + s.w2(hs.to(x.dtype)).float()
        return y


class Block(nn.Module):
    def __init__(self, cfg, rate, hash_layer, seed):
        super().__init__()
        self.attn_norm = Norm(cfg.hidden_size)
        self.ffn_norm = Norm(cfg.hidden_size)
        self.hc_attn = HyperConn(cfg)
        self.hc_ffn = HyperConn(cfg)
        self.attn = Attention(cfg, rate)
        self.ffn = MoE(cfg, hash_layer, seed)

    def forward(self, cfg, X, ids, ctx, aux):
        dt = torch.bfloat16 if ctx.autocast else torch.float32
        u, post, C = hc_pre(self.hc_attn, cfg, X)
        a = self.attn(cfg, rms_norm(u, self.attn_norm.weight, cfg.rms_norm_eps).to(dt), ctx, aux)
        X = hc_post(a, X, post, C)
        u, post, C = hc_pre(self.hc_ffn, cfg, X)
        f = self.ffn(cfg, rms_norm(u, self.ffn_norm.weight, cfg.rms_norm_eps).to(dt), ids, aux)
        return hc_post(f, X, post, C)


class Mtp(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        D = cfg.hidden_size
        self.e_proj = Linear(D, D)
        self.h_proj = Linear(D, D)
        self.enorm = Norm(D)
        self.hnorm = Norm(D)
        self.norm = Norm(D)
        self.hc_head = HyperHead(cfg)
        self.block = Block(cfg, cfg.mtp_compress_ratio, False, 0)


class Ctx:
    def __init__(self, cfg, T, device, training, autocast, dense_csa=False):
        self.positions = torch.arange(T, device=device)
        self.main = inv_freq(cfg.rope_theta, cfg.rope_head_dim).to(device)
        self.compress = inv_freq(cfg.compress_rope_theta, cfg.rope_head_dim,
                                 (cfg.yarn_factor, cfg.yarn_original_max_position_embeddings,
                                  cfg.yarn_beta_fast, cfg.yarn_beta_slow)).to(device)
        self.training = training
        self.autocast = autocast
        self.dense_csa = dense_csa


class DeepseekV4(nn.Module):
    def __init__(self, cfg: Config, seed=0):
        super().__init__()
        self.cfg = cfg
        V, D = cfg.vocab_size, cfg.hidden_size
        self.embed = nn.Embedding(V, D)
        nn.init.normal_(self.embed.weight, std=0.02)
        self.head = None if cfg.tie_word_embeddings else Linear(V, D)
        self.norm = Norm(D)
        self.hc_head = HyperHead(cfg)
        self.layers = nn.ModuleList([
            Block(cfg, cfg.compress_ratios[l], l < cfg.num_hash_layers, seed * 1000 + l)
            for l in range(cfg.num_layers)])
        self.mtp = nn.ModuleList([Mtp(cfg) for _ in range(cfg.num_mtp_layers)])

    def head_weight(self):
        return self.embed.weight if self.head is None else self.head.weight

    def trunk(self, ids, ctx, aux):
        """ids [B, T] -> the residual streams after the last layer [B, T, hc, D] (fp32)."""
        cfg = self.cfg
        h = self.embed(ids).float()
        X = h.unsqueeze(2).expand(-1, -1, cfg.hc_mult, -1).contiguous()
        for blk in self.layers:
            X = blk(cfg, X, ids, ctx, aux)
        return X

    def final(self, hc, norm_w, X):
        z = hc_head(hc, self.cfg, X)
        return rms_norm(z, norm_w, self.cfg.rms_norm_eps)

    def mtp_streams(self, X, next_ids, ctx, aux, k=0):
        """MTP rows: row i pairs X[:, i] (main streams at position i) with next_ids[:, i]
        (= t_{i+1}), at position i. Returns the MTP output streams [B, T, hc, D]."""
        cfg, m = self.cfg, self.mtp[k]
        dt = torch.bfloat16 if ctx.autocast else torch.float32
        e = rms_norm(self.embed(next_ids), m.enorm.weight, cfg.rms_norm_eps).to(dt)
        hn = rms_norm(X, m.hnorm.weight, cfg.rms_norm_eps).to(dt)
        Y = m.e_proj(e).float().unsqueeze(2) + m.h_proj(hn).float()
        return m.block(cfg, Y, next_ids, ctx, aux)

    def logits(self, z):
        return F.linear(z, self.head_weight()).float()


def load_checkpoint(path):
    """torch.load of our own checkpoint (config dict, RNG state): weights_only=False where torch
    2.6+ would default to True; torch < 1.13 has no such argument."""
    try:
        return torch.load(path, map_location="cpu", weights_only=False)
    except TypeError:
        return torch.load(path, map_location="cpu")


def new_aux():
    return {"indexer_kl": [], "load": []}


def chunked_ce(z, W, targets, chunk=4096):
    """Mean cross entropy of (z @ W^T) vs targets without holding all logits (recomputed in the
    backward pass via checkpointing). z [N, D], targets [N] (-1 = ignore)."""
    import torch.utils.checkpoint as cp
    total = z.new_zeros((), dtype=torch.float32)
    count = (targets >= 0).sum().clamp_min(1)

    def piece(zc, tc, W):
        lg = F.linear(zc, W).float()
        return F.cross_entropy(lg, tc, ignore_index=-1, reduction="sum")
    for i in range(0, z.shape[0], chunk):
        zc, tc = z[i:i + chunk], targets[i:i + chunk]
        if torch.is_grad_enabled():
            total = total + cp.checkpoint(piece, zc, tc, W, use_reentrant=False)
        else:
            total = total + piece(zc, tc, W)
    return total / count


# ---------------------------------------------------------------------------------------------
# Official tensor names (spec §4.2) <-> this module's parameters.

def official_state(model: DeepseekV4):
    """{official name: tensor (fp32 or int)} for export (dtypes chosen by the exporter)."""
    cfg = model.cfg
    out = {"embed.weight": model.embed.weight}
    if model.head is not None:
        out["head.weight"] = model.head.weight
    out["norm.weight"] = model.norm.weight
    out["hc_head_fn"], out["hc_head_base"], out["hc_head_scale"] = (
        model.hc_head.fn, model.hc_head.base, model.hc_head.scale)

    def block(p, b: Block):
        out[p + "attn_norm.weight"] = b.attn_norm.weight
        out[p + "ffn_norm.weight"] = b.ffn_norm.weight
        for name, hc in (("hc_attn", b.hc_attn), ("hc_ffn", b.hc_ffn)):
            out[p + name + "_fn"], out[p + name + "_base"], out[p + name + "_scale"] = hc.fn, hc.base, hc.scale
        a = b.attn
        for n in ("wq_a", "wq_b", "wkv", "wo_a", "wo_b"):
            out[p + "attn." + n + ".weight"] = getattr(a, n).weight
        out[p + "attn.q_norm.weight"] = a.q_norm.weight
        out[p + "attn.kv_norm.weight"] = a.kv_norm.weight
        out[p + "attn.attn_sink"] = a.attn_sink

        def comp(cp, c):
            out[cp + "wkv.weight"] = c.wkv.weight
            out[cp + "wgate.weight"] = c.wgate.weight
            out[cp + "ape"] = c.ape
            out[cp + "norm.weight"] = c.norm.weight
        if a.compressor is not None:
            comp(p + "attn.compressor.", a.compressor)
        if a.indexer is not None:
            out[p + "attn.indexer.wq_b.weight"] = a.indexer.wq_b.weight
            out[p + "attn.indexer.weights_proj.weight"] = a.indexer.weights_proj.weight
            comp(p + "attn.indexer.compressor.", a.indexer.compressor)
        f = b.ffn
        out[p + "ffn.gate.weight"] = f.gate.weight
        if f.hash:
            out[p + "ffn.gate.tid2eid"] = f.tid2eid
        else:
            out[p + "ffn.gate.bias"] = f.bias
        for e in range(cfg.n_routed_experts):
            out[p + "ffn.experts.%d.w1.weight" % e] = f.w1[e]
            out[p + "ffn.experts.%d.w3.weight" % e] = f.w3[e]
            out[p + "ffn.experts.%d.w2.weight" % e] = f.w2[e]
        if f.shared_experts is not None:
            for n in ("w1", "w2", "w3"):
                out[p + "ffn.shared_experts.%s.weight" % n] = getattr(f.shared_experts, n).weight

    for l, b in enumerate(model.layers):
        block("layers.%d." % l, b)
    for k, m in enumerate(model.mtp):
        p = "mtp.%d." % k
        out[p + "e_proj.weight"] = m.e_proj.weight
        out[p + "h_proj.weight"] = m.h_proj.weight
        out[p + "enorm.weight"] = m.enorm.weight
        out[p + "hnorm.weight"] = m.hnorm.weight
        out[p + "norm.weight"] = m.norm.weight
        out[p + "hc_head_fn"], out[p + "hc_head_base"], out[p + "hc_head_scale"] = (
            m.hc_head.fn, m.hc_head.base, m.hc_head.scale)
        block(p, m.block)
    return out


# fp32 in the official checkpoint (spec §4.3); everything else floating is BF16.
def official_dtype(name):
    if name.endswith(("_fn", "_base", "_scale", "attn_sink", "ape", "gate.bias")):
        return "F32"
    if name.endswith("tid2eid"):
        return "I32"
    return "BF16"
