//! The `tracker` binary: `serve` prints its address first and stops
//! cleanly on SIGTERM; `mcp` round-trips a keyed call with the key in
//! `_meta`, honoured exactly as the HTTP header is.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use rmcp::model::{CallToolRequestParams, MetaObject, RequestMetaObject};
use rmcp::service::ServiceError;
use rmcp::transport::TokioChildProcess;
use rmcp::ServiceExt;
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

fn keyed(name: &'static str, args: Value, key: &str) -> CallToolRequestParams {
    let mut meta = MetaObject::new();
    meta.0
        .insert(tracker::wire::MCP_META_KEY.into(), json!(key));
    let mut p = CallToolRequestParams::new(name).with_arguments(match args {
        Value::Object(o) => o,
        _ => unreachable!("arguments are an object"),
    });
    p.meta = Some(RequestMetaObject(meta));
    p
}

fn text(r: &rmcp::model::CallToolResult) -> String {
    r.content
        .iter()
        .filter_map(|c| c.as_text().map(|t| t.text.clone()))
        .collect()
}

#[test]
fn mcp_round_trips_a_keyed_call_with_the_key_in_meta() {
    let dir = tempfile::tempdir().unwrap();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let mut cmd = tokio::process::Command::new(BIN);
        cmd.args(["mcp", "--dir"]).arg(dir.path());
        let client = ().serve(TokioChildProcess::new(cmd).unwrap()).await.unwrap();
        let tools = client.list_all_tools().await.unwrap();
        let names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
        assert_eq!(names, ["issue_file", "issue_comment", "search", "lookup"]);
        let file = &tools[0];
        assert_eq!(
            file.meta
                .as_ref()
                .and_then(|m| m.0.get(tracker::wire::MCP_KEYS_META)),
            Some(&json!({"ttl_secs": 86_400}))
        );
        assert_eq!(
            tools[2].annotations.as_ref().and_then(|a| a.read_only_hint),
            Some(true)
        );

        let args = json!({"title": "crash in parser", "body": "trace"});
        let first = client
            .call_tool(keyed("issue_file", args.clone(), "k1"))
            .await
            .unwrap();
        assert_eq!(text(&first), r#"{"issue":1}"#);
        let again = client
            .call_tool(keyed("issue_file", args.clone(), "k1"))
            .await
            .unwrap();
        assert_eq!(text(&again), text(&first));
        let lookup = client
            .call_tool(keyed(
                "lookup",
                json!({"tool": "issue_file", "arguments": args}),
                "k1",
            ))
            .await
            .unwrap();
        assert_eq!(
            text(&lookup),
            r#"{"outcome":"found","response":{"issue":1}}"#
        );
        // The same key with other arguments: refused, as the HTTP 422.
        let reused = client
            .call_tool(keyed(
                "issue_file",
                json!({"title": "other", "body": "b"}),
                "k1",
            ))
            .await
            .unwrap_err();
        match reused {
            ServiceError::McpError(e) => assert_eq!(e.data, Some(json!({"code": "key_reused"}))),
            other => panic!("{other:?}"),
        }
        // No key on a keyed tracker: refused, as the HTTP 400.
        let p = CallToolRequestParams::new("issue_file").with_arguments(
            match json!({"title": "t", "body": "b"}) {
                Value::Object(o) => o,
                _ => unreachable!(),
            },
        );
        match client.call_tool(p).await.unwrap_err() {
            ServiceError::McpError(e) => {
                assert_eq!(e.data, Some(json!({"code": "missing_idempotency_key"})));
                // In MCP's words: the `_meta` field, not the HTTP header.
                assert!(
                    e.message
                        .contains("_meta field \"io.crashsweep/idempotency-key\""),
                    "{}",
                    e.message
                );
                assert!(!e.message.contains("header"), "{}", e.message);
            }
            other => panic!("{other:?}"),
        }
        // A fenced call: epoch 2 of run-1 files, then epoch 1 (a holder the
        // run has moved past) is refused as stale, even with a fresh key.
        let fenced = |key: &str, epoch: u64| {
            let mut p = keyed("issue_file", json!({"title": "f", "body": key}), key);
            let meta = &mut p.meta.as_mut().expect("keyed sets _meta").0 .0;
            meta.insert(tracker::wire::MCP_RUN_META.into(), json!("run-1"));
            meta.insert(tracker::wire::MCP_EPOCH_META.into(), json!(epoch));
            p
        };
        client.call_tool(fenced("k2", 2)).await.unwrap();
        match client.call_tool(fenced("k3", 1)).await.unwrap_err() {
            ServiceError::McpError(e) => {
                assert_eq!(
                    e.data,
                    Some(json!({"code": "stale_epoch"})),
                    "{}",
                    e.message
                )
            }
            other => panic!("{other:?}"),
        }
        client.cancel().await.unwrap();
    });
    // Two issues on disk: the first filed once, the fenced one once.
    let file: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("tracker.json")).unwrap())
            .unwrap();
    assert_eq!(file["issues"].as_array().unwrap().len(), 2, "{file}");
    let _ = Duration::ZERO;
}
