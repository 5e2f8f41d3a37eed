//! `crashsweep` stopped from outside (`kill`, `^C`): it kills its running
//! lives and services before it ends, so no service outlives it holding
//! its port, removes its worlds, and it exits with 128 + the signal's number, as a shell
//! reports a death by that signal.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Whether process `pid` still runs (a zombie waiting for its reaper does
/// not).
fn alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        // The state is the field after the command's closing parenthesis.
        Ok(stat) => stat
            .rsplit_once(')')
            .is_some_and(|(_, rest)| !rest.trim_start().starts_with('Z')),
        Err(_) => false,
    }
}

/// The pid written in `file`, once it is there.
fn wait_for_pid(file: &Path, child: &mut std::process::Child) -> u32 {
    let start = Instant::now();
    loop {
        if let Ok(text) = std::fs::read_to_string(file) {
            if let Ok(pid) = text.trim().parse() {
                return pid;
            }
        }
        if let Ok(Some(status)) = child.try_wait() {
            panic!(
                "crashsweep ended ({status}) before {} was written",
                file.display()
            );
        }
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "{} never written",
            file.display()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_sweep_stopped_by_sigterm_kills_its_service_and_its_life() {
    if !crate::unchanged::runtime("python3") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let pids = dir.path();
    // The service writes its pid, prints its URL and waits; the program
    // writes its pid and sleeps (its clean run is where the sweep is stopped).
    let service = format!(
        "python3 -c \"import os,sys,time; open('{0}/service.pid','w').write(str(os.getpid())); \
         print('http://127.0.0.1:9/', flush=True); time.sleep(600)\"",
        pids.display()
    );
    let program = format!(
        "import os,time; open('{}/program.pid','w').write(str(os.getpid())); time.sleep(600)",
        pids.display()
    );
    let worlds = tempfile::tempdir().unwrap();
    let mut sweep = Command::new(env!("CARGO_BIN_EXE_crashsweep"))
        .args(["--io-points", "--no-progress", "--service", &service])
        .arg("--worlds-in")
        .arg(worlds.path())
        .args(["--judge", "true", "--", "python3", "-c", &program])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let service_pid = wait_for_pid(&pids.join("service.pid"), &mut sweep);
    let program_pid = wait_for_pid(&pids.join("program.pid"), &mut sweep);
    assert!(alive(service_pid) && alive(program_pid));
    let killed = Command::new("kill")
        .args(["-TERM", &sweep.id().to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    let out = sweep.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(128 + 15), "{stderr}");
    assert!(stderr.contains("stopped by SIGTERM"), "{stderr}");
    // Its world directory, made under --worlds-in, is removed too.
    assert!(stderr.contains("1 temporary directory removed"), "{stderr}");
    let left: Vec<_> = std::fs::read_dir(worlds.path()).unwrap().collect();
    assert!(left.is_empty(), "{left:?}\n{stderr}");
    let start = Instant::now();
    while alive(service_pid) || alive(program_pid) {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "still running after crashsweep ended: service {} program {}\n{stderr}",
            alive(service_pid),
            alive(program_pid)
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}
