//! A model provider on the loopback address, for tests: an HTTP/1.1 server
//! on `127.0.0.1:0` that answers from scripted responses and counts the
//! requests it gets.
//!
//! A [`Script`] says what to answer. Responses listed with
//! [`Script::then_by_turn`] (or [`Script::by_turn`]) are picked by the
//! *turn* a request asks for — the number of assistant messages already in
//! its conversation — so a client that asks again for a turn whose reply it
//! lost gets the same reply, as a deterministic model would give; responses
//! listed with [`Script::first`] go to the first requests in order, whatever
//! they ask (a 429, a 500, a hang before the real answers). The server
//! speaks plain HTTP only; no TLS, no network beyond the loopback address.
//! It stops, and joins its threads, when dropped.
//!
//! [`openai`] and [`anthropic`] build response bodies in the two wire
//! formats, and turn a recorded transcript's replies into responses.
//!
//! ```
//! use std::io::{Read, Write};
//! use test_provider::{openai, Script, TestProvider};
//!
//! # fn main() -> std::io::Result<()> {
//! let server = TestProvider::start(Script::by_turn(vec![openai::completion("hello", &[], 3, 1)]))?;
//! let body = r#"{"messages": [{"role": "user", "content": "hi"}]}"#;
//! let mut conn = std::net::TcpStream::connect(server.addr())?;
//! write!(conn, "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}", body.len())?;
//! let mut answer = String::new();
//! conn.read_to_string(&mut answer)?;
//! assert!(answer.starts_with("HTTP/1.1 200 OK"));
//! assert!(answer.contains(r#""content":"hello""#));
//! assert_eq!(server.count(), 1);
//! assert_eq!(server.requests()[0].turn(), Some(0));
//! # Ok(())
//! # }
//! ```

#![deny(missing_docs)]
#![forbid(unsafe_code)]

use std::collections::VecDeque;
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::Duration;

use serde_json::Value;

pub mod anthropic;
pub mod openai;

/// What the server does with one request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Response {
    /// The HTTP status.
    pub status: u16,
    /// Extra headers (`Content-Type: application/json` and
    /// `Content-Length` are always sent).
    pub headers: Vec<(String, String)>,
    /// The body, sent as is (it need not be valid JSON).
    pub body: String,
    /// What to do instead of answering, if anything.
    pub fault: Option<Fault>,
}

/// A way not to answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    /// Read the request, then answer nothing and keep the connection open
    /// until the client gives up (its read timeout) or the server stops.
    Hang,
    /// Read the request, then close the connection without a word.
    Close,
}

impl Response {
    /// A response with `status` and a JSON `body`.
    pub fn json(status: u16, body: impl Into<String>) -> Response {
        Response {
            status,
            headers: Vec::new(),
            body: body.into(),
            fault: None,
        }
    }

    /// A `200 OK` with `body`.
    pub fn ok(body: impl Into<String>) -> Response {
        Response::json(200, body)
    }

    /// The same response with one more header.
    pub fn with_header(mut self, name: &str, value: &str) -> Response {
        self.headers.push((name.to_owned(), value.to_owned()));
        self
    }

    /// Read the request and never answer (see [`Fault::Hang`]).
    pub fn hang() -> Response {
        Response {
            fault: Some(Fault::Hang),
            ..Response::json(200, "")
        }
    }

    /// Read the request and close the connection (see [`Fault::Close`]).
    pub fn close() -> Response {
        Response {
            fault: Some(Fault::Close),
            ..Response::json(200, "")
        }
    }
}

/// What the server answers, request by request.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Script {
    first: VecDeque<Response>,
    turns: Vec<Response>,
}

impl Script {
    /// Answer the first requests with `responses`, in order, whatever they
    /// ask; later requests get a 400 naming the request (no script left).
    pub fn first(responses: Vec<Response>) -> Script {
        Script {
            first: responses.into(),
            turns: Vec::new(),
        }
    }

    /// Answer each request with the response for its turn (see
    /// [`Request::turn`]); a turn past the end gets a 400 naming it.
    pub fn by_turn(responses: Vec<Response>) -> Script {
        Script {
            first: VecDeque::new(),
            turns: responses,
        }
    }

    /// After the responses given to [`Script::first`], answer by turn.
    pub fn then_by_turn(mut self, responses: Vec<Response>) -> Script {
        self.turns = responses;
        self
    }

