#!/usr/bin/env python3
"""Short sentences, checked: the project's prose averages at most MAX_AVG words
a sentence, with at most MAX_LONG_SHARE of its sentences over LONG words.

Checked files: README.md, ARCHITECTURE.md, docs/*.md, and every README.md under
crates/ and clients/. Prose is what is left after removing fenced code blocks
(``` or ~~~), indented code, tables (lines starting with `|`), headings, HTML
comments, link reference definitions and inline code spans (a code span counts
as one word). A sentence ends at `.`, `!` or `?` followed by a space or the end
of a paragraph; a paragraph or list item that ends without one is a sentence
too. Common abbreviations (e.g., i.e., etc., vs.) do not end a sentence.

It also keeps the front door on a page: README.md and ARCHITECTURE.md have at
most 250 lines each, and every invariant of ARCHITECTURE.md's `## Invariants`
section (a bullet opening with a bold claim) has a `Checked by:` line.

Usage:
    .ci/sentences.py             check the workspace's prose; exit 1 if a file
                                 breaks the limit (each such file is named with
                                 its average, its share of long sentences and
                                 its longest sentence)
    .ci/sentences.py FILE...     check these files
    .ci/sentences.py --report    print every file's figures, fail as above
    .ci/sentences.py --self-test check the checker
"""

import glob
import os
import re
import sys

MAX_AVG = 20.0
# The front door fits on a page: these files have at most this many lines.
MAX_LINES = {"README.md": 250, "ARCHITECTURE.md": 250}
LONG = 40
MAX_LONG_SHARE = 0.05

# Abbreviations whose dot never ends a sentence; `etc.` ends one when a
# capital letter follows, and `No.` is an abbreviation only before a number.
ABBREV = re.compile(r"\b(e\.g|i\.e|vs|cf|approx|Fig)\.|\betc\.(?!\s+[A-Z])|\bNo\.(?=\s*\d)",
                    re.IGNORECASE)


def prose_blocks(text):
    """Yield the prose paragraphs and list items of a Markdown text."""
    lines = text.split("\n")
    out, cur = [], []
    fence = None
    in_comment = False

    def flush():
        if cur:
            out.append(" ".join(cur))
            cur.clear()

    for raw in lines:
        line = raw.rstrip()
        s = line.strip()
        if in_comment:
            if "-->" in s:
                in_comment = False
            continue
        if fence:
            if s.startswith(fence):
                fence = None
            continue
        m = re.match(r"^(```+|~~~+)", s)
        if m:
            flush()
            fence = m.group(1)[:3]
            continue
        if s.startswith("<!--"):
            flush()
            if "-->" not in s:
                in_comment = True
            continue
        if not s:
            flush()
            continue
        if s.startswith("|") or s.startswith("#") or re.match(r"^\[[^\]]+\]:\s", s):
            flush()
            continue
        if line.startswith("    ") and not cur and not re.match(r"^\s*([-*+]|\d+\.)\s", line):
            # indented code (not a list item's continuation)
            continue
        if re.match(r"^([-*+]|\d+[.)])\s", s):
            flush()
            s = re.sub(r"^([-*+]|\d+[.)])\s+", "", s)
        cur.append(s)
    flush()
    return out


def sentences(block):
    block = re.sub(r"`[^`]*`", "CODE", block)
    block = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", block)  # links: keep text
    block = re.sub(r"<[^>]+>", " ", block)
    block = ABBREV.sub(lambda m: m.group(0).replace(".", ""), block)
    parts = re.split(r"(?<=[.!?])[\"')\]*_]*\s+", block)
    for p in parts:
        words = [w for w in p.split() if re.search(r"\w", w)]
        if words:
            yield p.strip(), len(words)


def figures(text):
    counts = []
    longest = ("", 0)
    for b in prose_blocks(text):
        for s, n in sentences(b):
            counts.append(n)
            if n > longest[1]:
                longest = (s, n)
    if not counts:
        return 0, 0.0, 0.0, longest
    avg = sum(counts) / len(counts)
    share = sum(1 for n in counts if n > LONG) / len(counts)
    return len(counts), avg, share, longest


def files(root):
    names = ["README.md", "ARCHITECTURE.md"]
    names += sorted(glob.glob("docs/*.md", root_dir=root))
    for top in ("crates", "clients"):
        for dirpath, dirnames, filenames in os.walk(os.path.join(root, top)):
            dirnames[:] = sorted(d for d in dirnames if d not in ("target", "node_modules"))
            if "README.md" in filenames:
                names.append(os.path.relpath(os.path.join(dirpath, "README.md"), root))
    return [n for n in names if os.path.exists(os.path.join(root, n))]


