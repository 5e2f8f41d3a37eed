//! The triage process sweep: the real `triage` binary, run by
//! `sweep::process` on a recorded task, killed with `SIGKILL` at every point
//! it passes (its own, the loop's and the checkpoint store's), restarted by
//! the same command, as users are told, and judged by [`judge`]: every
//! effect once, no model turn asked again after its reply was saved, one
//! run, the run done and the task's checks passed. (`sweeps/judges/triage.py`
//! is the same judge as a command, for `crashsweep --judge`.)
//!
//! With the tracker service, each scenario starts its own
//! `tracker serve` on a free loopback port (keyed, or `--keyless`), and the
//! command gets `--tracker URL`. The service's own points are swept too: a
//! crash at one kills the service and `triage` together, and the next life
//! starts the service again on its records.

use std::path::PathBuf;
use std::process::Command;

use sweep::process::{Process, ProcessWorld};
use sweep::{Counter, Verdict};

/// The recorded task the sweep runs: two seed issues, two searches and a
/// comment (small, and every kind of effect the windows could repeat).
pub const TASK: &str = "s2-known-sync-timeout";

/// Which tracker the run's tools talk to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tracker {
    /// The run's own tracker file, in its world.
    Local,
    /// The tracker service, honouring keys.
    Keyed,
    /// The tracker service, ignoring keys.
    Keyless,
}

/// The subject's title (its table row).
pub fn title(tracker: Tracker) -> String {
    match tracker {
        Tracker::Local => "triage binary, local tracker".into(),
        Tracker::Keyed => "triage binary, tracker service".into(),
        Tracker::Keyless => "triage binary, keyless service".into(),
    }
}

/// The directory cargo puts this workspace's binaries in: the one this
/// program runs from (`target/debug`, or its `deps` in a test).
fn bin_dir() -> Result<PathBuf, String> {
    let exe = std::env::current_exe().map_err(|e| format!("where is xtask: {e}"))?;
    let mut dir = exe
        .parent()
        .ok_or("xtask runs from no directory")?
        .to_path_buf();
    if dir.ends_with("deps") {
        dir.pop();
    }
    Ok(dir)
}

/// Build `triage` and `tracker` (cargo does nothing when they are fresh)
/// and return their paths.
fn binaries() -> Result<(PathBuf, PathBuf), String> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut build = Command::new(&cargo);
    build.current_dir(crate::root()).args([
        "build", "--quiet", "-p", "triage", "-p", "tracker", "--bins",
    ]);
    // The profile this program was built in, whose directory it runs from.
    if !cfg!(debug_assertions) {
        build.arg("--release");
    }
    let status = build.status().map_err(|e| format!("{cargo} build: {e}"))?;
    if !status.success() {
        return Err(format!(
            "`cargo build -p triage -p tracker --bins` failed ({status})"
        ));
    }
    let dir = bin_dir()?;
    let (triage, tracker) = (dir.join("triage"), dir.join("tracker"));
    for b in [&triage, &tracker] {
        if !b.exists() {
            return Err(format!("{} is missing after the build", b.display()));
        }
    }
    Ok((triage, tracker))
}

/// The subject for `tracker`.
pub fn subject(tracker: Tracker) -> Result<Process, String> {
    let (triage, tracker_bin) = binaries()?;
    let mut argv: Vec<String> = vec![
        triage.to_string_lossy().into_owned(),
        "--task".into(),
        TASK.into(),
        "--state".into(),
        "state".into(),
        "--approve".into(),
        "off".into(),
        "--json".into(),
    ];
    let mut service: Option<Vec<String>> = None;
    if tracker != Tracker::Local {
        argv.extend(["--tracker".into(), "{service}".into()]);
        let mut s = vec![
            tracker_bin.to_string_lossy().into_owned(),
            "serve".into(),
            "--dir".into(),
            ".".into(),
            "--addr".into(),
            "127.0.0.1:0".into(),
        ];
        if tracker == Tracker::Keyless {
            s.push("--keyless".into());
        }
        service = Some(s);
    }
    let mut p = Process::new(&title(tracker), &argv)
        .judge_with(judge)
        .describe_with(describe)
        .counters(counters());
    // The worlds on a RAM disk when there is one: the same results (a
    // SIGKILL keeps the page cache), several times faster (triage syncs
    // every save).
    if let Some(ram) = sweep::process::ram_disk() {
        p = p.worlds_in(ram);
    }
    if let Some(s) = service {
        p = p.service(s).crash_service();
    }
    p.discover().map_err(|e| e.to_string())
}

/// The world's files with their sizes, as `sweep::process` lists them, but
/// with the run's ID (`<task>-<unix seconds>-<8 random characters>`, new in
/// every clean run) written `<task>-<run>`: two clean runs leave the same
/// files, under other names.
pub fn describe(world: &ProcessWorld) -> String {
    fn walk(dir: &std::path::Path, rel: &str, out: &mut Vec<String>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for e in entries.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            let path = if rel.is_empty() {
                name
            } else {
                format!("{rel}/{name}")
            };
            match e.metadata() {
                Ok(m) if m.is_dir() => walk(&e.path(), &path, out),
                Ok(m) => out.push(format!("{} ({} B)", mask_run(&path), m.len())),
                Err(_) => out.push(mask_run(&path)),
            }
        }
    }
    let mut files = Vec::new();
    walk(&world.dir(), "", &mut files);
    files.sort();
    format!("world: {}", files.join(", "))
}

