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
/// new output; with [`blessing`] on, the file is rewritten instead.
pub fn check(path: &Path, actual: &str) -> Result<(), String> {
    let expected = match std::fs::read_to_string(path) {
        Ok(text) => Some(text),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => return Err(format!("cannot read snapshot {}: {e}", path.display())),
    };
    if expected.as_deref() == Some(actual) {
        return Ok(());
    }
    if blessing() {
        return std::fs::write(path, actual)
            .map_err(|e| format!("cannot write snapshot {}: {e}", path.display()));
    }
    let mut msg = match &expected {
        None => format!(
            "snapshot {} does not exist; new output:\n{actual}",
            path.display()
        ),
        Some(exp) => format!(
            "snapshot {} differs (- reviewed, + this run):\n{}",
            path.display(),
            diff(exp, actual)
        ),
    };
    msg.push_str(
        "\nIf the new output is right, accept it by rerunning the sweep with --bless \
         (`cargo xtask sweep --bless` in this workspace; CRASHSWEEP_BLESS=1 for a test) \
         and say in review why the numbers moved.",
    );
    Err(msg)
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
        let dir = std::env::temp_dir().join(format!("sweep-snap-dir-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let e = check(&dir, "x\n").unwrap_err();
        assert!(e.starts_with("cannot read snapshot"), "{e}");
        assert!(dir.is_dir());
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn check_reports_a_missing_and_a_different_snapshot() {
        let dir = std::env::temp_dir().join(format!("sweep-snap-{}", std::process::id()));
        let _ = std::fs::create_dir_all(&dir);
        let p = dir.join("t.txt");
        let _ = std::fs::remove_file(&p);
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
        let _ = std::fs::remove_dir_all(&dir);
    }
}
