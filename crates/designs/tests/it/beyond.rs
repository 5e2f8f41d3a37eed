//! The sweeps beyond the book chapter's stated limits, every
//! scenario run, compared with the reviewed snapshot `snapshots/beyond.txt`.

use std::path::PathBuf;
use std::sync::OnceLock;

use designs::labels::{self, Settlement, Stage};
use designs::tables;
use designs::variants::{self, DesignVariant};
use designs::{Design, ModelBehaviour, Script, Writer};
use durable::testing::DiskState;
use sweep::{Config, Report};

fn script() -> Script {
    Script::load(designs::default_script_path()).expect("the triage job loads")
}

fn snapshot() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../snapshots/beyond.txt")
}

fn run_all(vs: Vec<DesignVariant>) -> Vec<(DesignVariant, Report)> {
    let script = script();
    vs.into_iter()
        .map(|v| {
            let r = sweep::run(&v.subject(&script), &Config::default()).expect("sweep runs");
            (v, r)
        })
        .collect()
}

/// Every power-loss sweep, run once and shared by the tests below.
fn power() -> &'static [(DesignVariant, Report)] {
    static CELL: OnceLock<Vec<(DesignVariant, Report)>> = OnceLock::new();
    CELL.get_or_init(|| run_all(variants::power_variants()))
}

/// Every wrong-person sweep.
fn person() -> &'static [(DesignVariant, Report)] {
    static CELL: OnceLock<Vec<(DesignVariant, Report)>> = OnceLock::new();
    CELL.get_or_init(|| run_all(variants::person_variants()))
}

/// Every changing-model sweep.
fn models() -> &'static [(DesignVariant, Report)] {
    static CELL: OnceLock<Vec<(DesignVariant, Report)>> = OnceLock::new();
    CELL.get_or_init(|| run_all(variants::model_variants()))
}

/// The book chapter's five designs, as the chapter swept them (labels come with them).
fn seed() -> &'static [(Design, Report)] {
    static CELL: OnceLock<Vec<(Design, Report)>> = OnceLock::new();
    CELL.get_or_init(|| {
        let script = script();
        Design::ALL
            .into_iter()
            .map(|d| {
                let subject = d.subject(&script, designs::Storage::Memory);
                (
                    d,
                    sweep::run(&subject, &Config::default()).expect("sweep runs"),
                )
            })
            .collect()
    })
}

/// Every crashing-tracker sweep.
fn trackers() -> &'static [(DesignVariant, Report)] {
    static CELL: OnceLock<Vec<(DesignVariant, Report)>> = OnceLock::new();
    CELL.get_or_init(|| run_all(variants::tracker_variants()))
}

fn report(reports: &'static [(DesignVariant, Report)], want: &DesignVariant) -> &'static Report {
    reports
        .iter()
        .find(|(v, _)| v == want)
        .map(|(_, r)| r)
        .unwrap_or_else(|| panic!("no sweep {}", want.title()))
}

fn first_failure(r: &Report) -> Option<(String, String)> {
    r.failures().next().map(|s| {
        (
            s.scenario.to_string(),
            s.failure
                .as_ref()
                .map(ToString::to_string)
                .unwrap_or_default(),
        )
    })
}

fn rows_table<'a>(reports: impl IntoIterator<Item = &'a (DesignVariant, Report)>) -> String {
    let rows: Vec<sweep::report::Row> = reports.into_iter().map(|(_, r)| r.row()).collect();
    sweep::table(&rows)
}

