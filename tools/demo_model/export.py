#!/usr/bin/env python3
"""Exports a trained demo model (train.py's ckpt.pt) as an HF-layout model dir for dsinfer.

  export.py --ckpt build-demo/run/ckpt.pt --tokenizer models/tiny --out models/demo

Writes OUT/config.json (modern + legacy keys, as `dsinfer init-model`), OUT/model.safetensors
with the official tensor names (spec §4.2): BF16 weights, F32 mHC / sink / ape / router bias,
I32 tid2eid (the engine reads I64 or I32), and copies tokenizer.json + tokenizer_config.json from
--tokenizer. With tie_word_embeddings (the demo config) there is no head.weight: the engine's
head reads embed.weight. --xz also writes OUT/model.safetensors.xz (the compressed-at-rest form).
No dependency beyond torch (the safetensors file is written by hand).
"""
import argparse
import array
import json
import lzma
import os
import shutil
import struct
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import dsv4  # noqa: E402

ST_DTYPE = {"BF16": torch.bfloat16, "F32": torch.float32, "I32": torch.int32}


def tensor_bytes(t, dtype):
    """Little-endian bytes of t as dtype (numpy if present, else the array module)."""
    t = t.detach().to("cpu").contiguous()
    if dtype == "BF16":
        t, code = t.to(torch.bfloat16).view(torch.int16), "h"
    elif dtype == "F32":
        t, code = t.to(torch.float32), "f"
    elif dtype == "I32":
        t, code = t.to(torch.int32), "i"
    else:
        raise ValueError(dtype)
    try:
        return t.numpy().tobytes()
    except (ImportError, RuntimeError):
        a = array.array(code, t.flatten().tolist())
        if sys.byteorder != "little":
            a.byteswap()
        return a.tobytes()


def write_safetensors(path, tensors):
    """tensors: {name: (dtype string, shape, bytes)} -> a safetensors file."""
    header, off = {}, 0
    for name, (dt, shape, data) in tensors.items():
        header[name] = {"dtype": dt, "shape": list(shape), "data_offsets": [off, off + len(data)]}
        off += len(data)
    header["__metadata__"] = {"format": "pt"}
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for _, (_, _, data) in tensors.items():
            f.write(data)


def export_model(model, out, tokenizer=None, xz=False):
    os.makedirs(out, exist_ok=True)
    cfg = model.cfg
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(cfg.hf_config(), f, indent=2)
        f.write("\n")
    tensors = {}
    for name, t in dsv4.official_state(model).items():
        dt = dsv4.official_dtype(name)
        tensors[name] = (dt, tuple(t.shape), tensor_bytes(t, dt))
    st = os.path.join(out, "model.safetensors")
    write_safetensors(st, tensors)
    if tokenizer:
        for n in ("tokenizer.json", "tokenizer_config.json"):
            src = os.path.join(tokenizer, n) if os.path.isdir(tokenizer) else \
                os.path.join(os.path.dirname(tokenizer), n)
            if os.path.exists(src):
                shutil.copy(src, os.path.join(out, n))
    if xz:
        with open(st, "rb") as f, lzma.open(st + ".xz", "wb", preset=9 | lzma.PRESET_EXTREME) as g:
            shutil.copyfileobj(f, g, 1 << 24)
    return st


def round_to_bf16_(model):
    """Rounds the parameters the export stores as BF16 in place (so PyTorch and the engine see the
    same weights)."""
    with torch.no_grad():
        for name, t in dsv4.official_state(model).items():
            if dsv4.official_dtype(name) == "BF16":
                t.copy_(t.to(torch.bfloat16).to(t.dtype))


def load_ckpt(path):
    state = dsv4.load_checkpoint(path)
    cfg = dsv4.Config.from_json(state["config"])
    model = dsv4.DeepseekV4(cfg)
    model.load_state_dict(state["model"])
    return model


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ckpt", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--tokenizer", help="dir (or tokenizer.json) whose tokenizer files are copied")
    ap.add_argument("--xz", action="store_true", help="also write model.safetensors.xz")
    args = ap.parse_args()
    model = load_ckpt(args.ckpt)
    st = export_model(model, args.out, args.tokenizer, args.xz)
    sizes = {n: os.path.getsize(os.path.join(args.out, n)) for n in sorted(os.listdir(args.out))}
    print(json.dumps({"out": args.out, "bytes": sizes}))


if __name__ == "__main__":
    main()
