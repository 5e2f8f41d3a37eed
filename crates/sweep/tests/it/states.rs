//! A report of several crash states: scenarios grouped by state in the
//! config's order (whole and merged from shards), each state's tally, and
//! the one-row view adding the states' tallies up, the same whether the
//! report keeps every scenario or tallies them.

use sweep::{
    power::{Boot, CrashState},
    Config, Counter, Report, Subject, Verdict,
};

const LOSE: CrashState = CrashState::named("lose");

/// Sends once and marks it sent; in `lose` a crash forgets the mark (it
/// was never synced), so the message goes again.
struct Relay;

#[derive(Default)]
struct Mailbox {
    sent: u64,
    starts: u64,
    marked: bool,
    running: bool,
    /// Where the life is: 1 sending, 2 marking, 3 done.
    stage: u8,
    /// The stage of the first crash.
    first_crash: Option<u8>,
}

impl Subject for Relay {
    type World = Mailbox;
    fn name(&self) -> String {
        "relay".into()
    }
    fn counters(&self) -> Vec<Counter> {
        vec![
            Counter::new("dups").with_scenarios("with dups"),
            Counter::new("starts").over_clean(),
            // Lives the world saw, clean run included (never zero).
            Counter::new("lives"),
            // The same as dups, without a column.
            Counter::new("again").hidden(),
            // The first crash came once the message was marked.
            Counter::new("late").hidden(),
        ]
    }
    fn world(&self) -> Result<Mailbox, sweep::LifeError> {
        Ok(Mailbox::default())
    }
    fn life(&self, w: &mut Mailbox) -> Result<(), sweep::LifeError> {
        w.starts += 1;
        if !w.marked {
            w.stage = 1;
            crashpoint::point!("sending");
            w.sent += 1;
            w.marked = true;
            w.stage = 2;
            crashpoint::point!("marked");
        }
        w.stage = 3;
        crashpoint::point!("done");
        Ok(())
    }
    fn judge(&self, w: &Mailbox) -> Verdict {
        Verdict::new()
            .count("dups", w.sent.saturating_sub(1))
            .count("starts", w.starts)
            .count("lives", w.starts)
            .count("again", w.sent.saturating_sub(1))
            .count("late", u64::from(w.first_crash == Some(3)))
    }

    fn power_cuts(&self) -> Option<&dyn sweep::power::PowerCuts<Mailbox>> {
        Some(self)
    }
}

impl sweep::power::PowerCuts<Mailbox> for Relay {
    fn crash_states(&self) -> Vec<CrashState> {
        vec![CrashState::PROCESS, LOSE]
    }

    fn boot(&self, w: &mut Mailbox, ctx: &Boot) -> Result<(), sweep::LifeError> {
        if w.running && w.first_crash.is_none() {
            w.first_crash = Some(w.stage);
        }
        if w.running && *ctx.state() == LOSE {
            w.marked = false;
        }
        w.running = true;
        Ok(())
    }

    fn shutdown(&self, w: &mut Mailbox, _: &Boot) {
        w.running = false;
    }
}

/// `lose` first, then `process`: not the subject's own order.
fn config(tally: bool, partition: Option<(u32, u32)>) -> Config {
    Config {
        depth: 2,
        threads: Some(2),
        crash_states: vec![LOSE, CrashState::PROCESS],
        tally,
        partition,
        ..Config::default()
    }
}

fn states(r: &Report) -> Vec<String> {
    let mut runs: Vec<String> = Vec::new();
    for s in &r.scenarios {
        let name = s.scenario.state.to_string();
        if runs.last() != Some(&name) {
            runs.push(name);
        }
    }
    runs
}

#[test]
fn scenarios_are_grouped_by_state_in_the_configs_order() {
    let whole = sweep::run(&Relay, &config(false, None)).unwrap();
    assert_eq!(states(&whole), ["lose", "process"]);
    let parts: Vec<Report> = (1..=3)
        .map(|k| sweep::run(&Relay, &config(false, Some((k, 3)))).unwrap())
        .collect();
    let merged = Report::merge(parts).unwrap();
    assert_eq!(states(&merged), ["lose", "process"]);
    assert_eq!(merged, whole);
}