fn power_section() -> String {
    let p = power();
    let mut out = String::from("## 1. Power loss\n\n");
    out.push_str("Crash states (what a power cut keeps of the operations not yet synced):\n");
    for s in DiskState::ALL {
        out.push_str(&format!("  {:<9} {}\n", s.slug(), s.title()));
    }
    out.push_str(
        "The book chapter's sweep is the `process` column of the `syncs off (book)` row: it passes,\n\
         and so does every mutation; it checks the order of the saves, not that they reach the disk.\n\n",
    );
    out.push_str(&tables::power_grid(p));
    out.push_str("\nFailing sweeps, each with its first failing scenario:\n");
    out.push_str(&tables::failures_list(p));
    out.push_str("\nEvery writer when nothing unsynced survives (`lose`):\n");
    out.push_str(&rows_table(p.iter().filter(|(v, _)| {
        v.modes
            .power
            .is_some_and(|x| x.state == DiskState::LoseUnsynced)
    })));
    out.push_str("\nThe real writer in full:\n");
    out.push_str(&rows_table(p.iter().filter(|(v, _)| {
        v.modes.power.is_some_and(|x| x.writer == Writer::Real)
    })));
    out
}

fn person_section() -> String {
    let p = person();
    let mut out = String::from("## 2. A person who answers wrong\n\n");
    out.push_str(
        "One wrong answer per scenario, at question k (k = 1 .. the most any scenario asks).\n\
         Only the designs with markers ask; save once per turn, save after the reply and\n\
         + idempotency keys never do, so a person cannot err there.\n\n",
    );
    let mut rows: Vec<sweep::report::Row> = Vec::new();
    for design in [Design::Markers, Design::KeysMarkers] {
        let mine: Vec<sweep::report::Row> = p
            .iter()
            .filter(|(v, _)| v.design == design)
            .map(|(_, r)| r.row())
            .collect();
        rows.extend(mine.iter().cloned());
        rows.push(tables::sum_rows(
            &format!("{} | every k", design.title()),
            &mine,
        ));
    }
    out.push_str(&sweep::table(&rows));
    out
}

fn model_section() -> String {
    let mut out = String::from("## 3. A model that changes its mind\n\n");
    out.push_str(
        "Asked again for a turn, the model repeats itself (the book chapter's model), mints new call IDs,\n\
         or gives other calls (new IDs, opposite order, reworded). Duplicates are counted\n\
         by intent: a reworded issue counts as the one it stands for.\n\n",
    );
    out.push_str(&rows_table(models()));
    out
}

fn labels_section() -> String {
    let mut out = String::from("## 5. Outcome labels\n\n");
    out.push_str(
        "Every crash of the book chapter's five sweeps (once and twice), by where the latest call that\n\
         changes the tracker stood when the life died, and how the restart settled it.\n\
         Columns: save once per turn, save after the reply, + idempotency keys,\n\
         + attempt markers no keys, keys and markers.\n\n",
    );
    let columns: Vec<(String, &Report)> = seed()
        .iter()
        .map(|(d, r)| (d.slug().to_owned(), r))
        .collect();
    out.push_str(&designs::labels::summary(&columns));
    out
}

fn tracker_section() -> String {
    let t = trackers();
    let mut out = String::from("## 4. A tracker that crashes\n\n");
    out.push_str(
        "The tracker keeps a log (one synced entry per record) and an index, and crashes at\n\
         `tracker received` (nothing durable), `tracker log appended` (entry durable, index not),\n\
         `tracker index updated` and `tracker accepted`; every crash restarts it from its files.\n\n",
    );
    out.push_str(&rows_table(t));
    out.push_str("\nFailing sweeps, each with its first failing scenario:\n");
    out.push_str(&tables::failures_list(t));
    out.push_str("\nOutcome labels of the crashing-tracker sweeps (right layout):\n");
    let columns: Vec<(String, &Report)> = t
        .iter()
        .filter(|(v, _)| v.modes.tracker == Some(tracker::LogLayout::KeysInLog))
        .map(|(v, r)| (v.design.slug().to_owned(), r))
        .collect();
    out.push_str(&labels::summary(&columns));
    out
}

