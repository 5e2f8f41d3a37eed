//! The real directory's system calls: `write_atomic` on a `DiskDir`, traced
//! with `strace -f`, makes them in the order the book gives — write the temp
//! file, fsync it, rename it over the checkpoint, fsync the directory — so
//! dropping either fsync from `DiskDir` fails this test.
//!
//! The test runs its own binary again under strace, asking it (by an
//! environment variable) to run only the child test below, which saves into
//! the directory it is given. Without a working strace (not installed, or
//! ptrace not allowed in this container) it prints why and passes; `.ci/run`
//! installs strace from Debian's packages when it is missing.

use std::path::Path;
use std::process::Command;

use durable::write::{write_atomic, WriteOptions};
use durable::DiskDir;

const CHILD_DIR: &str = "DURABLE_SYSCALLS_CHILD_DIR";

/// One step of the save, as the trace shows it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Step {
    WriteTemp,
    SyncTemp,
    Rename,
    SyncDir,
}

/// The child: one save of `run.json` in the directory the parent names (a
/// no-op when run as an ordinary test).
#[test]
fn child_saves_once() {
    let Ok(dir) = std::env::var(CHILD_DIR) else {
        return;
    };
    let d = DiskDir::new(&dir).unwrap();
    write_atomic(&d, "run.json", b"{\"state\":1}", WriteOptions::default()).unwrap();
}

/// Why strace cannot run here, if it cannot.
fn strace_unusable() -> Option<String> {
    match Command::new("strace")
        .args(["-f", "-qq", "-o", "/dev/null", "true"])
        .output()
    {
        Err(e) => Some(format!("strace could not be started ({e})")),
        Ok(o) if !o.status.success() => Some(format!(
            "strace cannot trace here: {}",
            String::from_utf8_lossy(&o.stderr).trim()
        )),
        Ok(_) => None,
    }
}

/// The fd argument's path, as `strace -y` prints it: `3</a/b>` → `/a/b`.
fn fd_path(args: &str) -> Option<&str> {
    let start = args.find('<')? + 1;
    let end = start + args[start..].find('>')?;
    Some(&args[start..end])
}

/// The steps of the save in the trace, in order (repeated writes of the
/// temp file count once).
fn steps(trace: &str, dir: &Path) -> Vec<Step> {
    let dir = dir.to_string_lossy();
    let temp_prefix = format!("{dir}/.run.json-");
    let target = format!("{dir}/run.json");
    let mut out: Vec<Step> = Vec::new();
    for line in trace.lines() {
        // "<pid> <call>(<args>) = <result>"; strace pads the pid to five
        // columns ("4729  write(…"), so skip all the blanks after it.
        let rest = line
            .split_once(char::is_whitespace)
            .map_or(line, |(_, r)| r)
            .trim_start();
        let Some(open) = rest.find('(') else {
            continue;
        };
        let (call, args) = (&rest[..open], &rest[open..]);
        if line.contains("= -1") {
            continue;
        }
        let step = match call {
            "write" | "pwrite64" | "writev" => fd_path(args)
                .filter(|p| p.starts_with(&temp_prefix))
                .map(|_| Step::WriteTemp),
            "fsync" | "fdatasync" => match fd_path(args) {
                Some(p) if p.starts_with(&temp_prefix) => Some(Step::SyncTemp),
                Some(p) if p == dir => Some(Step::SyncDir),
                _ => None,
            },
            "rename" | "renameat" | "renameat2" => (args.contains(&temp_prefix)
                && args.contains(&format!("\"{target}\"")))
            .then_some(Step::Rename),
            _ => None,
        };
        if let Some(s) = step {
            if out.last() != Some(&s) || s != Step::WriteTemp {
                out.push(s);
            }
        }
    }
    out
}

#[test]
fn write_atomic_on_a_real_directory_writes_fsyncs_renames_then_fsyncs_the_directory() {
    if let Some(why) = strace_unusable() {
        println!("skipped: {why}");
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    // strace -y prints resolved paths; compare against the resolved one.
    let root = tmp.path().canonicalize().unwrap();
    let dir = root.join("state");
    let trace_file = root.join("trace.txt");
    let exe = std::env::current_exe().unwrap();
    let out = Command::new("strace")
        .args(["-f", "-qq", "-y", "-s", "0", "-o"])
        .arg(&trace_file)
        .args([
            "-e",
            "trace=write,pwrite64,writev,fsync,fdatasync,rename,renameat,renameat2",
        ])
        .arg(&exe)
        .args(["--exact", "syscalls::child_saves_once", "--test-threads=1"])
        .env(CHILD_DIR, &dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "the traced child failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let trace = std::fs::read_to_string(&trace_file).unwrap();
    assert_eq!(
        std::fs::read(dir.join("run.json")).unwrap(),
        b"{\"state\":1}",
        "the child saved"
    );
    assert_eq!(
        steps(&trace, &dir),
        [Step::WriteTemp, Step::SyncTemp, Step::Rename, Step::SyncDir],
        "write_atomic's system calls on {}:\n{trace}",
        dir.display()
    );
}

#[test]
fn the_trace_reader_reads_pids_padded_to_five_columns() {
    let dir = Path::new("/d");
    let padded = "\
4730  write(3</d/.run.json-abc.tmp>, \"\"..., 11) = 11
4730  fsync(3</d/.run.json-abc.tmp>) = 0
4730  rename(\"/d/.run.json-abc.tmp\", \"/d/run.json\") = 0
4730  fsync(3</d>)   = 0
";
    assert_eq!(
        steps(padded, dir),
        [Step::WriteTemp, Step::SyncTemp, Step::Rename, Step::SyncDir]
    );
}

#[test]
fn the_trace_reader_sees_a_missing_fsync() {
    let dir = Path::new("/d");
    let good = "\
1 write(3</d/.run.json-abc.tmp>, \"\"..., 11) = 11
1 fsync(3</d/.run.json-abc.tmp>) = 0
1 rename(\"/d/.run.json-abc.tmp\", \"/d/run.json\") = 0
1 fsync(4</d>) = 0
";
    assert_eq!(
        steps(good, dir),
        [Step::WriteTemp, Step::SyncTemp, Step::Rename, Step::SyncDir]
    );
    let no_file_sync: String = good
        .lines()
        .filter(|l| !l.contains("fsync(3"))
        .map(|l| format!("{l}\n"))
        .collect();
    assert_eq!(
        steps(&no_file_sync, dir),
        [Step::WriteTemp, Step::Rename, Step::SyncDir]
    );
    let failed_rename = good.replace("\"/d/run.json\") = 0", "\"/d/run.json\") = -1 EIO");
    assert_eq!(
        steps(&failed_rename, dir),
        [Step::WriteTemp, Step::SyncTemp, Step::SyncDir]
    );
}
