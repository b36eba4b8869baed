#!/usr/bin/env python3
"""Structured output end to end: `dsinfer generate` on the random-weight tiny model with the V4
tokenizer at temperature 1, one request per constraint (64 JSON schemas in schemas.json with 3
completions each, regexes,
choices, GBNF grammars). Every output that stops must satisfy its constraint, checked by
independent validators (python3-jsonschema with its format checker, Python's re, hand-written
grammar checkers), and at least 90% of the outputs must stop (the constraints are bounded, so a
correct mask ends them). Bad constraints are per-request errors while the others run. With
overlap scheduling the outputs are the same; so they are with a mask deadline of 1 us, which makes
most draws' masks late (they sit out a step and draw the same token the next).

usage: structured_e2e_test.py DSINFER_BIN TOKENIZER_DIR SCRATCH_DIR [DEVICE]
DEVICE (default cpu): cuda runs every generate on the GPU engine (masks applied by the device
sampler; overlap is its default there), with the same checks.
"""
import json
import os
import re
import shutil
import subprocess
import sys

import jsonschema

HERE = os.path.dirname(os.path.abspath(__file__))

REGEXES = [
    r"[a-z]{3,8}@[a-z]{2,5}\.(com|org)",
    r"(\+|-)?[0-9]{1,4}(\.[0-9]{1,2})?",
    r"[A-Z][a-z]{0,6}( [A-Z][a-z]{0,6}){0,2}",
    r"(ab|cd|ef){1,4}x?",
    r"[0-9a-f]{8}",
    r"\d{3}-\d{4}",
    r"(yes|no|maybe)!{0,3}",
    r"[^\n\"]{1,10}",
    r"\D{2,4}\S{1,3}\W?",
    r"[^\s\d]{1,5}",
]
CHOICES = [["yes", "no"], ["red", "green", "blue", "light blue"], ["日本", "中国", "한국"], ["a", "ab", "abc"]]


def arith_ok(s):
    """expr ::= term (("+"|"-") term)*; term ::= [0-9]{1,3} | "(" expr ")"."""
    pos = 0

    def term():
        nonlocal pos
        if pos < len(s) and s[pos] == "(":
            pos += 1
            if not expr() or pos >= len(s) or s[pos] != ")":
                return False
            pos += 1
            return True
        start = pos
        while pos < len(s) and s[pos].isdigit() and pos - start < 3:
            pos += 1
        return pos > start

    def expr():
        nonlocal pos
        if not term():
            return False
        while pos < len(s) and s[pos] in "+-":
            pos += 1
            if not term():
                return False
        return True

    return expr() and pos == len(s)


GRAMMARS = [
    ('root ::= expr\nexpr ::= term (("+" | "-") term)*\nterm ::= [0-9]{1,3} | "(" expr ")"\n', arith_ok),
    ('root ::= "SELECT " col ("," col){0,2} " FROM " [a-z]{1,8} ";"\ncol ::= [a-z]{1,6}\n',
     lambda s: re.fullmatch(r"SELECT [a-z]{1,6}(,[a-z]{1,6}){0,2} FROM [a-z]{1,8};", s) is not None),
    ('root ::= item{1,3}\nitem ::= "- " [a-zA-Z ]{1,12} "\\n"\n',
     lambda s: re.fullmatch(r"(- [a-zA-Z ]{1,12}\n){1,3}", s) is not None),
    ('# a key=value list\nroot ::= pair (";" pair)?\npair ::= key "=" value\nkey ::= [a-z]+ \nvalue ::= [0-9]{1,4} | "true" | "false"\n',
     None),  # unbounded key: checked by regex below, may not stop
]
GRAMMAR_REGEX_4 = r"[a-z]+=([0-9]{1,4}|true|false)(;[a-z]+=([0-9]{1,4}|true|false))?"

BAD = [
    {"structured_outputs": {"json": {"type": "string", "not": {"const": "a"}}}},
    {"structured_outputs": {"regex": "(a)\\1"}},
    {"structured_outputs": {"grammar": "root ::= undefined_rule"}},
    {"response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": {"$ref": "#/nope"}}}},
]


