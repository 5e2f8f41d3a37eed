//! The Idempotency-Key contract over real HTTP on 127.0.0.1: replay, 422,
//! 409, 400, expiry, keyless mode, and garbage that must neither panic the
//! server nor lose a record. Each test starts its own server on port 0 and
//! stops it at the end.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tracker::client::{ClientError, HttpTracker};
use tracker::http::{self, Running};
use tracker::service::{Options, Service};
use tracker::wire::{Config, LookupReply};
use tracker::Request;

/// A raw answer: status, headers (lowercased names), body.
#[derive(Debug)]
struct Answer {
    status: u16,
    headers: Vec<(String, String)>,
    body: String,
}

impl Answer {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
    fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("{e}: {}", self.body))
    }
    fn code(&self) -> String {
        self.json()["error"].as_str().unwrap_or_default().to_owned()
    }
}

/// Send raw bytes, read until the server closes, parse the first answer.
fn raw(addr: SocketAddr, bytes: &[u8]) -> Option<Answer> {
    send(addr, bytes, false)
}

/// [`raw`], closing our side after sending when `hang_up` (a client that
/// gives up: hyper then drops the connection, maybe without an answer).
fn send(addr: SocketAddr, bytes: &[u8], hang_up: bool) -> Option<Answer> {
    let mut s = TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    // The server may answer and close before reading everything we send.
    let _ = s.write_all(bytes);
    if hang_up {
        let _ = s.shutdown(std::net::Shutdown::Write);
    }
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    let text = String::from_utf8_lossy(&out).into_owned();
    let (head, body) = text.split_once("\r\n\r\n")?;
    let mut lines = head.lines();
    let status = lines.next()?.split(' ').nth(1)?.parse().ok()?;
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_lowercase(), v.trim().to_owned()))
        .collect();
    Some(Answer {
        status,
        headers,
        body: body.to_owned(),
    })
}

fn request(method: &str, path: &str, key: Option<&str>, body: &str) -> Vec<u8> {
    let mut r = format!(
        "{method} {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: {}\r\n",
        body.len()
    );
    if let Some(k) = key {
        r.push_str(&format!("Idempotency-Key: \"{k}\"\r\n"));
    }
    r.push_str("\r\n");
    r.push_str(body);
    r.into_bytes()
}

fn call(addr: SocketAddr, method: &str, path: &str, key: Option<&str>, body: &str) -> Answer {
    raw(addr, &request(method, path, key, body)).expect("an HTTP answer")
}

struct Server {
    running: Option<Running>,
    dir: tempfile::TempDir,
    clock: Arc<AtomicU64>,
}

impl Server {
    fn start(opts: impl FnOnce(&mut Options)) -> Server {
        let dir = tempfile::tempdir().unwrap();
        Server::start_in(dir, opts)
    }

    fn start_in(dir: tempfile::TempDir, opts: impl FnOnce(&mut Options)) -> Server {
        let clock = Arc::new(AtomicU64::new(1_000));
        let mut o = Options::keyed();
        let c = Arc::clone(&clock);
        o.clock = Arc::new(move || c.load(Ordering::SeqCst));
        o.key_ttl = Some(Duration::from_secs(60));
        opts(&mut o);
        let svc = Service::open(dir.path(), o).unwrap();
        let running = http::spawn(svc, "127.0.0.1:0".parse().unwrap()).unwrap();
        Server {
            running: Some(running),
            dir,
            clock,
        }
    }

    fn addr(&self) -> SocketAddr {
        self.running.as_ref().unwrap().addr()
    }

    fn issues(&self) -> serde_json::Value {
        call(self.addr(), "GET", "/issues", None, "").json()
    }

    /// Stop and start again on the same directory (a restart).
    fn restart(mut self, opts: impl FnOnce(&mut Options)) -> Server {
        self.running.take().unwrap().stop();
        Server::start_in(self.dir, opts)
    }
}

