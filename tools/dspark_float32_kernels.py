"""float32 twins of the three kernel_cpu functions of DeepSeek-V4.1's official inference
reference that accept only bf16 (tools/make_golden_dspark.py installs them on the loaded
reference before it runs the oracle in float32)."""


class Float32Kernels:
    """The reference runs in bf16 upstream; its CPU kernels assert bf16 input (act_quant,
    fp4_act_quant) or round to bf16 (sparse_attn's probabilities before PV, and its output). For a
    float32 oracle the loaded `model` module gets these twins: the same math in float32. bf16
    inputs go to the originals unchanged. Calls are counted so the run can prove that no linear
    layer quantized its activations (fp32 weights take F.linear)."""

    def __init__(self, ref, kernel, torch):
        self.ref, self.k, self.torch = ref, kernel, torch
        self.orig = {n: getattr(ref, n) for n in ("act_quant", "fp4_act_quant", "sparse_attn",
                                                   "fp8_gemm", "fp4_gemm")}
        self.calls = {"act_quant_inplace": 0, "act_quant_linear": 0, "fp4_act_quant_inplace": 0,
                      "fp4_act_quant_other": 0, "sparse_attn": 0, "fp8_gemm": 0, "fp4_gemm": 0}

    def install(self):
        self.ref.act_quant = self.act_quant
        self.ref.fp4_act_quant = self.fp4_act_quant
        self.ref.sparse_attn = self.sparse_attn
        self.ref.fp8_gemm = self._counted("fp8_gemm")
        self.ref.fp4_gemm = self._counted("fp4_gemm")

    def _counted(self, name):
        def f(*a, **k):
            self.calls[name] += 1
            return self.orig[name](*a, **k)
        return f

    def act_quant(self, x, block_size=128, scale_fmt=None, scale_dtype=None, inplace=False):
        torch, k = self.torch, self.k
        self.calls["act_quant_inplace" if inplace else "act_quant_linear"] += 1
        if x.dtype == torch.bfloat16:
            return self.orig["act_quant"](x, block_size, scale_fmt,
                                          scale_dtype or torch.float32, inplace)
        assert inplace and x.dtype == torch.float32, (inplace, x.dtype)
        assert x.size(-1) % block_size == 0
        xg = x.float().unflatten(-1, (-1, block_size))
        amax = xg.abs().amax(dim=-1).clamp_min(1e-4)
        if scale_fmt is not None:
            s = k.fast_round_scale(amax, k._FP8_MAX_INV)
        else:
            s = amax * k._FP8_MAX_INV
        q = k._to_e4m3_satfinite(xg / s.unsqueeze(-1))
        x.copy_((q.float() * s.unsqueeze(-1)).flatten(-2))
        return x

    def fp4_act_quant(self, x, block_size=32, inplace=False, scale_dtype=None):
        torch, k = self.torch, self.k
        scale_dtype = scale_dtype or torch.float8_e8m0fnu
        self.calls["fp4_act_quant_inplace" if inplace else "fp4_act_quant_other"] += 1
        if x.dtype == torch.bfloat16:
            return self.orig["fp4_act_quant"](x, block_size, inplace, scale_dtype)
        assert inplace and x.dtype == torch.float32, (inplace, x.dtype)
        assert x.size(-1) % block_size == 0
        xg = x.float().unflatten(-1, (-1, block_size))
        amax = xg.abs().amax(dim=-1)
        if scale_dtype == torch.float8_e4m3fn:
            s = k._to_e4m3_satfinite(amax.clamp_min(6 * (2 ** -9)) / k.FP4_MAX).float()
        else:
            s = k.fast_round_scale(amax.clamp_min(6 * (2 ** -126)), k._FP4_MAX_INV)
        v = (xg / s.unsqueeze(-1)).clamp(-k.FP4_MAX, k.FP4_MAX)
        x.copy_((k._e2m1_round(v) * s.unsqueeze(-1)).flatten(-2))
        return x

    def sparse_attn(self, q, kv, attn_sink, topk_idxs, softmax_scale, round_bf16=None):
        """kernel_cpu.sparse_attn's online softmax over blocks of 64 gathered indices, with the
        unscaled sink in the denominator; round_bf16 (default: q is bf16) keeps its bf16 rounding of
        the probabilities and of the output."""
        torch = self.torch
        self.calls["sparse_attn"] += 1
        if q.dtype == torch.bfloat16 and round_bf16 is None:
            return self.orig["sparse_attn"](q, kv, attn_sink, topk_idxs, softmax_scale)
        b, m, h, d = q.size()
        topk = topk_idxs.size(-1)
        scale = torch.tensor(softmax_scale, dtype=torch.float32)
        qf, kvf = q.float(), kv.float()
        acc_o = torch.zeros(b, m, h, d, dtype=torch.float32)
        sum_exp = torch.zeros(b, m, h, dtype=torch.float32)
        scores_max = torch.full((b, m, h), -1e30, dtype=torch.float32)
        batch = torch.arange(b).view(b, 1, 1)
        block = self.k.SPARSE_ATTN_BLOCK
        for t in range(0, topk, block):
            idxs = topk_idxs[:, :, t:t + block].long()
            valid = idxs != -1
            kv_blk = kvf[batch, idxs.clamp_min(0)] * valid.unsqueeze(-1)
            acc_s = torch.einsum("bmhd,bmkd->bmhk", qf, kv_blk)
            acc_s = torch.where(valid.unsqueeze(2), acc_s, -torch.inf) * scale
            prev = scores_max
            scores_max = torch.maximum(prev, acc_s.amax(dim=-1))
            rescale = torch.exp(prev - scores_max)
            p = torch.exp(acc_s - scores_max.unsqueeze(-1))
            sum_exp = sum_exp * rescale + p.sum(dim=-1)
            if round_bf16:
                p = p.to(torch.bfloat16).float()
            acc_o = acc_o * rescale.unsqueeze(-1) + torch.einsum("bmhk,bmkd->bmhd", p, kv_blk)
        sum_exp = sum_exp + torch.exp(attn_sink.float() - scores_max)
        out = acc_o / sum_exp.unsqueeze(-1)
        return out.to(torch.bfloat16) if round_bf16 else out.to(q.dtype)

    def check(self, gen):
        """The twins against the originals and against a dense float64 attention."""
        torch = self.torch
        out = {}
        # QDQ: float32 values exact in bf16 give the originals' bf16 results bit for bit (the
        # dequantized values are exactly representable in bf16).
        for shape, block in (((3, 5, 64), 32), ((2, 4, 16, 32), 32)):
            x = (torch.randn(*shape, generator=gen) * 3).to(torch.bfloat16)
            a = x.clone()
            self.orig["act_quant"](a, block, "ue8m0", torch.float8_e8m0fnu, True)
            b = x.float().clone()
            self.act_quant(b, block, "ue8m0", torch.float8_e8m0fnu, True)
            assert torch.equal(a.float(), b), "act_quant twin differs from kernel_cpu"
            for sd, blk in ((torch.float8_e8m0fnu, 32), (torch.float8_e4m3fn, 16)):
                a = x.clone()
                self.orig["fp4_act_quant"](a, blk, True, sd)
                b = x.float().clone()
                self.fp4_act_quant(b, blk, True, sd)
                assert torch.equal(a.float(), b), f"fp4_act_quant twin differs ({sd})"
        out["qdq_twins_bit_equal_on_bf16_values"] = True
        # sparse_attn: with bf16 rounding on, bit-equal to the original; without, close to a
        # dense float64 softmax-with-sink.
        b_, m, h, d, n, topk = 1, 5, 4, 64, 13, 11
        q = torch.randn(b_, m, h, d, generator=gen).to(torch.bfloat16)
        kv = torch.randn(b_, n, d, generator=gen).to(torch.bfloat16)
        sink = torch.randn(h, generator=gen)
        idx = torch.stack([torch.randperm(n, generator=gen)[:topk] for _ in range(m)]).int()
        idx[1, 3] = -1
        idx = idx.unsqueeze(0).contiguous()
        scale = d ** -0.5
        a = self.orig["sparse_attn"](q, kv, sink, idx, scale)
        bq = self.sparse_attn(q.float(), kv.float(), sink, idx, scale, round_bf16=True)
        assert torch.equal(a, bq), "sparse_attn twin (bf16 rounding on) differs from kernel_cpu"
        f = self.sparse_attn(q.float(), kv.float(), sink, idx, scale)
        qd, kvd = q.double(), kv.double()
        dense = torch.zeros(b_, m, h, d, dtype=torch.float64)
        for i in range(m):
            sel = [int(j) for j in idx[0, i] if j >= 0]
            keys = kvd[0, sel]                                   # [k, d]
            s = (qd[0, i] @ keys.T) * scale                      # [h, k]
            mx = torch.maximum(s.amax(-1), sink.double())
            e = torch.exp(s - mx[:, None])
            den = e.sum(-1) + torch.exp(sink.double() - mx)
            dense[0, i] = (e @ keys) / den[:, None]
        err = float((f.double() - dense).abs().max())
        assert err < 1e-5, f"float32 sparse_attn twin off the dense reference by {err}"
        out["sparse_attn_twin_bit_equal_with_bf16_rounding"] = True
        out["sparse_attn_fp32_max_abs_err_vs_dense_fp64"] = err
        out["sparse_attn_bf16_vs_fp32_max_abs_diff"] = float((a.float() - f).abs().max())
        return out
