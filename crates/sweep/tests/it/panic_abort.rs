//! A user's crate built with `panic = "abort"` (the fixture
//! `fixtures/panic-abort`, a crate of its own outside the workspace) is
//! refused at the start of its sweep with the profile fix: exit 2, not the
//! exit 134 of an abort at the first injected crash.
//!
//! The fixture is copied under this build's target directory (so nothing is
//! written into the source tree) with the workspace's `Cargo.lock`, so it
//! builds with the versions the workspace already fetched: `--offline`
//! first, the registry only if something is missing.
//!
//! Ignored by `cargo test --workspace`: building the fixture compiles
//! sweep and its dependencies again with a profile of their own, about a
//! minute of two cores, longer than the rest of this crate's tests
//! together. CI runs it on its own line: `cargo test --workspace --
//! --ignored panic_abort`.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The target directory this test was built in (`<target>/debug/deps/…`).
fn target_dir() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    exe.ancestors().nth(3).unwrap().to_path_buf()
}

fn cargo_build(manifest: &Path, target: &Path, offline: bool) -> Output {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.args(["build", "--quiet", "--manifest-path"])
        .arg(manifest)
        .arg("--target-dir")
        .arg(target)
        .env_remove("CARGO_TARGET_DIR")
        .env_remove("CARGO_BUILD_TARGET_DIR");
    if offline {
        cmd.arg("--offline");
    }
    cmd.output().unwrap()
}

#[test]
#[ignore = "builds a crate of its own (a minute of compiling): CI runs it with -- --ignored panic_abort"]
fn a_panic_abort_build_is_refused_with_the_profile_fix() {
    let root = root().canonicalize().unwrap();
    let fixture = root.join("fixtures/panic-abort");
    let work = target_dir().join("fixtures/panic-abort");
    let krate = work.join("crate");
    std::fs::create_dir_all(krate.join("src")).unwrap();

    let manifest = std::fs::read_to_string(fixture.join("Cargo.toml")).unwrap();
    assert!(
        manifest.contains("panic = \"abort\""),
        "the fixture must abort on panic:\n{manifest}"
    );
    let crates = format!("\"{}/crates/", root.display());
    // A root of its own wherever the target directory is (under the
    // workspace on CI), with absolute paths to the workspace's crates.
    let manifest = manifest.replace("\"../../crates/", &crates) + "\n[workspace]\n";
    std::fs::write(krate.join("Cargo.toml"), manifest).unwrap();
    std::fs::copy(fixture.join("src/main.rs"), krate.join("src/main.rs")).unwrap();
    std::fs::copy(root.join("Cargo.lock"), krate.join("Cargo.lock")).unwrap();

    let target = work.join("target");
    let mut built = cargo_build(&krate.join("Cargo.toml"), &target, true);
    if !built.status.success() {
        built = cargo_build(&krate.join("Cargo.toml"), &target, false);
    }
    assert!(
        built.status.success(),
        "the fixture did not build:\n{}",
        String::from_utf8_lossy(&built.stderr)
    );

    let exe = target.join("debug/panic-abort-fixture");
    let ran = Command::new(&exe).env_remove("CI").output().unwrap();
    let err = String::from_utf8_lossy(&ran.stderr);
    assert_eq!(
        ran.status.code(),
        Some(2),
        "expected exit 2 (a sweep that cannot start), got {:?}; stderr:\n{err}",
        ran.status
    );
    assert!(err.starts_with("error: "), "{err}");
    assert!(err.contains("panic = \"abort\""), "{err}");
    assert!(
        err.contains("panic = \"unwind\"") && err.contains("[profile.release]"),
        "the message must say how to fix the profile:\n{err}"
    );
    assert!(ran.stdout.is_empty(), "no table for a refused sweep");
}