    fn answer(&mut self, request: &Request, number: usize) -> Response {
        if let Some(r) = self.first.pop_front() {
            return r;
        }
        match request.turn() {
            Some(turn) => self.turns.get(turn).cloned().unwrap_or_else(|| {
                openai::error(
                    400,
                    &format!(
                        "test provider: request {number} asks for turn {turn}; the script has {} turns",
                        self.turns.len()
                    ),
                )
            }),
            None => openai::error(
                400,
                &format!("test provider: request {number} has no \"messages\" array"),
            ),
        }
    }
}

/// One request the server received.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Request {
    /// `POST`, `GET`, …
    pub method: String,
    /// The request target, e.g. `/v1/chat/completions`.
    pub path: String,
    /// The headers, names in lower case, in the order sent.
    pub headers: Vec<(String, String)>,
    /// The body as text.
    pub body: String,
}

impl Request {
    /// The first header called `name` (any case).
    pub fn header(&self, name: &str) -> Option<&str> {
        let name = name.to_ascii_lowercase();
        self.headers
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| v.as_str())
    }

    /// The body parsed as JSON, if it is JSON.
    pub fn json(&self) -> Option<Value> {
        serde_json::from_str(&self.body).ok()
    }

    /// The turn the request asks for: how many messages of role
    /// `assistant` its `messages` array holds (the same in both wire
    /// formats). `None` if the body has no such array.
    pub fn turn(&self) -> Option<usize> {
        let body = self.json()?;
        let messages = body.get("messages")?.as_array()?;
        Some(
            messages
                .iter()
                .filter(|m| m.get("role").and_then(Value::as_str) == Some("assistant"))
                .count(),
        )
    }
}

struct Shared {
    script: Mutex<Script>,
    requests: Mutex<Vec<Request>>,
    stop: AtomicBool,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// A running test provider. Dropping it stops the server and joins its
/// threads.
pub struct TestProvider {
    addr: SocketAddr,
    shared: Arc<Shared>,
    accept: Option<JoinHandle<()>>,
}

impl std::fmt::Debug for TestProvider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TestProvider")
            .field("addr", &self.addr)
            .field("requests", &self.count())
            .finish()
    }
}

/// How often idle connection threads look at the stop flag.
const POLL: Duration = Duration::from_millis(20);

impl TestProvider {
    /// Bind `127.0.0.1:0` and serve `script` until dropped.
    pub fn start(script: Script) -> io::Result<TestProvider> {
        let listener = TcpListener::bind(("127.0.0.1", 0))?;
        let addr = listener.local_addr()?;
        let shared = Arc::new(Shared {
            script: Mutex::new(script),
            requests: Mutex::new(Vec::new()),
            stop: AtomicBool::new(false),
        });
        let s = Arc::clone(&shared);
        let accept = std::thread::Builder::new()
            .name("test-provider".into())
            .spawn(move || accept_loop(&listener, &s))?;
        Ok(TestProvider {
            addr,
            shared,
            accept: Some(accept),
        })
    }

    /// The address it listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The base URL an OpenAI-compatible client is given:
    /// `http://127.0.0.1:PORT/v1`.
    pub fn url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// How many requests it has received so far.
    pub fn count(&self) -> usize {
        lock(&self.shared.requests).len()
    }

    /// Every request received so far, in order.
    pub fn requests(&self) -> Vec<Request> {
        lock(&self.shared.requests).clone()
    }

    /// Replace the script (the request count is kept).
    pub fn set_script(&self, script: Script) {
        *lock(&self.shared.script) = script;
    }
}

impl Drop for TestProvider {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        // Wake the accept loop; it sees the flag and returns.
        let _ = TcpStream::connect(self.addr);
        if let Some(h) = self.accept.take() {
            let _ = h.join();
        }
    }
}

fn accept_loop(listener: &TcpListener, shared: &Arc<Shared>) {
    let mut conns: Vec<JoinHandle<()>> = Vec::new();
    for stream in listener.incoming() {
        if shared.stop.load(Ordering::SeqCst) {
            break;
        }
        let Ok(stream) = stream else { continue };
        let s = Arc::clone(shared);
        if let Ok(h) = std::thread::Builder::new()
            .name("test-provider-conn".into())
            .spawn(move || {
                let _ = serve(stream, &s);
            })
        {
            conns.push(h);
        }
        conns.retain(|h| !h.is_finished());
    }
    for h in conns {
        let _ = h.join();
    }
}

