#!/usr/bin/env python3
"""The README's two set-up commands share one build of every registry crate.

`cargo xtask sweep` builds xtask and its dependencies; `cargo test
--workspace` builds every crate with its dev-dependencies. Cargo unifies
features per command, so a registry crate that gets one more feature in the
test build is compiled twice, and with it every crate above it (one extra
feature of libc or serde rebuilt about fifty crates, minutes on two cores).
crates/same-build/Cargo.toml pins those features (xtask, triage and tracker
depend on it); this check fails when the builds drift apart again, naming
the crate, the features and the fix.

    .ci/one_build.py               compare the two builds, CI's build of
                                   crashpoint's default features with the
                                   test build, and the README's
                                   `cargo run -p triage` / `-p tracker`
                                   (after the tests) with the test build
                                   (runs cargo tree)
    .ci/one_build.py --self-test   check this checker on made-up trees

Exit 0: same features everywhere (but the allowed crates below); 1: a
difference; 2: a cargo tree error.
"""
import re
import subprocess
import sys

# Crates allowed to differ, with the reason: none. (ureq was, while xtask
# did not pin agent's model features; the test build then compiled ureq and
# the workspace above it a second time.)
ALLOWED = {}

XTASK = ["cargo", "tree", "-p", "xtask", "-e", "normal,build,features", "-f", "{p} [{f}]", "--prefix", "none"]
# CI's check of crashpoint's default build (`cargo test -p crashpoint --lib`,
# after the test command): its dev-dependencies pin features the same way.
CRASHPOINT = ["cargo", "tree", "-p", "crashpoint", "-e", "normal,build,dev,features", "-f", "{p} [{f}]", "--prefix", "none"]
# The binaries the README runs after the tests: `cargo run -p triage` and
# `cargo run -p tracker` must reuse the test build's registry crates, and
# the workspace's own crates but for the test doubles: a binary links no
# test double it does not use, so a workspace crate the test build gives
# one of TEST_DOUBLES is compiled again without it (a few crates).
BINARIES = ["triage", "tracker"]
TEST_DOUBLES = {"testing"}
# The test doubles a binary uses, by crate: triage declares its tools on an
# in-memory directory and fails its tracker's disk on demand (durable's).
# Any other test double in a binary's build fails the check.
USED_DOUBLES = {"triage": {"durable"}}
TESTS = ["cargo", "tree", "--workspace", "-e", "normal,build,dev,features", "-f", "{p} [{f}]", "--prefix", "none"]

LINE = re.compile(r"^(\S+) v(\S+)( \([^)]*\))?(?: \(\*\))? \[(.*)\]$")


def registry_features(tree, workspace_too=False):
    """{(name, version): set of features} of the registry crates in `tree`
    (crates with a path or git source are the workspace's own: skipped,
    unless `workspace_too`)."""
    out = {}
    for line in tree.splitlines():
        m = LINE.match(line.strip())
        if not m or (m.group(3) and not workspace_too):
            continue
        feats = {f for f in m.group(4).split(",") if f}
        out.setdefault((m.group(1), m.group(2)), set()).update(feats)
    return out


def differences(xtask_tree, test_tree, allowed=ALLOWED, workspace_too=False):
    """One message per registry crate (with `workspace_too`, per crate of the
    workspace too) both builds compile with different features."""
    x = registry_features(xtask_tree, workspace_too)
    t = registry_features(test_tree, workspace_too)
    errors = []
    for key in sorted(x.keys() & t.keys()):
        name, version = key
        if name in allowed or x[key] == t[key]:
            continue
        more = sorted(t[key] - x[key])
        fewer = sorted(x[key] - t[key])
        what = []
        if more:
            what.append(f"the test build adds {', '.join(more)}")
        if fewer:
            what.append(f"only xtask's build has {', '.join(fewer)}")
        errors.append(
            f"{name} {version} is compiled twice by the README's two commands: {'; '.join(what)}. "
            f"Fix: pin `{name} = {{ version = \"…\", features = [{', '.join(repr(f).replace(chr(39), chr(34)) for f in sorted(t[key]))}] }}` "
            f"among crates/same-build/Cargo.toml's feature pins (default-features = false when `default` is not listed)."
        )
    return errors


def binary_differences(binary, bin_tree, test_tree):
    """One message per crate (the workspace's own too) that `cargo run -p
    BINARY` compiles with other features than the test build, so compiles
    again after it."""
    b = registry_features(bin_tree, workspace_too=True)
    t = registry_features(test_tree, workspace_too=True)
    workspace = set(registry_features(bin_tree, workspace_too=True)) - set(registry_features(bin_tree))
    errors = []
    for key in sorted(b.keys() & t.keys()):
        if b[key] == t[key]:
            continue
        if key in workspace and b[key] <= t[key] and t[key] - b[key] <= TEST_DOUBLES:
            continue
        name, version = key
        more = sorted(t[key] - b[key])
        fewer = sorted(b[key] - t[key])
        what = []
        if more:
            what.append(f"the test build adds {', '.join(more)}")
        if fewer:
            what.append(f"only `cargo run -p {binary}` has {', '.join(fewer)}")
        errors.append(
            f"`cargo run -p {binary}` compiles {name} {version} again after `cargo test --workspace`: {'; '.join(what)}. "
            f"Fix: ask for those features in crates/same-build/Cargo.toml (the feature pins)."
        )
    return errors


