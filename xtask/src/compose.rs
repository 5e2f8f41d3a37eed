//! Variants by composition: a subject (`--variant loop-keyed`) and the
//! dimensions it runs with (`--crash-state lose --mutation no-dir-fsync`),
//! checked against the registry's table of what exists, with a reason for
//! every refusal and a suggestion for every misspelling.

use std::collections::BTreeMap;
use std::path::Path;

use crate::registry::{self, Entry, Family, SubjectInfo};
use crate::suggest;

pub(crate) mod spec;

pub use spec::{Dim, Spec, ON};

/// Subjects and lists of values per dimension: every combination is one
/// variant (`--variant loop-keyed,loop-keyless --crash-state lose,torn` is
/// four).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Request {
    pub subjects: Vec<String>,
    pub dims: BTreeMap<Dim, Vec<String>>,
}

impl Request {
    /// Whether any dimension is given.
    pub fn has_dims(&self) -> bool {
        self.dims.values().any(|v| !v.is_empty())
    }

    /// Every combination, subjects outermost, then the dimensions in flag
    /// order, each in the order its values were given.
    pub fn specs(&self) -> Vec<Spec> {
        let mut out: Vec<Spec> = self.subjects.iter().map(|s| Spec::new(s)).collect();
        for (dim, values) in &self.dims {
            if values.is_empty() {
                continue;
            }
            out = out
                .into_iter()
                .flat_map(|s| values.iter().map(move |v| s.clone().with(*dim, v)))
                .collect();
        }
        out
    }

    /// A request from a sweep definition's entry: a subject's name, or an
    /// object `{"variant": NAME or [NAME, …], "crash-state": STATE or […],
    /// …, "plus-keys": true}` with the command line's flags as keys.
    pub fn from_json(v: &serde_json::Value) -> Result<Request, String> {
        use serde_json::Value;
        let strings = |key: &str, v: &Value| -> Result<Vec<String>, String> {
            let one = |v: &Value| match v {
                Value::String(s) => Ok(s.clone()),
                Value::Number(n) => Ok(n.to_string()),
                other => Err(format!("\"{key}\": expected a name, got {other}")),
            };
            match v {
                Value::Array(items) if !items.is_empty() => items.iter().map(one).collect(),
                Value::Array(_) => Err(format!("\"{key}\" is an empty list")),
                other => Ok(vec![one(other)?]),
            }
        };
        match v {
            Value::String(s) => Ok(Request {
                subjects: vec![s.clone()],
                dims: BTreeMap::new(),
            }),
            Value::Object(map) => {
                let mut r = Request::default();
                for (key, value) in map {
                    if key == "variant" {
                        r.subjects = strings(key, value)?;
                    } else if let Some(dim) = Dim::by_key(key) {
                        let values = if dim.is_switch() {
                            match value {
                                Value::Bool(true) => vec![ON.to_owned()],
                                Value::Bool(false) => Vec::new(),
                                other => return Err(format!("\"{key}\": expected true or false, got {other}")),
                            }
                        } else {
                            strings(key, value)?
                        };
                        r.dims.insert(dim, values);
                    } else {
                        let keys: Vec<&str> = std::iter::once("variant")
                            .chain(Dim::ALL.iter().map(|d| d.key()))
                            .collect();
                        return Err(format!(
                            "unknown key {key:?}{} (keys: {})",
                            suggest::did_you_mean(key, keys.iter().copied()),
                            keys.join(", ")
                        ));
                    }
                }
                if r.subjects.is_empty() {
                    return Err("a composed variant needs \"variant\": the subject's name".into());
                }
                Ok(r)
            }
            other => Err(format!(
                "expected a variant's name or {{\"variant\": NAME, \"crash-state\": …}}, got {other}"
            )),
        }
    }
}

/// A spec found in the registry.
pub struct Resolved {
    /// The entry, whose spec is the canonical way to write it.
    pub entry: Entry,
}

