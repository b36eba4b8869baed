#!/usr/bin/env python3
"""Checks the layering of src/ and include/dsinfer/ (ARCHITECTURE.md section 1).

Each folder of src/ is one layer and may include only the folders of its row below (besides
itself); include/dsinfer/ (the public API) includes no src/ header; only backend/cuda,
distributed/ and model/*/cuda include CUDA or NCCL headers. The table mirrors
../shared/design/ARCHITECTURE.md section 1: a change there changes it here in the same commit.
Prints every violation and exits 1 if there is any.

  scripts/check_layering.py [REPO_ROOT]
"""
import pathlib
import re
import sys

MAY_USE = {
    "base": "",
    "dsinfer": "",  # include/dsinfer/
    "io": "base",
    "tokenizer": "base io",
    "recipe": "base io tokenizer",
    "structured": "base io tokenizer",
    "backend": "base",
    "distributed": "base backend",
    "cache": "base backend",
    "model": "base io backend cache distributed",
    "sampler": "base backend structured",
    "request": "base io sampler structured tokenizer",
    "speculative": "base backend cache model sampler request structured",
    "scheduler": "base cache request",
    "executor": "base io backend cache distributed model sampler speculative request scheduler "
                "structured",
    "response": "base tokenizer recipe request structured",
    "engine": "dsinfer base io tokenizer recipe structured sampler request speculative scheduler "
              "cache executor response distributed",
    "api": "dsinfer base io tokenizer recipe structured sampler request response engine",
    "cli": None,  # everything
}

# Public headers every layer may include: the error type of the public API is the one of src/ too
# (as LevelDB's include/leveldb/status.h), so that Status crosses the API without conversion.
SHARED_PUBLIC = {"dsinfer/status.h"}

# Edges allowed until the issue that removes them lands; each names that issue.
TEMPORARY = {}

CUDA_FOLDERS = re.compile(r"^(backend/cuda|distributed|model/[^/]+/cuda)/")
CUDA_HEADER = re.compile(r"#\s*include\s*<(cuda|cublas|cufft|curand|cusparse|nccl|cub/|thrust/|"
                         r"cooperative_groups|mma\.h|nvrtc|nvtx)")
LOCAL_INCLUDE = re.compile(r'#\s*include\s*"([^"]+)"')


def folder_of(rel: str) -> str:
    return rel.split("/", 1)[0]


def main() -> int:
    root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else pathlib.Path(__file__).parent.parent)
    errors = []
    used_temporary = set()
    files = [p for p in (root / "src").rglob("*") if p.suffix in {".h", ".cc", ".cu", ".cuh"}]
    files += [p for p in (root / "include" / "dsinfer").rglob("*") if p.suffix == ".h"]
    for path in sorted(files):
        rel_src = path.relative_to(root).as_posix()
        if rel_src.startswith("include/"):
            rel, folder = rel_src[len("include/"):], "dsinfer"
        else:
            rel = rel_src[len("src/"):]
            folder = folder_of(rel)
        if folder not in MAY_USE:
            errors.append(f"{rel_src}: folder '{folder}' is not in the layering table")
            continue
        allowed = MAY_USE[folder]
        for lineno, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            if CUDA_HEADER.search(line) and not CUDA_FOLDERS.match(rel):
                errors.append(f"{rel_src}:{lineno}: CUDA/NCCL header outside backend/cuda, "
                              f"distributed/ and model/*/cuda: {line.strip()}")
            m = LOCAL_INCLUDE.search(line)
            if not m or "/" not in m.group(1) or m.group(1) in SHARED_PUBLIC:
                continue
            target = folder_of(m.group(1))
            if target not in MAY_USE or target == folder or allowed is None:
                continue
            if target in allowed.split():
                continue
            if (folder, target) in TEMPORARY:
                used_temporary.add((folder, target))
                continue
            errors.append(f"{rel_src}:{lineno}: '{folder}/' may not include '{target}/' "
                          f"({m.group(1)})")
    for edge in sorted(used_temporary):
        print(f"check_layering: temporary exception {edge[0]}/ -> {edge[1]}/: {TEMPORARY[edge]}")
    for e in errors:
        print(e)
    if errors:
        print(f"check_layering: {len(errors)} violation(s)")
        return 1
    print(f"check_layering: {len(files)} files, layering as in ARCHITECTURE.md section 1")
    return 0


if __name__ == "__main__":
    sys.exit(main())
