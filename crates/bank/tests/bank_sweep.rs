//! The payday job swept single and double: the correct variant loses and
//! duplicates nothing and matches `snapshots/bank.txt`; the variant with the
//! ordering bug is caught, with its scenarios named and what the judge saw.

use std::path::PathBuf;

use bank::{Bank, Payday, Variant, BATCH};
use sweep::{report::Row, scenario::Scenario, Config, Report, Subject};

fn sweep(variant: Variant, threads: Option<usize>) -> Report {
    let config = Config {
        threads,
        ..Config::default()
    };
    sweep::run(&Payday(variant), &config).expect("the clean run finishes")
}

fn cell(row: &Row, title: &str) -> u64 {
    row.cell(title)
        .unwrap_or_else(|| panic!("no column {title} in {row:?}"))
}

fn names<'a>(it: impl Iterator<Item = &'a sweep::report::ScenarioResult>) -> Vec<String> {
    it.map(|s| s.scenario.to_string()).collect()
}

#[test]
fn correct_variant_has_no_failure_and_matches_the_snapshot() {
    let good = sweep(Variant::SaveRunFirst, None);
    let bad = sweep(Variant::FirstSaveAfterPayment, None);
    let table = sweep::table(&[good.row(), bad.row()]);
    print!("{table}");

    assert_eq!(names(good.failures()), Vec::<String>::new());
    let row = good.row();
    for title in ["with dups", "dups", "missing", "cents +/-", "cents off"] {
        assert_eq!(cell(&row, title), 0, "{title} in {row:?}");
    }
    // The clean run: the start save, then per transfer its payment and save.
    let hits: Vec<String> = good.scenarios[..11]
        .iter()
        .map(|s| s.scenario.to_string())
        .collect();
    assert_eq!(
        hits,
        [
            "mid-save#1",
            "after rename#1",
            "payment accepted#1",
            "mid-save#2",
            "after rename#2",
            "payment accepted#2",
            "mid-save#3",
            "after rename#3",
            "payment accepted#3",
            "mid-save#4",
            "after rename#4",
        ]
    );
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../snapshots/bank.txt");
    if let Err(diff) = sweep::report::snapshot::check(&path, &table) {
        panic!("{diff}");
    }
}

#[test]
fn buggy_variant_is_caught_and_names_its_scenarios() {
    let report = sweep(Variant::FirstSaveAfterPayment, None);
    let single: Vec<String> = names(report.failures().filter(|s| s.scenario.depth() == 1));
    // Only a crash between the first payment and the first save loses the
    // run ID; every later retry carries the key its first attempt carried.
    assert_eq!(single, ["payment accepted#1", "mid-save#1"]);

    let first = report.failures().next().expect("the bug is caught");
    assert_eq!(first.scenario.to_string(), "payment accepted#1");
    let text = first
        .failure
        .as_ref()
        .map(ToString::to_string)
        .unwrap_or_default();
    assert!(text.contains("transfer t1 applied 2 times"), "{text}");
    assert!(text.contains("dups = 1"), "{text}");
    assert!(text.contains("bob has 3000 cents too many"), "{text}");

    // Two crashes in that window make three run IDs, and three payments.
    let double = report
        .failures()
        .find(|s| s.scenario.to_string() == "payment accepted#1 → payment accepted#1")
        .expect("the double crash in the window fails too");
    assert!(
        double
            .failure
            .as_ref()
            .is_some_and(|f| f.to_string().contains("transfer t1 applied 3 times")),
        "{double:?}"
    );

    let row = report.row();
    assert_eq!(
        cell(&row, "cents +/-"),
        0,
        "a duplicate moves money, it makes none"
    );
    assert!(
        cell(&row, "dups") > 0 && cell(&row, "cents off") > 0,
        "{row:?}"
    );
    assert_eq!(row.failed, report.failures().count() as u64);
}

