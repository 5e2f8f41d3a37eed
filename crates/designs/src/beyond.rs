//! The sweeps beyond the seed's stated limits (issue 7), by command-line
//! name: power loss instead of a panic, and more to come.
//!
//! Each variant is one of the five designs run with [`Modes`]; its slug is
//! what `cargo xtask sweep --variant` takes, and its title is its row's name.
//!
//! ```
//! let script = designs::Script::load(designs::default_script_path()).unwrap();
//! let slug = "power-real-lose-keys-markers";
//! assert!(designs::beyond::variants().iter().any(|(s, _)| s == slug));
//! let subject = designs::beyond::subject(slug, &script).unwrap();
//! assert_eq!(subject.name(), "keys and markers | real writer | lose");
//! ```

use durable::testing::CrashState;
use sweep::{DynSubject, Report};

use crate::{Design, DesignSubject, Model, Modes, Person, Power, Script, Storage, Writer};

/// One sweepable variant: a design with modes, and its names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Variant {
    /// The command-line name.
    pub slug: String,
    /// The design.
    pub design: Design,
    /// What it runs with.
    pub modes: Modes,
}

impl Variant {
    fn new(slug: String, design: Design, modes: Modes) -> Variant {
        Variant {
            slug,
            design,
            modes,
        }
    }

    /// The subject running `script`.
    pub fn subject(&self, script: &Script) -> DesignSubject {
        self.design
            .subject(script, Storage::Memory)
            .with_modes(self.modes.clone())
    }

    /// The row title (the subject's name).
    pub fn title(&self) -> String {
        // The title does not depend on the job.
        let script = Script {
            name: String::new(),
            replies: vec![Vec::new()],
        };
        sweep::Subject::name(&self.subject(&script))
    }
}

/// A power-loss variant: `design`'s checkpoints written by `writer`, each
/// crash a power cut keeping what `state` says.
pub fn power(design: Design, writer: Writer, state: CrashState) -> Variant {
    Variant::new(
        format!("power-{}-{}-{}", writer.slug(), state.slug(), design.slug()),
        design,
        Modes {
            power: Some(Power { writer, state }),
            ..Modes::default()
        },
    )
}

/// A person who answers the `k`-th question of each scenario wrong.
pub fn person(design: Design, k: u64) -> Variant {
    Variant::new(
        format!("person-wrong-{k}-{}", design.slug()),
        design,
        Modes {
            person: Person::WrongAt(k),
            ..Modes::default()
        },
    )
}

/// A model that answers a repeated question as `model` says; with `keys`,
/// the design also sends keys to a tracker that honours them (for `save once
/// per turn + keys`, which no design of the seed's table is).
pub fn model(design: Design, keys: bool, model: Model) -> Variant {
    let keys = keys && !design.sends_keys();
    Variant::new(
        format!(
            "model-{}-{}{}",
            model.slug(),
            design.slug(),
            if keys { "-plus-keys" } else { "" }
        ),
        design,
        Modes {
            model: Some(model),
            keys,
            ..Modes::default()
        },
    )
}

/// The changing-model variants of the reviewed snapshot: the design that
/// asks again after acting (save once per turn, without and with keys) and
/// two that save the reply first (+ idempotency keys, keys and markers).
pub fn model_variants() -> Vec<Variant> {
    let mut v = Vec::new();
    for (design, keys) in [
        (Design::SaveOncePerTurn, false),
        (Design::SaveOncePerTurn, true),
        (Design::Keys, false),
        (Design::KeysMarkers, false),
    ] {
        for m in Model::ALL {
            v.push(model(design, keys, m));
        }
    }
    v
}

/// A log-backed tracker that crashes with the loop (at its own points as
/// well as the loop's) and restarts from its files, keeping keys as `layout`
/// says.
pub fn tracker_crash(design: Design, layout: tracker::LogLayout) -> Variant {
    let slug = match layout {
        tracker::LogLayout::KeysInLog => format!("tracker-crash-{}", design.slug()),
        tracker::LogLayout::KeysInIndexOnly => {
            format!("tracker-crash-keys-in-index-{}", design.slug())
        }
    };
    Variant::new(
        slug,
        design,
        Modes {
            tracker: Some(layout),
            ..Modes::default()
        },
    )
}

