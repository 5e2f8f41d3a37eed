#!/usr/bin/env python3
"""Functions you can hold in your head: no function of the workspace's
library or binary code is over MAX_LINES lines, but those on the allow-list,
which may only shrink.

The rule (what is counted):

- The files: every file of a library or binary target under crates/*/src
  and xtask/src, reached from the target's root (src/lib.rs, src/main.rs,
  src/bin/*.rs) through `mod name;`. Not tests/, examples/ or benches/, and
  not a file reached only through `#[cfg(test)] mod name;`.
- The functions: every `fn name … { … }` with a body, outside
  `#[cfg(test)]` items. Methods, trait default methods and functions
  nested in other functions count each on their own (a nested function's
  lines count in its outer function too); closures count in the function
  that holds them. A declaration without a body (`fn f();`) is not counted.
- A function's length: from the line of its `fn` keyword through the line
  of its closing `}`, both included, blank lines and comments too.
  Attributes and doc comments above the `fn` are not counted.
- A function's name: `path::fn`, or `path::Type::fn` inside `impl … Type`
  or `trait Type`, with the names of enclosing inline modules and functions
  between (`path::outer::inner`). The k-th function of the same name in one
  file (k ≥ 2) is `name#k`.

The reading of Rust is ladder.py's rough one (comments, literals and
`#[cfg(test)]` items blanked, brackets matched), not a parser.

The allow-list, ALLOW_LIST (`name lines` per line, `#` starts a comment
line), holds the functions over the limit when this check began, each with
its length then. It may only shrink. The check fails when:

- a function not on the list is over MAX_LINES lines (split it by phase:
  extract well-named helpers);
- a listed function grew past its listed length;
- a listed function no longer exists, or is now MAX_LINES lines or fewer
  (remove its line: the list shrinks as functions are split);
- the list holds more than MAX_LISTED functions.

A listed function that shrank but is still over the limit is a note: lower
its number (`--tighten` rewrites the list with today's lengths, dropping
what is gone or short; it never adds a line).

Usage:
    .ci/functions.py               check the workspace against the list
    .ci/functions.py --tighten     rewrite the list: lower numbers, drop
                                   functions now short or gone
    .ci/functions.py --top N       print the N longest functions counted
    .ci/functions.py --self-test   check the checker on synthetic sources

Exit status: 0 when the rule holds, 1 when it does not, 2 on a usage error
or an unreadable list.
"""

import importlib.util
import re
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
ALLOW_LIST = HERE / "long-functions.txt"
# The longest a function may be, in lines.
MAX_LINES = 70
# The most functions the allow-list may hold.
MAX_LISTED = 23

_spec = importlib.util.spec_from_file_location("ladder", HERE / "ladder.py")
ladder = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(ladder)

FN = re.compile(r"(?<![\w$])fn\s+(?:r#)?(\w+)")
# A block that names the functions inside it: `impl … {`, `trait X … {`,
# `mod x {`.
SCOPE = re.compile(r"(?<![\w$])(impl|trait|mod)(?![\w$])")


def body_start(code, i):
    """The offset of the `{` opening the body of the item whose header starts
    at code[i], or None when the item ends with `;` first (no body)."""
    n = len(code)
    while i < n:
        c = code[i]
        if c in "([":
            i = ladder.matching(code, i)
            continue
        if c == ";" or c == "}":
            return None
        if c == "{":
            return i
        i += 1
    return None


def strip_angles(text):
    """`text` without its `<…>` groups (`->` is not a bracket)."""
    text = text.replace("->", "  ")
    out, depth = [], 0
    for c in text:
        if c == "<":
            depth += 1
        elif c == ">":
            depth = max(0, depth - 1)
        elif depth == 0:
            out.append(c)
    return "".join(out)


def scope_name(kind, header):
    """The name a scope gives the functions inside it: a module's or trait's
    name, an impl's self type (its last path segment, generics dropped)."""
    header = strip_angles(header)
    header = re.split(r"(?<![\w$])where(?![\w$])", header)[0]
    if kind == "impl":
        parts = re.split(r"(?<![\w$])for(?![\w$])", header)
        header = parts[-1]
    words = re.findall(r"\w+", header)
    return words[-1] if words else kind