fn snapshot_text() -> String {
    let mut out = String::from(
        "# Beyond the book chapter's stated limits: reviewed output of crates/designs/tests/it/beyond.rs\n\n",
    );
    out.push_str(&power_section());
    out.push('\n');
    out.push_str(&person_section());
    out.push('\n');
    out.push_str(&model_section());
    out.push('\n');
    out.push_str(&tracker_section());
    out.push('\n');
    out.push_str(&labels_section());
    out
}

#[test]
fn beyond_matches_the_reviewed_snapshot() {
    let text = snapshot_text();
    print!("{text}");
    if let Err(diff) = sweep::report::snapshot::check(&snapshot(), &text) {
        panic!("{diff}");
    }
}

/// "Our real writer (temp, fsync, rename, fsync dir) must come through every
/// power-loss scenario with nothing lost and nothing done twice."
#[test]
fn the_real_writer_survives_every_crash_state() {
    let mut seen = 0;
    for (v, r) in power() {
        let Some(p) = v.modes.power else { continue };
        if p.writer != Writer::Real {
            continue;
        }
        seen += 1;
        let failed: Vec<String> = r
            .failures()
            .take(3)
            .map(|s| format!("{}: {:?}", s.scenario, s.failure))
            .collect();
        assert!(failed.is_empty(), "{}: {failed:?}", v.title());
        let row = r.row();
        for col in ["dups", "missing", "lost saves", "stopped"] {
            assert_eq!(row.cell(col), Some(0), "{} {col}", v.title());
        }
        assert!(
            row.depth_counts[1] > 0,
            "{} crashed the restart too",
            v.title()
        );
    }
    assert_eq!(seen, 2 * DiskState::ALL.len());
}

/// A panic keeps the page cache: the chapter-style sweep passes every writer,
/// right or wrong.
#[test]
fn a_process_crash_cannot_tell_a_missing_fsync() {
    for (v, r) in power() {
        if v.modes.power.is_some_and(|p| p.state == DiskState::Process) {
            assert_eq!(r.failures().count(), 0, "{}", v.title());
        }
    }
}

/// Mutation: `write_atomic` without the file fsync. The rename reaches the
/// disk before the data does, and the restart finds an empty checkpoint.
#[test]
fn a_writer_without_the_file_fsync_is_caught() {
    let p = power();
    let (sc, why) = first_failure(report(
        p,
        &variants::power(
            Design::KeysMarkers,
            Writer::NoFileSync,
            DiskState::KeepEntries,
        ),
    ))
    .unwrap();
    assert_eq!(sc, "entries: after rename#1");
    assert!(why.contains("truncated checkpoint"), "{why}");
    let (sc, why) = first_failure(report(
        p,
        &variants::power(
            Design::KeysMarkers,
            Writer::NoFileSync,
            DiskState::LoseUnsynced,
        ),
    ))
    .unwrap();
    assert_eq!(sc, "lose: reply arrived#1");
    assert!(why.contains("truncated checkpoint"), "{why}");
}

/// Mutation: `write_atomic` without the directory fsync. The rename may be
/// undone: the keyed loop resumes from an older checkpoint than one it acted
/// on, and the keyless markers loop loses a marker and files twice.
#[test]
fn a_writer_without_the_directory_fsync_is_caught() {
    let p = power();
    let (sc, why) = first_failure(report(
        p,
        &variants::power(
            Design::KeysMarkers,
            Writer::NoDirSync,
            DiskState::LoseUnsynced,
        ),
    ))
    .unwrap();
    assert_eq!(sc, "lose: mid-save#3");
    assert!(why.contains("lost saves = 1"), "{why}");
    let r = report(
        p,
        &variants::power(Design::Markers, Writer::NoDirSync, DiskState::LoseUnsynced),
    );
    let dup = r.failures().find(|s| r.value(s, "dups") > 0).unwrap();
    assert_eq!(dup.scenario.to_string(), "lose: tracker accepted#1");
    assert!(
        dup.verdict.notes[0].contains("made 2 times"),
        "{:?}",
        dup.verdict
    );
    // Keys hide the lost marker from the duplicate count, not from the judge.
    let row = report(
        p,
        &variants::power(
            Design::KeysMarkers,
            Writer::NoDirSync,
            DiskState::LoseUnsynced,
        ),
    )
    .row();
    assert_eq!(row.cell("dups"), Some(0));
    assert!(row.cell("lost saves").unwrap() > 0);
    // Each scenario that lost saves says so in words, with how many; the
    // others say nothing of it.
    let r = report(
        p,
        &variants::power(
            Design::KeysMarkers,
            Writer::NoDirSync,
            DiskState::LoseUnsynced,
        ),
    );
    assert!(
        counted_in_words(
            r,
            "lost saves",
            "restart(s) resumed from an older checkpoint"
        ) > 0
    );
}