/// The registry's subjects and entries, with the rules read off them.
pub struct Registry {
    subjects: Vec<SubjectInfo>,
    entries: Vec<Entry>,
}

impl Registry {
    pub fn load() -> Registry {
        Registry::new(registry::subjects(), registry::entries())
    }

    pub fn new(subjects: Vec<SubjectInfo>, entries: Vec<Entry>) -> Registry {
        Registry { subjects, entries }
    }

    fn subject(&self, name: &str) -> Option<&SubjectInfo> {
        self.subjects.iter().find(|s| s.name == name)
    }

    fn of_subject<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a Entry> + 'a {
        self.entries.iter().filter(move |e| e.spec.subject == name)
    }

    /// The entry `spec` names, or why there is none.
    pub fn resolve(&self, spec: &Spec) -> Result<Resolved, String> {
        let Some(info) = self.subject(&spec.subject) else {
            return Err(self.unknown(spec));
        };
        let family = info.family;
        let name = spec.subject.as_str();
        self.check_dims(spec, family, name)?;
        if let Some(e) = self.of_subject(name).find(|e| e.spec == *spec) {
            return Ok(Resolved { entry: e.clone() });
        }
        // What is missing: the dimensions every entry with these needs.
        let wider: Vec<&Entry> = self
            .of_subject(name)
            .filter(|e| spec.dims.iter().all(|(d, v)| e.spec.dims.get(d) == Some(v)))
            .collect();
        let needed: Vec<String> = Dim::ALL
            .into_iter()
            .filter(|d| !spec.dims.contains_key(d))
            .filter(|d| !wider.is_empty() && wider.iter().all(|e| e.spec.dims.contains_key(d)))
            .map(Dim::flag)
            .collect();
        if needed.is_empty() {
            Err(format!("no variant is `{spec}`; see --list"))
        } else {
            let example = wider
                .first()
                .map(|e| format!(", e.g. `{}`", e.spec.command()))
                .unwrap_or_default();
            Err(format!(
                "`{spec}` needs {} as well{example}",
                needed.join(" and ")
            ))
        }
    }

    /// Whether each dimension of `spec` applies to the subject `name` (of
    /// `family`) with a value it has, and each two combine.
    fn check_dims(&self, spec: &Spec, family: Family, name: &str) -> Result<(), String> {
        // Each dimension must apply to the subject, with a value it has.
        for (dim, value) in &spec.dims {
            let values: Vec<&str> = dedup(
                self.of_subject(name)
                    .filter_map(|e| e.spec.dims.get(dim).map(String::as_str)),
            );
            if values.is_empty() {
                return Err(format!(
                    "{} does not apply to {name}: {}",
                    dim.flag(),
                    registry::why_not(family, name, &dim.flag())
                ));
            }
            if !values.contains(&value.as_str()) {
                return Err(format!(
                    "{name} has no {} {value:?}{} ({} takes: {})",
                    dim.noun(),
                    suggest::did_you_mean(value, values.iter().copied()),
                    dim.flag(),
                    values.join(", ")
                ));
            }
        }
        // Each two dimensions must combine.
        let dims: Vec<Dim> = spec.dims.keys().copied().collect();
        for (i, a) in dims.iter().enumerate() {
            for b in &dims[i + 1..] {
                if !self
                    .of_subject(name)
                    .any(|e| e.spec.dims.contains_key(a) && e.spec.dims.contains_key(b))
                {
                    return Err(format!(
                        "{} and {} do not combine for {name}: {}",
                        a.flag(),
                        b.flag(),
                        registry::why_not_together(family)
                    ));
                }
            }
        }
        Ok(())
    }

    /// Why `spec`'s subject is no subject: its closest subject, if any.
    fn unknown(&self, spec: &Spec) -> String {
        let name = spec.subject.as_str();
        let subjects = self.subjects.iter().map(|s| s.name.as_str());
        let hint = match suggest::closest(name, subjects) {
            Some(c) => format!("; did you mean {c:?}?"),
            None => String::new(),
        };
        format!(
            "unknown variant {name:?}{hint} (subjects: {}; see --list)",
            self.subjects
                .iter()
                .map(|s| s.name.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        )
    }

    /// Refuse a run-wide flag (`--storage`, `--script`) that does not apply
    /// to one of the variants.
    pub fn check_run_flags(
        &self,
        entries: &[Entry],
        storage: bool,
        job: Option<&Path>,
    ) -> Result<(), String> {
        for e in entries {
            let family = e.family;
            if storage && !e.storage {
                return Err(format!(
                    "--storage does not apply to `{}`: {}",
                    e.spec,
                    registry::why_not(family, &e.spec.subject, "--storage")
                ));
            }
            if let (Some(job), false) = (job, e.job) {
                return Err(format!(
                    "--script {} does not apply to `{}`: {}",
                    job.display(),
                    e.spec,
                    registry::why_not(family, &e.spec.subject, "--script")
                ));
            }
        }
        Ok(())
    }

    /// The spec of the variant whose row title is `title`.
    pub fn spec_of_title(&self, title: &str) -> Option<Spec> {
        self.entries
            .iter()
            .find(|e| e.title() == title)
            .map(|e| e.spec.clone())
    }

    /// The first part of `--list`: subjects, then dimensions with their
    /// values and the subjects they apply to.
    pub fn listing(&self) -> String {
        let mut s = String::from("subjects (--variant NAME, repeatable):\n");
        s.push_str(&self.subject_lines());
        s.push_str("dimensions (repeat a flag or list values, a,b: every combination is swept):\n");
        let mut lines: Vec<_> = (Dim::ALL.into_iter())
            .filter_map(|dim| self.dim_line(dim))
            .collect();
        let takes = |pick: &dyn Fn(&Entry) -> bool| {
            let subjects: Vec<&str> = self
                .subjects
                .iter()
                .filter(|i| self.of_subject(&i.name).any(pick))
                .map(|i| i.name.as_str())
                .collect();
            self.name_subjects(&subjects)
        };
        lines.push((
            "--storage WHERE".into(),
            "where the worlds keep checkpoints".into(),
            vec![format!(
                "{} without dimensions: memory (default), disk",
                takes(&|e| e.storage)
            )],
        ));
        lines.push((
            "--script FILE".into(),
            "another job (a script for the designs, a transcript for the loop)".into(),
            vec![takes(&|e| e.job)],
        ));
        let w = lines.iter().map(|(f, _, _)| f.len()).max().unwrap_or(0);
        for (flag, about, rows) in lines {
            s.push_str(&format!("  {flag:<w$}  {about}\n"));
            for r in rows {
                s.push_str(&format!("  {:<w$}    {r}\n", ""));
            }
        }
        s.push_str("  e.g. --variant loop-keyed --crash-state lose --mutation no-dir-fsync\n");
        s
    }

    /// The subjects of `--list`, one a line, each family named once.
    fn subject_lines(&self) -> String {
        let width = self
            .subjects
            .iter()
            .map(|s| s.name.len())
            .max()
            .unwrap_or(0);
        let fam_width = self
            .subjects
            .iter()
            .map(|s| s.family.name().len())
            .max()
            .unwrap_or(0);
        let mut s = String::new();
        let mut last = None;
        for info in &self.subjects {
            let fam = if last == Some(info.family) {
                ""
            } else {
                info.family.name()
            };
            last = Some(info.family);
            s.push_str(&format!(
                "  {fam:<fam_width$}  {:<width$}  {}\n",
                info.name, info.title
            ));
        }
        s
    }

    /// Dimension `dim`'s line of `--list`: its flag, what it does (and the
    /// flags it needs), and the values each group of subjects takes; `None`
    /// when no subject has it.
    fn dim_line(&self, dim: Dim) -> Option<(String, String, Vec<String>)> {
        let with: Vec<&Entry> = self
            .entries
            .iter()
            .filter(|e| e.spec.dims.contains_key(&dim))
            .collect();
        if with.is_empty() {
            return None;
        }
        let needs: Vec<String> = Dim::ALL
            .into_iter()
            .filter(|d| *d != dim && with.iter().all(|e| e.spec.dims.contains_key(d)))
            .map(Dim::flag)
            .collect();
        let about = if needs.is_empty() {
            dim.about().to_owned()
        } else {
            format!("{} (needs {})", dim.about(), needs.join(", "))
        };
        // Group the subjects by the values they take.
        let mut groups: Vec<(Vec<&str>, Vec<&str>)> = Vec::new();
        for info in &self.subjects {
            let values = dedup(
                self.of_subject(&info.name)
                    .filter_map(|e| e.spec.dims.get(&dim).map(String::as_str)),
            );
            if values.is_empty() {
                continue;
            }
            match groups.iter_mut().find(|(v, _)| *v == values) {
                Some((_, subjects)) => subjects.push(&info.name),
                None => groups.push((values, vec![&info.name])),
            }
        }
        let rows = groups
            .iter()
            .map(|(values, subjects)| {
                let shown = if dim.is_switch() {
                    String::new()
                } else {
                    format!(": {}", compact(values))
                };
                format!("{}{shown}", self.name_subjects(subjects))
            })
            .collect();
        Some((format!("{}{}", dim.flag(), dim.value_name()), about, rows))
    }

    /// `designs`, `loop`, or the subjects' names when they are not a whole
    /// family.
    fn name_subjects(&self, subjects: &[&str]) -> String {
        let mut out: Vec<String> = Vec::new();
        let mut rest: Vec<&str> = subjects.to_vec();
        for fam in [Family::Designs, Family::Loop, Family::Bank, Family::Process] {
            let all: Vec<&str> = self
                .subjects
                .iter()
                .filter(|s| s.family == fam)
                .map(|s| s.name.as_str())
                .collect();
            if !all.is_empty() && all.iter().all(|n| rest.contains(n)) {
                rest.retain(|n| !all.contains(n));
                out.push(fam.name().to_owned());
            }
        }
        out.extend(rest.into_iter().map(str::to_owned));
        out.join(", ")
    }
}

