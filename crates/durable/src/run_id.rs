//! Run IDs: the name of a run's files, and the uniqueness behind its keys.

use std::fmt;
use std::str::FromStr;
use std::time::{SystemTime, UNIX_EPOCH};

use crate::error::{Error, Result};

/// The ID of one run, checked to be a safe file-name stem.
///
/// A run's files are `<id>.json` and `<id>.lock` inside the checkpoint
/// directory, and the ID comes from users and command lines, so
/// [`RunId::parse`] admits only 1 to [`RunId::MAX_LEN`] bytes of ASCII
/// letters, digits, `-`, `_` and `.`, with no leading `.` and no `..`: such
/// an ID can never name a file outside the directory, nor a hidden temp file.
///
/// The ID also carries the uniqueness of every idempotency [`key`](crate::key)
/// the run sends, so it must never be reused: [`RunId::generate`] builds one
/// from the task, the time and eight random characters.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RunId(String);

impl RunId {
    /// The longest run ID, in bytes; it keeps `<id>.json` and the temp names
    /// well below common file-name limits (255 bytes).
    pub const MAX_LEN: usize = 128;

    /// Check `s` and wrap it, or say why it is not a safe run ID.
    pub fn parse(s: &str) -> Result<RunId> {
        let invalid = |reason: &str| Error::InvalidRunId {
            id: s.to_owned(),
            reason: reason.to_owned(),
        };
        if s.is_empty() {
            return Err(invalid("it is empty"));
        }
        if s.len() > Self::MAX_LEN {
            return Err(Error::InvalidRunId {
                id: s.to_owned(),
                reason: format!(
                    "it is {} bytes long, the limit is {}",
                    s.len(),
                    Self::MAX_LEN
                ),
            });
        }
        if let Some(c) = s
            .chars()
            .find(|&c| !(c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.')))
        {
            return Err(Error::InvalidRunId {
                id: s.to_owned(),
                reason: format!(
                    "it contains {c:?}; only ASCII letters, digits, '-', '_' and '.' are allowed"
                ),
            });
        }
        if s.starts_with('.') {
            return Err(invalid("it starts with '.'"));
        }
        if s.contains("..") {
            return Err(invalid("it contains \"..\""));
        }
        Ok(RunId(s.to_owned()))
    }

    /// A fresh ID `<task>-<unix seconds>-<8 random [a-z0-9]>`.
    ///
    /// The task is sanitised (every character that is not an ASCII letter,
    /// digit, `-` or `_` becomes `-`, runs of `-` collapse, at most 64 bytes,
    /// `run` if nothing is left), so the result always parses. The random
    /// part keeps two runs started in the same second apart; the time keeps
    /// IDs readable and sortable. A clock before 1970 counts as 0.
    pub fn generate(task: &str, now: SystemTime) -> RunId {
        use rand::Rng;
        const TASK_MAX: usize = 64;
        const CHARS: &[u8] = b"abcdefghijklmnopqrstuvwxyz0123456789";

        let mut stem = String::with_capacity(task.len().min(TASK_MAX));
        for c in task.chars() {
            let c = if c.is_ascii_alphanumeric() || c == '_' {
                c
            } else {
                '-'
            };
            if c == '-' && (stem.is_empty() || stem.ends_with('-')) {
                continue;
            }
            if stem.len() == TASK_MAX {
                break;
            }
            stem.push(c);
        }
        let stem = stem.trim_end_matches('-');
        let stem = if stem.is_empty() { "run" } else { stem };

        let secs = now
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0);
        let mut rng = rand::thread_rng();
        let random: String = (0..8)
            .map(|_| char::from(CHARS[rng.gen_range(0..CHARS.len())]))
            .collect();
        let id = RunId(format!("{stem}-{secs}-{random}"));
        debug_assert!(RunId::parse(id.as_str()).is_ok(), "generated {id}");
        id
    }

    /// The ID as a string.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for RunId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl FromStr for RunId {
    type Err = Error;

    /// Same as [`RunId::parse`], for `str::parse` and command-line parsers.
    fn from_str(s: &str) -> Result<RunId> {
        RunId::parse(s)
    }
}

impl AsRef<str> for RunId {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn reason(s: &str) -> String {
        match RunId::parse(s) {
            Err(Error::InvalidRunId { id, reason }) => {
                assert_eq!(id, s);
                reason
            }
            other => panic!("{s:?}: expected InvalidRunId, got {other:?}"),
        }
    }

    #[test]
    fn accepts_plain_ids() {
        for s in ["a", "triage-1700000000-ab12cd34", "A_b.c-d", "x.json", "1"] {
            assert_eq!(RunId::parse(s).unwrap().as_str(), s);
        }
        assert!(RunId::parse(&"a".repeat(128)).is_ok());
    }

    #[test]
    fn rejects_ids_that_escape_or_hide() {
        assert!(reason("").contains("empty"));
        assert!(reason("../x").contains("'/'"));
        assert!(reason("a/b").contains("'/'"));
        assert!(reason("..").contains("'.'"));
        assert!(reason(".hidden").contains("starts with '.'"));
        assert!(reason("a..b").contains(".."));
        assert!(reason("a\nb").contains("'\\n'"));
        assert!(reason("a\0b").contains("'\\0'"));
        assert!(reason("a b").contains("' '"));
        assert!(reason("é").contains("'é'"));
        assert!(reason(&"a".repeat(129)).contains("129 bytes"));
    }

    #[test]
    fn generate_sanitises_and_parses() {
        let t = UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        let id = RunId::generate("m1 done/after..delete!", t);
        let s = id.as_str();
        assert!(s.starts_with("m1-done-after-delete-1700000000-"), "{s}");
        let random = &s[s.len() - 8..];
        assert!(random
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit()));
        assert_eq!(RunId::parse(s).unwrap(), id);

        for task in ["", "...", "../../etc", "\n\t", &"x".repeat(500), "-a-"] {
            let id = RunId::generate(task, t);
            assert!(RunId::parse(id.as_str()).is_ok(), "{task:?} -> {id}");
        }
        assert!(RunId::generate("", t)
            .as_str()
            .starts_with("run-1700000000-"));
        assert!(RunId::generate("x", UNIX_EPOCH - Duration::from_secs(5))
            .as_str()
            .starts_with("x-0-"));
        // Two runs in the same second still differ.
        assert_ne!(RunId::generate("x", t), RunId::generate("x", t));
    }
}