def functions(code):
    """[(name, start, end)] of the functions of `code` (blanked), with their
    qualified names (without the file's path); start is the offset of `fn`,
    end just past the closing `}`."""
    scopes = []
    for m in SCOPE.finditer(code):
        open_brace = body_start(code, m.end())
        if open_brace is None:
            continue
        name = scope_name(m.group(1), code[m.end():open_brace])
        scopes.append((m.start(), open_brace, ladder.matching(code, open_brace), name))
    found = []
    for m in FN.finditer(code):
        open_brace = body_start(code, m.end())
        if open_brace is None:
            continue
        end = ladder.matching(code, open_brace)
        scopes.append((m.start(), open_brace, end, m.group(1)))
        found.append((m.group(1), m.start(), open_brace, end))
    out, seen = [], {}
    for name, start, open_brace, end in found:
        outer = sorted((s for s in scopes if s[1] < start and end <= s[2]), key=lambda s: s[1])
        qual = "::".join([s[3] for s in outer] + [name])
        seen[qual] = seen.get(qual, 0) + 1
        if seen[qual] > 1:
            qual = f"{qual}#{seen[qual]}"
        out.append((qual, start, end))
    return out


def source_files(root, metadata):
    """The files counted: crates/*/src and xtask/src, reached from a lib or
    bin root without going through `#[cfg(test)]`."""
    members = set(metadata.get("workspace_members", []))
    files = set()
    for p in metadata["packages"]:
        if p["id"] not in members:
            continue
        crate_dir = Path(p["manifest_path"]).parent
        if crate_dir.parent != root / "crates" and crate_dir != root / "xtask":
            continue
        for r in ladder.target_roots(p):
            files.update(ladder.discover(r).values())
    return sorted(files)


def measure(root, files):
    """{name: lines} over `files`, names prefixed with the file's path
    relative to `root`."""
    lengths = {}
    for f in files:
        src = ladder.Source(f)
        rel = f.relative_to(root).as_posix()
        for qual, start, end in functions(src.code):
            lengths[f"{rel}::{qual}"] = src.line(end - 1) - src.line(start) + 1
    return lengths


def read_list(text):
    """{name: lines} from the allow-list's text, or raises ValueError."""
    listed = {}
    for k, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        parts = line.split()
        if len(parts) != 2 or not parts[1].isdigit():
            raise ValueError(f"line {k}: want `path::fn lines`, got {line!r}")
        if parts[0] in listed:
            raise ValueError(f"line {k}: {parts[0]} is listed twice")
        listed[parts[0]] = int(parts[1])
    return listed


def check(lengths, listed, limit=MAX_LINES, max_listed=MAX_LISTED):
    """(errors, notes) of `lengths` ({name: lines}) against `listed`."""
    errors, notes = [], []
    if len(listed) > max_listed:
        errors.append(f"the allow-list holds {len(listed)} functions, over the most allowed ({max_listed}): "
                      "split functions instead of listing them")
    for name, n in sorted(lengths.items()):
        if n <= limit or name in listed:
            continue
        errors.append(f"{name} has {n} lines, over the limit of {limit}: split it by phase "
                      "(extract well-named helpers); the allow-list takes no new functions")
    for name, was in sorted(listed.items()):
        n = lengths.get(name)
        if n is None:
            errors.append(f"{name} is on the allow-list but no longer exists: remove its line "
                          "(renamed? a renamed function is a new one, held to the limit)")
        elif n <= limit:
            errors.append(f"{name} now has {n} lines, within the limit of {limit}: remove its line "
                          "from the allow-list, so it stays short")
        elif n > was:
            errors.append(f"{name} grew from {was} to {n} lines: the allow-list only shrinks; "
                          "split it by phase instead")
        elif n < was:
            notes.append(f"{name} shrank from {was} to {n} lines: lower its number "
                         "(.ci/functions.py --tighten)")
    return errors, notes


