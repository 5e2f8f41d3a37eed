//! Every bad input gives a typed error, and the bad file stays as it was.

use std::sync::Arc;

use durable::testing::MemDir;
use durable::{Dir, DiskDir, Error, RunId};

use crate::{fast, populated, run_id, snapshot, Checkpoint};

/// Put `bytes` in `r.json`, then check that `open` and `load` both fail with
/// an error `want` accepts, naming the file, and that open changed nothing.
fn refused(dir: Arc<dyn Dir>, bytes: &[u8], want: impl Fn(&Error) -> bool) -> Error {
    let run = run_id("r");
    dir.write("r.json", bytes).unwrap();
    let before = snapshot(dir.as_ref());
    let file = dir.path_of("r.json");

    let e = Checkpoint::open(dir.clone(), &run, fast()).unwrap_err();
    assert!(want(&e), "open: unexpected {e:?}");
    assert!(
        e.to_string().contains(&*file.to_string_lossy()),
        "the message should name {}: {e}",
        file.display()
    );
    // Never replaced by a fresh run: byte for byte as it was, plus at most
    // the (empty) lock file.
    let after: Vec<_> = snapshot(dir.as_ref())
        .into_iter()
        .filter(|(n, _)| n != "r.lock")
        .collect();
    let before: Vec<_> = before.into_iter().filter(|(n, _)| n != "r.lock").collect();
    assert_eq!(after, before);

    let e2 = Checkpoint::load(dir.as_ref(), &run).unwrap_err();
    assert_eq!(e.to_string(), e2.to_string());
    e
}

fn mem() -> Arc<dyn Dir> {
    Arc::new(MemDir::new())
}

fn valid() -> Vec<u8> {
    let state = populated(&run_id("r"));
    let file = serde_json::json!({"version": durable::checkpoint::FORMAT_VERSION, "run": "r", "state": state});
    serde_json::to_vec_pretty(&file).unwrap()
}

#[test]
fn corrupt_json() {
    for bytes in [
        &b"{not json"[..],
        b"hello",
        b"\xff\xfe\x00",
        b"{} {}",
        b"{\"version\":1,}",
    ] {
        refused(mem(), bytes, |e| matches!(e, Error::Corrupt { .. }));
    }
}

#[test]
fn wrong_shape_is_corrupt() {
    let cases: &[&str] = &[
        "[1, 2]",
        "null",
        "\"model\"",
        r#"{"run":"r","state":{"phase":"model"}}"#,
        r#"{"version":"2","run":"r","state":{"phase":"model"}}"#,
        r#"{"version":-1,"run":"r","state":{"phase":"model"}}"#,
        r#"{"version":2,"run":"r"}"#,
        r#"{"version":2,"run":"r","state":null}"#,
        r#"{"version":2,"run":"r","state":{}}"#,
        r#"{"version":2,"run":"r","state":{"phase":7}}"#,
        r#"{"version":2,"run":"r","state":{"phase":"model","turns":"three"}}"#,
        r#"{"version":2,"run":"r","resumes":99999999999,"state":{"phase":"model"}}"#,
        r#"{"version":2,"run":"r","resumes":-1,"state":{"phase":"model"}}"#,
        r#"{"version":2,"run":"r","state":{"phase":"model","dollars":null}}"#,
        r#"{"version":2,"state":{"phase":"model"}}"#,
        r#"{"version":2,"run":"someone-else","state":{"phase":"model"}}"#,
    ];
    for json in cases {
        refused(mem(), json.as_bytes(), |e| {
            matches!(e, Error::Corrupt { .. })
        });
    }
}

#[test]
fn a_checkpoint_of_another_run_says_so() {
    let e = refused(
        mem(),
        br#"{"version":2,"run":"other","state":{"phase":"model"}}"#,
        |e| matches!(e, Error::Corrupt { .. }),
    );
    assert!(e.to_string().contains("\"other\""), "{e}");
}

#[test]
fn truncated_checkpoint() {
    let full = valid();
    for len in [0, 1, full.len() / 3, full.len() / 2, full.len() - 1] {
        refused(mem(), &full[..len], |e| {
            matches!(e, Error::Truncated { .. })
        });
    }
}

#[test]
fn truncated_checkpoint_on_disk() {
    let t = tempfile::tempdir().unwrap();
    let full = valid();
    let e = refused(
        Arc::new(DiskDir::new(t.path()).unwrap()),
        &full[..full.len() / 2],
        |e| matches!(e, Error::Truncated { .. }),
    );
    assert!(matches!(&e, Error::Truncated { path } if *path == t.path().join("r.json")));
}

#[test]
fn a_value_the_state_type_does_not_know_is_corrupt() {
    // The store knows nothing of phases: the state type's own deserialiser
    // refuses the value, and the error names the file and the value.
    let e = refused(
        mem(),
        br#"{"version":2,"run":"r","state":{"phase":"sleeping"}}"#,
        |e| matches!(e, Error::Corrupt { .. }),
    );
    assert!(e.to_string().contains("sleeping"), "{e}");
    // Names are exact.
    refused(
        mem(),
        br#"{"version":2,"run":"r","state":{"phase":"Model"}}"#,
        |e| matches!(e, Error::Corrupt { .. }),
    );
}

#[test]
fn unsupported_version() {
    for (json, v) in [
        (
            &br#"{"version":3,"run":"r","state":{"phase":"model"}}"#[..],
            3,
        ),
        (br#"{"version":0,"run":"r","state":{"phase":"model"}}"#, 0),
        (br#"{"version":18446744073709551615,"run":"r"}"#, u64::MAX),
    ] {
        let e = refused(
            mem(),
            json,
            |e| matches!(e, Error::UnsupportedVersion { version, .. } if *version == v),
        );
        assert!(e.to_string().contains("this build reads version 2"), "{e}");
    }
}

#[test]
fn version_is_checked_before_the_shape() {
    // A future version may have a shape this one does not know.
    refused(
        mem(),
        br#"{"version":3,"run":"r","body":{"phase":"reviewing"}}"#,
        |e| matches!(e, Error::UnsupportedVersion { version: 3, .. }),
    );
}

#[test]
fn run_ids_that_escape_the_directory() {
    let long = "a".repeat(129);
    for bad in [
        "../x", "a/b", "..", "", "a\nb", "a\u{7}b", "a\0", "/abs", ".hidden", &long,
    ] {
        match RunId::parse(bad) {
            Err(e @ Error::InvalidRunId { .. }) => {
                let Error::InvalidRunId { id, reason } = &e else {
                    unreachable!()
                };
                assert_eq!(id, bad);
                assert!(!reason.is_empty());
                // The message quotes the ID with escapes, so control
                // characters cannot forge log lines.
                assert!(!e.to_string().contains('\n'), "{e}");
            }
            other => panic!("{bad:?}: expected InvalidRunId, got {other:?}"),
        }
        assert!(bad.parse::<RunId>().is_err());
    }
}

#[test]
fn a_checkpoint_directory_that_cannot_be_created() {
    let t = tempfile::tempdir().unwrap();
    let file = t.path().join("file");
    std::fs::write(&file, b"x").unwrap();
    let e = Checkpoint::open_path(file.join("sub"), &run_id("r"), fast()).unwrap_err();
    assert!(
        matches!(
            e,
            Error::Io {
                op: "create directory",
                ..
            }
        ),
        "{e:?}"
    );
    assert!(e.to_string().contains(&*file.to_string_lossy()), "{e}");
}