/// The distinct items, in first-seen order.
fn dedup<'a>(items: impl Iterator<Item = &'a str>) -> Vec<&'a str> {
    let mut out: Vec<&str> = Vec::new();
    for i in items {
        if !out.contains(&i) {
            out.push(i);
        }
    }
    out
}

/// `a, b, c`, or `1..9` for a run of consecutive numbers.
fn compact(values: &[&str]) -> String {
    let numbers: Option<Vec<u64>> = values.iter().map(|v| v.parse().ok()).collect();
    match numbers.as_deref() {
        Some([first, .., last])
            if values.len() > 2
                && numbers
                    .as_ref()
                    .is_some_and(|n| n.windows(2).all(|w| w[1] == w[0] + 1)) =>
        {
            format!("{first}..{last}")
        }
        _ => values.join(", "),
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    fn spec(subject: &str, dims: &[(Dim, &str)]) -> Spec {
        dims.iter()
            .fold(Spec::new(subject), |s, (d, v)| s.with(*d, v))
    }

    fn refused(registry: &Registry, s: &Spec) -> String {
        match registry.resolve(s) {
            Ok(r) => panic!("`{s}` resolved to `{}`", r.entry.spec),
            Err(e) => e,
        }
    }

    #[test]
    fn a_request_is_every_combination_subjects_outermost() {
        let mut r = Request {
            subjects: vec!["loop-keyed".into(), "loop-keyless".into()],
            ..Request::default()
        };
        r.dims
            .insert(Dim::CrashState, vec!["lose".into(), "torn".into()]);
        r.dims.insert(Dim::Mutation, vec!["no-dir-fsync".into()]);
        let got: Vec<String> = r.specs().iter().map(Spec::to_string).collect();
        assert_eq!(
            got,
            [
                "loop-keyed --crash-state lose --mutation no-dir-fsync",
                "loop-keyed --crash-state torn --mutation no-dir-fsync",
                "loop-keyless --crash-state lose --mutation no-dir-fsync",
                "loop-keyless --crash-state torn --mutation no-dir-fsync",
            ]
        );
        assert!(r.has_dims());
        assert!(!Request::default().has_dims());
    }

    #[test]
    fn definitions_write_variants_as_names_or_objects() {
        let v: serde_json::Value = serde_json::json!([
            "keys",
            {"variant": ["loop-keyed", "loop-keyless"], "crash-state": "lose"},
            {"variant": "markers", "model": ["new-ids"], "plus-keys": true},
            {"variant": "markers", "person-wrong": 2}
        ]);
        let specs: Vec<String> = v
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|x| Request::from_json(x).unwrap().specs())
            .map(|s| s.to_string())
            .collect();
        assert_eq!(
            specs,
            [
                "keys",
                "loop-keyed --crash-state lose",
                "loop-keyless --crash-state lose",
                "markers --model new-ids --plus-keys",
                "markers --person-wrong 2",
            ]
        );
        for (bad, needle) in [
            (
                serde_json::json!({"variant": "keys", "crash_state": "lose"}),
                "did you mean \"crash-state\"?",
            ),
            (
                serde_json::json!({"crash-state": "lose"}),
                "needs \"variant\"",
            ),
            (serde_json::json!({"variant": []}), "empty list"),
            (
                serde_json::json!({"variant": "keys", "plus-keys": "yes"}),
                "true or false",
            ),
            (serde_json::json!(7), "expected a variant's name"),
        ] {
            let e = Request::from_json(&bad).unwrap_err();
            assert!(e.contains(needle), "{bad}: {e}");
        }
    }

    #[test]
    fn every_variant_resolves_by_its_spec() {
        let registry = Registry::load();
        let mut titles = Vec::new();
        for e in &registry.entries {
            let by_spec = registry.resolve(&e.spec).unwrap();
            assert_eq!(by_spec.entry.spec, e.spec);
            assert_eq!(by_spec.entry.title(), e.title());
            titles.push(e.title());
        }
        let n = titles.len();
        titles.sort();
        titles.dedup();
        assert_eq!(titles.len(), n, "row titles name one variant each");
        let e = &registry.entries[registry.entries.len() / 2];
        assert_eq!(registry.spec_of_title(&e.title()), Some(e.spec.clone()));
    }

    /// The composed form builds the variant the crates build from the same
    /// parts (named by its row title).
    #[test]
    fn the_composed_form_builds_the_crates_variant() {
        use designs::{variants, Design, ModelBehaviour, Writer};
        use durable::testing::DiskState;
        use loop_sweep::{LoopVariant, Power, Situation};
        let registry = Registry::load();
        let looped = |keyed, situation, power| {
            LoopVariant {
                keyed,
                situation,
                power,
            }
            .title()
        };
        for (s, title) in [
            (
                spec(
                    "loop-keyed",
                    &[(Dim::CrashState, "lose"), (Dim::Mutation, "no-dir-fsync")],
                ),
                looped(
                    true,
                    Situation::Plain,
                    Some(Power {
                        state: DiskState::LoseUnsynced,
                        writer: loop_sweep::Writer::NoDirSync,
                    }),
                ),
            ),
            (
                spec("loop-keyless", &[(Dim::Situation, "approval-gate")]),
                looped(false, Situation::ApprovalGate, None),
            ),
            (
                spec("keys-markers", &[(Dim::CrashState, "lose")]),
                variants::power(Design::KeysMarkers, Writer::Real, DiskState::LoseUnsynced).title(),
            ),
            (
                spec(
                    "markers",
                    &[(Dim::CrashState, "torn"), (Dim::Mutation, "syncs-off")],
                ),
                variants::power(Design::Markers, Writer::SyncsOff, DiskState::TornContents).title(),
            ),
            (
                spec(
                    "save-once-per-turn",
                    &[(Dim::Model, "new-ids"), (Dim::PlusKeys, ON)],
                ),
                variants::model(Design::SaveOncePerTurn, true, ModelBehaviour::NewIds).title(),
            ),
            (
                spec("markers", &[(Dim::PersonWrong, "2")]),
                variants::person(Design::Markers, 2).title(),
            ),
            (
                spec("keys", &[(Dim::Tracker, "crashes-keys-in-index")]),
                variants::tracker_crash(Design::Keys, tracker::LogLayout::KeysInIndexOnly).title(),
            ),
        ] {
            assert_eq!(registry.resolve(&s).unwrap().entry.title(), title, "{s}");
        }
    }

    #[test]
    fn a_dimension_that_does_not_apply_is_refused_with_why() {
        let registry = Registry::load();
        let e = refused(&registry, &spec("bank", &[(Dim::CrashState, "lose")]));
        assert!(
            e.starts_with("--crash-state does not apply to bank: the bank example"),
            "{e}"
        );
        let e = refused(&registry, &spec("loop-keyed", &[(Dim::Model, "new-ids")]));
        assert!(
            e.contains("--model does not apply to loop-keyed") && e.contains("five designs only"),
            "{e}"
        );
        let e = refused(
            &registry,
            &spec("keys", &[(Dim::Model, "new-ids"), (Dim::PlusKeys, ON)]),
        );
        assert!(
            e.contains("--plus-keys does not apply to keys: keys sends idempotency keys already"),
            "{e}"
        );
        let e = refused(
            &registry,
            &spec("keys", &[(Dim::Situation, "approval-gate")]),
        );
        assert!(e.contains("--situation does not apply to keys"), "{e}");
    }

    #[test]
    fn dimensions_that_do_not_combine_or_need_another_are_refused() {
        let registry = Registry::load();
        let e = refused(
            &registry,
            &spec(
                "loop-keyed",
                &[(Dim::Situation, "approval-gate"), (Dim::CrashState, "lose")],
            ),
        );
        assert!(
            e.contains("--situation and --crash-state do not combine for loop-keyed"),
            "{e}"
        );
        let e = refused(
            &registry,
            &spec(
                "keys",
                &[(Dim::CrashState, "lose"), (Dim::Model, "new-ids")],
            ),
        );
        assert!(
            e.contains("--crash-state and --model do not combine for keys: a design runs one mode"),
            "{e}"
        );
        let e = refused(&registry, &spec("keys", &[(Dim::Mutation, "no-dir-fsync")]));
        assert!(
            e.contains("needs --crash-state as well, e.g. `--variant keys --crash-state"),
            "{e}"
        );
        let e = refused(&registry, &spec("markers", &[(Dim::PlusKeys, ON)]));
        assert!(e.contains("needs --model as well"), "{e}");
    }

    #[test]
    fn misspellings_get_a_suggestion() {
        let registry = Registry::load();
        for (s, needle) in [
            (
                spec("loop-keyd", &[]),
                "unknown variant \"loop-keyd\"; did you mean \"loop-keyed\"?",
            ),
            (spec("keys-marker", &[]), "did you mean \"keys-markers\"?"),
            (
                spec("loop-keyed", &[(Dim::CrashState, "lsoe")]),
                "loop-keyed has no crash state \"lsoe\"; did you mean \"lose\"?",
            ),
            (
                spec(
                    "keys",
                    &[(Dim::CrashState, "lose"), (Dim::Mutation, "no-dir-fsink")],
                ),
                "did you mean \"no-dir-fsync\"?",
            ),
            (
                spec("keys", &[(Dim::Model, "new-id")]),
                "did you mean \"new-ids\"?",
            ),
            (
                spec("loop-keyed", &[(Dim::Situation, "approval")]),
                "did you mean \"approval-gate\"?",
            ),
        ] {
            let e = refused(&registry, &s);
            assert!(e.contains(needle), "`{s}`: {e}");
        }
        // A value of another subject is named as such, with the values this one takes.
        let e = refused(
            &registry,
            &spec(
                "loop-keyed",
                &[(Dim::CrashState, "lose"), (Dim::Mutation, "syncs-off")],
            ),
        );
        assert!(
            e.contains("loop-keyed has no mutation \"syncs-off\"")
                && e.contains("no-file-fsync, no-dir-fsync"),
            "{e}"
        );
    }

    /// An old one-word name (`loop-keyed-power-lose`) is no subject: it is
    /// refused as any unknown name is, with the closest subject.
    #[test]
    fn a_one_word_variant_name_is_an_unknown_variant() {
        let registry = Registry::load();
        let e = refused(&registry, &Spec::new("loop-keyed-power-lose-no-dir-fsync"));
        assert!(
            e.starts_with("unknown variant \"loop-keyed-power-lose-no-dir-fsync\""),
            "{e}"
        );
        assert!(e.contains("see --list"), "{e}");
    }

    #[test]
    fn run_flags_that_do_not_apply_are_refused() {
        let registry = Registry::load();
        let entry = |s: &Spec| registry.resolve(s).unwrap().entry;
        let plain = entry(&Spec::new("keys"));
        let looped = entry(&Spec::new("loop-keyed"));
        let powered = entry(&spec("keys", &[(Dim::CrashState, "lose")]));
        let bank = entry(&Spec::new("bank"));
        assert!(registry
            .check_run_flags(
                std::slice::from_ref(&plain),
                true,
                Some(Path::new("x.json"))
            )
            .is_ok());
        assert!(registry
            .check_run_flags(&[looped.clone(), bank.clone()], false, None)
            .is_ok());
        let e = registry
            .check_run_flags(&[plain.clone(), looped.clone()], true, None)
            .unwrap_err();
        assert!(
            e.starts_with("--storage does not apply to `loop-keyed`: the loop keeps"),
            "{e}"
        );
        let e = registry
            .check_run_flags(&[powered], true, None)
            .unwrap_err();
        assert!(
            e.contains("only the plain designs choose their storage"),
            "{e}"
        );
        let e = registry
            .check_run_flags(&[looped, bank], false, Some(Path::new("job.json")))
            .unwrap_err();
        assert!(
            e.starts_with(
                "--script job.json does not apply to `bank`: the bank example runs its own"
            ),
            "{e}"
        );
    }

    #[test]
    fn the_listing_fits_on_one_screen_and_names_everything() {
        let registry = Registry::load();
        let list = registry.listing();
        let lines: Vec<&str> = list.lines().collect();
        assert!(lines.len() <= 35, "{} lines:\n{list}", lines.len());
        assert!(lines.iter().all(|l| l.chars().count() <= 100), "{list}");
        for s in &registry.subjects {
            assert!(list.contains(&format!(" {} ", s.name)), "{}", s.name);
        }
        for d in Dim::ALL {
            assert!(list.contains(&format!("  {}", d.flag())), "{}", d.flag());
        }
        // Each value a subject takes is listed on a line that names it.
        assert!(list.contains("loop: no-file-fsync, no-dir-fsync"), "{list}");
        assert!(list.contains("designs: 1..9"), "{list}");
        assert!(list.contains("(needs --crash-state)"), "{list}");
    }

    #[test]
    fn consecutive_numbers_are_listed_as_a_range() {
        assert_eq!(compact(&["1", "2", "3"]), "1..3");
        assert_eq!(compact(&["1", "3", "4"]), "1, 3, 4");
        assert_eq!(compact(&["a", "b"]), "a, b");
    }
}
