//! The tracker tools on the tracker service over HTTP ([`Backend::Http`]):
//! the key lifetime the service publishes, the same answers as in process,
//! and how the client's failures map to outcomes. Each service listens on
//! 127.0.0.1 and stops at the end of its test.

use std::sync::Arc;
use std::time::Duration;

use agent::tool::{CallContext, Keys, Lookup, Tool, ToolError, ToolOutput};
use durable::RunId;
use serde_json::{json, Value};
use tracker::client::{HttpTracker, Retry};
use tracker::http::{self, Running};
use tracker::service::{Options, Service};
use tracker::{Mode, Tracker};
use triage_tools::{comment_output, issue_output, Backend, IssueComment, IssueFile, Search};

/// `tracker` served on a loopback port, and a client of it.
fn serve(tracker: Tracker) -> (Running, Arc<HttpTracker>) {
    let running = http::spawn(
        Service::over(tracker, Options::keyed()),
        "127.0.0.1:0".parse().unwrap(),
    )
    .unwrap();
    let retry = Retry {
        // A stopped service is given up on quickly.
        unreachable: Duration::from_millis(200),
        ..Retry::default()
    };
    let client = HttpTracker::connect_with(&running.url(), retry).unwrap();
    (running, Arc::new(client))
}

fn ctx<'a>(run: &'a RunId, call_id: &'a str, key: Option<&'a str>) -> CallContext<'a> {
    CallContext {
        run,
        call_id,
        key,
        epoch: 1,
        messages: &[],
    }
}

#[test]
fn keys_live_as_long_as_the_service_publishes_unless_told() {
    let (svc, client) = serve(Tracker::new(Mode::Keyed).with_key_ttl(600));
    assert_eq!(
        Backend::from(Arc::clone(&client)).published_key_ttl(),
        Some(600)
    );
    assert_eq!(
        Backend::from(Tracker::new(Mode::Keyed)).published_key_ttl(),
        None
    );
    let six_hundred = Keys::Honoured {
        keep_for: Some(600),
    };
    assert_eq!(IssueFile::new(Arc::clone(&client)).keys(), six_hundred);
    assert_eq!(IssueComment::new(Arc::clone(&client)).keys(), six_hundred);
    // What the tools are told wins over what the service says.
    assert_eq!(
        IssueFile::new(Arc::clone(&client)).keep_keys_for(10).keys(),
        Keys::Honoured { keep_for: Some(10) }
    );
    svc.stop();

    // A service that keeps keys for ever publishes no lifetime.
    let (svc, client) = serve(Tracker::new(Mode::Keyed));
    assert_eq!(Backend::from(Arc::clone(&client)).published_key_ttl(), None);
    assert_eq!(
        IssueFile::new(Arc::clone(&client)).keys(),
        Keys::Honoured { keep_for: None }
    );
    svc.stop();

    // A keyless service: no keys at all.
    let (svc, client) = serve(Tracker::new(Mode::Keyless).with_key_ttl(600));
    assert_eq!(Backend::from(Arc::clone(&client)).mode(), Mode::Keyless);
    assert_eq!(IssueFile::new(Arc::clone(&client)).keys(), Keys::None);
    svc.stop();
}

#[test]
fn the_tools_answer_over_http_as_in_process() {
    let world = Tracker::new(Mode::Keyed);
    let (svc, client) = serve(world.clone());
    let run = RunId::parse("r").unwrap();
    let file = IssueFile::new(Arc::clone(&client));
    let args = json!({ "title": "crash in parser", "body": "trace" });
    let c = ctx(&run, "c1", Some("k1"));
    assert_eq!(file.lookup(&c, &args), Lookup::NotFound);
    assert_eq!(
        file.call(&c, &args).unwrap(),
        ToolOutput::ok(issue_output(1))
    );
    // A repeat with the key: the first answer, nothing new.
    assert_eq!(
        file.call(&c, &args).unwrap(),
        ToolOutput::ok(issue_output(1))
    );
    assert_eq!(
        file.lookup(&c, &args),
        Lookup::Found(ToolOutput::ok(issue_output(1)))
    );
    assert_eq!(world.issues().len(), 1);

    let comment = IssueComment::new(Arc::clone(&client));
    let out = comment
        .call(
            &ctx(&run, "c2", Some("k2")),
            &json!({ "issue": "#1", "body": "more" }),
        )
        .unwrap();
    assert_eq!(out, ToolOutput::ok(comment_output(1, 1)));

    let out = Search::new(Arc::clone(&client))
        .call(&ctx(&run, "c3", None), &json!({ "query": "parser" }))
        .unwrap();
    assert_eq!(
        serde_json::from_str::<Value>(&out.output).unwrap(),
        json!({ "issues": [{ "number": 1, "title": "crash in parser" }] })
    );
    svc.stop();
}