const ISSUE: &str = r#"{"title": "crash in parser", "body": "trace"}"#;

#[test]
fn a_keyed_repeat_returns_the_first_answer_and_changes_nothing() {
    let s = Server::start(|_| {});
    let first = call(s.addr(), "POST", "/issues", Some("k1"), ISSUE);
    assert_eq!(first.status, 201, "{first:?}");
    assert_eq!(first.json(), serde_json::json!({"number": 1}));
    assert_eq!(first.header("idempotent-replayed"), None);
    // Same key, same request (other whitespace and field order: same fingerprint).
    let again = call(
        s.addr(),
        "POST",
        "/issues",
        Some("k1"),
        r#"{"body":"trace","title":"crash in parser"}"#,
    );
    assert_eq!(again.status, 201);
    assert_eq!(again.body, first.body);
    assert_eq!(again.header("idempotent-replayed"), Some("true"));
    assert_eq!(s.issues().as_array().unwrap().len(), 1);
    // A comment, replayed the same way.
    let c1 = call(
        s.addr(),
        "POST",
        "/issues/1/comments",
        Some("k2"),
        r#"{"body": "seen"}"#,
    );
    let c2 = call(
        s.addr(),
        "POST",
        "/issues/1/comments",
        Some("k2"),
        r#"{"body": "seen"}"#,
    );
    assert_eq!((c1.status, c2.status), (201, 201));
    assert_eq!(c1.json(), serde_json::json!({"issue": 1, "id": 1}));
    assert_eq!(c2.body, c1.body);
    assert_eq!(s.issues()[0]["comments"].as_array().unwrap().len(), 1);
}

#[test]
fn the_same_key_with_another_payload_is_422_and_records_nothing() {
    let s = Server::start(|_| {});
    assert_eq!(
        call(s.addr(), "POST", "/issues", Some("k1"), ISSUE).status,
        201
    );
    let other = call(
        s.addr(),
        "POST",
        "/issues",
        Some("k1"),
        r#"{"title": "another", "body": "trace"}"#,
    );
    assert_eq!(other.status, 422, "{other:?}");
    assert_eq!(other.code(), "key_reused");
    assert!(other.json()["message"].as_str().unwrap().contains("k1"));
    // The same key on another route is another payload too.
    let comment = call(
        s.addr(),
        "POST",
        "/issues/1/comments",
        Some("k1"),
        r#"{"body": "x"}"#,
    );
    assert_eq!(comment.status, 422);
    let issues = s.issues();
    assert_eq!(issues.as_array().unwrap().len(), 1);
    assert_eq!(issues[0]["comments"].as_array().unwrap().len(), 0);
}

#[test]
fn a_post_without_a_key_is_400_on_a_keyed_tracker_and_reads_need_none() {
    let s = Server::start(|_| {});
    let a = call(s.addr(), "POST", "/issues", None, ISSUE);
    assert_eq!(a.status, 400);
    assert_eq!(a.code(), "missing_idempotency_key");
    for bad in ["", "caf\u{e9}", "\"unterminated"] {
        let r = format!(
            "POST /issues HTTP/1.1\r\nHost: x\r\nConnection: close\r\nIdempotency-Key: {bad}\r\nContent-Length: {}\r\n\r\n{ISSUE}",
            ISSUE.len()
        );
        let a = raw(s.addr(), r.as_bytes()).unwrap();
        assert_eq!(a.status, 400, "key {bad:?}: {a:?}");
        assert_eq!(a.code(), "bad_idempotency_key", "key {bad:?}");
    }
    let long = "k".repeat(256);
    assert_eq!(
        call(s.addr(), "POST", "/issues", Some(&long), ISSUE).code(),
        "bad_idempotency_key"
    );
    assert_eq!(s.issues(), serde_json::json!([]));
    // Reads never need a key.
    assert_eq!(
        call(s.addr(), "GET", "/search?q=crash", None, "").status,
        200
    );
    assert_eq!(call(s.addr(), "GET", "/config", None, "").status, 200);
    let lookup = call(
        s.addr(),
        "POST",
        "/lookup",
        None,
        r#"{"op": "file_issue", "title": "t", "body": "b"}"#,
    );
    assert_eq!(lookup.status, 200);
    assert_eq!(lookup.json(), serde_json::json!({"outcome": "not_found"}));
}

