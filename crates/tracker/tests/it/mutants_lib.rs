//! Accessors and the Debug view of `Tracker`, for the survivors mutation
//! testing (`cargo xtask mutants tracker`) found.

use std::sync::Arc;

use durable::testing::MemDir;
use tracker::{Mode, Tracker};

#[test]
fn the_clock_reads_what_advance_and_advance_to_set() {
    let t = Tracker::new(Mode::Keyed);
    assert_eq!(t.clock_ticks(), 0);
    t.advance(5);
    assert_eq!(t.clock_ticks(), 5);
    t.advance_to(3); // never back
    assert_eq!(t.clock_ticks(), 5);
    t.advance_to(9);
    assert_eq!(t.clock_ticks(), 9);
    assert_eq!(t.clone().clock_ticks(), 9, "clones share the clock");
}

#[test]
fn uncertain_lookup_is_off_until_asked_for() {
    let t = Tracker::new(Mode::Keyed);
    assert!(!t.uncertain_lookup());
    assert!(t.with_uncertain_lookup().uncertain_lookup());
}

#[test]
fn debug_names_where_the_records_live() {
    let mem = format!("{:?}", Tracker::new(Mode::Keyed));
    assert!(mem.contains("path: \"<memory>\""), "{mem}");
    let file = Tracker::open_dir(Arc::new(MemDir::new()), Mode::Keyed).unwrap();
    let file = format!("{file:?}");
    assert!(file.contains("path: \"mem:/tracker.json\""), "{file}");
    let log = Tracker::open_log(Arc::new(MemDir::new()), Mode::Keyed).unwrap();
    let log = format!("{log:?}");
    assert!(log.contains("path: \"mem:/tracker-index.json\""), "{log}");
}

#[test]
fn a_held_key_stands_for_its_request_and_first_answer_in_keyed_mode_only() {
    use tracker::{Request, Response};
    let keyed = Tracker::new(Mode::Keyed);
    keyed.file_issue("t", "b", Some("k")).unwrap();
    let issue = Request::FileIssue {
        title: "t".into(),
        body: "b".into(),
    };
    assert_eq!(
        keyed.held_key("k"),
        Some((issue, Response::Issue { number: 1 }))
    );
    assert_eq!(keyed.held_key("other"), None);
    let keyless = Tracker::new(Mode::Keyless);
    keyless.file_issue("t", "b", Some("k")).unwrap();
    assert_eq!(keyless.held_key("k"), None);
}