#[test]
fn http_failures_map_to_failed_fatal_and_unknown() {
    let (svc, client) = serve(Tracker::new(Mode::Keyed));
    let run = RunId::parse("r").unwrap();
    let file = IssueFile::new(Arc::clone(&client));
    let comment = IssueComment::new(Arc::clone(&client));
    file.call(
        &ctx(&run, "c1", Some("k1")),
        &json!({ "title": "crash", "body": "trace" }),
    )
    .unwrap();

    // No such issue (404): refused, the model sees it.
    let e = comment
        .call(
            &ctx(&run, "c2", Some("k2")),
            &json!({ "issue": 9, "body": "x" }),
        )
        .unwrap_err();
    assert!(
        matches!(&e, ToolError::Failed(m) if m.starts_with("issue_comment: ")),
        "{e:?}"
    );
    // One key, two requests (422): a bug, the run stops.
    let e = file
        .call(
            &ctx(&run, "c1", Some("k1")),
            &json!({ "title": "other", "body": "trace" }),
        )
        .unwrap_err();
    assert!(
        matches!(&e, ToolError::Fatal(m) if m.starts_with("issue_file: ")),
        "{e:?}"
    );

    // The service is gone: nothing was sent, but the call cannot finish.
    svc.stop();
    let e = file
        .call(
            &ctx(&run, "c3", Some("k3")),
            &json!({ "title": "new", "body": "trace" }),
        )
        .unwrap_err();
    assert!(
        matches!(&e, ToolError::Unknown(m) if m.starts_with("issue_file: ") && m.ends_with("; nothing was sent")),
        "{e:?}"
    );
    let e = Search::new(Arc::clone(&client))
        .call(&ctx(&run, "c4", None), &json!({ "query": "crash" }))
        .unwrap_err();
    assert!(
        matches!(&e, ToolError::Unknown(m) if m.starts_with("search: ")),
        "{e:?}"
    );
    // A lookup that fails cannot tell.
    let l = file.lookup(
        &ctx(&run, "c1", Some("k1")),
        &json!({ "title": "crash", "body": "trace" }),
    );
    assert!(
        matches!(&l, Lookup::CantTell(m) if m.starts_with("the lookup failed: ")),
        "{l:?}"
    );
}

#[test]
fn over_http_a_stale_holder_is_refused_as_stale_and_files_nothing() {
    let (svc, client) = serve(Tracker::new(Mode::Keyed));
    let tool = IssueFile::new(Arc::clone(&client));
    let run = RunId::parse("r").unwrap();
    let newer = CallContext {
        epoch: 2,
        ..ctx(&run, "c1", Some("k1"))
    };
    tool.call(&newer, &json!({ "title": "crash", "body": "t" }))
        .unwrap();
    // The older holder, with a key of its own: keys alone would let it in.
    let older = ctx(&run, "c2", Some("k2"));
    match tool.call(&older, &json!({ "title": "crash", "body": "t" })) {
        Err(ToolError::Stale(m)) => assert!(m.contains("412"), "{m}"),
        other => panic!("the older holder was not refused as stale: {other:?}"),
    }
    assert_eq!(client.issues().unwrap().len(), 1);
    svc.stop();
}
