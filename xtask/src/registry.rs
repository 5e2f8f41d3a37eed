//! The registry of sweepable subjects: every variant `cargo xtask sweep`
//! can run, as a subject plus dimensions, with its row title and how to
//! build it.
//!
//! This is the only module of xtask that names the types of the crates it
//! sweeps (`designs`, the loop's sweep, `bank`); everything else (parsing,
//! refusals, suggestions, the listing) works on the [`Entry`] table it
//! returns, by name.

use std::path::Path;
use std::rc::Rc;

use designs::variants::{self, DesignVariant};
use designs::{Design, ModelBehaviour, Script, Storage, Writer};
use durable::testing::DiskState;
use sweep::cli::DynSubject;

use crate::compose::spec::{Dim, Spec};
use crate::StorageArg;

type Build = Rc<dyn Fn(Option<&Path>, StorageArg) -> Result<Box<dyn DynSubject>, String>>;
type Title = Rc<dyn Fn() -> String>;

/// Which family of subjects a subject belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Family {
    /// The five simplified designs of the comparison table.
    Designs,
    /// The real agent loop.
    Loop,
    /// The bank-transfer example.
    Bank,
    /// The `triage` binary itself, swept as a process.
    Process,
}

impl Family {
    pub fn name(self) -> &'static str {
        match self {
            Family::Designs => "designs",
            Family::Loop => "loop",
            Family::Bank => "bank",
            Family::Process => "triage-process",
        }
    }
}

/// A subject: what `--variant NAME` names before any dimension.
#[derive(Clone, Debug)]
pub struct SubjectInfo {
    pub name: String,
    pub title: String,
    pub family: Family,
}

/// One sweepable variant.
#[derive(Clone)]
pub struct Entry {
    /// The subject and its dimensions.
    pub spec: Spec,
    pub family: Family,
    /// Whether `--storage` chooses where its worlds keep checkpoints.
    pub storage: bool,
    /// Whether it runs another job file (`--script`).
    pub job: bool,
    build: Build,
    title: Title,
}

impl Entry {
    /// The subject, running `job` (its default job when `None`).
    pub fn build(
        &self,
        job: Option<&Path>,
        storage: StorageArg,
    ) -> Result<Box<dyn DynSubject>, String> {
        (self.build)(job, storage)
    }

    /// Its row title.
    pub fn title(&self) -> String {
        (self.title)()
    }
}

fn storage(s: StorageArg) -> Storage {
    match s {
        StorageArg::Memory => Storage::Memory,
        StorageArg::Disk => Storage::Disk,
    }
}

fn script(job: Option<&Path>) -> Result<Script, String> {
    let path = job.map_or_else(designs::default_script_path, Path::to_path_buf);
    Script::load(&path).map_err(|e| e.to_string())
}

/// The subjects, in listing order.
pub fn subjects() -> Vec<SubjectInfo> {
    let mut v: Vec<SubjectInfo> = Design::ALL
        .iter()
        .map(|d| SubjectInfo {
            name: d.slug().to_owned(),
            title: d.title().to_owned(),
            family: Family::Designs,
        })
        .collect();
    for keyed in [true, false] {
        let name = loop_subject(keyed);
        let title = loop_sweep::VARIANTS
            .iter()
            .find(|l| l.keyed == keyed && l.situation == loop_sweep::Situation::Plain)
            .map_or_else(|| name.replace('-', " "), |l| l.title());
        v.push(SubjectInfo {
            name: name.to_owned(),
            title,
            family: Family::Loop,
        });
    }
    for (name, tracker) in PROCESS_TRACKERS {
        v.push(SubjectInfo {
            name: name.to_owned(),
            title: crate::process::title(tracker),
            family: Family::Process,
        });
    }
    for (name, b) in bank_variants() {
        v.push(SubjectInfo {
            name: name.to_owned(),
            title: sweep::Subject::name(&bank::Payday(b)),
            family: Family::Bank,
        });
    }
    v
}

fn loop_subject(keyed: bool) -> &'static str {
    if keyed {
        "loop-keyed"
    } else {
        "loop-keyless"
    }
}