#[test]
fn a_repeat_while_the_first_is_in_flight_is_409() {
    // The first request is held inside the server until the test lets go.
    let (arrived_tx, arrived_rx) = mpsc::channel::<()>();
    let (release_tx, release_rx) = mpsc::channel::<()>();
    let arrived_tx = Mutex::new(arrived_tx);
    let release_rx = Mutex::new(release_rx);
    let s = Server::start(move |o| {
        o.hold = Some(Arc::new(move |_| {
            let _ = arrived_tx.lock().unwrap().send(());
            let _ = release_rx.lock().unwrap().recv();
        }));
    });
    let addr = s.addr();
    let first = std::thread::spawn(move || call(addr, "POST", "/issues", Some("k1"), ISSUE));
    arrived_rx.recv().unwrap();
    let during = call(addr, "POST", "/issues", Some("k1"), ISSUE);
    assert_eq!(during.status, 409, "{during:?}");
    assert_eq!(during.code(), "request_in_flight");
    // Another payload with the in-flight key: a reuse, 422.
    let other = call(
        addr,
        "POST",
        "/issues",
        Some("k1"),
        r#"{"title": "x", "body": "y"}"#,
    );
    assert_eq!(other.status, 422);
    // Other keys are not blocked by it... (they are held too: let both go.)
    release_tx.send(()).unwrap();
    let first = first.join().unwrap();
    assert_eq!(first.status, 201);
    // After it finished, the same request is a replay.
    let after = call(addr, "POST", "/issues", Some("k1"), ISSUE);
    assert_eq!(
        (after.status, after.body.as_str()),
        (201, first.body.as_str())
    );
    assert_eq!(after.header("idempotent-replayed"), Some("true"));
    drop(release_tx);
    assert_eq!(s.issues().as_array().unwrap().len(), 1);
}

#[test]
fn keys_expire_after_the_published_time() {
    let s = Server::start(|_| {});
    let config: Config =
        serde_json::from_str(&call(s.addr(), "GET", "/config", None, "").body).unwrap();
    assert_eq!(config.key_ttl_secs, Some(60));
    assert_eq!(config.mode, "keyed");
    assert!(config.requires_key);
    assert_eq!(
        call(s.addr(), "POST", "/issues", Some("k1"), ISSUE).status,
        201
    );
    s.clock.fetch_add(59, Ordering::SeqCst);
    let held = call(s.addr(), "POST", "/issues", Some("k1"), ISSUE);
    assert_eq!(held.header("idempotent-replayed"), Some("true"));
    assert_eq!(
        call(s.addr(), "GET", "/keys/k1", None, "").json()["outcome"],
        "found"
    );
    s.clock.fetch_add(1, Ordering::SeqCst);
    // Expired: the key counts as no key, so the same request files again,
    // and other arguments are no longer a reuse.
    let lookup = call(s.addr(), "GET", "/keys/k1", None, "").json();
    assert_eq!(lookup["outcome"], "cant_tell", "{lookup}");
    let again = call(s.addr(), "POST", "/issues", Some("k1"), ISSUE);
    assert_eq!(again.status, 201);
    assert_eq!(again.header("idempotent-replayed"), None);
    assert_eq!(again.json(), serde_json::json!({"number": 2}));
    assert_eq!(s.issues().as_array().unwrap().len(), 2);
}