/// How many scenarios of `r` (the clean run included) count `counter`
/// above zero; each of them must have a note `"{n} {words}…"` with its
/// count, and the others no note with `words`.
fn counted_in_words(r: &Report, counter: &str, words: &str) -> usize {
    let mut counted = 0;
    for s in std::iter::once(&r.clean).chain(&r.scenarios) {
        let n = r.value(s, counter);
        let said = s.verdict.notes.iter().find(|note| note.contains(words));
        match n {
            0 => assert_eq!(said, None, "{}", s.scenario),
            n => {
                counted += 1;
                let said = said.unwrap_or_else(|| panic!("{}: no note {words:?}", s.scenario));
                assert!(said.starts_with(&format!("{n} {words}")), "{said}");
            }
        }
    }
    counted
}

/// Mutation: overwrite the checkpoint in place. Only a crash state that tears
/// the unsynced write catches it: the restart finds half a checkpoint.
#[test]
fn a_writer_that_overwrites_in_place_is_caught() {
    let p = power();
    let in_place = |state| variants::power(Design::KeysMarkers, Writer::InPlace, state);
    let (sc, why) = first_failure(report(p, &in_place(DiskState::TornContents))).unwrap();
    assert_eq!(sc, "torn: mid-overwrite#1");
    assert!(why.contains("truncated checkpoint"), "{why}");
    for state in [
        DiskState::Process,
        DiskState::LoseUnsynced,
        DiskState::KeepContents,
        DiskState::InOrderHalf,
    ] {
        let r = report(p, &in_place(state));
        assert_eq!(r.failures().count(), 0, "{state:?}");
    }
}

/// Each variant of the reviewed snapshot has a row title of its own, the
/// name of the subject it builds.
#[test]
fn every_variant_has_a_title_of_its_own() {
    let script = script();
    let all = variants::variants();
    let mut titles: Vec<String> = all.iter().map(DesignVariant::title).collect();
    for (v, title) in all.iter().zip(&titles) {
        assert_eq!(&sweep::Subject::name(&v.subject(&script)), title);
    }
    titles.sort();
    titles.dedup();
    assert_eq!(titles.len(), all.len());
}

/// The person variants cover every question asked: no scenario of the
/// markers design asks more than `MAX_QUESTIONS`.
#[test]
fn the_person_variants_cover_every_question() {
    let subject = Design::Markers.subject(&script(), designs::Storage::Memory);
    let r = sweep::run(&subject, &Config::default()).unwrap();
    let most = r.scenarios.iter().map(|s| s.verdict.get("asks")).max();
    assert_eq!(most, Some(variants::MAX_QUESTIONS));
}

/// "The keyed loop must stay at zero, since it never asks."
#[test]
fn a_wrong_person_costs_the_keyless_loop_and_not_the_keyed_one() {
    for (v, r) in person() {
        let row = r.row();
        match v.design {
            Design::KeysMarkers => {
                for col in ["dups", "missing", "asks", "wrong answers", "stopped"] {
                    assert_eq!(row.cell(col), Some(0), "{} {col}", v.title());
                }
            }
            _ => {
                assert!(row.cell("wrong answers").unwrap() > 0, "{}", v.title());
            }
        }
    }
    // The first question of the markers design, answered wrong, files twice.
    let r = report(person(), &variants::person(Design::Markers, 1));
    let s = r.scenarios.iter().find(|s| r.value(s, "dups") > 0).unwrap();
    assert_eq!(s.scenario.to_string(), "tracker accepted#1");
}

