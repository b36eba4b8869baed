#!/usr/bin/env python3
"""Writes <model_dir>/engram_token_map.json, the compressed token map of DeepSeek-V4.1's Engram.

The reference derives the map from the tokenizer when it binds one
(`build_compressed_token_map` in transformers' `modeling_deepseek_v41.py`: each token decoded alone,
normalized, tokens with equal keys sharing one compressed id in first-seen order). dsinfer reads
the map from the model dir (docs/architecture.md "DeepSeek-V4.1", Engram); this script computes it
with the reference function itself, loaded from tools/reference_v41/ the way
tools/make_golden_v41.py loads the oracle (torch, transformers and tokenizers needed), and checks
its size against the config's `engram_compressed_vocab_size`.

Usage:
    python3 tools/make_engram_token_map.py MODEL_DIR [--reference DIR]
"""
import argparse
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model_dir")
    ap.add_argument("--reference", default=os.path.join(HERE, "reference_v41"))
    args = ap.parse_args()
    import make_golden_v41 as golden
    from transformers import AutoTokenizer

    mod, _, _ = golden.load_reference(args.reference)
    with open(os.path.join(args.model_dir, "config.json")) as f:
        config = json.load(f)
    text = config.get("text_config", config)
    tokenizer = AutoTokenizer.from_pretrained(args.model_dir)
    token_map, size = mod.build_compressed_token_map(tokenizer)
    want = text.get("engram_compressed_vocab_size")
    if want is not None and size != want:
        golden.die(f"the tokenizer's compressed vocabulary has {size} ids, the config says {want}")
    vocab = text.get("vocab_size", len(token_map))
    if len(token_map) != vocab:  # the reference's map covers exactly the tokenizer's ids
        golden.die(f"the tokenizer has {len(token_map)} ids, the config's vocab_size is {vocab}")
    out = os.path.join(args.model_dir, "engram_token_map.json")
    with open(out, "w") as f:
        json.dump({"compressed_vocab_size": size, "token_map": token_map}, f)
    print(f"{out}: {vocab} ids -> {size} compressed ids")


if __name__ == "__main__":
    main()
