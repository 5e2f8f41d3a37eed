//! Reviewed snapshots: a rendered table kept in a file and compared on every
//! run, so a change in any count shows up as a readable diff.

use std::path::Path;

/// Whether this run may rewrite snapshots: `CRASHSWEEP_BLESS=1` is set and
/// `CI` is not (under CI snapshots are never written).
pub fn blessing() -> bool {
    blessing_in(
        std::env::var("CI").ok().as_deref(),
        std::env::var("CRASHSWEEP_BLESS").ok().as_deref(),
    )
}

/// [`blessing`] for these values of `CI` and `CRASHSWEEP_BLESS`.
fn blessing_in(ci: Option<&str>, bless: Option<&str>) -> bool {
    bless.is_some_and(|v| v == "1" || v == "true") && !under_ci(ci)
}

/// Whether a value of the `CI` variable means "this is CI": set and not
/// empty, `0`, `false` or `no` (any case). `CI=false` is not CI.
pub fn under_ci(value: Option<&str>) -> bool {
    value.is_some_and(|v| {
        let v = v.trim().to_ascii_lowercase();
        !(v.is_empty() || v == "0" || v == "false" || v == "no")
    })
}

/// Compare `actual` with the snapshot at `path`. When they differ (or the
/// file is missing) the error is a line diff and the command that accepts the
/// new output; with [`blessing`] on, the file is rewritten instead. For
/// tests, which have no flags of their own; a command line uses
/// [`compare`] and a flag.
pub fn check(path: &Path, actual: &str) -> Result<(), String> {
    match mismatch(path, actual)? {
        None => Ok(()),
        Some(_) if blessing() => std::fs::write(path, actual)
            .map_err(|e| format!("cannot write snapshot {}: {e}", path.display())),
        Some(msg) => Err(format!(
            "{msg}\nIf the new output is right, accept it by rerunning the sweep with --bless \
             (`cargo xtask sweep --bless` in this workspace; CRASHSWEEP_BLESS=1 for a test) \
             and say in review why the numbers moved."
        )),
    }
}

/// Compare `actual` with the snapshot at `path` and never write it,
/// whatever the environment says: the error is [`check`]'s diff, ending
/// with `accept`, the way to accept the new output. A command line that
/// blesses only on its own flag (as `sweep::cli` does with `--bless`)
/// compares with this, so that a `CRASHSWEEP_BLESS=1` left in a shell
/// cannot rewrite a reviewed table behind its back.
///
/// ```
/// let dir = tempfile::tempdir().unwrap();
/// let path = dir.path().join("table.txt");
/// let e = sweep::report::snapshot::compare(&path, "a\n", "rerun with --bless").unwrap_err();
/// assert!(e.contains("does not exist") && e.ends_with("rerun with --bless"));
/// assert!(!path.exists());
/// std::fs::write(&path, "a\n").unwrap();
/// assert!(sweep::report::snapshot::compare(&path, "a\n", "").is_ok());
/// ```
pub fn compare(path: &Path, actual: &str, accept: &str) -> Result<(), String> {
    match mismatch(path, actual)? {
        None => Ok(()),
        Some(msg) => Err(format!("{msg}\n{accept}")),
    }
}

/// `None` when the snapshot at `path` holds `actual`; else what differs
/// (a missing file, or a line diff). A snapshot that cannot be read is
/// an error.
fn mismatch(path: &Path, actual: &str) -> Result<Option<String>, String> {
    let expected = match std::fs::read_to_string(path) {
        Ok(text) => Some(text),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => return Err(format!("cannot read snapshot {}: {e}", path.display())),
    };
    Ok(match &expected {
        Some(exp) if exp == actual => None,
        None => Some(format!(
            "snapshot {} does not exist; new output:\n{actual}",
            path.display()
        )),
        Some(exp) => Some(format!(
            "snapshot {} differs (- reviewed, + this run):\n{}",
            path.display(),
            diff(exp, actual)
        )),
    })
}