pub(crate) fn bank_variants() -> [(&'static str, bank::Variant); 2] {
    [
        ("bank", bank::Variant::SaveRunFirst),
        ("bank-buggy", bank::Variant::FirstSaveAfterPayment),
    ]
}

/// The triage process sweep's subjects: the `triage` binary with its run's
/// own tracker, and with the tracker service keyed and keyless.
const PROCESS_TRACKERS: [(&str, crate::process::Tracker); 3] = [
    ("triage-process", crate::process::Tracker::Local),
    ("triage-process-service", crate::process::Tracker::Keyed),
    ("triage-process-keyless", crate::process::Tracker::Keyless),
];

/// The tracker dimension's values.
const TRACKERS: [(&str, tracker::LogLayout); 2] = [
    ("crashes", tracker::LogLayout::KeysInLog),
    ("crashes-keys-in-index", tracker::LogLayout::KeysInIndexOnly),
];

/// The person dimension's values: the `k` of "wrong at question k".
const PERSON_WRONG: std::ops::RangeInclusive<u64> = 1..=9;

/// Every variant any command line can name, in listing order.
pub fn entries() -> Vec<Entry> {
    let mut v = Vec::new();
    for d in Design::ALL {
        v.push(Entry {
            spec: Spec::new(d.slug()),
            family: Family::Designs,
            storage: true,
            job: true,
            build: Rc::new(move |job, s| {
                Ok(Box::new(d.subject(&script(job)?, storage(s))) as Box<dyn DynSubject>)
            }),
            title: Rc::new(move || d.title().to_owned()),
        });
    }
    for d in Design::ALL {
        for w in designs::WRITERS {
            for s in DiskState::ALL {
                let mut spec = Spec::new(d.slug()).with(Dim::CrashState, s.slug());
                if w != Writer::Real {
                    spec = spec.with(Dim::Mutation, w.slug());
                }
                v.push(design_entry(spec, variants::power(d, w, s)));
            }
        }
        for k in PERSON_WRONG {
            let spec = Spec::new(d.slug()).with(Dim::PersonWrong, &k.to_string());
            v.push(design_entry(spec, variants::person(d, k)));
        }
        for m in ModelBehaviour::ALL {
            let spec = Spec::new(d.slug()).with(Dim::Model, m.slug());
            v.push(design_entry(spec.clone(), variants::model(d, false, m)));
            let keyed = variants::model(d, true, m);
            if keyed.modes.keys {
                v.push(design_entry(spec.with(Dim::PlusKeys, "yes"), keyed));
            }
        }
        for (name, layout) in TRACKERS {
            let spec = Spec::new(d.slug()).with(Dim::Tracker, name);
            v.push(design_entry(spec, variants::tracker_crash(d, layout)));
        }
    }
    for l in loop_sweep::variants() {
        let mut spec = Spec::new(loop_subject(l.keyed));
        match l.situation {
            loop_sweep::Situation::Plain => {}
            loop_sweep::Situation::FailAfterAccept => {
                spec = spec.with(Dim::Situation, "fail-after-accept");
            }
            loop_sweep::Situation::ApprovalGate => {
                spec = spec.with(Dim::Situation, "approval-gate");
            }
        }
        if let Some(p) = l.power {
            spec = spec.with(Dim::CrashState, p.state.slug());
            if p.writer != loop_sweep::Writer::Real {
                spec = spec.with(Dim::Mutation, p.writer.slug());
            }
        }
        let title = l.title();
        v.push(Entry {
            spec,
            family: Family::Loop,
            storage: false,
            job: true,
            build: Rc::new(move |job, _| {
                loop_sweep::subject(l, job)
                    .map(|s| Box::new(s) as Box<dyn DynSubject>)
                    .map_err(|e| e.to_string())
            }),
            title: Rc::new(move || title.clone()),
        });
    }
    for (name, tracker) in PROCESS_TRACKERS {
        v.push(Entry {
            spec: Spec::new(name),
            family: Family::Process,
            storage: false,
            job: false,
            build: Rc::new(move |_, _| {
                crate::process::subject(tracker).map(|s| Box::new(s) as Box<dyn DynSubject>)
            }),
            title: Rc::new(move || crate::process::title(tracker)),
        });
    }
    for (name, b) in bank_variants() {
        let subject = bank::Payday(b);
        v.push(Entry {
            spec: Spec::new(name),
            family: Family::Bank,
            storage: false,
            job: false,
            build: Rc::new(move |_, _| Ok(Box::new(subject) as Box<dyn DynSubject>)),
            title: Rc::new(move || sweep::Subject::name(&subject)),
        });
    }
    v
}

fn design_entry(spec: Spec, variant: DesignVariant) -> Entry {
    let titled = variant.clone();
    Entry {
        spec,
        family: Family::Designs,
        storage: false,
        job: true,
        build: Rc::new(move |job, _| {
            Ok(Box::new(variant.subject(&script(job)?)) as Box<dyn DynSubject>)
        }),
        title: Rc::new(move || titled.title()),
    }
}

/// Why `flag` does not apply to `subject` (of `family`), for a refusal.
pub fn why_not(family: Family, subject: &str, flag: &str) -> String {
    match (family, flag) {
        (Family::Designs, "--situation") => {
            "the tool that fails after accept and the approval gate are situations of the real \
             loop; the designs run their scripted job"
                .into()
        }
        (Family::Designs, "--plus-keys") => {
            format!("{subject} sends idempotency keys already")
        }
        (Family::Designs, "--storage") => {
            "only the plain designs choose their storage; a design run with another dimension \
             keeps its checkpoints in memory (or in a power-loss directory under --crash-state)"
                .into()
        }
        (Family::Loop, "--storage") => {
            "the loop keeps its checkpoint and workspace in memory, or in a power-loss directory \
             under --crash-state; --storage chooses for the five plain designs"
                .into()
        }
        (Family::Loop, "--person-wrong" | "--model" | "--plus-keys" | "--tracker") => {
            "the person who errs, the model that changes its mind and the crashing tracker run \
             on the five designs only; the loop runs a recorded transcript"
                .into()
        }
        (Family::Bank, "--script") => "the bank example runs its own payday job, built in".into(),
        (Family::Bank, "--storage") => "the bank example keeps its checkpoints in memory".into(),
        (Family::Bank, _) => {
            "the bank example is swept as it is: its two subjects are its whole space".into()
        }
        (Family::Process, _) => {
            "the triage process sweep runs the real binary on its recorded task as it is; \
             its subjects (local tracker, service keyed, service keyless) are its whole space"
                .into()
        }
        _ => format!("no variant of {subject} takes it (see --list)"),
    }
}

/// Why two dimensions do not combine for a subject of `family`.
pub fn why_not_together(family: Family) -> &'static str {
    match family {
        Family::Designs => {
            "a design runs one mode beyond the book chapter's sweep at a time: power loss, a person who \
             errs, a model that changes its mind, or a crashing tracker"
        }
        Family::Loop => "the loop's power-loss sweep runs the plain job, without a situation",
        Family::Bank => "the bank example takes no dimension",
        Family::Process => "the triage process sweep takes no dimension",
    }
}

