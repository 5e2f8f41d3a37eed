#!/usr/bin/env python3
"""The dependency ladder of the workspace, checked from `cargo metadata`, the
sources and `cargo tree`.

Invariants (ARCHITECTURE.md states them; this script is their check):

1. A production crate depends (normally: not as a dev- or build-dependency)
   only on production crates below it on the ladder. The ladder is
   PRODUCTION, bottom layer first; every other workspace crate is a harness
   crate (it exists to test, sweep or demonstrate) and no production crate
   may depend on it. Optional dependencies count: a feature can turn them on.
2. No workspace crates depend on each other in a circle through normal and
   build dependencies.
3. Inside a crate, no modules depend on each other in a circle. Each target
   (src/lib.rs, src/main.rs, src/bin/*.rs) is its own graph of module files,
   followed from the root through `mod name;`. Module A depends on module B
   when A's code outside `#[cfg(test)]` and comments names B by a path:
   `crate::b::…`, `super::b::…`, `self::b::…`, in `use` trees too
   (`use crate::{b, c::d}`); a path to an item of the crate root
   (`crate::Foo`) names the root. A module using its own descendants is not
   counted: declaring a child and re-exporting it (`pub use child::X`) is the
   normal pattern, and a child may use its parent.
4. No source file under crates/*/src (xtask is a tool, not a library) has more
   than MAX_LINES lines outside `#[cfg(test)]` items; a file reached only
   through `#[cfg(test)] mod name;` is test code and not counted.
5. Crash points are compiled out of production builds: `cargo tree -e
   no-dev,features` over the production crates (crashpoint itself aside)
   shows no `crashpoint feature "enabled"`.

Dev-dependency circles (cargo allows them: `a`'s tests use `b`, which depends
on `a`) are reported as notes, not failures: integration tests link the one
`a`, but `a`'s unit tests would see two copies of its types.

The source scan of 3 and 4 is a rough reading of Rust, not a parser: it
blanks comments, string and character literals, then `#[cfg(test)]` items
(the attribute through the `;` or the matching `}` of the item after it). It
does not follow `#[path]` attributes or paths written inside macros' input.

Usage:
    .ci/ladder.py                  check this workspace: all five invariants
                                   (runs cargo metadata, reads the sources,
                                   runs cargo tree)
    .ci/ladder.py --metadata FILE  check 1 and 2 on saved `cargo metadata`
                                   output
    .ci/ladder.py --tree FILE      check 5 on saved output of the cargo tree
                                   command above (both options may be given;
                                   with either, only the saved inputs are
                                   checked: 3 and 4 need the real tree)
    .ci/ladder.py --self-test      check the checker on synthetic inputs

Every check runs whatever the others find; all failures are printed.

Exit status: 0 when every invariant holds, 1 when one does not, 2 on a usage,
metadata or cargo tree error.
"""

import bisect
import contextlib
import io
import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path

# The single source of truth: the production crates, bottom layer first. A
# crate here may normally depend only on crates before it in this list.
# Every workspace crate not listed is a harness crate.
PRODUCTION = ["crashpoint", "durable", "agent"]

# The harness crates known today, for the messages only: the rule above
# treats every workspace crate not in PRODUCTION as harness, listed or not.
KNOWN_HARNESS = [
    "sweep",
    "tracker",
    "designs",
    "loop-sweep",
    "triage-tools",
    "triage",
    "bank",
    "outbox",
    "xtask",
    "test-provider",
    "same-build",
]


def workspace_graph(metadata):
    """{crate: [(dependency, kind, optional)]} over workspace crates only.

    kind is "normal", "build" or "dev"; dependencies outside the workspace
    (registry crates) are left out.
    """
    members = set(metadata.get("workspace_members", []))
    packages = [p for p in metadata["packages"] if p["id"] in members]
    names = {p["name"] for p in packages}
    graph = {}
    for p in packages:
        edges = []
        for d in p.get("dependencies", []):
            # A workspace dependency is a path dependency on a member.
            if d["name"] in names and d.get("source") is None:
                edges.append((d["name"], d.get("kind") or "normal", bool(d.get("optional"))))
        graph[p["name"]] = sorted(set(edges))
    return graph