/// `path` with each `<task>-<seconds>-<random>` run ID written `<task>-<run>`.
fn mask_run(path: &str) -> String {
    let prefix = format!("{TASK}-");
    let mut out = String::new();
    let mut rest = path;
    while let Some(i) = rest.find(&prefix) {
        out.push_str(&rest[..i + prefix.len()]);
        rest = &rest[i + prefix.len()..];
        let end = rest.find(['.', '/']).unwrap_or(rest.len());
        out.push_str("<run>");
        rest = &rest[end..];
    }
    out.push_str(rest);
    out
}

/// The judge's counters, each required to stay zero.
fn counters() -> Vec<Counter> {
    ["runs+", "dups", "re-asked", "unfinished", "failed"]
        .iter()
        .map(|n| Counter::new(n).required())
        .collect()
}

/// Whether `name` is a run's checkpoint: `<task>-<seconds>-<8 chars>.json`.
fn is_checkpoint(name: &str) -> bool {
    let Some(stem) = name.strip_suffix(".json") else {
        return false;
    };
    let mut parts = stem.rsplitn(3, '-');
    let (Some(tail), Some(secs), Some(task)) = (parts.next(), parts.next(), parts.next()) else {
        return false;
    };
    tail.len() == 8
        && tail
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
        && !secs.is_empty()
        && secs.chars().all(|c| c.is_ascii_digit())
        && !task.is_empty()
}

/// Each line of a life's output that is a JSON event.
fn events(path: &std::path::Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        // A line cut short by the kill is not an event.
        .filter_map(|l| serde_json::from_str(l.trim()).ok())
        .collect()
}

/// (title, comment bodies) of every issue the run's tracker holds.
fn issues(world: &ProcessWorld) -> Result<Vec<(String, Vec<String>)>, String> {
    if let Some(url) = world.service_url() {
        let http = tracker::client::HttpTracker::connect(url).map_err(|e| e.to_string())?;
        let issues = http.issues().map_err(|e| e.to_string())?;
        return Ok(issues
            .into_iter()
            .map(|i| (i.title, i.comments.into_iter().map(|c| c.body).collect()))
            .collect());
    }
    let mut out = Vec::new();
    let state = world.dir().join("state");
    for entry in std::fs::read_dir(&state).map_err(|e| format!("{}: {e}", state.display()))? {
        let path = entry
            .map_err(|e| e.to_string())?
            .path()
            .join("tracker.json");
        let Ok(text) = std::fs::read_to_string(&path) else {
            continue;
        };
        let v: serde_json::Value =
            serde_json::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))?;
        for i in v["issues"].as_array().into_iter().flatten() {
            let comments = i["comments"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|c| c["body"].as_str().map(str::to_owned))
                .collect();
            out.push((i["title"].as_str().unwrap_or_default().to_owned(), comments));
        }
    }
    Ok(out)
}

/// Count what a scenario left: runs beyond the first, effects beyond the
/// first, model turns asked again after their reply was saved, a final life
/// that did not finish the run, and the task's checks that failed.
pub fn judge(world: &ProcessWorld) -> Result<Verdict, String> {
    let state = world.dir().join("state");
    let runs = std::fs::read_dir(&state)
        .map(|d| {
            d.filter_map(Result::ok)
                .filter(|e| is_checkpoint(&e.file_name().to_string_lossy()))
                .count()
        })
        .unwrap_or(0) as u64;
    let mut dups = 0u64;
    let mut titles: Vec<(String, u64)> = Vec::new();
    for (title, comments) in issues(world)? {
        match titles.iter_mut().find(|(t, _)| *t == title) {
            Some((_, n)) => *n += 1,
            None => titles.push((title, 1)),
        }
        let mut bodies: Vec<&String> = comments.iter().collect();
        bodies.sort();
        let before = bodies.len();
        bodies.dedup();
        dups += (before - bodies.len()) as u64;
    }
    dups += titles.iter().map(|(_, n)| n - 1).sum::<u64>();

    let mut saved: Vec<u64> = Vec::new();
    let mut reasked = 0u64;
    let mut last = Vec::new();
    for life in 1..=world.lives() {
        let evs = events(&world.logs().join(format!("life-{life}.out")));
        for e in &evs {
            let turn = e["turn"].as_u64();
            match e["event"].as_str() {
                Some("model_call") if turn.is_some_and(|t| saved.contains(&t)) => reasked += 1,
                Some("reply_saved") => saved.extend(turn),
                _ => {}
            }
        }
        last = evs;
    }
    let summary = last.iter().find(|e| e["event"] == "summary");
    let done = summary.is_some_and(|s| s["status"] == "done");
    let failed = summary
        .and_then(|s| s["checks"].as_array())
        .map_or(0, |c| c.iter().filter(|c| c["passed"] != true).count()) as u64;
    Ok(Verdict::new()
        .count("runs+", runs.saturating_sub(1))
        .count("dups", dups)
        .count("re-asked", reasked)
        .count("unfinished", u64::from(!done))
        .count("failed", failed))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_ids_are_masked_in_the_world_description() {
        assert_eq!(
            mask_run("state/s2-known-sync-timeout-1796325724-9jl960bi.world/run.json"),
            "state/s2-known-sync-timeout-<run>.world/run.json"
        );
        assert_eq!(mask_run("state/.triage.lock"), "state/.triage.lock");
    }

    #[test]
    fn checkpoints_are_told_by_their_names() {
        assert!(is_checkpoint(
            "s2-known-sync-timeout-1796290829-ywpwtwal.json"
        ));
        for not in [
            "s2-known-sync-timeout-1796290829-ywpwtwal.lock",
            "s2-1796290829-ywpwtwa.json",
            "s2-17962x0829-ywpwtwal.json",
            "-1796290829-ywpwtwal.json",
            ".s2-1796290829-ywpwtwal.json-tmp",
        ] {
            assert!(!is_checkpoint(not), "{not}");
        }
    }
}
