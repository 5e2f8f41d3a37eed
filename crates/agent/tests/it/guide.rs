//! The guide's example (`examples/tickets.rs`), run against its ticket
//! service (the tracker over HTTP on a loopback port): one ticket across a
//! crash, a service that is down, the saved answer without a model; and the
//! guide (`docs/build-your-agent.md`) checked to show the example's code.

use tracker::http::{self, Running};
use tracker::service::{Options, Service};
use tracker::{Mode, Tracker};

#[path = "../../examples/tickets.rs"]
#[allow(dead_code)]
mod tickets;

const ANSWER: &str = "Filed a ticket for the export crash.";

fn serve(tracker: &Tracker, addr: &str) -> Running {
    http::spawn(
        Service::over(tracker.clone(), Options::keyed()),
        addr.parse().unwrap(),
    )
    .unwrap()
}

fn args(service: &str, state: &std::path::Path, extra: &[&str]) -> tickets::Args {
    let mut all = vec![
        "--service".to_owned(),
        service.to_owned(),
        "--state".into(),
        state.display().to_string(),
        "--run".into(),
        "support-4711".into(),
        "--yes".into(),
    ];
    all.extend(extra.iter().map(|s| (*s).to_owned()));
    tickets::Args::parse(all.into_iter()).unwrap()
}

#[test]
fn the_guide_shows_the_example_code() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let guide = std::fs::read_to_string(root.join("../../docs/build-your-agent.md")).unwrap();
    let code = std::fs::read_to_string(root.join("examples/tickets.rs")).unwrap();
    let blocks: Vec<&str> = guide
        .split("```rust\n")
        .skip(1)
        .filter_map(|b| b.split("```").next())
        .collect();
    assert!(blocks.len() >= 8, "{} blocks", blocks.len());
    for block in blocks {
        assert!(
            code.contains(block),
            "the guide shows code the example does not have:\n{block}"
        );
    }
}

/// Crashed right after the service filed the ticket and before the result
/// was saved, the run resumes, resends the call with its key, and the
/// service answers as the first time: one ticket. The answer is then read
/// with no model at all.
#[test]
fn the_example_files_one_ticket_across_a_crash() {
    let tracker = Tracker::new(Mode::Keyed);
    let service = serve(&tracker, "127.0.0.1:0");
    let state = tempfile::tempdir().unwrap();
    let args = args(&service.url(), state.path(), &[]);

    // The first "tool returned" is the search's; the second file_ticket's.
    let hit = crashpoint::Hit::new("tool returned", 2);
    let life = crashpoint::crash_at(hit, || tickets::run(&args, None));
    assert!(life.outcome.crashed().is_some(), "{:?}", life.outcome);
    assert_eq!(tracker.issues().len(), 1);

    assert_eq!(tickets::run(&args, None), Ok(ANSWER.to_owned()));
    assert_eq!(tracker.issues().len(), 1);
    assert_eq!(tracker.issues()[0].title, "Export crashes on empty input");

    // Finished: the same command returns the answer and files nothing.
    assert_eq!(tickets::run(&args, None), Ok(ANSWER.to_owned()));
    assert_eq!(tracker.issues().len(), 1);
    service.stop();
    // The saved answer needs neither the service nor a model.
    let answer = args_with(&args, "--answer");
    assert_eq!(tickets::run(&answer, None), Ok(ANSWER.to_owned()));
}

fn args_with(args: &tickets::Args, flag: &str) -> tickets::Args {
    let all = [
        "--service",
        args.service.as_str(),
        "--state",
        args.state.as_str(),
        "--run",
        args.run.as_str(),
        flag,
    ];
    tickets::Args::parse(all.iter().map(|s| (*s).to_owned())).unwrap()
}

/// A service that is down stops the run with the exit code for "try
/// later", nothing sent; once it is up, the same command finishes. A run
/// that is not finished has no answer to read.
#[test]
fn a_service_that_is_down_stops_the_run_until_it_is_up() {
    let addr = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let state = tempfile::tempdir().unwrap();
    let args = args(&format!("http://{addr}"), state.path(), &[]);
    assert_eq!(tickets::run(&args, None), Err(6));
    assert_eq!(tickets::run(&args_with(&args, "--answer"), None), Err(1));

    let tracker = Tracker::new(Mode::Keyed);
    let service = serve(&tracker, &addr.to_string());
    assert_eq!(tickets::run(&args, None), Ok(ANSWER.to_owned()));
    assert_eq!(tracker.issues().len(), 1);
    service.stop();
}

/// Each stop has its exit code; the command line wants a run ID.
#[test]
fn each_stop_has_its_exit_code() {
    use agent::Error as E;
    let phase = agent::state::Phase::Tools;
    let locked = E::Checkpoint(durable::Error::Locked { path: "x".into() });
    let cases = [
        (locked, 3),
        (E::Paused { waiting: vec![] }, 4),
        (E::TurnLimit { turns: 1, limit: 1 }, 5),
        (
            E::OutcomeUnknown {
                call: "c".into(),
                tool: "t".into(),
                tries: 3,
                reason: "r".into(),
            },
            6,
        ),
        (
            E::ToolFatal {
                call: "c".into(),
                tool: "t".into(),
                reason: "r".into(),
            },
            7,
        ),
        (E::Cancelled { phase }, 130),
    ];
    for (e, code) in cases {
        assert_eq!(tickets::exit_code(&e), code, "{e}");
    }
    let parse = |a: &[&str]| tickets::Args::parse(a.iter().map(|s| (*s).to_owned()));
    assert!(parse(&[]).unwrap_err().contains("--run ID is required"));
    assert!(parse(&["--run"])
        .unwrap_err()
        .contains("--run needs a value"));
    assert!(parse(&["--run", "r", "--what"]).is_err());
    assert!(parse(&["--run", "r", "--yes"]).unwrap().yes);
}
