#!/usr/bin/env python3
"""The dependency ladder of the workspace, checked from `cargo metadata`.

Invariants (ARCHITECTURE.md states them; this script is their check):

1. A production crate depends (normally: not as a dev- or build-dependency)
   only on production crates below it on the ladder. The ladder is
   PRODUCTION, bottom rung first; every other workspace crate is a harness
   crate (it exists to test, sweep or demonstrate) and no production crate
   may depend on it. Optional dependencies count: a feature can turn them on.
2. No workspace crates depend on each other in a circle through normal and
   build dependencies.

Dev-dependency circles (cargo allows them: `a`'s tests use `b`, which depends
on `a`) are reported as notes, not failures: integration tests link the one
`a`, but `a`'s unit tests would see two copies of its types.

Usage:
    .ci/ladder.py                  check this workspace (runs cargo metadata)
    .ci/ladder.py --metadata FILE  check saved `cargo metadata` output
    .ci/ladder.py --self-test      check the checker on synthetic graphs

Exit status: 0 when the ladder holds, 1 when it does not, 2 on a usage or
metadata error.
"""

import json
import subprocess
import sys

# The single source of truth: the production crates, bottom rung first. A
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


def cycles(graph, kinds):
    """The strongly connected components with a circle, over edges of `kinds`
    (Tarjan's algorithm), each as a sorted list of crate names."""
    adj = {a: sorted({b for b, k, _ in es if k in kinds and b in graph}) for a, es in graph.items()}
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


def circle_text(graph, comp, kinds):
    """One circle through `comp`, written a -> b -> … -> a."""
    inside = set(comp)
    adj = {a: [b for b, k, _ in graph[a] if k in kinds and b in inside] for a in comp}
    start = comp[0]
    # Breadth-first search for the shortest way back to start.
    prev, frontier, seen = {}, [start], {start}
    while frontier:
        nxt = []
        for v in frontier:
            for w in adj[v]:
                if w == start:
                    path = [v]
                    while path[-1] != start:
                        path.append(prev[path[-1]])
                    return " -> ".join(reversed(path)) + " -> " + start
                if w not in seen:
                    seen.add(w)
                    prev[w] = v
                    nxt.append(w)
        frontier = nxt
    return " -> ".join(comp)


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
    rung = {c: i for i, c in enumerate(production)}
    for crate in production:
        for dep, kind, optional in graph.get(crate, []):
            if kind != "normal":
                continue
            how = "an optional (feature-gated) normal" if optional else "a normal"
            if dep not in rung:
                known = "" if dep in KNOWN_HARNESS else ", as is every workspace crate not in PRODUCTION"
                errors.append(
                    f"production crate `{crate}` has {how} dependency on `{dep}`, "
                    f"a harness crate{known}: move the code that needs `{dep}` into a "
                    f"harness crate, or make `{dep}` a dev-dependency of `{crate}`"
                )
            elif rung[dep] >= rung[crate]:
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


def report(errors, notes, out=sys.stdout):
    for n in notes:
        print(f"ladder: note: {n}", file=out)
    for e in errors:
        print(f"ladder: FAILED: {e}", file=out)
    if not errors:
        print(
            f"ladder: ok: production crates {' < '.join(PRODUCTION)} depend on no harness "
            "crate, and no workspace crates depend on each other in a circle",
            file=out,
        )
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
        cases.append((name, crates, list(want_errors), list(want_notes), production))

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

    failed = 0
    for name, crates, want_errors, want_notes, production in cases:
        errors, notes = check(synthetic(crates), production)
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
    if failed:
        print(f"ladder self-test: {failed} of {len(cases) + 1} checks failed")
        return 1
    print(f"ladder self-test: all {len(cases) + 1} checks pass")
    return 0


def main(argv):
    if argv == ["--self-test"]:
        return self_test()
    if len(argv) == 2 and argv[0] == "--metadata":
        try:
            with open(argv[1]) as f:
                metadata = json.load(f)
        except (OSError, ValueError) as e:
            print(f"ladder: cannot read cargo metadata from {argv[1]}: {e}", file=sys.stderr)
            return 2
    elif not argv:
        try:
            out = subprocess.run(
                ["cargo", "metadata", "--format-version", "1", "--no-deps"],
                check=True, capture_output=True, text=True,
            ).stdout
            metadata = json.loads(out)
        except (OSError, subprocess.CalledProcessError, ValueError) as e:
            detail = getattr(e, "stderr", "") or ""
            print(f"ladder: cargo metadata failed: {e}\n{detail}", file=sys.stderr)
            return 2
    else:
        print(__doc__, file=sys.stderr)
        return 2
    return report(*check(metadata))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
