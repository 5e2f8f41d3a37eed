//! Tests of `tracker::client::HttpTracker` that pin what cargo-mutants
//! found untested: the base URL, the comment's id, which
//! failures are "certainly not sent" and which "outcome unknown", the
//! retry while connections are refused, the bounded `409` retry and the
//! key's escaping in `GET /keys/{key}`. The retry counts are observed by
//! counting the requests a small loopback server of our own receives
//! (never by timing). Every server binds 127.0.0.1 and stops at the end.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::{self, JoinHandle};
use std::time::Duration;

use tracker::client::{ClientError, HttpTracker, Retry};
use tracker::http;
use tracker::service::{Options, Service};
use tracker::wire::Config;

/// What the fake answers: `Some((status, body))`, or `None` to close the
/// connection after reading the request (an answer lost on the way).
type Answer = Box<dyn Fn(&str) -> Option<(u16, String)> + Send>;

/// A one-thread HTTP/1.1 server that records each request line.
struct Fake {
    addr: SocketAddr,
    lines: Arc<Mutex<Vec<String>>>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

fn config_json() -> String {
    serde_json::to_string(&Config {
        mode: "keyed".into(),
        requires_key: true,
        key_ttl_secs: None,
        uncertain_lookup: false,
        max_body_bytes: tracker::wire::MAX_BODY_BYTES,
        idempotency_header: tracker::wire::IDEMPOTENCY_KEY_HEADER.into(),
        mcp_meta_key: tracker::wire::MCP_META_KEY.into(),
    })
    .unwrap()
}

/// Read one request (head and `Content-Length` body); its request line.
fn read_request(s: &mut TcpStream) -> Option<String> {
    let mut buf = Vec::new();
    let mut byte = [0u8; 1];
    while !buf.ends_with(b"\r\n\r\n") {
        if s.read(&mut byte).ok()? == 0 {
            return None;
        }
        buf.push(byte[0]);
    }
    let head = String::from_utf8_lossy(&buf).into_owned();
    let len: usize = head
        .lines()
        .filter_map(|l| l.split_once(':'))
        .find(|(n, _)| n.trim().eq_ignore_ascii_case("content-length"))
        .and_then(|(_, v)| v.trim().parse().ok())
        .unwrap_or(0);
    let mut body = vec![0u8; len];
    s.read_exact(&mut body).ok()?;
    Some(head.lines().next().unwrap_or_default().to_owned())
}

impl Fake {
    /// Serve on `addr` after `listener` is bound; `GET /config` is always
    /// answered, every other request by `answer`.
    fn serve(listener: TcpListener, answer: Answer) -> Fake {
        let addr = listener.local_addr().unwrap();
        let lines = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let (l, st) = (Arc::clone(&lines), Arc::clone(&stop));
        let thread = thread::spawn(move || {
            for s in listener.incoming() {
                if st.load(Ordering::SeqCst) {
                    break;
                }
                let Ok(mut s) = s else { continue };
                s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
                let Some(line) = read_request(&mut s) else {
                    continue;
                };
                let reply = if line.starts_with("GET /config ") {
                    Some((200, config_json()))
                } else {
                    l.lock().unwrap().push(line.clone());
                    answer(&line)
                };
                if let Some((status, body)) = reply {
                    let _ = write!(
                        s,
                        "HTTP/1.1 {status} X\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                        body.len()
                    );
                }
                // Dropping `s` closes the connection (with no answer if `None`).
            }
        });
        Fake {
            addr,
            lines,
            stop,
            thread: Some(thread),
        }
    }

    fn start(answer: Answer) -> Fake {
        Fake::serve(TcpListener::bind("127.0.0.1:0").unwrap(), answer)
    }

    fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The request lines received, `GET /config` left out.
    fn lines(&self) -> Vec<String> {
        self.lines.lock().unwrap().clone()
    }
}

impl Drop for Fake {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        let _ = TcpStream::connect(self.addr);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn quick() -> Retry {
    Retry {
        in_flight: 3,
        in_flight_pause: Duration::from_millis(1),
        unreachable: Duration::from_millis(300),
        timeout: Duration::from_secs(30),
    }
}

#[test]
fn url_is_the_base_it_was_given_without_a_trailing_slash() {
    let f = Fake::start(Box::new(|_| None));
    let t = HttpTracker::connect_with(&format!("{}/", f.url()), quick()).unwrap();
    assert_eq!(t.url(), f.url());
    assert_eq!(t.config().mode, "keyed");
}

#[test]
fn comment_returns_the_new_comments_id() {
    let dir = tempfile::tempdir().unwrap();
    let svc = Service::open(dir.path(), Options::keyed()).unwrap();
    let running = http::spawn(svc, "127.0.0.1:0".parse().unwrap()).unwrap();
    let t = HttpTracker::connect(&running.url()).unwrap();
    let n = t
        .file_issue("crash in parser", "trace", Some("i1"))
        .unwrap();
    let first = t.comment(n, "seen", Some("c1")).unwrap();
    let second = t.comment(n, "seen again", Some("c2")).unwrap();
    // Ids are unique over the tracker, from 1.
    assert_eq!((first, second), (1, 2));
    let issues = t.issues().unwrap();
    let ids: Vec<u64> = issues[0].comments.iter().map(|c| c.id).collect();
    assert_eq!(ids, vec![first, second]);
    // A keyed repeat gets the same id again.
    assert_eq!(t.comment(n, "seen again", Some("c2")).unwrap(), second);
    running.stop();
}

#[test]
fn outcome_unknown_only_for_unknown_and_in_flight() {
    let unknown = ClientError::Unknown {
        url: "u".into(),
        reason: "r".into(),
    };
    let in_flight = ClientError::InFlight {
        tries: 1,
        message: "m".into(),
    };
    assert!(unknown.outcome_unknown());
    assert!(in_flight.outcome_unknown());
    let unreachable = ClientError::Unreachable {
        url: "u".into(),
        reason: "r".into(),
    };
    assert!(!unreachable.outcome_unknown());
}

#[test]
fn a_refused_connection_is_a_definite_error() {
    // A port nobody listens on (bound, then closed).
    let addr = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let e = HttpTracker::connect_with(&format!("http://{addr}"), quick()).unwrap_err();
    assert!(matches!(e, ClientError::Unreachable { .. }), "{e:?}");
    assert!(!e.outcome_unknown());
}

#[test]
fn a_lost_answer_is_outcome_unknown_and_not_retried() {
    // Every POST is read and then the connection closes with no answer.
    let f = Fake::start(Box::new(|_| None));
    let t = HttpTracker::connect_with(&f.url(), quick()).unwrap();
    let e = t.file_issue("crash", "trace", Some("k1")).unwrap_err();
    assert!(matches!(e, ClientError::Unknown { .. }), "{e:?}");
    assert!(e.outcome_unknown());
    // The request was sent once: a sent request is never sent again.
    assert_eq!(f.lines(), vec!["POST /issues HTTP/1.1".to_owned()]);
}

#[test]
fn a_service_that_comes_up_while_refused_is_reached() {
    // The port is closed when the client starts; it opens a little later.
    let addr = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let opener = thread::spawn(move || {
        thread::sleep(Duration::from_millis(300));
        Fake::serve(TcpListener::bind(addr).unwrap(), Box::new(|_| None))
    });
    let retry = Retry {
        unreachable: Duration::from_secs(60),
        ..quick()
    };
    let t = HttpTracker::connect_with(&format!("http://{addr}"), retry);
    let f = opener.join().unwrap();
    let t = t.unwrap();
    assert_eq!(t.config().mode, "keyed");
    drop(f);
}

#[test]
fn a_409_is_tried_exactly_in_flight_times() {
    // 409 for the first ten POSTs, then a 201: a client that tries more
    // than `in_flight` times ends with the 201.
    let count = Arc::new(Mutex::new(0u32));
    let c = Arc::clone(&count);
    let f = Fake::start(Box::new(move |_| {
        let mut n = c.lock().unwrap();
        *n += 1;
        if *n <= 10 {
            Some((409, r#"{"error":"in_flight","message":"busy"}"#.to_owned()))
        } else {
            Some((201, r#"{"number":7}"#.to_owned()))
        }
    }));
    let t = HttpTracker::connect_with(&f.url(), quick()).unwrap();
    let e = t.file_issue("crash", "trace", Some("k1")).unwrap_err();
    assert_eq!(
        e,
        ClientError::InFlight {
            tries: 3,
            message: "busy".into()
        }
    );
    assert!(e.outcome_unknown());
    assert_eq!(f.lines().len(), 3);
    // With in_flight 1, one try.
    let t = HttpTracker::connect_with(
        &f.url(),
        Retry {
            in_flight: 1,
            ..quick()
        },
    )
    .unwrap();
    let e = t.file_issue("crash", "trace", Some("k2")).unwrap_err();
    assert!(matches!(e, ClientError::InFlight { tries: 1, .. }), "{e:?}");
    assert_eq!(f.lines().len(), 4);
}

#[test]
fn lookup_key_escapes_only_reserved_bytes() {
    let f = Fake::start(Box::new(|_| {
        Some((200, r#"{"status":"not_found"}"#.to_owned()))
    }));
    let t = HttpTracker::connect_with(&f.url(), quick()).unwrap();
    let _ = t.lookup_key("run-1.a_b~C9/ x");
    assert_eq!(
        f.lines(),
        vec!["GET /keys/run-1.a_b~C9%2F%20x HTTP/1.1".to_owned()]
    );
}

/// A real service on 127.0.0.1:0 in a fresh directory.
fn service() -> (tempfile::TempDir, http::Running) {
    let dir = tempfile::tempdir().unwrap();
    let svc = Service::open(dir.path(), Options::keyed()).unwrap();
    let running = http::spawn(svc, "127.0.0.1:0".parse().unwrap()).unwrap();
    (dir, running)
}

/// Send raw bytes, read to the end; the status of the answer, if any.
fn raw_status(addr: SocketAddr, bytes: &[u8]) -> (Option<u16>, String) {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let _ = s.write_all(bytes);
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    let text = String::from_utf8_lossy(&out).into_owned();
    let status = text.split(' ').nth(1).and_then(|c| c.parse().ok());
    (status, text)
}

#[test]
fn a_body_of_exactly_the_limit_is_accepted() {
    let (_dir, running) = service();
    let limit = tracker::wire::MAX_BODY_BYTES;
    let shell = r#"{"title":"","body":"b"}"#;
    let body = format!(
        r#"{{"title":"{}","body":"b"}}"#,
        "a".repeat(limit - shell.len())
    );
    assert_eq!(body.len(), limit);
    let head = |len: usize| {
        format!(
            "POST /issues HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\nContent-Type: application/json\r\nIdempotency-Key: \"big\"\r\nContent-Length: {len}\r\n\r\n"
        )
    };
    let (status, text) = raw_status(running.addr(), format!("{}{body}", head(limit)).as_bytes());
    assert_eq!(status, Some(201), "{text}");
    running.stop();
}

#[test]
fn a_body_that_breaks_off_is_malformed_not_too_large() {
    let (_dir, running) = service();
    // A chunked body whose chunk size is not hex: the body cannot be read.
    let req = "POST /issues HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\nContent-Type: application/json\r\nIdempotency-Key: \"chunk\"\r\nTransfer-Encoding: chunked\r\n\r\n4\r\n{\"ti\r\nzz\r\n";
    let (status, text) = raw_status(running.addr(), req.as_bytes());
    if let Some(status) = status {
        assert_eq!(status, 400, "{text}");
        assert!(text.contains("malformed_body"), "{text}");
    }
    running.stop();
}

#[test]
fn a_comment_lands_on_the_issue_named_in_the_path() {
    let (_dir, running) = service();
    let t = HttpTracker::connect(&running.url()).unwrap();
    assert_eq!(t.file_issue("one", "b", Some("i1")).unwrap(), 1);
    assert_eq!(t.file_issue("two", "b", Some("i2")).unwrap(), 2);
    t.comment(2, "on two", Some("c1")).unwrap();
    let issues = t.issues().unwrap();
    assert!(issues[0].comments.is_empty(), "{issues:?}");
    assert_eq!(issues[1].comments.len(), 1, "{issues:?}");
    // Issue 0 does not exist: numbers start at 1.
    let e = t.comment(0, "on zero", Some("c0")).unwrap_err();
    assert!(
        matches!(&e, ClientError::Refused { status: 404, code, message }
            if code == "no_such_issue" && message.contains("is not an issue number")),
        "{e:?}"
    );
    running.stop();
}

#[test]
fn options_debug_names_its_fields() {
    let text = format!("{:?}", Options::keyed());
    assert!(text.starts_with("Options {"), "{text}");
    for field in [
        "mode",
        "key_ttl",
        "uncertain_lookup",
        "hold: false",
        "after: false",
    ] {
        assert!(text.contains(field), "{field} in {text}");
    }
}

#[test]
fn keyed_options_keep_keys_24_hours() {
    assert_eq!(Options::keyed().key_ttl, Some(Duration::from_secs(86_400)));
}

/// Stopping (or dropping) a running service closes its port and lets go
/// of its directory: a second service opens the same directory at once.
#[test]
fn a_stopped_or_dropped_service_releases_its_directory() {
    for stop in [true, false] {
        let dir = tempfile::tempdir().unwrap();
        let svc = Service::open(dir.path(), Options::keyed()).unwrap();
        let running = http::spawn(svc, "127.0.0.1:0".parse().unwrap()).unwrap();
        assert!(
            Service::open(dir.path(), Options::keyed()).is_err(),
            "a running service holds its directory"
        );
        if stop {
            running.stop();
        } else {
            drop(running);
        }
        assert!(
            Service::open(dir.path(), Options::keyed()).is_ok(),
            "stop = {stop}: the directory is free again"
        );
    }
}

/// `unix_secs` is the wall clock in whole seconds since the epoch (a key's
/// age is measured with it), not a constant.
#[test]
fn unix_secs_reads_the_wall_clock() {
    use std::time::{SystemTime, UNIX_EPOCH};
    let before = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let now = tracker::service::unix_secs();
    let after = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs();
    assert!(
        before <= now && now <= after,
        "{before} <= {now} <= {after}"
    );
}

#[test]
fn service_debug_names_its_tracker_and_options() {
    let dir = tempfile::tempdir().unwrap();
    let svc = Service::open(dir.path(), Options::keyless()).unwrap();
    let text = format!("{svc:?}");
    assert!(text.starts_with("Service {"), "{text}");
    assert!(text.contains("tracker:"), "{text}");
    assert!(text.contains("opts: Options {"), "{text}");
    assert!(text.contains("Keyless"), "{text}");
}

/// A second service on a directory is refused as `Locked`, naming the
/// lock file, not as an I/O error.
#[test]
fn a_second_service_on_one_directory_is_locked_out() {
    let dir = tempfile::tempdir().unwrap();
    let _first = Service::open(dir.path(), Options::keyed()).unwrap();
    match Service::open(dir.path(), Options::keyed()) {
        Err(tracker::service::OpenError::Locked { path }) => {
            assert_eq!(path, dir.path().join("tracker.lock"))
        }
        other => panic!("expected Locked, got {other:?}"),
    }
}

/// `Service::over` takes mode, key lifetime and lookups from the tracker
/// it serves, whatever the options say.
#[test]
fn a_service_over_a_tracker_takes_the_trackers_settings() {
    let tracker = tracker::Tracker::new(tracker::Mode::Keyless)
        .with_key_ttl(5)
        .with_uncertain_lookup();
    let svc = Service::over(tracker, Options::keyed());
    let config = svc.config();
    assert_eq!(config.mode, "keyless");
    assert!(!config.requires_key);
    assert!(config.uncertain_lookup);
    assert_eq!(svc.key_ttl_secs(), Some(5));
    let text = format!("{svc:?}");
    assert!(text.contains("mode: Keyless"), "{text}");
    assert!(text.contains("key_ttl: Some(5s)"), "{text}");
    assert!(text.contains("uncertain_lookup: true"), "{text}");
}

/// While a keyed request is in flight (held before the tracker records
/// it), the same request with its key is refused as in flight, and another
/// request with that key as a reused key; once it is done, the same
/// request is answered as a replay.
#[test]
fn a_key_in_flight_refuses_its_repeat_and_another_request() {
    use std::sync::mpsc;
    use tracker::service::Refusal;
    let (entered_tx, entered_rx) = mpsc::channel::<()>();
    let (release_tx, release_rx) = mpsc::channel::<()>();
    let release_rx = Mutex::new(release_rx);
    let entered_tx = Mutex::new(entered_tx);
    let dir = tempfile::tempdir().unwrap();
    let hold: tracker::service::Hold = Arc::new(move |_| {
        let _ = entered_tx.lock().unwrap().send(());
        let _ = release_rx.lock().unwrap().recv();
    });
    let svc = Service::open(
        dir.path(),
        Options {
            hold: Some(hold),
            ..Options::keyed()
        },
    )
    .unwrap();
    let file = |title: &str| tracker::Request::FileIssue {
        title: title.into(),
        body: "b".into(),
    };
    // Both answers are taken while the first request is held, and it is
    // released before anything is asserted (a failed assertion must not
    // leave it held for ever).
    let (held, same, other, first) = thread::scope(|s| {
        let first = s.spawn(|| svc.create(&file("A"), Some("key-1")));
        // (Bounded only so that a request never held fails, not hangs.)
        let held = entered_rx.recv_timeout(Duration::from_secs(30)).is_ok();
        let same = svc.create(&file("A"), Some("key-1"));
        let other = svc.create(&file("B"), Some("key-1"));
        release_tx.send(()).unwrap();
        (held, same, other, first.join().unwrap())
    });
    assert!(held, "a new keyed request is held before it is recorded");
    assert!(
        matches!(&same, Err(Refusal::InFlight { key }) if key == "key-1"),
        "{same:?}"
    );
    assert!(
        matches!(&other, Err(Refusal::KeyReused { key }) if key == "key-1"),
        "{other:?}"
    );
    assert!(!first.unwrap().replayed);
    // (A hold now would not wait: its channel is closed.)
    drop(release_tx);
    let again = svc.create(&file("A"), Some("key-1")).unwrap();
    assert!(again.replayed, "the same request with its key is a replay");
    assert_eq!(svc.issues().len(), 1);
}

/// `Options::after` sees each new request once, after it is recorded, and
/// never a replay; `Options::hold` likewise, before it is recorded.
#[test]
fn hooks_see_new_requests_only() {
    use std::sync::atomic::AtomicU64;
    let dir = tempfile::tempdir().unwrap();
    let (held, after) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let (h, a) = (Arc::clone(&held), Arc::clone(&after));
    let svc = Service::open(
        dir.path(),
        Options {
            hold: Some(Arc::new(move |_| {
                h.fetch_add(1, Ordering::SeqCst);
            })),
            after: Some(Arc::new(move |_| {
                a.fetch_add(1, Ordering::SeqCst);
            })),
            ..Options::keyed()
        },
    )
    .unwrap();
    let req = tracker::Request::FileIssue {
        title: "A".into(),
        body: "b".into(),
    };
    let seen = || (held.load(Ordering::SeqCst), after.load(Ordering::SeqCst));
    assert!(!svc.create(&req, Some("k1")).unwrap().replayed);
    assert_eq!(seen(), (1, 1), "the new request");
    assert!(svc.create(&req, Some("k1")).unwrap().replayed);
    assert_eq!(seen(), (1, 1), "not the replay");
}