/// The crashing-tracker variants of the reviewed snapshot: all five designs
/// against the right log layout, and the two keyed ones against the layout
/// that keeps keys in the index only.
pub fn tracker_variants() -> Vec<Variant> {
    let mut v: Vec<Variant> = Design::ALL
        .into_iter()
        .map(|d| tracker_crash(d, tracker::LogLayout::KeysInLog))
        .collect();
    for d in [Design::Keys, Design::KeysMarkers] {
        v.push(tracker_crash(d, tracker::LogLayout::KeysInIndexOnly));
    }
    v
}

/// The most questions any scenario of the triage job's depth-2 sweep asks
/// (checked by the test): the person variants cover k = 1 up to it.
pub const MAX_QUESTIONS: u64 = 2;

/// The wrong-person variants of the reviewed snapshot: the two designs with
/// markers (the only ones that ask), k over every question a scenario asks.
pub fn person_variants() -> Vec<Variant> {
    let mut v = Vec::new();
    for design in [Design::Markers, Design::KeysMarkers] {
        for k in 1..=MAX_QUESTIONS {
            v.push(person(design, k));
        }
    }
    v
}

/// The power-loss variants of the reviewed snapshot: every writer under every
/// crash state in the keyed design (a lost or torn checkpoint shows as a run
/// that stops on a corrupt file, or as repeated model calls), and the real
/// writer, the seed's setting and the missing directory fsync in the keyless
/// markers design too (a lost marker shows there as a duplicate).
pub fn power_variants() -> Vec<Variant> {
    let mut v = Vec::new();
    for writer in Writer::ALL {
        for state in CrashState::ALL {
            v.push(power(Design::KeysMarkers, writer, state));
        }
    }
    for writer in [Writer::Real, Writer::SyncsOff, Writer::NoDirSync] {
        for state in CrashState::ALL {
            v.push(power(Design::Markers, writer, state));
        }
    }
    v
}

/// Every variant any slug can name (a superset of [`variants`]).
fn space() -> Vec<Variant> {
    let mut v = Vec::new();
    for design in Design::ALL {
        for writer in Writer::ALL {
            for state in CrashState::ALL {
                v.push(power(design, writer, state));
            }
        }
        for k in 1..=9 {
            v.push(person(design, k));
        }
        v.push(tracker_crash(design, tracker::LogLayout::KeysInLog));
        v.push(tracker_crash(design, tracker::LogLayout::KeysInIndexOnly));
        for m in Model::ALL {
            v.push(model(design, false, m));
            if !design.sends_keys() {
                v.push(model(design, true, m));
            }
        }
    }
    v
}

/// `(slug, title)` of every variant of the reviewed snapshot
/// `snapshots/beyond.txt`, in its order.
pub fn variants() -> Vec<(String, String)> {
    curated()
        .into_iter()
        .map(|v| {
            let title = v.title();
            (v.slug, title)
        })
        .collect()
}

fn curated() -> Vec<Variant> {
    let mut v = power_variants();
    v.extend(person_variants());
    v.extend(model_variants());
    v.extend(tracker_variants());
    v
}

/// The variant named `slug`: any combination the slugs can spell, not only
/// those of [`variants`].
pub fn variant(slug: &str) -> Option<Variant> {
    space().into_iter().find(|v| v.slug == slug)
}

/// The subject of the variant named `slug`, running `script`.
pub fn subject(slug: &str, script: &Script) -> Option<Box<dyn DynSubject>> {
    variant(slug).map(|v| Box::new(v.subject(script)) as Box<dyn DynSubject>)
}

/// The slug of the variant whose row title is `title`.
pub fn slug_of(title: &str) -> Option<String> {
    space()
        .into_iter()
        .find(|v| v.title() == title)
        .map(|v| v.slug)
}