#[test]
fn keys_and_records_survive_a_restart() {
    let s = Server::start(|_| {});
    assert_eq!(
        call(s.addr(), "POST", "/issues", Some("k1"), ISSUE).status,
        201
    );
    let s = s.restart(|_| {});
    let again = call(s.addr(), "POST", "/issues", Some("k1"), ISSUE);
    assert_eq!(again.header("idempotent-replayed"), Some("true"));
    assert_eq!(
        call(
            s.addr(),
            "POST",
            "/issues",
            Some("k1"),
            "{\"title\":\"o\",\"body\":\"b\"}"
        )
        .status,
        422
    );
    assert_eq!(s.issues().as_array().unwrap().len(), 1);
}

#[test]
fn a_second_service_on_one_directory_is_refused() {
    let s = Server::start(|_| {});
    let err = Service::open(s.dir.path(), Options::keyed()).unwrap_err();
    assert!(err.to_string().contains("locked"), "{err}");
}

#[test]
fn keyless_mode_ignores_keys() {
    let s = Server::start(|o| {
        *o = Options {
            clock: o.clock.clone(),
            ..Options::keyless()
        }
    });
    let config = call(s.addr(), "GET", "/config", None, "").json();
    assert_eq!(config["mode"], "keyless");
    assert_eq!(config["requires_key"], false);
    assert_eq!(call(s.addr(), "POST", "/issues", None, ISSUE).status, 201);
    assert_eq!(
        call(s.addr(), "POST", "/issues", Some("k1"), ISSUE).status,
        201
    );
    let again = call(s.addr(), "POST", "/issues", Some("k1"), ISSUE);
    assert_eq!(again.json(), serde_json::json!({"number": 3}));
    assert_eq!(again.header("idempotent-replayed"), None);
    // The lookup by arguments is certain: the records are the truth.
    let found = call(
        s.addr(),
        "POST",
        "/lookup",
        None,
        r#"{"op":"file_issue","title":"crash in parser","body":"trace"}"#,
    );
    assert_eq!(
        found.json(),
        serde_json::json!({"outcome": "found", "response": {"number": 1}})
    );
}

#[test]
fn an_uncertain_lookup_never_says_not_found() {
    let s = Server::start(|o| o.uncertain_lookup = true);
    let answer = call(
        s.addr(),
        "POST",
        "/lookup",
        None,
        r#"{"op":"comment","issue":1,"body":"b"}"#,
    );
    assert_eq!(answer.json()["outcome"], "cant_tell");
    // ...but a held key is still an answer.
    assert_eq!(
        call(s.addr(), "POST", "/issues", Some("k1"), ISSUE).status,
        201
    );
    let by_key = call(
        s.addr(),
        "POST",
        "/lookup",
        Some("k1"),
        r#"{"op":"file_issue","title":"crash in parser","body":"trace"}"#,
    );
    assert_eq!(by_key.json()["outcome"], "found");
}

