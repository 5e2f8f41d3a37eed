//! The file store's check of a loaded `tracker.json`, for the survivors
//! mutation testing (`cargo xtask mutants tracker`) found: a key's first
//! answer must be a record made by exactly that key's request.

use std::sync::Arc;

use durable::testing::MemDir;
use durable::Dir;
use tracker::{Mode, Tracker, TrackerError};

const FILE: &str = "tracker.json";

/// A tracker file with two keyed issues and a keyed comment on issue 1,
/// edited by `edit`, then opened.
fn open_after(edit: impl FnOnce(&mut serde_json::Value)) -> Result<Tracker, TrackerError> {
    let world = MemDir::new();
    let t = Tracker::open_dir(Arc::new(world.clone()), Mode::Keyed).unwrap();
    t.file_issue("a", "x", Some("k1")).unwrap();
    t.file_issue("b", "y", Some("k2")).unwrap();
    t.comment(1, "c", Some("k3")).unwrap();
    drop(t);
    let bytes = world.read(FILE).unwrap().unwrap();
    let mut json: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
    edit(&mut json);
    world
        .write(FILE, &serde_json::to_vec(&json).unwrap())
        .unwrap();
    Tracker::open_dir(Arc::new(world), Mode::Keyed)
}

fn refused(edit: impl FnOnce(&mut serde_json::Value), why: &str) {
    match open_after(edit) {
        Err(TrackerError::Corrupt { reason, .. }) => {
            assert!(reason.contains(why), "{reason}");
        }
        other => panic!(
            "expected Corrupt ({why}), got {:?}",
            other.map(|t| t.issues())
        ),
    }
}

#[test]
fn the_unedited_file_opens() {
    let t = open_after(|_| {}).unwrap();
    assert_eq!(t.issues().len(), 2);
    assert!(t.holds_key("k3"));
}

#[test]
fn an_issue_key_whose_request_differs_only_in_the_body_is_corrupt() {
    refused(
        |j| j["keys"]["k1"]["request"]["FileIssue"]["body"] = "other".into(),
        "its issue has other arguments",
    );
    refused(
        |j| j["keys"]["k1"]["request"]["FileIssue"]["title"] = "other".into(),
        "its issue has other arguments",
    );
}

#[test]
fn a_comment_key_must_match_the_comment_in_issue_answer_and_body() {
    // Same issue, other body.
    refused(
        |j| j["keys"]["k3"]["request"]["Comment"]["body"] = "other".into(),
        "its comment has other arguments",
    );
    // The answer names another issue than the request and the comment.
    refused(
        |j| j["keys"]["k3"]["response"]["Comment"]["issue"] = 2.into(),
        "its comment has other arguments",
    );
}