def tightened(text, lengths, limit=MAX_LINES):
    """The allow-list's text with today's lengths where they are lower, and
    without the lines of functions gone or within the limit."""
    out = []
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 2 and not line.lstrip().startswith("#") and parts[1].isdigit():
            n = lengths.get(parts[0])
            if n is None or n <= limit:
                continue
            line = f"{parts[0]} {min(n, int(parts[1]))}"
        out.append(line)
    return "\n".join(out) + "\n"


def report(errors, notes, out=None):
    out = out or sys.stdout
    for n in notes:
        print(f"functions: note: {n}", file=out)
    for e in errors:
        print(f"functions: FAILED: {e}", file=out)
    if not errors:
        print(f"functions: ok: no function over {MAX_LINES} lines but the allow-list's "
              f"(.ci/long-functions.txt), none of which grew", file=out)
    return 1 if errors else 0


# ---------------------------------------------------------------- self-test


def self_test():
    def body(n):
        """A function body of n lines in all (its fn and } lines included)."""
        return " {\n" + "    x();\n" * (n - 2) + "}\n"

    failures = 0

    def expect(what, got, want):
        nonlocal failures
        if got != want:
            failures += 1
            print(f"functions self-test: FAILED: {what}: got {got!r}, want {want!r}")

    def lengths_of(text):
        code = ladder.blank_literals(text)
        code = ladder.blank_regions(code, ladder.test_regions(code))
        newlines = [k for k, c in enumerate(code) if c == "\n"]
        line = lambda o: sum(1 for k in newlines if k < o) + 1  # noqa: E731
        return {q: line(e - 1) - line(s) + 1 for q, s, e in functions(code)}

    src = (
        "/// doc\n#[inline]\npub fn a(x: u8)" + body(3)
        + "fn decl();\n"
        + "impl<'a, T: Fn() -> u8> fmt::Display for Thing<'a, T> where T: Clone {\n"
        + "    fn fmt(&self)" + body(4) + "}\n"
        + "impl Other {\n    fn fmt(&self)" + body(2) + "}\n"
        + "trait T {\n    fn req(&self);\n    fn dflt(&self)" + body(2) + "}\n"
        + "mod inner {\n    fn b() {\n        fn nested() {}\n        let s = \"fn fake() {\";\n    }\n}\n"
        + "#[cfg(test)]\nmod tests {\n    fn hidden()" + body(90) + "}\n"
        + "fn dup()" + body(2) + "fn dup()" + body(5)
        + "// fn commented() {\n"
        + "fn ret() -> impl Fn(u8) -> [u8; 2] {\n    |_| [0; 2]\n}\n"
    )
    expect("lengths of the synthetic file", lengths_of(src), {
        "a": 3, "Thing::fmt": 4, "Other::fmt": 2, "T::dflt": 2, "inner::b": 4, "inner::b::nested": 1,
        "dup": 2, "dup#2": 5, "ret": 3,
    })

    lengths = {"f.rs::long": 80, "f.rs::short": 10, "f.rs::listed": 90, "f.rs::shrunk": 75,
               "f.rs::grown": 101, "f.rs::split": 40}
    listed = {"f.rs::listed": 90, "f.rs::shrunk": 80, "f.rs::grown": 100, "f.rs::split": 72,
              "f.rs::gone": 99}
    errors, notes = check(lengths, listed, limit=70, max_listed=5)
    expect("errors", errors, [
        "f.rs::long has 80 lines, over the limit of 70: split it by phase (extract well-named helpers); "
        "the allow-list takes no new functions",
        "f.rs::gone is on the allow-list but no longer exists: remove its line (renamed? a renamed "
        "function is a new one, held to the limit)",
        "f.rs::grown grew from 100 to 101 lines: the allow-list only shrinks; split it by phase instead",
        "f.rs::split now has 40 lines, within the limit of 70: remove its line from the allow-list, "
        "so it stays short",
    ])
    expect("notes", notes, ["f.rs::shrunk shrank from 80 to 75 lines: lower its number (.ci/functions.py --tighten)"])
    expect("a clean workspace", check({"f.rs::a": 70, "f.rs::b": 71}, {"f.rs::b": 71}), ([], []))
    expect("too long a list", check({}, {"a": 80, "b": 80}, max_listed=1)[0][0][:41],
           "the allow-list holds 2 functions, over th")
    expect("the list read", read_list("# c\n\na.rs::f 80\n"), {"a.rs::f": 80})
    for bad in ("a.rs::f\n", "a.rs::f x\n", "a.rs::f 80\na.rs::f 81\n"):
        try:
            read_list(bad)
            expect(f"a bad list {bad!r}", "read", "ValueError")
        except ValueError:
            pass
    expect("tightened", tightened("# c\nf.rs::shrunk 80\nf.rs::split 72\nf.rs::gone 99\nf.rs::grown 100\n", lengths),
           "# c\nf.rs::shrunk 75\nf.rs::grown 100\n")

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        files = {
            "crates/m/src/lib.rs": "mod a;\n#[cfg(test)]\nmod t;\nfn root()" + body(71),
            "crates/m/src/a.rs": "fn in_a()" + body(5),
            "crates/m/src/t.rs": "fn test_only()" + body(200),
            "crates/m/tests/it.rs": "fn integration()" + body(200),
            "xtask/src/main.rs": "fn main()" + body(3),
        }
        for rel, text in files.items():
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            (root / rel).write_text(text)
        metadata = {"workspace_members": ["m", "x"], "workspace_root": tmp, "packages": [
            {"id": "m", "manifest_path": f"{tmp}/crates/m/Cargo.toml",
             "targets": [{"kind": ["lib"], "src_path": f"{tmp}/crates/m/src/lib.rs"}]},
            {"id": "x", "manifest_path": f"{tmp}/xtask/Cargo.toml",
             "targets": [{"kind": ["bin"], "src_path": f"{tmp}/xtask/src/main.rs"}]},
        ]}
        expect("the files counted", measure(root, source_files(root, metadata)),
               {"crates/m/src/lib.rs::root": 71, "crates/m/src/a.rs::in_a": 5, "xtask/src/main.rs::main": 3})

    if failures:
        print(f"functions self-test: {failures} case(s) failed")
        return 1
    print("functions self-test: ok")
    return 0


