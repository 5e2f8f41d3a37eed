//! Sweep definitions: data files in `sweeps/` naming which variants to
//! sweep, on which scripted job, how deep, and which snapshot reviews them.
//!
//! A variant is written as on the command line, by composition: a subject's
//! name (`"keys"`), or an object with the flags as keys, each a value or a
//! list of values whose every combination is swept:
//! `{"variant": ["loop-keyed", "loop-keyless"], "crash-state": ["lose", "torn"]}`.

use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::compose::{Request, Spec};
use crate::StorageArg;

/// The file `cargo xtask sweep` runs when given no variant.
pub fn default_path() -> PathBuf {
    crate::root().join("sweeps/five-designs.sweep.json")
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Raw {
    description: String,
    variants: Vec<serde_json::Value>,
    #[serde(default)]
    job: Option<String>,
    #[serde(default = "two")]
    depth: u32,
    #[serde(default)]
    storage: Option<String>,
    #[serde(default)]
    snapshot: Option<String>,
    #[serde(default)]
    required: Vec<String>,
}

fn two() -> u32 {
    2
}

/// A loaded sweep definition.
pub struct Definition {
    pub description: String,
    /// Every variant, the combinations of each entry expanded in order.
    pub variants: Vec<Spec>,
    /// The scripted job, resolved against the definition's directory.
    pub job: Option<PathBuf>,
    pub depth: u32,
    /// Where the worlds keep checkpoints, when the definition says.
    pub storage: Option<StorageArg>,
    /// The reviewed table, resolved against the workspace root.
    pub snapshot: Option<PathBuf>,
    /// Counters every scenario of every variant must count zero, beyond
    /// those the subjects mark required themselves.
    pub required: Vec<String>,
}

impl Definition {
    pub fn load(path: &Path) -> Result<Definition, String> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("{}: cannot read the sweep definition: {e}", path.display()))?;
        let raw: Raw = serde_json::from_str(&text).map_err(|e| {
            format!(
                "{}: not a sweep definition ({e}); expected {{\"description\": …, \"variants\": [NAME or {{\"variant\": NAME, \"crash-state\": …}}, …], \"job\"?: …, \"depth\"?: 2, \"storage\"?: \"memory\"|\"disk\", \"snapshot\"?: …, \"required\"?: [counter, …]}}",
                path.display()
            )
        })?;
        if raw.variants.is_empty() {
            return Err(format!("{}: \"variants\" is empty", path.display()));
        }
        let mut variants = Vec::new();
        for (i, v) in raw.variants.iter().enumerate() {
            let request = Request::from_json(v).map_err(|e| {
                format!("{}: variant {} of \"variants\": {e}", path.display(), i + 1)
            })?;
            variants.extend(request.specs());
        }
        let storage = match raw.storage.as_deref() {
            None => None,
            Some("memory") => Some(StorageArg::Memory),
            Some("disk") => Some(StorageArg::Disk),
            Some(other) => {
                return Err(format!(
                    "{}: storage {other:?} is neither \"memory\" nor \"disk\"",
                    path.display()
                ))
            }
        };
        let base = path.parent().unwrap_or(Path::new("."));
        Ok(Definition {
            description: raw.description,
            variants,
            job: raw.job.map(|j| base.join(j)),
            depth: raw.depth,
            storage,
            snapshot: raw.snapshot.map(|s| crate::root().join(s)),
            required: raw.required,
        })
    }
}

/// The definitions in `sweeps/`, for `--list`.
pub fn listing() -> Result<String, String> {
    let dir = crate::root().join("sweeps");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .map_err(|e| format!("{}: {e}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.to_string_lossy().ends_with(".sweep.json"))
        .collect();
    files.sort();
    let mut s = String::from("sweep definitions (--file FILE):\n");
    let rels: Vec<String> = files
        .iter()
        .map(|f| {
            f.strip_prefix(crate::root())
                .unwrap_or(f)
                .display()
                .to_string()
        })
        .collect();
    let width = rels.iter().map(String::len).max().unwrap_or(0);
    for (f, rel) in files.iter().zip(&rels) {
        let text = match Definition::load(f) {
            Ok(d) => format!(
                "{} variants, depth {}: {}",
                d.variants.len(),
                d.depth,
                d.description
            ),
            Err(e) => format!("INVALID: {e}"),
        };
        let lead = format!("  {rel:<width$}  ");
        s.push_str(&lead);
        s.push_str(&fit(&text, WIDTH.saturating_sub(lead.chars().count())));
        s.push('\n');
    }
    Ok(s)
}

/// The width `--list` keeps to.
const WIDTH: usize = 100;

/// `text` in at most `room` characters: whole, or cut at a word boundary
/// and ended with `…` (`--list` gives a definition one line; its file has
/// the rest).
fn fit(text: &str, room: usize) -> String {
    if text.chars().count() <= room {
        return text.to_owned();
    }
    let mut out = String::new();
    for word in text.split_whitespace() {
        let next = if out.is_empty() {
            word.chars().count()
        } else {
            out.chars().count() + 1 + word.chars().count()
        };
        if next + 1 > room {
            break;
        }
        if !out.is_empty() {
            out.push(' ');
        }
        out.push_str(word);
    }
    out.push('…');
    out
}

#[cfg(test)]
mod tests {
    use super::fit;

    #[test]
    fn a_long_text_is_cut_at_a_word_and_marked() {
        assert_eq!(fit("two words", 9), "two words");
        assert_eq!(fit("two words", 8), "two…");
        assert_eq!(fit("two words", 3), "…");
        assert!(fit(&"word ".repeat(40), 30).chars().count() <= 30);
    }
}