/// A minimal line diff (longest common subsequence), enough for tables.
pub fn diff(old: &str, new: &str) -> String {
    let a: Vec<&str> = old.lines().collect();
    let b: Vec<&str> = new.lines().collect();
    let mut lcs = vec![vec![0usize; b.len() + 1]; a.len() + 1];
    for i in (0..a.len()).rev() {
        for j in (0..b.len()).rev() {
            lcs[i][j] = if a[i] == b[j] {
                lcs[i + 1][j + 1] + 1
            } else {
                lcs[i + 1][j].max(lcs[i][j + 1])
            };
        }
    }
    let (mut i, mut j, mut out) = (0, 0, String::new());
    while i < a.len() || j < b.len() {
        if i < a.len() && j < b.len() && a[i] == b[j] {
            out.push_str(&format!("  {}\n", a[i]));
            i += 1;
            j += 1;
        } else if j < b.len() && (i == a.len() || lcs[i][j + 1] >= lcs[i + 1][j]) {
            out.push_str(&format!("+ {}\n", b[j]));
            j += 1;
        } else {
            out.push_str(&format!("- {}\n", a[i]));
            i += 1;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn diff_marks_changed_lines() {
        let d = diff("a\nb\nc\n", "a\nx\nc\n");
        assert_eq!(d, "  a\n+ x\n- b\n  c\n");
        // Where the longest common run decides between + and -.
        assert_eq!(diff("a\nb\n", "b\nb\n"), "+ b\n- a\n  b\n");
        assert_eq!(diff("a\nb\na\n", "b\na\n"), "- a\n  b\n  a\n");
        assert_eq!(diff("a\nb\n", "b\nc\na\n"), "+ b\n+ c\n  a\n- b\n");
        // Lines left at either end.
        assert_eq!(diff("a\nb\n", "a\n"), "  a\n- b\n");
        assert_eq!(diff("a\n", "a\nb\n"), "  a\n+ b\n");
        assert_eq!(diff("", "a\n"), "+ a\n");
        assert_eq!(diff("a\n", ""), "- a\n");
    }

    #[test]
    fn blessing_needs_crashsweep_bless_and_no_ci() {
        for bless in ["1", "true"] {
            assert!(blessing_in(None, Some(bless)));
            assert!(blessing_in(Some("false"), Some(bless)));
            assert!(!blessing_in(Some("true"), Some(bless)));
            assert!(!blessing_in(Some("1"), Some(bless)));
        }
        for bless in [None, Some("0"), Some("yes"), Some("")] {
            assert!(!blessing_in(None, bless), "{bless:?}");
        }
    }

    #[test]
    fn ci_is_any_value_but_empty_0_false_or_no() {
        for v in ["true", "1", "yes", "github"] {
            assert!(under_ci(Some(v)), "{v}");
        }
        for v in ["", " ", "0", "false", "FALSE", "No"] {
            assert!(!under_ci(Some(v)), "{v:?}");
        }
        assert!(!under_ci(None));
    }

    /// A snapshot that cannot be read (here a directory) is an error, not
    /// a missing file to write or report as new.
    #[test]
    fn an_unreadable_snapshot_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        for e in [
            check(dir.path(), "x\n").unwrap_err(),
            compare(dir.path(), "x\n", "").unwrap_err(),
        ] {
            assert!(e.starts_with("cannot read snapshot"), "{e}");
        }
        assert!(dir.path().is_dir());
    }

    #[test]
    fn check_reports_a_missing_and_a_different_snapshot() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("t.txt");
        if !blessing() {
            assert!(check(&p, "x\n").unwrap_err().contains("does not exist"));
            std::fs::write(&p, "x\n").unwrap();
            assert!(check(&p, "x\n").is_ok());
            let e = check(&p, "y\n").unwrap_err();
            assert!(
                e.contains("- x") && e.contains("+ y") && e.contains("--bless"),
                "{e}"
            );
        }
    }

    /// `compare` never writes, whatever the environment; its error ends
    /// with the way to accept the new output.
    #[test]
    fn compare_reports_and_never_writes() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("t.txt");
        let e = compare(&p, "x\n", "accept: rerun with --bless").unwrap_err();
        assert!(e.contains("does not exist; new output:\nx\n"), "{e}");
        assert!(e.ends_with("\naccept: rerun with --bless"), "{e}");
        assert!(!p.exists());
        std::fs::write(&p, "x\n").unwrap();
        assert_eq!(compare(&p, "x\n", "-"), Ok(()));
        let e = compare(&p, "y\n", "-").unwrap_err();
        assert!(
            e.contains("differs") && e.contains("- x") && e.contains("+ y"),
            "{e}"
        );
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "x\n");
    }
}
