//! The fence: a request that says which holder of its run sends it (the run
//! and its fencing epoch) is refused once the tracker has recorded a newer
//! holder of that run, keyed or keyless, in memory, in its file, in its log,
//! over HTTP; the refusal records nothing, and the highest epoch outlives a
//! restart of the tracker.

use std::sync::Arc;

use durable::testing::MemDir;
use durable::Dir;
use tracker::{Fence, Mode, Request, Tracker, TrackerError};

fn fence(run: &str, epoch: u64) -> Fence {
    Fence {
        run: run.into(),
        epoch,
    }
}

fn issue(title: &str) -> Request {
    Request::FileIssue {
        title: title.into(),
        body: "b".into(),
    }
}

/// What every store must do: the newer holder acts, the older one is
/// refused and records nothing, other runs and unfenced requests are not
/// affected. `key` makes keyed requests (for a keyed tracker).
fn the_older_holder_is_refused(t: &Tracker, keyed: bool) {
    let key = |k: &'static str| keyed.then_some(k);
    t.apply_fenced(&issue("a"), key("k1"), Some(&fence("run-1", 1)))
        .unwrap();
    // The run is taken over: epoch 2 acts.
    t.apply_fenced(&issue("b"), key("k2"), Some(&fence("run-1", 2)))
        .unwrap();
    // The old holder wakes up and sends its next request.
    let before = t.issues().len();
    match t.apply_fenced(&issue("c"), key("k3"), Some(&fence("run-1", 1))) {
        Err(TrackerError::StaleEpoch {
            run,
            epoch,
            highest,
        }) => assert_eq!((run.as_str(), epoch, highest), ("run-1", 1, 2)),
        other => panic!("the stale holder was not refused: {other:?}"),
    }
    assert_eq!(t.issues().len(), before, "a refusal records nothing");
    assert_eq!(t.count(&issue("c")), 0);
    // Even its repeat of a request the tracker holds by key is refused.
    if keyed {
        assert!(matches!(
            t.apply_fenced(&issue("a"), Some("k1"), Some(&fence("run-1", 1))),
            Err(TrackerError::StaleEpoch { .. })
        ));
    }
    // The same epoch goes on; another run and an unfenced request are
    // not fenced by run-1's epoch.
    t.apply_fenced(&issue("d"), key("k4"), Some(&fence("run-1", 2)))
        .unwrap();
    t.apply_fenced(&issue("e"), key("k5"), Some(&fence("run-2", 1)))
        .unwrap();
    t.apply(&issue("f"), key("k6")).unwrap();
}

#[test]
fn in_memory_keyless_and_keyed() {
    the_older_holder_is_refused(&Tracker::new(Mode::Keyless), false);
    the_older_holder_is_refused(&Tracker::new(Mode::Keyed), true);
}

#[test]
fn the_file_store_keeps_the_highest_epoch_across_a_restart() {
    let world = MemDir::new();
    let t = Tracker::open_dir(Arc::new(world.clone()), Mode::Keyless).unwrap();
    the_older_holder_is_refused(&t, false);
    drop(t);
    let again = Tracker::open_dir(Arc::new(world.clone()), Mode::Keyless).unwrap();
    assert!(matches!(
        again.apply_fenced(&issue("g"), None, Some(&fence("run-1", 1))),
        Err(TrackerError::StaleEpoch { highest: 2, .. })
    ));
    again
        .apply_fenced(&issue("g"), None, Some(&fence("run-1", 3)))
        .unwrap();
}

#[test]
fn a_tracker_nobody_fences_writes_its_file_as_before() {
    let world = MemDir::new();
    let t = Tracker::open_dir(Arc::new(world.clone()), Mode::Keyed).unwrap();
    t.file_issue("a", "x", Some("k1")).unwrap();
    let text = String::from_utf8(world.read("tracker.json").unwrap().unwrap()).unwrap();
    assert!(!text.contains("epochs"), "{text}");
}

#[test]
fn the_log_store_keeps_the_highest_epoch_across_a_restart() {
    let world = MemDir::new();
    let t = Tracker::open_log(Arc::new(world.clone()), Mode::Keyed).unwrap();
    the_older_holder_is_refused(&t, true);
    drop(t);
    let again = Tracker::open_log(Arc::new(world.clone()), Mode::Keyed).unwrap();
    assert!(matches!(
        again.apply_fenced(&issue("g"), Some("k7"), Some(&fence("run-1", 1))),
        Err(TrackerError::StaleEpoch { highest: 2, .. })
    ));
    again
        .apply_fenced(&issue("h"), Some("k8"), Some(&fence("run-1", 5)))
        .unwrap();
    drop(again);
    let replayed = Tracker::open_log(Arc::new(world), Mode::Keyed).unwrap();
    assert!(matches!(
        replayed.apply_fenced(&issue("i"), Some("k9"), Some(&fence("run-1", 4))),
        Err(TrackerError::StaleEpoch { highest: 5, .. })
    ));
}

#[cfg(all(feature = "serve", feature = "client"))]
mod over_http {
    use super::*;
    use tracker::client::{ClientError, HttpTracker};
    use tracker::http;
    use tracker::service::{Options, Service};

    fn post(url: &str, headers: &[(&str, &str)]) -> (u16, String) {
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .build()
            .into();
        let mut r = agent
            .post(format!("{url}/issues"))
            .content_type("application/json");
        for (k, v) in headers {
            r = r.header(*k, *v);
        }
        let resp = r.send(r#"{"title": "t", "body": "b"}"#).unwrap();
        let status = resp.status().as_u16();
        (status, resp.into_body().read_to_string().unwrap())
    }

    #[test]
    fn a_stale_holder_gets_412_and_the_client_says_stale() {
        let running = http::spawn(
            Service::over(Tracker::new(Mode::Keyless), Options::keyless()),
            "127.0.0.1:0".parse().unwrap(),
        )
        .unwrap();
        let client = HttpTracker::connect(&running.url()).unwrap();
        client
            .apply_fenced(&issue("a"), None, Some(&fence("run-1", 2)))
            .unwrap();
        match client.apply_fenced(&issue("b"), None, Some(&fence("run-1", 1))) {
            Err(ClientError::Stale { message }) => {
                assert!(message.contains("stale"), "{message}")
            }
            other => panic!("{other:?}"),
        }
        let (status, body) = post(
            &running.url(),
            &[
                (tracker::wire::RUN_HEADER, "run-1"),
                (tracker::wire::EPOCH_HEADER, "1"),
            ],
        );
        assert_eq!(status, tracker::wire::STALE_EPOCH_STATUS, "{body}");
        assert!(body.contains("stale_epoch"), "{body}");
        // Unusable fences are 400 and record nothing.
        for headers in [
            vec![(tracker::wire::RUN_HEADER, "run-1")],
            vec![(tracker::wire::EPOCH_HEADER, "3")],
            vec![
                (tracker::wire::RUN_HEADER, "run-1"),
                (tracker::wire::EPOCH_HEADER, "three"),
            ],
        ] {
            let (status, body) = post(&running.url(), &headers);
            assert_eq!(status, 400, "{headers:?}: {body}");
            assert!(body.contains("bad_fence"), "{body}");
        }
        assert_eq!(client.issues().unwrap().len(), 1);
        running.stop();
    }
}