#[test]
fn each_state_has_its_own_tally_and_the_row_adds_them_up() {
    let full = sweep::run(&Relay, &config(false, None)).unwrap();
    let tallied = sweep::run(&Relay, &config(true, None)).unwrap();
    let (lose, process) = (full.tally(&LOSE), full.tally(&CrashState::PROCESS));
    assert_ne!(lose, process, "the states differ");
    assert!(lose.counters[0].sum > 0, "lose sends again");
    assert_eq!(process.counters[0].sum, 0, "process does not");
    assert_eq!(tallied.tally(&LOSE), lose);
    assert_eq!(tallied.tally(&CrashState::PROCESS), process);
    assert_eq!(tallied.row(), full.row());
    let row = full.row();
    assert_eq!(row, {
        // The row's counts are the two states' added up.
        let mut both = full.clone();
        both.tally_up();
        both.row()
    });
    // Tallied shards merge into the same tallies.
    let parts: Vec<Report> = (1..=2)
        .map(|k| sweep::run(&Relay, &config(true, Some((k, 2)))).unwrap())
        .collect();
    let merged = Report::merge(parts).unwrap();
    assert_eq!(merged.tally(&LOSE), lose);
    assert_eq!(merged.tally(&CrashState::PROCESS), process);
    assert_eq!(merged.row(), full.row());
    assert_eq!(sweep::table(&merged.rows()), sweep::table(&full.rows()));
}

/// A clean run that fails (here: a counter it counts made required after
/// the fact) is one failure, counted in the first state's row only.
#[test]
fn a_failing_clean_run_counts_once_in_the_first_row() {
    let mut r = sweep::run(&Relay, &config(false, None)).unwrap();
    assert!(!r.clean.failed());
    r.require("lives").unwrap();
    assert!(r.clean.failed());
    let failed = |st: &CrashState| r.in_state(st).filter(|s| s.failed()).count() as u64;
    assert!(failed(&LOSE) > 0);
    let rows = r.rows();
    assert_eq!(rows.len(), 2);
    assert_eq!(rows[0].failed, failed(&LOSE) + 1);
    assert_eq!(rows[1].failed, failed(&CrashState::PROCESS));
}

/// A tallied report can require a counter after the fact when only kept
/// (failing) scenarios count it, and fails the same scenarios; it refuses
/// one that passing scenarios count, which it could not name.
#[test]
fn a_tallied_report_requires_a_counter_only_kept_scenarios_count() {
    let cfg = Config {
        required: vec!["dups".into()],
        ..config(true, None)
    };
    let mut r = sweep::run(&Relay, &cfg).unwrap();
    let kept_all = sweep::run(
        &Relay,
        &Config {
            tally: false,
            ..cfg.clone()
        },
    )
    .unwrap();
    assert!(r.row().failed > 0);
    assert_eq!(r.row(), kept_all.row(), "a tallied row counts failures too");
    let failing: Vec<String> = r.failures().map(|s| s.scenario.to_string()).collect();
    assert!(!failing.is_empty());
    r.require("again").unwrap();
    let after: Vec<String> = r.failures().map(|s| s.scenario.to_string()).collect();
    assert_eq!(after, failing);
    assert!(matches!(
        r.require("starts"),
        Err(sweep::Error::Tallied { .. })
    ));
    // `late` is counted by a few passing scenarios and not by many failing
    // ones: only the passing ones make the refusal.
    {
        let passing = kept_all
            .scenarios
            .iter()
            .filter(|s| !s.failed() && kept_all.value(s, "late") > 0)
            .count();
        let kept_zero = kept_all
            .scenarios
            .iter()
            .filter(|s| s.failed() && kept_all.value(s, "late") == 0)
            .count();
        assert!(passing > 0 && kept_zero >= passing, "{passing} {kept_zero}");
    }
    assert!(matches!(
        r.require("late"),
        Err(sweep::Error::Tallied { .. })
    ));
    // Counting scenarios: every one, tallied or kept.
    let full = sweep::run(&Relay, &config(false, None)).unwrap();
    assert!(full.scenario_count() > 1);
    assert_eq!(full.scenario_count(), full.scenarios.len() as u64);
    assert_eq!(r.scenario_count(), full.scenario_count());
}