#[test]
fn malformed_and_oversized_bodies_are_400_and_413_with_a_json_reason() {
    let s = Server::start(|_| {});
    let cases: &[(&str, &str, u16, &str)] = &[
        ("/issues", "not json", 400, "malformed_body"),
        ("/issues", r#"{"title": "t"}"#, 400, "malformed_body"),
        (
            "/issues",
            r#"{"title": 3, "body": "b"}"#,
            400,
            "malformed_body",
        ),
        (
            "/issues",
            r#"{"title": "t", "body": "b", "extra": 1}"#,
            400,
            "malformed_body",
        ),
        (
            "/issues",
            r#"{"title": "t", "body": "b"#,
            400,
            "malformed_body",
        ),
        (
            "/issues/1/comments",
            r#"{"body": "b"}"#,
            404,
            "no_such_issue",
        ),
        (
            "/issues/zero/comments",
            r#"{"body": "b"}"#,
            404,
            "no_such_issue",
        ),
        (
            "/issues/0/comments",
            r#"{"body": "b"}"#,
            404,
            "no_such_issue",
        ),
        ("/nowhere", "{}", 404, "not_found"),
    ];
    for (i, (path, body, status, code)) in cases.iter().enumerate() {
        let a = call(s.addr(), "POST", path, Some(&format!("k{i}")), body);
        assert_eq!(
            (a.status, a.code().as_str()),
            (*status, *code),
            "{path} {body}: {a:?}"
        );
        assert!(!a.json()["message"].as_str().unwrap().is_empty());
    }
    let malformed = call(s.addr(), "POST", "/issues", Some("m"), r#"{"title": "t"}"#);
    assert!(
        malformed.json()["message"]
            .as_str()
            .unwrap()
            .contains("body"),
        "{malformed:?}"
    );
    let huge = format!(r#"{{"title": "t", "body": "{}"}}"#, "x".repeat(70 * 1024));
    let a = call(s.addr(), "POST", "/issues", Some("big"), &huge);
    assert_eq!((a.status, a.code().as_str()), (413, "body_too_large"));
    // Chunked, without a length up front: still 413.
    let chunk = "y".repeat(70 * 1024);
    let chunked = format!(
        "POST /issues HTTP/1.1\r\nHost: x\r\nConnection: close\r\nIdempotency-Key: \"c\"\r\nTransfer-Encoding: chunked\r\n\r\n{:x}\r\n{chunk}\r\n0\r\n\r\n",
        chunk.len()
    );
    let a = raw(s.addr(), chunked.as_bytes()).unwrap();
    assert_eq!(
        (a.status, a.code().as_str()),
        (413, "body_too_large"),
        "{a:?}"
    );
    assert_eq!(
        call(s.addr(), "DELETE", "/issues", None, "").code(),
        "method_not_allowed"
    );
    assert_eq!(
        call(s.addr(), "GET", "/search", None, "").code(),
        "bad_query"
    );
    assert_eq!(s.issues(), serde_json::json!([]));
    // Just under the limit (64 KiB): read and recorded.
    let near = format!(r#"{{"title": "t", "body": "{}"}}"#, "x".repeat(60 * 1024));
    let a = call(s.addr(), "POST", "/issues", Some("near"), &near);
    assert!((200..300).contains(&a.status), "{a:?}");
    assert_eq!(s.issues().as_array().map(Vec::len), Some(1));
}

#[test]
fn garbage_truncated_bodies_and_huge_headers_neither_panic_nor_lose_a_record() {
    let s = Server::start(|_| {});
    let addr = s.addr();
    assert_eq!(
        call(addr, "POST", "/issues", Some("keep"), ISSUE).status,
        201
    );
    // Bytes that are not HTTP at all, seeded so a failure reproduces.
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    for len in [1usize, 7, 64, 1024, 65_536] {
        let bytes: Vec<u8> = (0..len)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect();
        if let Some(a) = send(addr, &bytes, true) {
            assert!(
                (400..500).contains(&a.status),
                "garbage of {len} bytes: {a:?}"
            );
        }
    }
    // A body shorter than its Content-Length: the client gave up mid-body.
    let truncated = format!(
        "POST /issues HTTP/1.1\r\nHost: x\r\nIdempotency-Key: \"t\"\r\nContent-Length: 500\r\n\r\n{}",
        &ISSUE[..20]
    );
    if let Some(a) = send(addr, truncated.as_bytes(), true) {
        assert!((400..500).contains(&a.status), "truncated body: {a:?}");
    }
    // A head cut in the middle of a header.
    let _ = send(
        addr,
        b"POST /issues HTTP/1.1\r\nHost: x\r\nIdempotency-Ke",
        true,
    );
    // A huge header and very many headers: refused, never held whole.
    let huge = format!(
        "GET /issues HTTP/1.1\r\nHost: x\r\nConnection: close\r\nX-Big: {}\r\n\r\n",
        "a".repeat(2 << 20)
    );
    if let Some(a) = raw(addr, huge.as_bytes()) {
        assert!((400..500).contains(&a.status), "huge header: {}", a.status);
    }
    let mut many = String::from("GET /issues HTTP/1.1\r\nHost: x\r\nConnection: close\r\n");
    for i in 0..10_000 {
        many.push_str(&format!("X-H{i}: v\r\n"));
    }
    many.push_str("\r\n");
    if let Some(a) = raw(addr, many.as_bytes()) {
        assert!((400..500).contains(&a.status), "many headers: {}", a.status);
    }
    // Invalid UTF-8 in a JSON body.
    let mut bad = request("POST", "/issues", Some("u"), "");
    let body = b"{\"title\": \"\xff\xfe\", \"body\": \"b\"}";
    bad.truncate(bad.len() - 4);
    bad.extend_from_slice(format!("Content-Length: {}\r\n\r\n", body.len()).as_bytes());
    bad.extend_from_slice(body);
    // (The request above carries Content-Length twice; either way, a 4xx.)
    if let Some(a) = raw(addr, &bad) {
        assert!((400..500).contains(&a.status), "{a:?}");
    }
    // The server still serves, and the record is all there.
    let issues = s.issues();
    assert_eq!(issues.as_array().unwrap().len(), 1, "{issues}");
    assert_eq!(issues[0]["title"], "crash in parser");
    let again = call(addr, "POST", "/issues", Some("keep"), ISSUE);
    assert_eq!(again.header("idempotent-replayed"), Some("true"));
}

#[test]
fn the_client_sends_the_key_in_the_header_and_maps_each_status() {
    let s = Server::start(|_| {});
    let t = HttpTracker::connect(&format!("http://{}", s.addr())).unwrap();
    assert_eq!(t.mode(), tracker::Mode::Keyed);
    assert_eq!(t.config().key_ttl_secs, Some(60));
    let n = t
        .file_issue("crash in parser", "trace", Some("run-1/call-1"))
        .unwrap();
    assert_eq!(
        t.file_issue("crash in parser", "trace", Some("run-1/call-1"))
            .unwrap(),
        n
    );
    assert_eq!(t.issues().unwrap().len(), 1);
    let reused = t
        .file_issue("other", "trace", Some("run-1/call-1"))
        .unwrap_err();
    assert!(
        matches!(reused, ClientError::KeyReused { .. }),
        "{reused:?}"
    );
    assert!(!reused.outcome_unknown());
    let missing = t.file_issue("crash in parser", "trace", None).unwrap_err();
    assert!(
        matches!(&missing, ClientError::Refused { status: 400, code, .. } if code == "missing_idempotency_key"),
        "{missing:?}"
    );
    let comment = t.comment(n, "seen", Some("run-1/call-2")).unwrap();
    assert_eq!(t.comment(n, "seen", Some("run-1/call-2")).unwrap(), comment);
    let req = Request::FileIssue {
        title: "crash in parser".into(),
        body: "trace".into(),
    };
    assert_eq!(
        t.lookup(&req, Some("run-1/call-1")).unwrap(),
        LookupReply::Found {
            response: tracker::wire::Created::Issue { number: n }
        }
    );
    assert_eq!(
        t.lookup_key("run-1/call-1").unwrap(),
        LookupReply::Found {
            response: tracker::wire::Created::Issue { number: n }
        }
    );
    assert_eq!(t.search("PARSER").unwrap().issues.len(), 1);
    // A server that is gone: the request was certainly not sent.
    let addr = s.addr();
    drop(s);
    let gone = HttpTracker::connect_with(
        &format!("http://{addr}"),
        tracker::client::Retry {
            unreachable: Duration::from_millis(50),
            ..Default::default()
        },
    )
    .unwrap_err();
    assert!(matches!(gone, ClientError::Unreachable { .. }), "{gone:?}");
}