/// "Show how `save once per turn` gets worse and that the keyed loop (which
/// never re-asks for a saved reply) does not."
#[test]
fn a_model_that_changes_its_mind_hurts_only_the_loop_that_asks_again() {
    let m = models();
    use ModelBehaviour::{NewCalls, NewIds, Scripted};
    let once = Design::SaveOncePerTurn;
    let dups = |design, keys, model| {
        let v = variants::model(design, keys, model);
        report(m, &v).row().cell("dups").unwrap()
    };
    // Keys rescue `save once per turn` only while the model repeats its IDs.
    assert_eq!(dups(once, true, Scripted), 0);
    assert_eq!(dups(once, true, NewIds), dups(once, false, Scripted));
    // Other calls: more duplicates, and every one of them worded differently
    // from the first, so no lookup by arguments would find it.
    assert!(dups(once, false, NewCalls) > dups(once, false, Scripted));
    // A loop that saves the reply before acting never asks again after
    // acting: whatever the model answers, nothing is done twice.
    for design in [Design::Keys, Design::KeysMarkers] {
        for model in ModelBehaviour::ALL {
            let r = report(m, &variants::model(design, false, model));
            assert_eq!(r.row().cell("dups"), Some(0), "{model:?} {design:?}");
            assert_eq!(r.row().cell("missing"), Some(0), "{model:?} {design:?}");
            assert_eq!(r.failures().count(), 0, "{model:?} {design:?}");
        }
    }
    // Every scenario that left reworded records says so in words, with
    // how many; the others say nothing of rewording.
    let r = report(m, &variants::model(once, false, NewCalls));
    let words = "record(s) worded as a model asked again worded them";
    assert!(
        counted_in_words(r, "reworded", words) > 0,
        "some scenario rewords a record"
    );
}

/// A model asked again mints new call IDs (`c1~2`), and only then: the
/// first answer to every turn keeps the script's IDs.
#[test]
fn only_a_repeated_question_gets_new_call_ids() {
    let r = report(
        models(),
        &variants::model(Design::KeysMarkers, false, ModelBehaviour::NewIds),
    );
    let crash_notes = |prefix: &str| -> Vec<String> {
        r.scenarios
            .iter()
            .flat_map(|s| &s.verdict.notes)
            .filter(|n| n.starts_with(prefix))
            .cloned()
            .collect()
    };
    let first = crash_notes("crash 1: ");
    assert!(!first.is_empty());
    assert!(first.iter().all(|n| !n.contains('~')), "{first:#?}");
    let second = crash_notes("crash 2: ");
    assert!(second.iter().any(|n| n.contains("~2 ")), "{second:#?}");
}

fn labels_of(s: &sweep::report::ScenarioResult) -> Vec<(Stage, Settlement)> {
    s.verdict
        .counts
        .iter()
        .filter_map(|(k, n)| labels::parse_count_name(k).map(|l| (l, *n)))
        .flat_map(|(l, n)| std::iter::repeat(l).take(n as usize))
        .collect()
}

/// Every crash of every sweep carries exactly one label, and it is settled.
#[test]
fn every_crash_is_labelled_and_settled() {
    let all = seed()
        .iter()
        .map(|(_, r)| r)
        .chain(models().iter().map(|(_, r)| r))
        .chain(power().iter().map(|(_, r)| r));
    for r in all {
        for s in &r.scenarios {
            let l = labels_of(s);
            assert_eq!(l.len(), s.scenario.depth(), "{} {}", r.subject, s.scenario);
            if s.failure.is_none() {
                assert!(
                    l.iter()
                        .all(|(_, settlement)| *settlement != Settlement::Unsettled),
                    "{} {}",
                    r.subject,
                    s.scenario
                );
            }
        }
    }
}