#[test]
fn a_failing_scenario_reruns_alone_by_name() {
    let scenario: Scenario = "payment accepted#1".parse().unwrap();
    let bad = sweep::rerun(
        &Payday(Variant::FirstSaveAfterPayment),
        &sweep::Config::default(),
        &scenario.to_string(),
    )
    .unwrap();
    let timeline = bad.timeline();
    assert!(
        timeline.contains("payment accepted#1  ← crash"),
        "{timeline}"
    );
    assert!(timeline.contains("FAILED: dups = 1"), "{timeline}");
    assert!(
        timeline.contains(r#"ledger ["t1", "t1", "t2", "t3"]"#),
        "{timeline}"
    );

    let good = sweep::rerun(
        &Payday(Variant::SaveRunFirst),
        &sweep::Config::default(),
        &scenario.to_string(),
    )
    .unwrap();
    assert_eq!(good.failure, None, "{}", good.timeline());
}

#[test]
fn the_table_does_not_depend_on_the_thread_count() {
    for variant in [Variant::SaveRunFirst, Variant::FirstSaveAfterPayment] {
        // Another test of this binary runs a life by hand, outside any
        // sweep, at the same time: its points are no sweep's, and the two
        // reports are equal whole.
        assert_eq!(sweep(variant, Some(1)), sweep(variant, Some(2)));
    }
}

#[test]
fn the_judge_counts_what_a_broken_world_shows() {
    let subject = Payday(Variant::SaveRunFirst);
    let mut w = subject.world().unwrap();
    let v = subject.judge(&w);
    assert_eq!(v.get("missing"), 3);
    // Alice still holds what t1 would have taken, less what t3 would have paid her.
    assert_eq!(v.get("misplaced"), 3000 - 500, "{v:?}");

    // Money created from nothing: the books no longer balance.
    *w.bank.balances.get_mut("carol").unwrap() += 7;
    let v = subject.judge(&w);
    assert_eq!(v.get("money"), 7);
    assert!(v.notes.contains(&"7 cents created".to_owned()), "{v:?}");
}

#[test]
fn the_bank_honours_idempotency_keys() {
    let mut bank = Bank::open();
    let t = BATCH[0];
    let first = bank.transfer(&t, "k1").unwrap();
    let before = bank.balances.clone();
    assert_eq!(bank.transfer(&t, "k1").unwrap(), first);
    assert_eq!(bank.balances, before);
    assert_eq!(bank.applied("t1"), 1);
    // A new key is a new payment, however alike it looks.
    bank.transfer(&t, "k2").unwrap();
    assert_eq!(bank.applied("t1"), 2);
}

#[test]
fn a_transfer_to_or_from_an_unknown_account_is_refused() {
    let mut bank = Bank::open();
    let before = bank.balances.clone();
    for (from, to) in [("mallory", "bob"), ("alice", "mallory")] {
        let t = bank::Transfer {
            from,
            to,
            ..BATCH[0]
        };
        let e = bank.transfer(&t, from).unwrap_err();
        assert_eq!(e, "transfer t1: unknown account");
    }
    assert_eq!(bank.balances, before, "nothing moved");
    assert_eq!(bank.applied("t1"), 0);
}

/// After a clean run the judge has nothing to count and nothing to say.
#[test]
fn a_clean_run_leaves_nothing_to_report() {
    let subject = Payday(Variant::SaveRunFirst);
    let mut w = subject.world().unwrap();
    lived(|| subject.life(&mut w)).expect("the clean run finishes");
    let v = subject.judge(&w);
    for c in ["dups", "missing", "money", "misplaced"] {
        // Counted (not merely absent) and zero.
        assert!(
            v.counts.iter().any(|(k, _)| k == c),
            "{c} not counted: {v:?}"
        );
        assert_eq!(v.get(c), 0, "{c}: {v:?}");
    }
    assert!(v.notes.is_empty(), "{:?}", v.notes);
}

/// The payday world is copied and hashed whole, so its sweep shares lives
/// and gives brute force's report.
#[test]
fn the_sweep_shares_lives_and_gives_brute_forces_report() {
    for variant in [Variant::SaveRunFirst, Variant::FirstSaveAfterPayment] {
        let subject = Payday(variant);
        let shared = sweep::run(&subject, &Config::default()).unwrap();
        let stats = shared.stats;
        assert!(stats.shared, "{variant:?}");
        let brute = Config {
            share: false,
            ..Config::default()
        };
        assert_eq!(shared, sweep::run(&subject, &brute).unwrap(), "{variant:?}");
    }
}

/// Run `f`, a life outside any sweep, in a recording scope of its own as a
/// sweep would: its points are recorded, not passes outside any scope,
/// which another test's sweep running meanwhile would count (and refuse).
fn lived<R>(f: impl FnOnce() -> R) -> R {
    match crashpoint::record(f).outcome {
        crashpoint::Outcome::Finished(r) => r,
        crashpoint::Outcome::Crashed(hit) => panic!("the life crashed at {hit}"),
        crashpoint::Outcome::Panicked(m) => panic!("the life panicked: {m}"),
    }
}
