//! Sweep definitions: data files in `sweeps/` naming which variants to
//! sweep, on which scripted job, how deep, and which snapshot reviews them.

use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::StorageArg;

/// The file `cargo xtask sweep` runs when given no variant.
pub fn default_path() -> PathBuf {
    crate::root().join("sweeps/five-designs.sweep.json")
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Raw {
    description: String,
    variants: Vec<String>,
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
    pub variants: Vec<String>,
    /// The scripted job, resolved against the definition's directory.
    pub job: Option<PathBuf>,
    pub depth: u32,
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
                "{}: not a sweep definition ({e}); expected {{\"description\": …, \"variants\": [...], \"job\"?: …, \"depth\"?: 2, \"storage\"?: \"memory\"|\"disk\", \"snapshot\"?: …, \"required\"?: [counter, …]}}",
                path.display()
            )
        })?;
        if raw.variants.is_empty() {
            return Err(format!("{}: \"variants\" is empty", path.display()));
        }
        let storage = match raw.storage.as_deref() {
            None | Some("memory") => Some(StorageArg::Memory),
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
            variants: raw.variants,
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
    for f in files {
        let rel = f
            .strip_prefix(crate::root())
            .unwrap_or(&f)
            .display()
            .to_string();
        match Definition::load(&f) {
            Ok(d) => s.push_str(&format!(
                "  {rel:<34} {} [{}; depth {}]\n",
                d.description,
                d.variants.join(", "),
                d.depth
            )),
            Err(e) => s.push_str(&format!("  {rel:<34} INVALID: {e}\n")),
        }
    }
    Ok(s)
}