/// Read from `stream` into `buf` until it holds `want` bytes; `Ok(false)`
/// if the client closed first or the server is stopping.
fn fill(
    stream: &mut TcpStream,
    buf: &mut Vec<u8>,
    want: usize,
    shared: &Shared,
) -> io::Result<bool> {
    let mut chunk = [0u8; 8192];
    while buf.len() < want {
        if shared.stop.load(Ordering::SeqCst) {
            return Ok(false);
        }
        match stream.read(&mut chunk) {
            Ok(0) => return Ok(false),
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
            // The read timeout (a look at the stop flag), or a signal.
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock
                        | io::ErrorKind::TimedOut
                        | io::ErrorKind::Interrupted
                ) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(true)
}

fn find_head_end(buf: &[u8]) -> Option<usize> {
    buf.windows(4).position(|w| w == b"\r\n\r\n").map(|i| i + 4)
}

/// Read one request off the connection; `None` when the client closed.
fn read_request(
    stream: &mut TcpStream,
    buf: &mut Vec<u8>,
    shared: &Shared,
) -> io::Result<Option<Request>> {
    let head_end = loop {
        if let Some(end) = find_head_end(buf) {
            break end;
        }
        let want = buf.len() + 1;
        if !fill(stream, buf, want, shared)? {
            return Ok(None);
        }
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
    let mut lines = head.split("\r\n");
    let mut start = lines.next().unwrap_or_default().split(' ');
    let method = start.next().unwrap_or_default().to_owned();
    let path = start.next().unwrap_or_default().to_owned();
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    let len = headers
        .iter()
        .find(|(n, _)| n == "content-length")
        .and_then(|(_, v)| v.parse::<usize>().ok())
        .unwrap_or(0);
    if !fill(stream, buf, head_end + len, shared)? {
        return Ok(None);
    }
    let body = String::from_utf8_lossy(&buf[head_end..head_end + len]).into_owned();
    buf.drain(..head_end + len);
    Ok(Some(Request {
        method,
        path,
        headers,
        body,
    }))
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        529 => "Overloaded",
        _ => "Status",
    }
}

fn serve(mut stream: TcpStream, shared: &Shared) -> io::Result<()> {
    stream.set_read_timeout(Some(POLL))?;
    let mut buf = Vec::new();
    while let Some(request) = read_request(&mut stream, &mut buf, shared)? {
        let response = {
            let mut requests = lock(&shared.requests);
            requests.push(request.clone());
            let number = requests.len();
            lock(&shared.script).answer(&request, number)
        };
        match response.fault {
            Some(Fault::Close) => return Ok(()),
            Some(Fault::Hang) => {
                // Wait for the client to hang up (or the server to stop).
                let mut rest = Vec::new();
                let _ = fill(&mut stream, &mut rest, usize::MAX, shared);
                return Ok(());
            }
            None => {}
        }
        let mut out = format!(
            "HTTP/1.1 {} {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n",
            response.status,
            reason(response.status),
            response.body.len()
        );
        for (n, v) in &response.headers {
            out.push_str(&format!("{n}: {v}\r\n"));
        }
        out.push_str("\r\n");
        out.push_str(&response.body);
        stream.write_all(out.as_bytes())?;
        stream.flush()?;
        if request
            .header("connection")
            .is_some_and(|v| v.eq_ignore_ascii_case("close"))
        {
            return Ok(());
        }
    }
    Ok(())
}

/// The `replies` of a transcript file (the format `agent::model::Transcript`
/// reads), as `(text, calls as (id, tool, raw args), input tokens, output
/// tokens)`. `args` that are a JSON string are the raw text the model
/// wrote; an object is written out as JSON.
pub type TranscriptReply = (String, Vec<(String, String, String)>, u64, u64);

/// Read a transcript's replies; `Err` says what is wrong.
pub fn transcript_replies(json: &str) -> Result<Vec<TranscriptReply>, String> {
    let v: Value = serde_json::from_str(json).map_err(|e| format!("not JSON: {e}"))?;
    let replies = v
        .get("replies")
        .and_then(Value::as_array)
        .ok_or("no \"replies\" array")?;
    let mut out = Vec::with_capacity(replies.len());
    for r in replies {
        let text = r
            .get("text")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned();
        let mut calls = Vec::new();
        for c in r
            .get("calls")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let id = c.get("id").and_then(Value::as_str).unwrap_or("").to_owned();
            let tool = c
                .get("tool")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_owned();
            let args = match c.get("args") {
                None => "{}".to_owned(),
                Some(Value::String(raw)) => raw.clone(),
                Some(v) => v.to_string(),
            };
            calls.push((id, tool, args));
        }
        let usage = r.get("usage");
        let tokens = |k: &str| {
            usage
                .and_then(|u| u.get(k))
                .and_then(Value::as_u64)
                .unwrap_or(0)
        };
        out.push((text, calls, tokens("input_tokens"), tokens("output_tokens")));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A provider stopped (its threads joined) at the end of a test that
    /// passes, and left running when the test fails: a server that stopped
    /// answering fails the test instead of hanging it in the join.
    struct Served(Option<TestProvider>);

    impl Served {
        fn start(script: Script) -> Served {
            Served(Some(TestProvider::start(script).unwrap()))
        }
    }

    impl std::ops::Deref for Served {
        type Target = TestProvider;
        fn deref(&self) -> &TestProvider {
            self.0
                .as_ref()
                .expect("the provider runs until the test ends")
        }
    }

    impl Drop for Served {
        fn drop(&mut self) {
            if let Some(p) = self.0.take() {
                if std::thread::panicking() {
                    std::mem::forget(p);
                }
            }
        }
    }

    /// A connection that gives up waiting for an answer after 10 s.
    fn connect(addr: SocketAddr) -> TcpStream {
        let conn = TcpStream::connect(addr).unwrap();
        conn.set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        conn
    }

    /// Send `body` with `Connection: close` and read the whole answer.
    fn post(addr: SocketAddr, body: &str) -> String {
        let mut conn = connect(addr);
        write!(
            conn,
            "POST /v1/chat/completions HTTP/1.1\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        )
        .unwrap();
        read_to_close(&mut conn)
    }

    /// Read until the server closes the connection, at most 1 MiB: a
    /// server that answers without end fails the test instead of filling
    /// memory.
    fn read_to_close(conn: &mut TcpStream) -> String {
        let mut answer = String::new();
        conn.take(1 << 20).read_to_string(&mut answer).unwrap();
        assert!(answer.len() < 1 << 20, "the server does not stop answering");
        answer
    }

    /// Read one answer off a kept-alive connection: its head and its body
    /// (by `Content-Length`).
    fn read_answer(conn: &mut TcpStream) -> (String, String) {
        let mut head = Vec::new();
        let mut byte = [0u8; 1];
        while !head.ends_with(b"\r\n\r\n") {
            conn.read_exact(&mut byte).unwrap();
            head.push(byte[0]);
        }
        let head = String::from_utf8(head).unwrap();
        let len: usize = head
            .lines()
            .find_map(|l| l.strip_prefix("Content-Length: "))
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("no Content-Length in {head:?}"));
        let mut body = vec![0u8; len];
        conn.read_exact(&mut body).unwrap();
        (head, String::from_utf8(body).unwrap())
    }

    /// Wait until the server has received `n` requests.
    fn wait_for(server: &TestProvider, n: usize) {
        for _ in 0..10_000 {
            if server.count() >= n {
                return;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        panic!("the server got {} requests, not {n}", server.count());
    }

    const TURN0: &str = r#"{"messages": [{"role": "user", "content": "x"}]}"#;
    const TURN1: &str =
        r#"{"messages": [{"role": "user"}, {"role": "assistant"}, {"role": "tool"}]}"#;

    #[test]
    fn first_then_by_turn_and_counts() {
        let server = Served::start(
            Script::first(vec![
                openai::error(429, "slow down").with_header("Retry-After", "1")
            ])
            .then_by_turn(vec![
                openai::completion("a", &[("c1", "search", "{}")], 1, 1),
                openai::completion("b", &[], 1, 1),
            ]),
        );
        let (turn0, turn1) = (TURN0, TURN1);
        let first = post(server.addr(), turn0);
        assert!(
            first.starts_with("HTTP/1.1 429 Too Many Requests\r\n"),
            "{first}"
        );
        assert!(first.contains("Retry-After: 1\r\n"), "{first}");
        assert!(post(server.addr(), turn1).contains(r#""content":"b""#));
        assert!(post(server.addr(), turn0).contains(r#""content":"a""#));
        let past = post(
            server.addr(),
            r#"{"messages": [{"role": "assistant"}, {"role": "assistant"}]}"#,
        );
        assert!(past.starts_with("HTTP/1.1 400"), "{past}");
        assert!(
            past.contains("request 4 asks for turn 2; the script has 2 turns"),
            "{past}"
        );
        assert_eq!(server.count(), 4);
        let turns: Vec<Option<usize>> = server.requests().iter().map(Request::turn).collect();
        assert_eq!(turns, [Some(0), Some(1), Some(0), Some(2)]);
    }

    #[test]
    fn transcript_replies_keep_raw_args() {
        let r = transcript_replies(
            r#"{"replies": [{"text": "t", "calls": [{"id": "c1", "tool": "x", "args": {"a": 1}},
                {"id": "c2", "tool": "x", "args": "{bad"}], "usage": {"input_tokens": 5}}, {"text": "done"}]}"#,
        )
        .unwrap();
        assert_eq!(r[0].1[0].2, r#"{"a":1}"#);
        assert_eq!(r[0].1[1].2, "{bad");
        assert_eq!((r[0].2, r[0].3), (5, 0));
        assert_eq!(r[1].0, "done");
        assert!(transcript_replies("{}").is_err());
    }

    #[test]
    fn reason_phrases_follow_the_status() {
        for (status, phrase) in [
            (200, "OK"),
            (400, "Bad Request"),
            (401, "Unauthorized"),
            (403, "Forbidden"),
            (404, "Not Found"),
            (429, "Too Many Requests"),
            (500, "Internal Server Error"),
            (502, "Bad Gateway"),
            (503, "Service Unavailable"),
            (529, "Overloaded"),
            (418, "Status"),
        ] {
            assert_eq!(reason(status), phrase, "{status}");
        }
        let server = Served::start(Script::first(vec![openai::error(503, "later")]));
        let answer = post(server.addr(), TURN0);
        assert!(
            answer.starts_with("HTTP/1.1 503 Service Unavailable\r\n"),
            "{answer}"
        );
    }

    #[test]
    fn a_request_has_its_headers_body_and_turn() {
        let request = |body: &str| Request {
            method: "POST".into(),
            path: "/v1/messages".into(),
            headers: vec![
                ("x-api-key".into(), "k1".into()),
                ("retry".into(), "a".into()),
                ("retry".into(), "b".into()),
            ],
            body: body.into(),
        };
        let r = request(
            r#"{"messages": [{"role": "assistant"}, {"role": "user"}, {"role": "assistant"}, {"role": "tool"}, {}]}"#,
        );
        assert_eq!(r.header("X-Api-Key"), Some("k1"));
        assert_eq!(r.header("retry"), Some("a"));
        assert_eq!(r.header("authorization"), None);
        assert_eq!(
            r.json()
                .and_then(|v| v["messages"].as_array().map(Vec::len)),
            Some(5)
        );
        assert_eq!(r.turn(), Some(2));
        assert_eq!(request(r#"{"messages": []}"#).turn(), Some(0));
        assert_eq!(
            request(r#"{"messages": [{"role": "user"}]}"#).turn(),
            Some(0)
        );
        assert_eq!(
            request(r#"{"messages": [{"role": "assistant"}]}"#).turn(),
            Some(1)
        );
        assert_eq!(request(r#"{"messages": "no"}"#).turn(), None);
        assert_eq!(request(r#"{"input": []}"#).turn(), None);
        assert_eq!(request("not json").json(), None);
        assert_eq!(request("not json").turn(), None);
    }

    #[test]
    fn a_request_without_messages_gets_a_400_naming_it() {
        let server = Served::start(Script::by_turn(vec![openai::completion("a", &[], 1, 1)]));
        let answer = post(server.addr(), "not json");
        assert!(
            answer.starts_with("HTTP/1.1 400 Bad Request\r\n"),
            "{answer}"
        );
        assert!(
            answer.contains(r#"request 1 has no \"messages\" array"#),
            "{answer}"
        );
        assert!(post(server.addr(), TURN0).contains(r#""content":"a""#));
        assert_eq!(server.count(), 2);
    }

    #[test]
    fn close_and_hang_read_the_request_and_answer_nothing() {
        assert_eq!(Response::close().fault, Some(Fault::Close));
        assert_eq!(Response::hang().fault, Some(Fault::Hang));
        let server = Served::start(
            Script::first(vec![Response::close(), Response::hang()])
                .then_by_turn(vec![openai::completion("after", &[], 1, 1)]),
        );
        // Closed without a word.
        assert_eq!(post(server.addr(), TURN0), "");
        assert_eq!(server.count(), 1);
        // Hung: the request is read, and nothing comes back while the
        // server serves others.
        let mut hung = connect(server.addr());
        write!(
            hung,
            "POST /v1/chat/completions HTTP/1.1\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{TURN0}",
            TURN0.len()
        )
        .unwrap();
        wait_for(&server, 2);
        assert!(post(server.addr(), TURN0).contains(r#""content":"after""#));
        assert_eq!(server.count(), 3);
        assert_eq!(server.requests()[1].body, TURN0);
        // Stopping the server ends the hung connection, still unanswered.
        drop(server);
        assert_eq!(read_to_close(&mut hung), "");
    }

    #[test]
    fn a_kept_alive_connection_is_served_request_by_request() {
        let server = Served::start(Script::by_turn(vec![
            openai::completion("a", &[], 1, 1),
            openai::completion("b", &[], 1, 1),
        ]));
        let mut conn = connect(server.addr());
        let send = |conn: &mut TcpStream, extra: &str, body: &str| {
            write!(
                conn,
                "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n{extra}Content-Length: {}\r\n\r\n{body}",
                body.len()
            )
            .unwrap();
        };
        send(&mut conn, "X-Test: one\r\n", TURN0);
        let (head, body) = read_answer(&mut conn);
        assert!(head.starts_with("HTTP/1.1 200 OK\r\n"), "{head}");
        assert!(body.contains(r#""content":"a""#), "{body}");
        // Idle for longer than the server's poll: the connection stays.
        std::thread::sleep(POLL * 5);
        send(&mut conn, "", TURN1);
        assert!(read_answer(&mut conn).1.contains(r#""content":"b""#));
        // Two requests in one write, the first with a body larger than
        // one read.
        let big = format!(
            r#"{{"messages": [{{"role": "user", "content": "{}"}}]}}"#,
            "x".repeat(20_000)
        );
        let mut both = Vec::new();
        for body in [big.as_str(), TURN1] {
            write!(
                both,
                "POST /v1/messages HTTP/1.1\r\nContent-Length: {}\r\n\r\n{body}",
                body.len()
            )
            .unwrap();
        }
        conn.write_all(&both).unwrap();
        assert!(read_answer(&mut conn).1.contains(r#""content":"a""#));
        assert!(read_answer(&mut conn).1.contains(r#""content":"b""#));
        // `Connection: close`: answered, then closed.
        send(&mut conn, "Connection: Close\r\n", TURN0);
        let rest = read_to_close(&mut conn);
        assert!(rest.starts_with("HTTP/1.1 200 OK\r\n"), "{rest}");
        assert!(
            rest.ends_with(&format!(
                "\r\n\r\n{}",
                openai::completion("a", &[], 1, 1).body
            )),
            "{rest}"
        );

        let got = server.requests();
        let bodies: Vec<&str> = got.iter().map(|r| r.body.as_str()).collect();
        assert_eq!(bodies, [TURN0, TURN1, big.as_str(), TURN1, TURN0]);
        assert_eq!(got[0].method, "POST");
        assert_eq!(got[0].path, "/v1/chat/completions");
        assert_eq!(got[2].path, "/v1/messages");
        assert_eq!(got[0].header("x-test"), Some("one"));
        assert_eq!(got[1].header("x-test"), None);
        assert_eq!(
            got[2].header("content-length"),
            Some(big.len().to_string().as_str())
        );
    }

    #[test]
    fn url_debug_count_and_a_new_script() {
        let server = Served::start(Script::by_turn(vec![openai::completion("a", &[], 1, 1)]));
        let addr = server.addr();
        assert_eq!(addr.ip(), std::net::Ipv4Addr::LOCALHOST);
        assert_ne!(addr.port(), 0);
        assert_eq!(server.url(), format!("http://127.0.0.1:{}/v1", addr.port()));
        assert_eq!(server.count(), 0);
        assert_eq!(
            format!("{:?}", *server),
            format!("TestProvider {{ addr: {addr}, requests: 0 }}")
        );
        assert!(post(addr, TURN0).contains(r#""content":"a""#));
        server.set_script(Script::first(vec![openai::error(500, "down")]));
        let answer = post(addr, TURN0);
        assert!(
            answer.starts_with("HTTP/1.1 500 Internal Server Error\r\n"),
            "{answer}"
        );
        // The count is kept across scripts.
        assert_eq!(server.count(), 2);
        assert_eq!(server.requests().len(), 2);
        assert!(format!("{:?}", *server).ends_with("requests: 2 }"));
    }

    #[test]
    fn dropping_the_provider_closes_its_port() {
        let server = TestProvider::start(Script::default()).unwrap();
        let addr = server.addr();
        drop(server);
        let e = TcpStream::connect(addr).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::ConnectionRefused);
    }
}