def read_results(path):
    results = {}
    with open(path) as f:
        for line in f:
            d = json.loads(line)
            results[d["id"]] = d
    return results


def main():
    dsinfer, tok_dir, scratch = sys.argv[1:4]
    device = sys.argv[4] if len(sys.argv) > 4 else "cpu"
    dev = ["--device", device]
    os.makedirs(scratch, exist_ok=True)
    model = os.path.join(scratch, "tiny")
    if not os.path.exists(os.path.join(model, "model.safetensors")):
        subprocess.run([dsinfer, "init-model", "--preset", "tiny", "--out", model, "--seed", "0", "--weights", "bf16"],
                       check=True, stdout=subprocess.DEVNULL)
    for f in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(os.path.join(tok_dir, f), os.path.join(model, f))
    with open(os.path.join(HERE, "schemas.json")) as f:
        schemas = json.load(f)
    requests, checks = [], {}
    base = {"prompt": "Answer:", "temperature": 1.0, "max_tokens": 256}
    for i, schema in enumerate(schemas):
        rid = f"schema{i}"
        requests.append(dict(base, id=rid, seed=i, n=3,
                             response_format={"type": "json_schema", "json_schema": {"name": rid, "schema": schema}}))
        checks[rid] = ("schema", schema)
    for i, rx in enumerate(REGEXES):
        rid = f"regex{i}"
        requests.append(dict(base, id=rid, seed=100 + i, structured_outputs={"regex": rx}))
        checks[rid] = ("regex", rx)
    for i, ch in enumerate(CHOICES):
        rid = f"choice{i}"
        requests.append(dict(base, id=rid, seed=200 + i, n=2, structured_outputs={"choice": ch}))
        checks[rid] = ("choice", ch)
    for i, (g, check) in enumerate(GRAMMARS):
        rid = f"grammar{i}"
        requests.append(dict(base, id=rid, seed=300 + i, structured_outputs={"grammar": g}))
        checks[rid] = ("grammar", check or (lambda s: re.fullmatch(GRAMMAR_REGEX_4, s) is not None))
    requests.append(dict(base, id="json_object", seed=400, max_tokens=64, response_format={"type": "json_object"}))
    checks["json_object"] = ("json_object", None)
    for i, bad in enumerate(BAD):
        requests.append(dict(base, id=f"bad{i}", **bad))
    # Thinking chat: the constraint starts after </think> (forced first by a logit bias).
    chat = {k: v for k, v in base.items() if k != "prompt"}
    requests.append(dict(chat, id="thinking", seed=7, messages=[{"role": "user", "content": "Yes or no?"}],
                         thinking=True, logit_bias={"128822": 100}, structured_outputs={"choice": ["yes", "no"]}))
    inp = os.path.join(scratch, "in.jsonl")
    out = os.path.join(scratch, "out.jsonl")
    with open(inp, "w") as f:
        for r in requests:
            f.write(json.dumps(r) + "\n")
    proc = subprocess.run([dsinfer, "generate", "--model", model, "--input", inp, "--output", out, "--quiet",
                           *dev, "--threads", "2"], capture_output=True, text=True, timeout=900)
    if proc.returncode not in (0, 1):
        print(proc.stdout, proc.stderr)
        return 1
    results = read_results(out)
    # Determinism: a seeded constrained request alone gives the tokens it got in the batch.
    alone = os.path.join(scratch, "alone.jsonl")
    with open(alone, "w") as f:
        f.write(json.dumps(requests[5]) + "\n")
    subprocess.run([dsinfer, "generate", "--model", model, "--input", alone, "--output", alone + ".out", "--quiet",
                    *dev, "--threads", "2"], check=True, capture_output=True, timeout=300)
    failures, outputs, stopped = [], 0, 0
    # Overlap scheduling (the GPU's default; --overlap on the CPU) computes each step's masks after
    # the previous step's tokens arrive, while the next forward runs: the same tokens.
    over = os.path.join(scratch, "overlap.jsonl")
    proc = subprocess.run([dsinfer, "generate", "--model", model, "--input", inp, "--output", over, "--quiet",
                           *dev, "--threads", "2", "--overlap"], capture_output=True, text=True, timeout=900)
    if proc.returncode not in (0, 1):
        print(proc.stdout, proc.stderr)
        return 1
    overlapped = read_results(over)
    for rid, d in results.items():
        o = overlapped.get(rid, {})
        if [c["ids"] for c in d.get("choices", [])] != [c["ids"] for c in o.get("choices", [])] or \
                ("error" in d) != ("error" in o):
            failures.append(f"{rid}: different outputs with --overlap")
    # A deadline no mask meets (1 us after the logits; with overlap on the CPU a step's masks start
    # after its forward): draws sit out steps, and every output is still the same.
    late = os.path.join(scratch, "late.jsonl")
    summary = os.path.join(scratch, "late_summary.json")
    proc = subprocess.run([dsinfer, "generate", "--model", model, "--input", inp, "--output", late, "--quiet",
                           *dev, "--threads", "2", "--overlap", "--structured-mask-deadline-us", "1",
                           "--summary-json", summary], capture_output=True, text=True, timeout=900)
    if proc.returncode not in (0, 1):
        print(proc.stdout, proc.stderr)
        return 1
    sat_out = read_results(late)
    def outputs_of(d):
        return [(c["ids"], c["text"], c["finish_reason"]) for c in d.get("choices", [])]
    for rid, d in results.items():
        o = sat_out.get(rid, {})
        if outputs_of(d) != outputs_of(o) or ("error" in d) != ("error" in o):
            failures.append(f"{rid}: different outputs when late masks sit out")
    with open(summary) as f:
        if json.load(f)["structured_mask_late"] < 1:
            failures.append("no draw sat out a step with a 1 us mask deadline")
    solo = read_results(alone + ".out")[requests[5]["id"]]
    if [c["ids"] for c in solo["choices"]] != [c["ids"] for c in results[requests[5]["id"]]["choices"]]:
        failures.append("a seeded constrained request gave different tokens alone and in the batch")
    t = results.get("thinking", {}).get("choices", [{}])[0]
    if t.get("ids", [None])[0] != 128822 or t.get("finish_reason") != "stop" or \
            t.get("text", "").replace("</think>", "") not in ("yes", "no"):
        failures.append(f"thinking: expected </think> then a constrained choice, got {t}")
    for i in range(len(BAD)):
        d = results.get(f"bad{i}", {})
        if "error" not in d or d["error"]["code"] not in ("INVALID_ARGUMENT", "UNIMPLEMENTED"):
            failures.append(f"bad{i}: expected a per-request error, got {d}")
    for rid, (kind, spec) in checks.items():
        d = results.get(rid)
        if d is None or "error" in d:
            failures.append(f"{rid}: no result: {d}")
            continue
        for c in d["choices"]:
            outputs += 1
            text = c["text"]
            if c["finish_reason"] != "stop":
                continue
            stopped += 1
            ok, why = True, ""
            try:
                if kind == "schema":
                    cls = jsonschema.validators.validator_for(spec, default=jsonschema.Draft202012Validator)
                    errors = list(cls(spec, format_checker=cls.FORMAT_CHECKER).iter_errors(json.loads(text)))
                    ok, why = not errors, "; ".join(e.message for e in errors[:2])
                elif kind == "json_object":
                    ok = isinstance(json.loads(text), dict)
                elif kind == "regex":
                    ok = re.fullmatch(spec, text) is not None
                elif kind == "choice":
                    ok = text in spec
                else:
                    ok = spec(text)
            except ValueError as e:
                ok, why = False, f"not JSON: {e}"
            if ok and rid == "schema0" and list(json.loads(text)) != ["name", "age"]:
                ok, why = False, "properties not in schema order"
            if not ok:
                failures.append(f"{rid}: output {text!r} violates its constraint: {why}")
    rate = stopped / max(outputs, 1)
    print(f"{outputs} outputs, {stopped} stopped ({rate:.1%}), {len(failures)} failures")
    for f in failures:
        print("FAIL", f)
    if rate < 0.9:
        print("FAIL: fewer than 90% of the outputs stopped")
        return 1
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