/// The five plain designs on their default job, for `cargo xtask bench`.
pub fn five_designs(s: StorageArg) -> Result<Vec<Box<dyn DynSubject>>, String> {
    let script = script(None)?;
    Ok(Design::ALL
        .iter()
        .map(|d| Box::new(d.subject(&script, storage(s))) as Box<dyn DynSubject>)
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compose::Registry;

    /// Every variant the crates list is in the table, found by the title
    /// the crates give it.
    #[test]
    fn every_variant_the_crates_list_is_reachable_with_its_title() {
        let registry = Registry::load();
        let mut listed: Vec<String> = Design::ALL.iter().map(|d| d.title().to_owned()).collect();
        listed.extend(loop_sweep::variants().iter().map(|l| l.title()));
        listed.extend(variants::variants().iter().map(DesignVariant::title));
        for (_, b) in bank_variants() {
            listed.push(sweep::Subject::name(&bank::Payday(b)));
        }
        for title in listed {
            let spec = registry
                .spec_of_title(&title)
                .unwrap_or_else(|| panic!("no variant is titled {title:?}"));
            assert_eq!(registry.resolve(&spec).unwrap().entry.title(), title);
        }
    }

    #[test]
    fn entries_build_their_subjects() {
        for spec in [
            Spec::new("keys"),
            Spec::new("loop-keyless").with(Dim::Situation, "approval-gate"),
            Spec::new("markers")
                .with(Dim::CrashState, "torn")
                .with(Dim::Mutation, "in-place"),
            Spec::new("bank-buggy"),
        ] {
            let e = Registry::load().resolve(&spec).unwrap().entry;
            let s = e.build(None, StorageArg::Memory).unwrap();
            assert_eq!(s.name(), e.title(), "{spec}");
        }
    }
}
