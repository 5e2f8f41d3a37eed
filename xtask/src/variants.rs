//! Every sweepable variant by its command-line name: the five designs, the
//! real loop's six rows, issue 7's modes, and the bank-transfer example.

use std::path::Path;

use designs::{Design, Script, Storage};
use sweep::DynSubject;

type Build = Box<dyn Fn(Option<&Path>, Storage) -> Result<Box<dyn DynSubject>, String>>;

/// One variant: its `--variant` name, its row title, and how to build it
/// (given an optional job file and the storage for its worlds).
pub struct Variant {
    pub slug: String,
    pub title: String,
    pub build: Build,
}

/// Every variant, in listing order.
pub fn all() -> Vec<Variant> {
    let mut v = Vec::new();
    for d in Design::ALL {
        v.push(Variant {
            slug: d.slug().to_owned(),
            title: d.title().to_owned(),
            build: Box::new(move |job, storage| {
                let path = job.map_or_else(designs::default_script_path, Path::to_path_buf);
                let script = Script::load(&path).map_err(|e| e.to_string())?;
                Ok(Box::new(d.subject(&script, storage)) as Box<dyn DynSubject>)
            }),
        });
    }
    for l in loop_sweep::variants() {
        let slug = l.slug();
        v.push(Variant {
            slug: slug.clone(),
            title: l.title(),
            build: Box::new(move |job, _storage| {
                loop_sweep::subject(&slug, job)
                    .map(|s| Box::new(s) as Box<dyn DynSubject>)
                    .map_err(|e| e.to_string())
            }),
        });
    }
    for (slug, title) in designs::variants::variants() {
        let s = slug.clone();
        v.push(Variant {
            slug,
            title,
            build: Box::new(move |job, _| beyond(&s, job)),
        });
    }
    for (slug, variant) in [
        ("bank", bank::Variant::SaveRunFirst),
        ("bank-buggy", bank::Variant::FirstSaveAfterPayment),
    ] {
        let subject = bank::Payday(variant);
        v.push(Variant {
            slug: slug.to_owned(),
            title: sweep::Subject::name(&subject),
            build: Box::new(move |job, _| match job {
                Some(p) => Err(format!(
                    "variant {slug} takes no job file (got {})",
                    p.display()
                )),
                None => Ok(Box::new(subject) as Box<dyn DynSubject>),
            }),
        });
    }
    v
}

/// A variant of issue 7's modes (power loss, a person who errs, a model
/// that changes its mind, a tracker that crashes): the curated ones are
/// listed, and any combination of `designs::variants` is accepted by slug.
fn beyond(slug: &str, job: Option<&Path>) -> Result<Box<dyn DynSubject>, String> {
    let path = job.map_or_else(designs::default_script_path, Path::to_path_buf);
    let script = Script::load(&path).map_err(|e| e.to_string())?;
    designs::variants::subject(slug, &script).ok_or_else(|| format!("unknown variant {slug:?}"))
}

/// The slug of the variant whose row title is `title`.
pub fn slug_of(title: &str) -> Option<String> {
    all()
        .into_iter()
        .find(|v| v.title == title)
        .map(|v| v.slug)
        .or_else(|| designs::variants::slug_of(title))
}

/// The listing printed by `--list`.
pub fn listing() -> String {
    let all = all();
    let width = all.iter().map(|v| v.slug.len()).max().unwrap_or(0);
    let mut s = String::from("variants (--variant NAME):\n");
    for v in all {
        s.push_str(&format!("  {:<width$}  {}\n", v.slug, v.title));
    }
    s
}

/// Build the subject for `slug`.
pub fn subject(
    slug: &str,
    job: Option<&Path>,
    storage: Storage,
) -> Result<Box<dyn DynSubject>, String> {
    let all = all();
    match all.iter().find(|v| v.slug == slug) {
        Some(v) => (v.build)(job, storage),
        None if designs::variants::variant(slug).is_some() => beyond(slug, job),
        None => Err(format!(
            "unknown variant {slug:?}; known: {}",
            all.iter()
                .map(|v| v.slug.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        )),
    }
}