/// A plain-text grid in the style of [`sweep::table`]: a header, then rows;
/// the first column left-aligned, the others right-aligned.
pub fn grid(header: &[String], rows: &[Vec<String>]) -> String {
    let ncols = header.len();
    let mut width = vec![0usize; ncols];
    for r in std::iter::once(header).chain(rows.iter().map(Vec::as_slice)) {
        for (i, c) in r.iter().enumerate().take(ncols) {
            width[i] = width[i].max(c.chars().count());
        }
    }
    let line = |r: &[String]| {
        let cells: Vec<String> = (0..ncols)
            .map(|i| {
                let c = r.get(i).map_or("", String::as_str);
                let pad = " ".repeat(width[i] - c.chars().count());
                if i == 0 {
                    format!("{c}{pad}")
                } else {
                    format!("{pad}{c}")
                }
            })
            .collect();
        format!("| {} |\n", cells.join("   "))
    };
    let inner = width.iter().sum::<usize>() + 3 * ncols.saturating_sub(1) + 2;
    let mut out = format!("+{}+\n", "-".repeat(inner));
    out.push_str(&line(header));
    out.push_str(&format!("+{}+\n", "=".repeat(inner)));
    for r in rows {
        out.push_str(&line(r));
    }
    out.push_str(&format!("+{}+\n", "-".repeat(inner)));
    out
}

/// The power-loss grid: one row per design and writer, one column per crash
/// state, each cell the scenarios that failed (lost or duplicated an effect,
/// or stopped on a checkpoint it could not read) out of those run.
pub fn power_grid(reports: &[(Variant, Report)]) -> String {
    let mut header = vec!["failing scenarios: design | writer".to_owned()];
    header.extend(CrashState::ALL.iter().map(|s| s.slug().to_owned()));
    let mut rows: Vec<Vec<String>> = Vec::new();
    let mut keys: Vec<(Design, Writer)> = Vec::new();
    for (v, _) in reports {
        if let Some(p) = v.modes.power {
            if !keys.contains(&(v.design, p.writer)) {
                keys.push((v.design, p.writer));
            }
        }
    }
    for (design, writer) in keys {
        let mut row = vec![format!("{} | {}", design.title(), writer.title())];
        for state in CrashState::ALL {
            let cell = reports
                .iter()
                .find(|(v, _)| v.design == design && v.modes.power == Some(Power { writer, state }))
                .map_or_else(
                    || "-".to_owned(),
                    |(_, r)| format!("{}/{}", r.failures().count(), r.scenarios.len()),
                );
            row.push(cell);
        }
        rows.push(row);
    }
    grid(&header, &rows)
}

/// One line per failing sweep: how many scenarios failed and the first of
/// them by name, with why (the command `--scenario` reruns it).
pub fn failures_list(reports: &[(Variant, Report)]) -> String {
    let mut out = String::new();
    for (v, r) in reports {
        let n = r.failures().count();
        if let Some(first) = r.failures().next() {
            out.push_str(&format!(
                "{}: {n} failing; first: {} ({})\n",
                v.title(),
                first.scenario,
                short_reason(first.failure.as_deref().unwrap_or(""))
            ));
        }
    }
    out
}

/// A failure message cut to its cause: `final life 2: stopped with an error:
/// truncated checkpoint power:/x.json: …` becomes `truncated checkpoint`,
/// `dups = 1; issue … made 2 times` becomes `dups = 1`.
fn short_reason(failure: &str) -> &str {
    let cause = failure
        .split_once("stopped with an error: ")
        .map_or(failure, |(_, rest)| rest);
    let cause = cause.split(';').next().unwrap_or(cause);
    cause.split(" power:/").next().unwrap_or(cause).trim()
}

/// Rows summed cell by cell into one titled `title` (scenario counts and
/// every column), for a total over variants that split one sweep in parts.
pub fn sum_rows(title: &str, rows: &[sweep::Row]) -> sweep::Row {
    let mut total = sweep::Row {
        variant: title.to_owned(),
        depth_counts: Vec::new(),
        cells: Vec::new(),
        failed: 0,
    };
    for r in rows {
        if total.depth_counts.len() < r.depth_counts.len() {
            total.depth_counts.resize(r.depth_counts.len(), 0);
        }
        for (t, n) in total.depth_counts.iter_mut().zip(&r.depth_counts) {
            *t += n;
        }
        for (title, n) in &r.cells {
            match total.cells.iter_mut().find(|(t, _)| t == title) {
                Some((_, m)) => *m += n,
                None => total.cells.push((title.clone(), *n)),
            }
        }
        total.failed += r.failed;
    }
    total
}