def invariants_unchecked(text):
    """The invariants of ARCHITECTURE.md's `## Invariants` section (bullets
    that open with a bold claim) that have no `Checked by:` line."""
    m = re.search(r"^## Invariants\n(.*?)(?=^## |\Z)", text, re.S | re.M)
    if not m:
        return ["(no '## Invariants' section)"]
    items = re.split(r"^- \*\*", m.group(1), flags=re.M)[1:]
    return [i.split("**")[0] for i in items if "Checked by:" not in i]


def front_door(root):
    """README.md and ARCHITECTURE.md fit their line limits, and every
    invariant of ARCHITECTURE.md names its check."""
    bad = 0
    for name, limit in MAX_LINES.items():
        path = os.path.join(root, name)
        if not os.path.exists(path):
            continue
        with open(path, encoding="utf-8") as f:
            text = f.read()
        n = text.count("\n")
        if n > limit:
            print(f"{name}: {n} lines, over its limit of {limit}")
            bad += 1
        if name == "ARCHITECTURE.md":
            for claim in invariants_unchecked(text):
                print(f"ARCHITECTURE.md: the invariant '{claim}' has no 'Checked by:' line")
                bad += 1
    return bad


def check(paths, root, report):
    bad = 0
    for p in paths:
        with open(os.path.join(root, p), encoding="utf-8") as f:
            n, avg, share, longest = figures(f.read())
        ok = avg <= MAX_AVG and share <= MAX_LONG_SHARE
        if report or not ok:
            print(f"{p}: {n} sentences, {avg:.1f} words on average, {share:.1%} over {LONG} words"
                  + ("" if ok else "  <- over the limit"))
        if not ok:
            bad += 1
            print(f"  longest ({longest[1]} words): {longest[0][:300]}")
    if bad:
        print(f"{bad} file(s) break the limit: at most {MAX_AVG:g} words a sentence on average, "
              f"at most {MAX_LONG_SHARE:.0%} of sentences over {LONG} words. Split long sentences.")
    return 1 if bad else 0


def self_test():
    text = """# Title

A short sentence. Another one here!

```
code that. is. not. prose with many many many words words words words words
```

| a table | row. |

- a list item without a period
- e.g. this does not split. But this does.

    indented code is skipped. yes.

`a code span with many words inside` counts as one word.
"""
    n, avg, share, _ = figures(text)
    assert n == 6, n
    long = " ".join(["word"] * 45) + "."
    n2, avg2, share2, l2 = figures(long + " Short one.")
    assert n2 == 2 and share2 == 0.5 and l2[1] == 45, (n2, share2, l2)
    assert figures("")[0] == 0
    arch = "## Invariants\n\n- **A holds.**\n  Checked by: `x`.\n- **B holds.**\n  No check.\n\n## Next\n"
    assert invariants_unchecked(arch) == ["B holds."], invariants_unchecked(arch)
    assert invariants_unchecked("# none") == ["(no '## Invariants' section)"]
    # `etc.` before a capital ends a sentence; `No.` ends one unless a number follows.
    assert figures("Keys, markers, etc. Then more. It is no. 5 here. Is it? No. Fine.")[0] == 6
    # Links keep their text, HTML comments and link definitions are not prose.
    n3, avg3, _, _ = figures("See [the guide](docs/x.md) now.\n\n<!-- a b c. d e. -->\n\n[x]: http://a.b/c\n")
    assert (n3, avg3) == (1, 4.0), (n3, avg3)
    # A paragraph wrapped over lines is one block; a heading is not prose.
    assert figures("## A long heading of words\none sentence\nwrapped here.")[0] == 1
    # A file over either limit fails the check; a file within both passes.
    import contextlib
    import io
    import tempfile
    with tempfile.TemporaryDirectory() as d:
        cases = {
            "long.md": long + " Short one.",                     # half the sentences over 40 words
            "wordy.md": " ".join(["word"] * 25) + ".",          # 25 words on average
            "fine.md": "A short one. " * 19 + long,             # 1 in 20 over 40 words, 6.5 on average
        }
        for name, text in cases.items():
            with open(os.path.join(d, name), "w", encoding="utf-8") as f:
                f.write(text)
        with contextlib.redirect_stdout(io.StringIO()):
            got = {name: check([name], d, False) for name in cases}
    assert got == {"long.md": 1, "wordy.md": 1, "fine.md": 0}, got
    print("sentences.py self-test: ok")
    return 0


def main(argv):
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    if "--self-test" in argv:
        return self_test()
    report = "--report" in argv
    paths = [a for a in argv if not a.startswith("--")]
    if paths:
        paths = [os.path.relpath(os.path.abspath(p), root) for p in paths]
    else:
        paths = files(root)
        if front_door(root):
            return 1
    return check(paths, root, report)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