def linked_doubles(binary, bin_tree, used=None):
    """One message per workspace crate `cargo run -p BINARY` builds with a
    test double (a feature of TEST_DOUBLES) the binary does not use."""
    used = USED_DOUBLES if used is None else used
    workspace = set(registry_features(bin_tree, workspace_too=True)) - set(registry_features(bin_tree))
    errors = []
    for (name, version), feats in sorted(registry_features(bin_tree, workspace_too=True).items()):
        doubles = sorted(feats & TEST_DOUBLES)
        if (name, version) in workspace and doubles and name not in used.get(binary, set()):
            errors.append(
                f"`cargo run -p {binary}` links {name}'s test doubles ({', '.join(doubles)}), which it does not use. "
                f"Fix: find who asks for them (cargo tree -p {binary} -e features -i {name}), or list {name} in USED_DOUBLES."
            )
    return errors


def self_test():
    same = "serde v1.0.0 [default,std]\nsweep v0.1.0 (/w/crates/sweep) [cli]\n"
    more = "serde v1.0.0 [default,rc,std]\nsweep v0.1.0 (/w/crates/sweep) [cli,extra]\n"
    cases = [
        ("same features pass", same, same, 0),
        ("a workspace crate's own features do not count", same, same.replace("[cli]", "[]"), 0),
        ("a registry crate with one more feature fails", same, more, 1),
        ("an allowed crate may differ", "ureq v3.0.0 []\n", "ureq v3.0.0 [rustls]\n", 0),
        ("a workspace crate's features count when asked", same, same.replace("[cli]", "[cli,rc]"), 1),
        ("a crate only one build has does not count", same, same + "rmcp v1.0.0 [default]\n", 0),
        ("a repeated line (*) is the same crate", same, "serde v1.0.0 [default,std] (*)\n" + same, 0),
    ]
    failed = 0
    for name, x, t, want in cases:
        got = differences(x, t, allowed={"ureq": "a test"}, workspace_too="asked" in name)
        ok = len(got) == want and all(("serde" in e or "sweep" in e) and "rc" in e for e in got)
        print(f"{'ok  ' if ok else 'FAIL'} {name}")
        failed += not ok
    binary_cases = [
        ("a binary built with the test build's features passes", same, same, 0),
        ("a binary whose registry crate lacks a feature fails", same, more, 2),
        ("a binary whose workspace crate lacks a feature fails", same, same.replace("[cli]", "[cli,extra]"), 1),
        ("a binary without a test double it does not use passes", same, same.replace("[cli]", "[cli,testing]"), 0),
        ("a binary whose registry crate lacks a test double fails", same, same.replace("[default,std]", "[default,std,testing]"), 1),
    ]
    for name, b, t, want in binary_cases:
        got = binary_differences("triage", b, t)
        ok = len(got) == want and all("cargo run -p triage" in e for e in got)
        print(f"{'ok  ' if ok else 'FAIL'} {name}")
        failed += not ok
    doubles = "sweep v0.1.0 (/w/crates/sweep) [cli,testing]\n"
    double_cases = [
        ("a binary linking a test double it does not use fails", "tracker", doubles, 1),
        ("a binary linking a test double it uses passes", "triage", doubles, 0),
        ("a registry crate's feature named testing is not a test double here", "tracker", "serde v1.0.0 [testing]\n", 0),
    ]
    for name, binary, tree_text, want in double_cases:
        got = linked_doubles(binary, tree_text, used={"triage": {"sweep"}})
        ok = len(got) == want
        print(f"{'ok  ' if ok else 'FAIL'} {name}")
        failed += not ok
    return 1 if failed else 0


def tree(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        print(f"one_build: `{' '.join(cmd)}` failed:\n{r.stderr}", file=sys.stderr)
        sys.exit(2)
    return r.stdout


def main(argv):
    if argv == ["--self-test"]:
        return self_test()
    if argv:
        print(__doc__, file=sys.stderr)
        return 2
    tests = tree(TESTS)
    # The workspace's crates too: xtask pins their test-build features, so
    # the test build reuses the first command's build whole, xtask included.
    errors = differences(tree(XTASK), tests, workspace_too=True)
    errors += [e.replace("the README's two commands", "CI's crashpoint step and the test command").replace("crates/same-build/Cargo.toml", "crates/crashpoint/Cargo.toml")
               for e in differences(tree(CRASHPOINT), tests)]
    for binary in BINARIES:
        bin_tree = tree(["cargo", "tree", "-p", binary, "-e", "normal,build,features", "-f", "{p} [{f}]", "--prefix", "none"])
        errors += binary_differences(binary, bin_tree, tests)
        errors += linked_doubles(binary, bin_tree)
    for e in errors:
        print(f"one_build: {e}", file=sys.stderr)
    if not errors:
        print("one_build: `cargo xtask sweep` and `cargo test --workspace` compile every crate with the same features"
              f"; `cargo run -p {'` and `-p '.join(BINARIES)}` reuse the test build (but for test doubles they do not link)")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