def metadata_of(root):
    out = ladder.cargo(["cargo", "metadata", "--format-version", "1", "--no-deps"], cwd=root)
    if out is None:
        return None
    import json
    return json.loads(out)


def main(argv):
    if argv == ["--self-test"]:
        return self_test()
    if argv not in ([], ["--tighten"]) and not (len(argv) == 2 and argv[0] == "--top" and argv[1].isdigit()):
        print(__doc__, file=sys.stderr)
        return 2
    metadata = metadata_of(ROOT)
    if metadata is None:
        return 2
    root = Path(metadata["workspace_root"])
    lengths = measure(root, source_files(root, metadata))
    if argv[:1] == ["--top"]:
        over = sum(1 for n in lengths.values() if n > MAX_LINES)
        print(f"{len(lengths)} functions, {over} over {MAX_LINES} lines, "
              f"{sum(1 for n in lengths.values() if n > 100)} over 100")
        for name, n in sorted(lengths.items(), key=lambda kv: (-kv[1], kv[0]))[:int(argv[1])]:
            print(f"{n:5} {name}")
        return 0
    try:
        text = ALLOW_LIST.read_text(encoding="utf-8")
        listed = read_list(text)
    except (OSError, ValueError) as e:
        print(f"functions: cannot read the allow-list {ALLOW_LIST.relative_to(ROOT)}: {e}", file=sys.stderr)
        return 2
    if argv == ["--tighten"]:
        ALLOW_LIST.write_text(tightened(text, lengths), encoding="utf-8")
        listed = read_list(ALLOW_LIST.read_text(encoding="utf-8"))
    return report(*check(lengths, listed))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