/// The labels explain the book chapter's table: each duplicate comes from a call that
/// had gone out (sent, or answered) and was made again with no marker to warn;
/// with markers, such a call goes up the ladder instead.
#[test]
fn duplicates_are_calls_that_went_out_and_were_made_again_blind() {
    for (d, r) in seed() {
        for s in r.scenarios.iter().filter(|s| r.value(s, "dups") > 0) {
            let l = labels_of(s);
            assert!(
                l.iter().any(|(stage, settlement)| {
                    matches!(stage, Stage::Sent | Stage::Acknowledged)
                        && matches!(settlement, Settlement::Blind | Settlement::ReplyLost)
                }),
                "{d:?} {}: {l:?}",
                s.scenario
            );
        }
        if d.slug().contains("markers") {
            let blind_after_sending = r.scenarios.iter().flat_map(labels_of).any(|(st, ru)| {
                matches!(st, Stage::Sent | Stage::Acknowledged) && ru == Settlement::Blind
            });
            assert!(!blind_after_sending, "{d:?}");
        }
    }
    // The one scenario of the timeline snapshot (five_designs.rs), in words.
    let (_, r) = &seed()[0];
    let s = r
        .scenarios
        .iter()
        .find(|s| s.scenario.to_string() == "tracker accepted#1")
        .unwrap();
    assert_eq!(labels_of(s), [(Stage::Sent, Settlement::ReplyLost)]);
}

/// "A request the tracker accepted but did not make durable is lost; the loop
/// must then redo it, and the key table must survive with the records it
/// protects."
#[test]
fn a_crashing_tracker_loses_nothing_and_duplicates_nothing_for_keys_or_markers() {
    let t = trackers();
    for (v, r) in t {
        let row = r.row();
        assert_eq!(row.cell("missing"), Some(0), "{}", v.title());
        if v.modes.tracker == Some(tracker::LogLayout::KeysInLog) {
            let safe = matches!(
                v.design,
                Design::Keys | Design::Markers | Design::KeysMarkers
            );
            if safe {
                assert_eq!(r.failures().count(), 0, "{}", v.title());
            }
            // The tracker's own points were crashed at, and a crash before
            // the log append lost a request that the restart then redid.
            let lost = r
                .scenarios
                .iter()
                .filter(|s| s.scenario.hits.iter().any(|h| h.point == tracker::RECEIVED))
                .count();
            assert!(lost > 0, "{}", v.title());
        }
    }
    // The wrong layout: the record survives its key, and the keyed retry
    // files again, named by the scenario that shows it.
    for design in [Design::Keys, Design::KeysMarkers] {
        let r = report(
            t,
            &variants::tracker_crash(design, tracker::LogLayout::KeysInIndexOnly),
        );
        let (sc, why) = first_failure(r).unwrap();
        assert_eq!(sc, "tracker log appended#1", "{design:?}");
        assert!(why.starts_with("dups = 1"), "{why}");
    }
}

/// The new worlds (a power-loss directory, a crashing tracker's files, the
/// labels) are per scenario: one thread or many give the same table.
#[test]
fn one_thread_or_many_give_the_same_rows() {
    let script = script();
    for v in [
        variants::power(Design::Markers, Writer::NoDirSync, DiskState::InOrderHalf),
        variants::tracker_crash(Design::KeysMarkers, tracker::LogLayout::KeysInLog),
        variants::model(Design::SaveOncePerTurn, false, ModelBehaviour::NewCalls),
    ] {
        let one = sweep::run(
            &v.subject(&script),
            &Config {
                threads: Some(1),
                ..Config::default()
            },
        )
        .unwrap();
        let many = sweep::run(
            &v.subject(&script),
            &Config {
                threads: Some(8),
                ..Config::default()
            },
        )
        .unwrap();
        assert_eq!(one, many, "{}", v.title());
    }
}
