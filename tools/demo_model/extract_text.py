#!/usr/bin/env python3
"""Plain text from unpacked Debian packages (the demo corpus, scripts/build_demo_corpus.sh).

  extract_text.py --packages corpus_packages.tsv --root WORK/root --out WORK/text

For every package of the list, reads the files under ROOT/<package>/ whose path matches the
package's `include` regex, turns each into one plain-text document by the package's `kind`
(html, rst, text, man, pod, code), cleans it (UTF-8, no control characters, collapsed blank
runs, no tiny documents) and writes OUT/<split>/<package>.NNN.txt chunks of about 4 MB in which
every document starts with the BOS spelling (so `dsinfer tokenize` emits id 0 there).
Files are visited in sorted order: the output is deterministic.
Only the Python standard library and groff / pod2text (Debian base tools) are used.
"""
import argparse
import concurrent.futures
import gzip
import html
import html.parser
import json
import os
import re
import subprocess
import sys

BOS = "<\uff5cbegin\u2581of\u2581sentence\uff5c>"
CHUNK_CHARS = 4_000_000
MIN_DOC_CHARS = 300

BLOCK_TAGS = {
    "p", "div", "br", "li", "ul", "ol", "dl", "dt", "dd", "tr", "table", "h1", "h2", "h3", "h4",
    "h5", "h6", "pre", "blockquote", "section", "article", "header", "footer", "hr", "title",
    "caption", "figure", "td", "th",
}
SKIP_TAGS = {"script", "style", "head", "nav", "noscript", "svg"}
SKIP_CLASS = re.compile(
    r"\b(navheader|navfooter|sphinxsidebar|related|footer|headerlink|toc|breadcrumbs|"
    r"navigation|menu|top|copyright)\b")
VOID = {"br", "hr", "img", "meta", "link", "input", "area", "base", "col", "embed", "source",
        "track", "wbr", "param"}


class HtmlText(html.parser.HTMLParser):
    """HTML to text: block elements break lines, <pre> keeps its spacing, page chrome is dropped."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.out = []
        self.skip = []  # stack of tag names whose content is dropped (with nesting counts)
        self.pre = 0

    def handle_starttag(self, tag, attrs):
        if tag in VOID:
            if tag in ("br", "hr") and not self.skip:
                self.out.append("\n")
            return
        a = dict(attrs)
        cls = (a.get("class") or "") + " " + (a.get("role") or "") + " " + (a.get("id") or "")
        if self.skip:
            if tag == self.skip[-1][0]:
                self.skip[-1][1] += 1
            return
        if tag in SKIP_TAGS or SKIP_CLASS.search(cls):
            self.skip.append([tag, 1])
            return
        if tag == "pre":
            self.pre += 1
            self.out.append("\n")
        elif tag in BLOCK_TAGS:
            self.out.append("\n")
        if tag == "li":
            self.out.append("* ")

    def handle_endtag(self, tag):
        if self.skip:
            if tag == self.skip[-1][0]:
                self.skip[-1][1] -= 1
                if self.skip[-1][1] == 0:
                    self.skip.pop()
            return
        if tag == "pre":
            self.pre = max(0, self.pre - 1)
            self.out.append("\n")
        elif tag in BLOCK_TAGS:
            self.out.append("\n")
        elif tag in ("td", "th"):
            self.out.append(" ")

    def handle_data(self, data):
        if self.skip:
            return
        if self.pre:
            self.out.append(data)
        else:
            self.out.append(re.sub(r"\s+", " ", data))

    def text(self):
        return "".join(self.out)


def html_to_text(raw):
    p = HtmlText()
    try:
        p.feed(raw)
        p.close()
    except Exception:  # malformed markup: keep what was parsed
        pass
    lines = [ln.rstrip() for ln in p.text().split("\n")]
    # Outside <pre> the parser already collapsed runs; strip the leading blanks it left.
    return "\n".join(ln if ln.startswith("    ") else ln.strip() for ln in lines)


def read_bytes(path):
    with open(path, "rb") as f:
        data = f.read()
    if path.endswith(".gz"):
        data = gzip.decompress(data)
    return data


def decode(data):
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return data.decode("latin-1")


def man_to_text(path):
    data = read_bytes(path)
    if data.startswith(b".so ") and len(data) < 200:
        return ""  # a link to another page
    env = dict(os.environ, GROFF_NO_SGR="1", MANWIDTH="80")
    r = subprocess.run(["groff", "-t", "-man", "-Tutf8", "-rLL=80n", "-rHY=0", "-dAD=l"], input=data,
                       capture_output=True, env=env, timeout=60)
    out = r.stdout
    r2 = subprocess.run(["col", "-bx"], input=out, capture_output=True, timeout=60)
    return decode(r2.stdout)


def pod_to_text(path):
    r = subprocess.run(["pod2text", "-w", "80", path], capture_output=True, timeout=60)
    return decode(r.stdout)


CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")


def clean(text):
    text = text.replace("\r\n", "\n").replace("\r", "\n").replace("\t", "    ")
    text = CONTROL.sub("", text)
    text = text.replace(BOS, "")
    text = re.sub(r"[ ]+\n", "\n", text)
    text = re.sub(r"\n{3,}", "\n\n", text)
    return text.strip() + "\n"


def convert(kind, path):
    if kind == "html":
        return html_to_text(decode(read_bytes(path)))
    if kind == "man":
        return man_to_text(path)
    if kind == "pod":
        return pod_to_text(path)
    return decode(read_bytes(path))  # rst, text, code: as they are


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--packages", required=True)
    ap.add_argument("--root", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    args = ap.parse_args()
    stats = []
    for line in open(args.packages, encoding="utf-8"):
        if not line.strip() or line.startswith("#"):
            continue
        pkg, split, lic, kind, include = line.rstrip("\n").split("\t")
        rx = re.compile(include)
        base = os.path.join(args.root, pkg)
        files = []
        for d, _, names in os.walk(base):
            for n in names:
                full = os.path.join(d, n)
                rel = full[len(base):]
                if rx.search(rel) and os.path.isfile(full) and not os.path.islink(full):
                    files.append(full)
        files.sort()
        with concurrent.futures.ThreadPoolExecutor(args.jobs) as ex:
            texts = list(ex.map(lambda f: clean(convert(kind, f)), files))
        os.makedirs(os.path.join(args.out, split), exist_ok=True)
        chunk, n_chunk, docs, chars = [], 0, 0, 0

        def flush():
            nonlocal chunk, n_chunk
            if chunk:
                p = os.path.join(args.out, split, "%s.%03d.txt" % (pkg, n_chunk))
                with open(p, "w", encoding="utf-8") as f:
                    f.write("".join(chunk))
                n_chunk += 1
                chunk = []

        size = 0
        for t in texts:
            if len(t) < MIN_DOC_CHARS:
                continue
            chunk.append(BOS + t)
            size += len(t)
            docs += 1
            chars += len(t)
            if size >= CHUNK_CHARS:
                flush()
                size = 0
        flush()
        stats.append({"package": pkg, "split": split, "license": lic, "kind": kind,
                      "files": len(files), "documents": docs, "chars": chars})
        print("%-22s %-7s files %5d docs %5d chars %10d" % (pkg, split, len(files), docs, chars),
              file=sys.stderr)
    with open(os.path.join(args.out, "extract_stats.json"), "w") as f:
        json.dump(stats, f, indent=1)


if __name__ == "__main__":
    main()