def strong_components(adj):
    """The strongly connected components of `adj` ({node: [node]}) that hold
    a circle (Tarjan's algorithm), each as a sorted list of nodes."""
    index, low, on_stack, stack, out = {}, {}, set(), [], []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in adj[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1 or v in adj[v]:
                out.append(sorted(comp))

    for v in sorted(adj):
        if v not in index:
            visit(v)
    return sorted(out)


def shortest_circle(adj, comp):
    """One circle through `comp` (a strong component of `adj`), from its first
    node back to it: [a, b, …, a]."""
    inside = set(comp)
    start = comp[0]
    # Breadth-first search for the shortest way back to start.
    prev, frontier, seen = {}, [start], {start}
    while frontier:
        nxt = []
        for v in frontier:
            for w in adj[v]:
                if w not in inside:
                    continue
                if w == start:
                    path = [v]
                    while path[-1] != start:
                        path.append(prev[path[-1]])
                    return list(reversed(path)) + [start]
                if w not in seen:
                    seen.add(w)
                    prev[w] = v
                    nxt.append(w)
        frontier = nxt
    return list(comp)


def crate_adjacency(graph, kinds):
    return {a: sorted({b for b, k, _ in es if k in kinds and b in graph}) for a, es in graph.items()}


def cycles(graph, kinds):
    """The strongly connected components with a circle, over edges of `kinds`,
    each as a sorted list of crate names."""
    return strong_components(crate_adjacency(graph, kinds))


def circle_text(graph, comp, kinds):
    """One circle through `comp`, written a -> b -> … -> a."""
    return " -> ".join(shortest_circle(crate_adjacency(graph, kinds), comp))


def check(metadata, production=PRODUCTION):
    """(errors, notes): the broken invariants, and what is worth knowing."""
    graph = workspace_graph(metadata)
    errors, notes = [], []
    for crate in production:
        if crate not in graph:
            errors.append(
                f"production crate `{crate}` is not a workspace crate: "
                f"update PRODUCTION in .ci/ladder.py (workspace: {', '.join(sorted(graph))})"
            )
    layer = {c: i for i, c in enumerate(production)}
    for crate in production:
        for dep, kind, optional in graph.get(crate, []):
            if kind != "normal":
                continue
            how = "an optional (feature-gated) normal" if optional else "a normal"
            if dep not in layer:
                known = "" if dep in KNOWN_HARNESS else ", as is every workspace crate not in PRODUCTION"
                errors.append(
                    f"production crate `{crate}` has {how} dependency on `{dep}`, "
                    f"a harness crate{known}: move the code that needs `{dep}` into a "
                    f"harness crate, or make `{dep}` a dev-dependency of `{crate}`"
                )
            elif layer[dep] >= layer[crate]:
                errors.append(
                    f"production crate `{crate}` has {how} dependency on `{dep}`, "
                    f"which is not below it on the ladder ({' < '.join(production)})"
                )
    for comp in cycles(graph, {"normal", "build"}):
        errors.append(
            "workspace crates depend on each other in a circle (normal and build "
            f"dependencies): {circle_text(graph, comp, {'normal', 'build'})}"
        )
    normal = {tuple(c) for c in cycles(graph, {"normal", "build"})}
    for comp in cycles(graph, {"normal", "build", "dev"}):
        if tuple(comp) not in normal:
            notes.append(
                "a circle closed by a dev-dependency (allowed; unit tests of its crates "
                f"see two copies of their types): {circle_text(graph, comp, {'normal', 'build', 'dev'})}"
            )
    return errors, notes


# ------------------------------------------------- Rust sources, read roughly

# Invariant 4's limit: lines of a library source file outside #[cfg(test)].
MAX_LINES = 600

# Where a comment, a string (raw or not, with a b or c prefix) or a character
# literal starts; a ' that starts no character literal is a lifetime's.
LITERAL_START = re.compile(r"//|/\*|(?<![\w$])[bc]?r#*\"|\"|'")
CHAR_LITERAL = re.compile(r"'(?:\\(?:x[0-9a-fA-F]{2}|u\{[0-9a-fA-F_]{1,6}\}|.)|[^\\'\n])'")
RAW_STRING = re.compile(r"[bc]?r(#*)\"")
CFG_ATTRIBUTE = re.compile(r"#\s*(!?)\s*\[\s*cfg\s*\(")
MOD_ITEM = re.compile(r"(?<![\w$])mod\s+(?:r#)?(\w+)\s*([;{])")
USE_ITEM = re.compile(r"(?<![\w$])use\s")
USE_TOKEN = re.compile(r"\s*(::|[{},*;]|(?:r#)?\w+)")
# A path from the crate root, the parent or the module itself. `$crate` (a
# macro's) and `::crate` cannot be written; `Self` is not `self`.
RELATIVE_PATH = re.compile(r"(?<![\w$:])(crate|super|self)((?:\s*::\s*(?:r#)?\w+)+)")


def blank_literals(text):
    """`text` with comments, strings and character literals made spaces (the
    newlines kept, so offsets and line numbers still hold)."""
    out = list(text)
    n = len(text)

    def blank(a, b):
        for k in range(a, min(b, n)):
            if out[k] != "\n":
                out[k] = " "

    i = 0
    while True:
        m = LITERAL_START.search(text, i)
        if not m:
            break
        i, tok = m.start(), m.group()
        if tok == "//":
            j = text.find("\n", i)
            j = n if j < 0 else j
        elif tok == "/*":
            depth, j = 1, i + 2
            while j < n and depth:
                if text.startswith("/*", j):
                    depth, j = depth + 1, j + 2
                elif text.startswith("*/", j):
                    depth, j = depth - 1, j + 2
                else:
                    j += 1
        elif tok == "'":
            c = CHAR_LITERAL.match(text, i)
            if not c:  # a lifetime or a label
                i += 1
                continue
            j = c.end()
        elif tok == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            j += 1
        else:
            close = '"' + RAW_STRING.match(text, i).group(1)
            j = text.find(close, m.end())
            j = n if j < 0 else j + len(close)
        blank(i, j)
        i = j
    return "".join(out)


def matching(code, i):
    """The offset just past the bracket that closes code[i] ("{", "(" or "[")."""
    depth = 0
    for j in range(i, len(code)):
        c = code[j]
        if c in "{([":
            depth += 1
        elif c in "})]":
            depth -= 1
            if depth == 0:
                return j + 1
    return len(code)


def item_end(code, i):
    """The offset just past the item (or statement) that starts at code[i]:
    its `;` or the `}` matching its first `{`, outside () and []."""
    n = len(code)
    while i < n:
        c = code[i]
        if c in "([":
            i = matching(code, i)
        elif c == ";":
            return i + 1
        elif c == "{":
            return matching(code, i)
        elif c in "})]":
            return i
        else:
            i += 1
    return n


def is_test_only(predicate):
    """Whether a cfg predicate holds only in test builds: `test` or `all(…, test, …)`."""
    p = re.sub(r"\s+", "", predicate)
    return re.fullmatch(r"test|all\((?:.*,)?test(?:,.*)?\)", p) is not None


def test_regions(code):
    """[(start, end)] offsets of the `#[cfg(test)]` items of `code` (blanked
    of literals): from the attribute through the end of the item after it. A
    `#![cfg(test)]` makes the whole file one."""
    regions, i = [], 0
    while True:
        m = CFG_ATTRIBUTE.search(code, i)
        if not m:
            break
        open_paren = m.end() - 1
        close = matching(code, open_paren)
        i = close
        if not is_test_only(code[open_paren + 1:close - 1]):
            continue
        if m.group(1):
            return [(0, len(code))]
        bracket = code.find("]", close)
        end = item_end(code, len(code) if bracket < 0 else bracket + 1)
        regions.append((m.start(), end))
        i = end
    return regions


def blank_regions(code, regions):
    out = list(code)
    for a, b in regions:
        for k in range(a, b):
            if out[k] != "\n":
                out[k] = " "
    return "".join(out)


class Source:
    """A Rust file read roughly: `code` is its text blanked of comments and
    literals, and of `#[cfg(test)]` items unless `keep_tests`."""

    def __init__(self, path, keep_tests=False):
        self.path = path
        self.text = path.read_text(encoding="utf-8", errors="replace")
        code = blank_literals(self.text)
        self.tests = test_regions(code)
        self.code = code if keep_tests else blank_regions(code, self.tests)
        self.newlines = [k for k, c in enumerate(self.code) if c == "\n"]
        # Inline modules, `mod name { … }`: (name, start, end).
        self.inline = [(m.group(1), m.end() - 1, matching(self.code, m.end() - 1))
                       for m in MOD_ITEM.finditer(self.code) if m.group(2) == "{"]

    def line(self, offset):
        return bisect.bisect_right(self.newlines, offset - 1) + 1

    def nesting(self, offset):
        """The inline modules `offset` is inside, outermost first."""
        return tuple(name for name, a, b in self.inline if a < offset < b)


def discover(root, keep_tests=False):
    """{module path: file} of the target whose root file is `root`: the root
    (path ()) and every file reached from it through `mod name;`, which names
    name.rs or name/mod.rs beside a root or mod.rs file, and under a directory
    named after any other file."""
    modules, todo = {}, [((), root, True)]
    while todo:
        path, file, owns_dir = todo.pop()
        if path in modules or not file.is_file():
            continue
        modules[path] = file
        src = Source(file, keep_tests)
        base = file.parent if owns_dir else file.parent / file.stem
        for m in MOD_ITEM.finditer(src.code):
            if m.group(2) != ";":
                continue
            nest, name = src.nesting(m.start()), m.group(1)
            d = base.joinpath(*nest)
            for candidate, owns in ((d / f"{name}.rs", False), (d / name / "mod.rs", True)):
                if candidate.is_file():
                    todo.append((path + nest + (name,), candidate, owns))
                    break
    return modules


def use_paths(code, start):
    """The paths a `use` tree starting at code[start] names, expanded
    (`a::{b, c::d}` gives a::b and a::c::d): [(segments, offset of the
    last)], and the offset past the tree."""
    tokens, i = [], start
    while True:
        m = USE_TOKEN.match(code, i)
        if not m:
            break
        i = m.end()
        if m.group(1) == ";":
            break
        tokens.append((m.group(1), m.start(1)))

    def tree(k, prefix):
        segs, last, out = list(prefix), None, []
        while k < len(tokens):
            tok, pos = tokens[k]
            if tok == "::":
                k += 1
            elif tok == "*":
                return out + [(segs, pos)], k + 1
            elif tok == "{":
                k += 1
                while k < len(tokens) and tokens[k][0] != "}":
                    if tokens[k][0] == ",":
                        k += 1
                        continue
                    sub, k = tree(k, segs)
                    out += sub
                return out, k + 1
            elif tok in "},":
                break
            else:
                segs, last, k = segs + [tok], pos, k + 1
                if k < len(tokens) and tokens[k][0] == "as":
                    k += 2
                    break
                if not (k < len(tokens) and tokens[k][0] == "::"):
                    break
        if last is not None:
            out.append((segs, last))
        return out, k

    paths, _ = tree(0, [])
    return [(segs[:-1] if segs[-1] == "self" else segs, pos) for segs, pos in paths if segs], i


def references(src):
    """[(offset, segments, as written)]: every path in `src`'s code that starts
    at crate, super or self, in `use` trees and elsewhere."""
    out, code = [], src.code
    masked = list(code)
    for m in USE_ITEM.finditer(code):
        paths, end = use_paths(code, m.end())
        for segs, pos in paths:
            if segs and segs[0] in ("crate", "super", "self"):
                out.append((pos, segs, "::".join(segs)))
        for k in range(m.start(), end):
            masked[k] = " "
    masked = "".join(masked)
    for m in RELATIVE_PATH.finditer(masked):
        # A visibility, pub(in crate::a), names where an item may be seen from.
        if re.search(r"\bpub\s*\(\s*in\s*$", masked[max(0, m.start() - 16):m.start()]):
            continue
        written = re.sub(r"\s+", "", m.group())
        out.append((m.start(), written.split("::"), written))
    return out


def resolve(segs, here, modules):
    """The module file a path names from module `here` (inline modules
    included): the deepest of `modules` its segments lead to, or None."""
    cur, rest = list(here), list(segs)
    if rest[0] == "crate":
        cur, rest = [], rest[1:]
    elif rest[0] == "self":
        rest = rest[1:]
    while rest and rest[0] == "super":
        if not cur:
            return None
        cur, rest = cur[:-1], rest[1:]
    full = cur + rest
    for k in range(len(full), -1, -1):
        if tuple(full[:k]) in modules:
            return tuple(full[:k])
    return None


def module_name(path):
    return "::".join(path) if path else "crate"


def module_edges(modules):
    """{(module, module it depends on): [(line, path as written)]} over the
    files of one target; a module's uses of itself and its descendants are
    left out."""
    edges = {}
    for here, file in modules.items():
        src = Source(file)
        for offset, segs, written in references(src):
            to = resolve(segs, here + src.nesting(offset), modules)
            if to is None or to[:len(here)] == here:
                continue
            edges.setdefault((here, to), []).append((src.line(offset), written))
    return edges


def target_roots(package):
    """The root files of a package's library and binaries under its src/."""
    src = Path(package["manifest_path"]).parent / "src"
    roots = []
    for t in package.get("targets", []):
        if set(t.get("kind", [])) & {"lib", "rlib", "proc-macro", "bin"}:
            root = Path(t["src_path"])
            if src in root.parents:
                roots.append(root)
    return sorted(set(roots))


def where(file, crate_dir, uses):
    """`src/a.rs uses crate::b::X at line 3 (and at lines 9, 12)`."""
    first = {}
    for line, written in uses:
        first.setdefault(line, written)
    (line, written), *more = sorted(first.items())
    text = f"{file.relative_to(crate_dir)} uses {written} at line {line}"
    if more:
        lines = ", ".join(str(n) for n, _ in more[:5]) + (", …" if len(more) > 5 else "")
        text += f" (and at {'line' if len(more) == 1 else 'lines'} {lines})"
    return text


def module_cycle_errors(package):
    """Invariant 3 for one package: an error per circle of its modules."""
    crate_dir = Path(package["manifest_path"]).parent
    roots = target_roots(package)
    errors = []
    for root in roots:
        modules = discover(root)
        edges = module_edges(modules)
        adj = {m: sorted(b for (a, b) in edges if a == m) for m in modules}
        label = f"crate {package['name']}"
        if len(roots) > 1:
            label += f" (target {root.relative_to(crate_dir)})"
        for comp in strong_components(adj):
            circle = shortest_circle(adj, comp)
            steps = list(zip(circle, circle[1:]))
            said = [where(modules[a], crate_dir, edges[(a, b)]) for a, b in steps]
            text = (f"{label}: modules import each other in a circle: "
                    f"{' -> '.join(module_name(m) for m in circle)} ({'; '.join(said)})")
            others = [(a, b) for (a, b) in sorted(edges) if a in comp and b in comp and (a, b) not in steps]
            if others:
                text += (f"; the knot holds {len(comp)} modules ({', '.join(module_name(m) for m in comp)}), "
                         "whose other uses of each other are: "
                         + "; ".join(where(modules[a], crate_dir, edges[(a, b)]) for a, b in others))
            errors.append(text + ": cut one of these uses (move what both sides need into a module below them)")
    return errors


def production_lines(src):
    """The lines of a file outside its #[cfg(test)] items."""
    test_lines = set()
    for a, b in src.tests:
        test_lines.update(range(src.line(a), src.line(max(a, b - 1)) + 1))
    return len(src.text.splitlines()) - len(test_lines)


def big_file_errors(package, workspace_root, limit=MAX_LINES):
    """Invariant 4 for one package (a crate under crates/): an error per file
    of its src/ over `limit` lines outside #[cfg(test)]."""
    crate_dir = Path(package["manifest_path"]).parent
    production, with_tests = set(), set()
    for root in target_roots(package):
        production.update(discover(root).values())
        with_tests.update(discover(root, keep_tests=True).values())
    test_only = with_tests - production
    errors = []
    for file in sorted((crate_dir / "src").rglob("*.rs")):
        if file in test_only:
            continue
        n = production_lines(Source(file))
        if n > limit:
            errors.append(
                f"{file.relative_to(workspace_root)} has {n} lines outside #[cfg(test)], over the limit of {limit}: "
                "split it into one module per concept"
            )
    return errors


def source_errors(metadata, limit=MAX_LINES):
    """(invariant 3 errors, invariant 4 errors) over the workspace's sources."""
    members = set(metadata.get("workspace_members", []))
    root = Path(metadata["workspace_root"])
    cycles_found, big = [], []
    for p in sorted((p for p in metadata["packages"] if p["id"] in members), key=lambda p: p["name"]):
        cycles_found += module_cycle_errors(p)
        crate_dir = Path(p["manifest_path"]).parent
        if crate_dir.parent == root / "crates":
            big += big_file_errors(p, root, limit)
    return cycles_found, big


# ------------------------------------------------------------ cargo tree


def crashpoint_tree_command(production=PRODUCTION):
    cmd = ["cargo", "tree", "-e", "no-dev,features"]
    for crate in production:
        if crate != "crashpoint":
            cmd += ["-p", crate]
    return cmd


def crashpoint_errors(tree, production=PRODUCTION):
    """Invariant 5 from the text `cargo tree -e no-dev,features -p …` prints:
    an error per way a production build reaches crashpoint's `enabled`."""
    errors, seen, stack = [], set(), []
    for line in tree.splitlines():
        m = re.match(r"^([│├└─|`\- \u00a0]*)(\S.*)$", line)
        if not m:
            stack = []
            continue
        depth = len(m.group(1)) // 4
        # The local path of a workspace crate says nothing here.
        entry = re.sub(r" \([^()]*[/\\][^()]*\)", "", m.group(2))
        del stack[depth:]
        stack.append(entry)
        if re.match(r'crashpoint feature "enabled"', entry):
            chain = " -> ".join(stack)
            if chain in seen:
                continue
            seen.add(chain)
            # The production crate nearest to crashpoint on the way is the one
            # that asks for it; the tree's root only depends on that one.
            crates = [e.split()[0] for e in stack if re.match(r"\S+ v\d", e)]
            who = ([c for c in crates if c in production] or [stack[0].split()[0]])[-1]
            errors.append(
                f"production crate `{who}` turns crash points on in its build: {chain} "
                f"(in `{' '.join(crashpoint_tree_command(production))}`): crashpoint's `enabled` "
                "feature must be off by default; turn it on only in harness crates and dev-dependencies"
            )
    return errors


LADDER_OK = (
    f"production crates {' < '.join(PRODUCTION)} depend on no harness crate, and no "
    "workspace crates depend on each other in a circle"
)
MODULES_OK = "no crate's modules import each other in a circle"
LINES_OK = f"no source file of crates/*/src has more than {MAX_LINES} lines outside #[cfg(test)]"
CRASHPOINT_OK = "no production build turns crashpoint's `enabled` feature on"


def report(errors, notes, out=None, ok=None):
    out = out or sys.stdout
    for n in notes:
        print(f"ladder: note: {n}", file=out)
    for e in errors:
        print(f"ladder: FAILED: {e}", file=out)
    if not errors:
        print(f"ladder: ok: {ok or LADDER_OK}", file=out)
    return 1 if errors else 0


# ---------------------------------------------------------------- self-test


def synthetic(crates):
    """Metadata in `cargo metadata` shape for {crate: [(dep, kind), …]};
    kind is None (normal), "dev" or "build"; a third item True makes it
    optional. A dependency named `registry:x` is a crates.io crate."""
    packages, members = [], []
    for name, deps in crates.items():
        pid = f"path+file:///ws/{name}#0.1.0"
        members.append(pid)
        ds = []
        for d in deps:
            dep, kind = d[0], d[1]
            optional = len(d) > 2 and d[2]
            if dep.startswith("registry:"):
                ds.append({"name": dep[9:], "source": "registry+https://github.com/rust-lang/crates.io-index",
                           "kind": kind, "optional": optional})
            else:
                ds.append({"name": dep, "source": None, "kind": kind, "optional": optional,
                           "path": f"/ws/{dep}"})
        packages.append({"name": name, "id": pid, "dependencies": ds})
    return {"packages": packages, "workspace_members": members}


def synthetic_sources(root, files):
    """Writes {path: text} under `root` and returns its `cargo metadata`:
    a package per directory holding src/lib.rs or src/main.rs."""
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    packages = []
    for src in sorted({(root / rel).parent for rel in files if Path(rel).name in ("lib.rs", "main.rs")}):
        if src.name != "src":
            continue
        crate_dir = src.parent
        targets = [{"kind": [kind], "src_path": str(src / f)}
                   for kind, f in (("lib", "lib.rs"), ("bin", "main.rs")) if (src / f).is_file()]
        packages.append({"name": crate_dir.name, "id": f"path+file://{crate_dir}#0.1.0",
                         "manifest_path": str(crate_dir / "Cargo.toml"), "targets": targets,
                         "dependencies": []})
    return {"packages": packages, "workspace_members": [p["id"] for p in packages],
            "workspace_root": str(root)}


def self_test():
    clean = {
        "crashpoint": [("registry:serde", None)],
        "durable": [("crashpoint", None), ("registry:tempfile", "dev")],
        "agent": [("crashpoint", None), ("durable", None), ("tracker", "dev"), ("sweep", "dev")],
        "sweep": [("crashpoint", None)],
        "tracker": [("durable", None)],
        "loop-sweep": [("agent", None), ("sweep", None), ("tracker", None)],
        "xtask": [("loop-sweep", None), ("sweep", None)],
    }
    cases = []

    def case(name, crates, want_errors, want_notes=(), production=PRODUCTION):
        cases.append((name, lambda: check(synthetic(crates), production), list(want_errors), list(want_notes)))

    case("a clean graph", clean, [])
    today = dict(clean, agent=[("crashpoint", None), ("durable", None), ("sweep", None), ("tracker", None)])
    case("agent -> sweep and tracker (today's main)", today,
         ["`agent` has a normal dependency on `sweep`", "`agent` has a normal dependency on `tracker`"])
    case("an optional dependency counts",
         dict(clean, durable=[("crashpoint", None), ("sweep", None, True)]),
         ["`durable` has an optional (feature-gated) normal dependency on `sweep`"])
    case("an unlisted workspace crate is harness",
         dict(clean, newcrate=[], durable=[("crashpoint", None), ("newcrate", None)]),
         ["`durable` has a normal dependency on `newcrate`, a harness crate, as is every"])
    case("a build-dependency on a harness crate is not a normal one",
         dict(clean, durable=[("crashpoint", None), ("sweep", "build")]), [])
    case("down the ladder only",
         dict(clean, crashpoint=[("durable", None)]),
         ["`crashpoint` has a normal dependency on `durable`, which is not below it",
          "circle (normal and build dependencies): crashpoint -> durable -> crashpoint"])
    case("a circle of harness crates",
         dict(clean, sweep=[("crashpoint", None), ("tracker", None)], tracker=[("durable", None), ("sweep", "build")]),
         ["circle (normal and build dependencies): sweep -> tracker -> sweep"])
    case("a crate depending on itself", dict(clean, sweep=[("sweep", None)]),
         ["circle (normal and build dependencies): sweep -> sweep"])
    case("a dev-dependency circle is a note",
         dict(clean, agent=[("crashpoint", None), ("durable", None), ("loop-sweep", "dev")]),
         [], ["closed by a dev-dependency (allowed; unit tests of its crates see two copies of their types): agent -> loop-sweep -> agent"])
    case("a production crate missing from the workspace",
         {k: v for k, v in clean.items() if k != "durable"},
         ["production crate `durable` is not a workspace crate"])
    case("the list is the source of truth",
         clean, ["`agent` has a normal dependency on `durable`, which is not below it"],
         production=["crashpoint", "agent", "durable"])

    # Invariants 3 and 4, on small source trees.
    def source_case(name, files, want_errors):
        def run():
            with tempfile.TemporaryDirectory() as tmp:
                errors = sum(source_errors(synthetic_sources(Path(tmp), files)), [])
                return [e.replace(tmp + "/", "") for e in errors], []
        cases.append((name, run, list(want_errors), []))

    circle = {
        "crates/m/src/lib.rs": "mod a;\nmod b;\nmod c;\npub use a::A;\npub struct Root;\n",
        "crates/m/src/a.rs": "use crate::b::B;\npub struct A;\n",
        "crates/m/src/b.rs": "use crate::{c::C, Root};\npub struct B;\n",
        "crates/m/src/c.rs": "pub struct C;\n\nfn f() -> crate::a::A {\n    crate::a::A\n}\n",
    }
    source_case("modules in a circle", circle, [
        "crate m: modules import each other in a circle: a -> b -> c -> a (src/a.rs uses crate::b::B at "
        "line 1; src/b.rs uses crate::c::C at line 1; src/c.rs uses crate::a::A at line 3 (and at line 4))"])
    source_case("a circle through a use group and a knot of four", dict(circle, **{
        "crates/m/src/lib.rs": "mod a;\nmod b;\nmod c;\nmod d;\n",
        "crates/m/src/a.rs": "use crate::{b::B, d::{self, D}};\npub struct A;\n",
        "crates/m/src/d.rs": "pub struct D(crate::c::C);\n"}), [
        "a -> b -> c -> a (src/a.rs uses crate::b::B at line 1; ",
        "the knot holds 4 modules (a, b, c, d), whose other uses of each other are: src/a.rs uses "
        "crate::d at line 1; src/d.rs uses crate::c::C at line 1"])
    source_case("a parent re-exporting its child, which uses its parent and the root", {
        "crates/m/src/lib.rs": "mod a;\npub use a::X;\npub struct Root;\n",
        "crates/m/src/a/mod.rs": "mod b;\npub use self::b::X;\npub use b::X as Y;\npub struct P;\n",
        "crates/m/src/a/b.rs": "use super::P;\nuse crate::Root;\npub struct X(P, Root);\n",
    }, [])
    source_case("uses in tests, comments, strings and macros only", dict(circle, **{
        "crates/m/src/c.rs": (
            "//! [`A`](crate::a::A)\n// crate::a::A\n/* crate::a::A /* nested */ crate::a::A */\n"
            "const S: &str = \"crate::a::A \\\" crate::a::A\";\nconst R: &str = r#\"crate::a::A\"#;\n"
            "const Q: char = '\"';\nfn f<'a>(x: &'a str) -> &'a str { x }\n"
            "macro_rules! m { () => { $crate::a::A }; }\n"
            "#[cfg(test)]\nmod tests {\n    const C: char = '}';\n    use crate::a::A;\n}\n"
            "#[cfg(all(test, unix))]\nuse crate::a::A;\n#[cfg(test)]\nmod more;\npub struct C;\n"),
        "crates/m/src/c/more.rs": "use crate::a::A;\n"}), [])
    source_case("super:: resolves from the file's own module", {
        "crates/m/src/lib.rs": "mod a;\nmod c;\n",
        "crates/m/src/a/mod.rs": "mod b;\n",
        "crates/m/src/a/b.rs": "use super::super::c::C;\npub struct B;\n",
        "crates/m/src/c.rs": "pub struct C(crate::a::b::B);\n",
    }, ["crate m: modules import each other in a circle: a::b -> c -> a::b (src/a/b.rs uses "
        "super::super::c::C at line 1; src/c.rs uses crate::a::b::B at line 1)"])
    source_case("an inline module's super:: is its file's module", {
        "crates/m/src/lib.rs": "mod a;\nmod b;\n",
        "crates/m/src/a.rs": "mod inner {\n    use super::super::b::B;\n}\npub struct A;\n",
        "crates/m/src/b.rs": "pub struct B(crate::a::A);\n",
    }, ["a -> b -> a (src/a.rs uses super::super::b::B at line 2; src/b.rs uses crate::a::A at line 1)"])
    # x.rs is a module of both targets; only the binary's graph has y.
    source_case("a binary is a graph of its own; it names the library by the crate's name", {
        "crates/m/src/lib.rs": "mod x;\npub use x::X;\n",
        "crates/m/src/main.rs": "mod x;\nmod y;\nuse m::X;\nfn main() {}\n",
        "crates/m/src/x.rs": "pub struct X;\npub struct Z(crate::y::Y);\n",
        "crates/m/src/y.rs": "pub struct Y(crate::x::X);\n",
    }, ["crate m (target src/main.rs): modules import each other in a circle: x -> y -> x (src/x.rs "
        "uses crate::y::Y at line 2; src/y.rs uses crate::x::X at line 1)"])

    lines = "".join(f"// line {k}\n" for k in range(MAX_LINES))
    source_case(f"a library file of {MAX_LINES + 1} lines", {"crates/big/src/lib.rs": lines + "pub struct X;\n"},
                [f"crates/big/src/lib.rs has {MAX_LINES + 1} lines outside #[cfg(test)], over the limit of "
                 f"{MAX_LINES}: split it into one module per concept"])
    source_case(f"{MAX_LINES} lines and test code (a test module, a test file)", {
        "crates/big/src/lib.rs": "#[cfg(test)]\nmod more;\n" + lines
        + "#[cfg(test)]\n#[allow(unused)]\nmod tests {\n" + lines + "}\n",
        "crates/big/src/more.rs": lines * 2,
    }, [])
    source_case("a file that is #![cfg(test)] throughout", {
        "crates/big/src/lib.rs": "mod gen;\n",
        "crates/big/src/gen.rs": "#![cfg(test)]\n" + "".join(f"const X{k}: u8 = 0;\n" for k in range(2 * MAX_LINES)),
    }, [])
    source_case("xtask, tests/ and benches/ are not library sources", {
        "crates/big/src/lib.rs": "pub struct X;\n",
        "crates/big/tests/it.rs": lines * 2,
        "crates/big/benches/b.rs": lines * 2,
        "xtask/src/main.rs": lines * 2 + "fn main() {}\n",
    }, [])

    # Invariant 5, on `cargo tree` output.
    def tree_case(name, tree, want_errors):
        cases.append((name, lambda: (crashpoint_errors(tree), []), list(want_errors), []))

    today_tree = """agent v0.1.0 (/ws/crates/agent)
├── crashpoint feature "default"
│   ├── crashpoint v0.1.0 (/ws/crates/crashpoint)
│   │   └── libc feature "default"
│   │       └── libc v0.2.191
│   └── crashpoint feature "enabled"
│       └── crashpoint v0.1.0 (/ws/crates/crashpoint) (*)
└── durable feature "default" (command-line)
    └── durable v0.1.0 (/ws/crates/durable)
        └── crashpoint feature "default" (*)

durable v0.1.0 (/ws/crates/durable) (*)
"""
    tree_case("crashpoint's default turns crash points on (today's main)", today_tree, [
        'production crate `agent` turns crash points on in its build: agent v0.1.0 -> crashpoint feature '
        '"default" -> crashpoint feature "enabled" (in `cargo tree -e no-dev,features -p durable -p agent`): '
        "crashpoint's `enabled` feature must be off by default"])
    tree_case("a production crate asking for crash points by name", """agent v0.1.0 (/ws/crates/agent)
├── crashpoint v0.1.0 (/ws/crates/crashpoint)
└── durable feature "default" (command-line)
    └── durable v0.1.0 (/ws/crates/durable)
        ├── crashpoint feature "tokio"
        │   └── crashpoint v0.1.0 (/ws/crates/crashpoint) (*)
        └── crashpoint feature "enabled"
            └── crashpoint v0.1.0 (/ws/crates/crashpoint) (*)
""", ['production crate `durable` turns crash points on in its build: agent v0.1.0 -> durable feature '
      '"default" (command-line) -> durable v0.1.0 -> crashpoint feature "enabled"'])
    tree_case("crash points off in production builds", today_tree.replace(
        """│   └── crashpoint feature "enabled"
│       └── crashpoint v0.1.0 (/ws/crates/crashpoint) (*)
""", "").replace("│   ├── crashpoint v0.1.0", "│   └── crashpoint v0.1.0").replace(
        "feature \"default\" (*)", "feature \"tokio\"\n            └── crashpoint v0.1.0 (*)"), [])

    failed = 0
    for name, run, want_errors, want_notes in cases:
        errors, notes = run()
        problems = []
        for want, got, what in ((want_errors, errors, "error"), (want_notes, notes, "note")):
            for w in want:
                if not any(w in g for g in got):
                    problems.append(f"missing {what} containing {w!r}")
            for g in got:
                if not any(w in g for w in want):
                    problems.append(f"unexpected {what}: {g}")
        if problems:
            failed += 1
            print(f"self-test FAILED: {name}")
            for p in problems:
                print(f"    {p}")
        else:
            print(f"self-test ok: {name}")
    # The real entry point's exit status, on a failing and a clean graph.
    with open("/dev/null", "w") as null:
        if report(*check(synthetic(today)), out=null) != 1 or report(*check(synthetic(clean)), out=null) != 0:
            failed += 1
            print("self-test FAILED: exit status 1 on a broken ladder, 0 on a clean one")
    # Each check reports whatever the others find; the worst decides the status.
    with tempfile.TemporaryDirectory() as tmp:
        meta, tree = Path(tmp) / "metadata.json", Path(tmp) / "tree.txt"
        meta.write_text(json.dumps(synthetic(clean)))
        tree.write_text(today_tree)
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            broken = main(["--metadata", str(meta), "--tree", str(tree)])
            tree.write_text(today_tree.replace('"enabled"', '"tokio"'))
            fine = main(["--tree", str(tree), "--metadata", str(meta)])
        printed = out.getvalue()
        if (broken, fine) != (1, 0) or printed.count(f"ok: {LADDER_OK}") != 2 \
                or printed.count("FAILED: production crate `agent` turns crash points on") != 1:
            failed += 1
            print("self-test FAILED: --metadata and --tree: every check reported, exit 1 then 0")
            print("    " + printed.replace("\n", "\n    "))
    if failed:
        print(f"ladder self-test: {failed} of {len(cases) + 2} checks failed")
        return 1
    print(f"ladder self-test: all {len(cases) + 2} checks pass")
    return 0


def cargo(cmd, cwd=None):
    """The standard output of a cargo command, or None after saying why not."""
    try:
        return subprocess.run(cmd, check=True, capture_output=True, text=True, cwd=cwd).stdout
    except (OSError, subprocess.CalledProcessError) as e:
        detail = getattr(e, "stderr", "") or ""
        print(f"ladder: {' '.join(cmd[:2])} failed: {e}\n{detail}", file=sys.stderr)
        return None


def main(argv):
    if argv == ["--self-test"]:
        return self_test()
    saved = {}
    args = list(argv)
    while len(args) >= 2 and args[0] in ("--metadata", "--tree") and args[0] not in saved:
        saved[args[0]], args = args[1], args[2:]
    if args:
        print(__doc__, file=sys.stderr)
        return 2
    metadata = tree = None
    if "--metadata" in saved:
        try:
            with open(saved["--metadata"]) as f:
                metadata = json.load(f)
        except (OSError, ValueError) as e:
            print(f"ladder: cannot read cargo metadata from {saved['--metadata']}: {e}", file=sys.stderr)
            return 2
    if "--tree" in saved:
        try:
            with open(saved["--tree"]) as f:
                tree = f.read()
        except (OSError, UnicodeDecodeError) as e:
            print(f"ladder: cannot read cargo tree output from {saved['--tree']}: {e}", file=sys.stderr)
            return 2
    sources = production = None
    if not saved:
        out = cargo(["cargo", "metadata", "--format-version", "1", "--no-deps"])
        if out is None:
            return 2
        try:
            metadata = json.loads(out)
        except ValueError as e:
            print(f"ladder: cargo metadata printed no JSON: {e}", file=sys.stderr)
            return 2
        sources = source_errors(metadata)
        names = {p["name"] for p in metadata["packages"]}
        production = [c for c in PRODUCTION if c in names]
        tree = cargo(crashpoint_tree_command(production), cwd=metadata.get("workspace_root"))
        if tree is None:
            return 2
    status = 0
    if metadata is not None:
        status |= report(*check(metadata), ok=LADDER_OK)
    if sources is not None:
        status |= report(sources[0], [], ok=MODULES_OK)
        status |= report(sources[1], [], ok=LINES_OK)
    if tree is not None:
        status |= report(crashpoint_errors(tree, production or PRODUCTION), [], ok=CRASHPOINT_OK)
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
