//! Every sweepable variant by its command-line name.

use std::path::Path;

use designs::{Design, Script, Storage};
use sweep::DynSubject;

/// (slug, row title) of every variant.
pub fn all() -> Vec<(String, String)> {
    let mut v: Vec<(String, String)> = Design::ALL
        .iter()
        .map(|d| (d.slug().to_owned(), d.title().to_owned()))
        .collect();
    v.extend(extra());
    v
}

fn extra() -> Vec<(String, String)> {
    Vec::new()
}

/// The slug of the variant whose row title is `title`.
pub fn slug_of(title: &str) -> Option<&'static str> {
    Design::ALL
        .iter()
        .find(|d| d.title() == title)
        .map(|d| d.slug())
}

/// The listing printed by `--list`.
pub fn listing() -> String {
    let mut s = String::from("variants (--variant NAME):\n");
    for (slug, title) in all() {
        s.push_str(&format!("  {slug:<34} {title}\n"));
    }
    s
}

/// Build the subject for `slug`.
pub fn subject(
    slug: &str,
    script: Option<&Path>,
    storage: Storage,
) -> Result<Box<dyn DynSubject>, String> {
    if let Some(d) = Design::from_slug(slug) {
        let path = script.map_or_else(designs::default_script_path, Path::to_path_buf);
        let script = Script::load(&path).map_err(|e| e.to_string())?;
        return Ok(Box::new(d.subject(&script, storage)));
    }
    let known: Vec<String> = all().into_iter().map(|(s, _)| s).collect();
    Err(format!(
        "unknown variant {slug:?}; known: {}",
        known.join(", ")
    ))
}
