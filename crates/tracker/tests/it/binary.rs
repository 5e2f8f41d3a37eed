//! The `tracker` binary: `serve` prints its address first and stops
//! cleanly on SIGTERM; `mcp` round-trips a keyed call with the key in
//! `_meta`, honoured exactly as the HTTP header is.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

const BIN: &str = env!("CARGO_BIN_EXE_tracker");

/// Kills the child if a test fails before it stopped it.
struct Guard(Option<Child>);

impl Drop for Guard {
    fn drop(&mut self) {
        if let Some(mut c) = self.0.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

fn get(addr: &str, path: &str) -> String {
    let mut s = TcpStream::connect(addr).unwrap();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    out
}

#[test]
fn serve_prints_its_address_first_and_stops_cleanly_on_sigterm() {
    let dir = tempfile::tempdir().unwrap();
    let child = Command::new(BIN)
        .args(["serve", "--dir"])
        .arg(dir.path())
        .args(["--addr", "127.0.0.1:0", "--key-ttl-secs", "120"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut guard = Guard(Some(child));
    let child = guard.0.as_mut().unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut first = String::new();
    out.read_line(&mut first).unwrap();
    let addr = first
        .trim_end()
        .strip_prefix("listening on http://")
        .unwrap_or_else(|| panic!("first line: {first:?}"))
        .to_owned();
    assert!(addr.starts_with("127.0.0.1:"), "{addr}");
    let config = get(&addr, "/config");
    assert!(config.contains(r#""key_ttl_secs":120"#), "{config}");
    // A keyed creation, then SIGTERM.
    let body = r#"{"title":"t","body":"b"}"#;
    let mut s = TcpStream::connect(&addr).unwrap();
    write!(
        s,
        "POST /issues HTTP/1.1\r\nHost: x\r\nConnection: close\r\nIdempotency-Key: \"k\"\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut answer = String::new();
    s.read_to_string(&mut answer).unwrap();
    assert!(answer.starts_with("HTTP/1.1 201"), "{answer}");
    let pid = i32::try_from(child.id()).unwrap();
    // SAFETY: kill(2) on our own child's pid, with a valid signal number.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGTERM) }, 0);
    let status = child.wait().unwrap();
    guard.0 = None;
    assert!(status.success(), "{status:?}");
    let file = std::fs::read_to_string(dir.path().join("tracker.json")).unwrap();
    assert!(file.contains(r#""title": "t""#), "{file}");
    // The lock went with the process: a new server starts on the directory.
    let again = Command::new(BIN)
        .args(["serve", "--dir"])
        .arg(dir.path())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut guard = Guard(Some(again));
    let mut line = String::new();
    BufReader::new(guard.0.as_mut().unwrap().stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert!(line.starts_with("listening on http://127.0.0.1:"), "{line}");
}

/// What `ready` gives once it gives something, polled every 10 ms; fails
/// with `what` after 20 s.
fn within_20_s<T>(what: &str, mut ready: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Some(t) = ready() {
            return t;
        }
        assert!(Instant::now() < deadline, "{what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn mcp_stops_on_sigterm_before_any_client_spoke() {
    let dir = tempfile::tempdir().unwrap();
    let child = Command::new(BIN)
        .args(["mcp", "--dir"])
        .arg(dir.path())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut guard = Guard(Some(child));
    // The service takes its lock after the signal handlers are in place.
    let lock = dir.path().join("tracker.lock");
    within_20_s("the service never started", || lock.exists().then_some(()));
    let child = guard.0.as_mut().unwrap();
    let pid = i32::try_from(child.id()).unwrap();
    // SAFETY: kill(2) on our own child's pid, with a valid signal number.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGTERM) }, 0);
    let status = within_20_s(
        "`tracker mcp` ignored SIGTERM while waiting for a client's handshake",
        || child.try_wait().unwrap(),
    );
    guard.0 = None;
    assert!(status.success(), "{status:?}");
}

#[test]
fn a_second_server_on_one_directory_fails_with_a_message() {
    let dir = tempfile::tempdir().unwrap();
    let first = Command::new(BIN)
        .args(["serve", "--dir"])
        .arg(dir.path())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut guard = Guard(Some(first));
    let mut line = String::new();
    BufReader::new(guard.0.as_mut().unwrap().stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let second = Command::new(BIN)
        .args(["serve", "--dir"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(!second.status.success());
    let err = String::from_utf8_lossy(&second.stderr);
    assert!(err.contains("locked"), "{err}");
    drop(guard);
}

/// The `tracker mcp` child, spoken to as MCP's stdio transport is:
/// newline-delimited JSON-RPC. Raw JSON on purpose: this pins the wire
/// the binary speaks (the SDK's own client talks to the same server in
/// agent's MCP tests).
struct Mcp {
    child: Guard,
    to: std::process::ChildStdin,
    from: BufReader<std::process::ChildStdout>,
    id: u64,
}

impl Mcp {
    fn start(dir: &std::path::Path) -> Mcp {
        let mut child = Command::new(BIN)
            .args(["mcp", "--dir"])
            .arg(dir)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let (to, from) = (child.stdin.take().unwrap(), child.stdout.take().unwrap());
        let mut mcp = Mcp {
            child: Guard(Some(child)),
            to,
            from: BufReader::new(from),
            id: 0,
        };
        let init = mcp.request(
            "initialize",
            json!({"protocolVersion": "2025-06-18", "capabilities": {},
                   "clientInfo": {"name": "binary-test", "version": "0"}}),
        );
        assert!(
            init["result"]["capabilities"]["tools"].is_object(),
            "{init}"
        );
        mcp.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        mcp
    }

    fn send(&mut self, message: &Value) {
        writeln!(self.to, "{message}").unwrap();
        self.to.flush().unwrap();
    }

    /// One request; its whole answer (`result` or `error`).
    fn request(&mut self, method: &str, params: Value) -> Value {
        self.id += 1;
        let id = self.id;
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        loop {
            let mut line = String::new();
            assert_ne!(
                self.from.read_line(&mut line).unwrap(),
                0,
                "the server hung up"
            );
            let answer: Value = serde_json::from_str(&line).unwrap();
            if answer["id"] == json!(id) {
                return answer;
            }
        }
    }

    /// `tools/call` of `name` with `meta` as the request's `_meta`.
    fn call(&mut self, name: &str, arguments: Value, meta: Value) -> Value {
        let mut params = json!({"name": name, "arguments": arguments});
        if !meta.is_null() {
            params["_meta"] = meta;
        }
        self.request("tools/call", params)
    }
}

fn keyed(key: &str) -> Value {
    json!({ tracker::wire::MCP_META_KEY: key })
}

/// A call's answer text (its text blocks, joined); fails on an error.
fn text(answer: &Value) -> String {
    let blocks = answer["result"]["content"].as_array();
    let blocks = blocks.unwrap_or_else(|| panic!("not a result: {answer}"));
    blocks.iter().filter_map(|c| c["text"].as_str()).collect()
}

#[test]
fn mcp_round_trips_a_keyed_call_with_the_key_in_meta() {
    let dir = tempfile::tempdir().unwrap();
    let mut mcp = Mcp::start(dir.path());
    let listed = mcp.request("tools/list", json!({}));
    let tools = listed["result"]["tools"].as_array().unwrap().clone();
    let names: Vec<&str> = tools.iter().filter_map(|t| t["name"].as_str()).collect();
    assert_eq!(names, ["issue_file", "issue_comment", "search", "lookup"]);
    assert_eq!(
        tools[0]["_meta"][tracker::wire::MCP_KEYS_META],
        json!({"ttl_secs": 86_400})
    );
    assert_eq!(tools[2]["annotations"]["readOnlyHint"], json!(true));

    let args = json!({"title": "crash in parser", "body": "trace"});
    let first = mcp.call("issue_file", args.clone(), keyed("k1"));
    assert_eq!(text(&first), r#"{"issue":1}"#);
    let again = mcp.call("issue_file", args.clone(), keyed("k1"));
    assert_eq!(text(&again), text(&first));
    let lookup = mcp.call(
        "lookup",
        json!({"tool": "issue_file", "arguments": args}),
        keyed("k1"),
    );
    assert_eq!(
        text(&lookup),
        r#"{"outcome":"found","response":{"issue":1}}"#
    );
    // The same key with other arguments: refused, as the HTTP 422.
    let reused = mcp.call(
        "issue_file",
        json!({"title": "other", "body": "b"}),
        keyed("k1"),
    );
    assert_eq!(
        reused["error"]["data"],
        json!({"code": "key_reused"}),
        "{reused}"
    );
    // No key on a keyed tracker: refused, as the HTTP 400.
    let keyless = mcp.call(
        "issue_file",
        json!({"title": "t", "body": "b"}),
        Value::Null,
    );
    let error = &keyless["error"];
    assert_eq!(
        error["data"],
        json!({"code": "missing_idempotency_key"}),
        "{keyless}"
    );
    // In MCP's words: the `_meta` field, not the HTTP header.
    let message = error["message"].as_str().unwrap();
    assert!(
        message.contains("_meta field \"io.crashsweep/idempotency-key\""),
        "{message}"
    );
    assert!(!message.contains("header"), "{message}");
    // A fenced call: epoch 2 of run-1 files, then epoch 1 (a holder the
    // run has moved past) is refused as stale, even with a fresh key.
    let fenced = |key: &str, epoch: u64| {
        let mut meta = keyed(key);
        meta[tracker::wire::MCP_RUN_META] = json!("run-1");
        meta[tracker::wire::MCP_EPOCH_META] = json!(epoch);
        (json!({"title": "f", "body": key}), meta)
    };
    let (args, meta) = fenced("k2", 2);
    text(&mcp.call("issue_file", args, meta));
    let (args, meta) = fenced("k3", 1);
    let stale = mcp.call("issue_file", args, meta);
    assert_eq!(
        stale["error"]["data"],
        json!({"code": "stale_epoch"}),
        "{stale}"
    );
    // Closing its stdin ends the server, which exits 0.
    let Mcp { mut child, to, .. } = mcp;
    drop(to);
    let status = child.0.take().unwrap().wait().unwrap();
    assert!(status.success(), "{status}");
    // Two issues on disk: the first filed once, the fenced one once.
    let file: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("tracker.json")).unwrap())
            .unwrap();
    assert_eq!(file["issues"].as_array().unwrap().len(), 2, "{file}");
}
