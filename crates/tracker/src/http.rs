//! The tracker served over HTTP: the REST surface of the crate's README on
//! a [`Service`], with axum on tokio.
//!
//! Why axum: the MCP SDK (`rmcp`) runs on tokio, so the binary has tokio
//! anyway, and hyper underneath bounds what a client can make the server
//! hold — request heads over its buffer limit get `431`, garbage gets `400`
//! — where the small synchronous servers read a header line of any length
//! into memory. The tracker itself is synchronous (a mutex and synced file
//! writes), so each request runs on tokio's blocking pool.
//!
//! Every error is a JSON [`ErrorBody`]: a malformed body is `400`
//! (`malformed_body`, with serde's message saying what was wrong), an
//! oversized one `413` (`body_too_large`), and so on (see
//! [`Refusal::code`]). Nothing a client sends can make a handler panic: a
//! body is read to at most [`MAX_BODY_BYTES`](crate::wire::MAX_BODY_BYTES)
//! and parsed into typed requests before the tracker sees it.
//!
//! ```no_run
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use tracker::{http, service};
//! let svc = service::Service::open("/tmp/tracker".as_ref(), service::Options::keyed())?;
//! let server = http::spawn(svc, "127.0.0.1:0".parse()?)?;
//! println!("listening on http://{}", server.addr());
//! server.stop();
//! # Ok(())
//! # }
//! ```

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;

use axum::body::{Body, Bytes};
use axum::extract::rejection::{PathRejection, QueryRejection};
use axum::extract::{Path, Query, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use http_body_util::BodyExt;
use serde::de::DeserializeOwned;
use serde::Deserialize;

use crate::service::{Accepted, Refusal, Service};
use crate::wire::{self, ErrorBody, LookupRequest, NewComment, NewIssue};
use crate::{Fence, Request};

type Svc = Arc<Service>;

fn json_response(status: StatusCode, value: &impl serde::Serialize) -> Response {
    // Serialising our own plain structs cannot fail; if it ever did, say so
    // rather than panic.
    let bytes = serde_json::to_vec(value).unwrap_or_else(|e| {
        format!(r#"{{"error":"internal","message":"cannot serialise the answer: {e}"}}"#)
            .into_bytes()
    });
    (
        status,
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        )],
        bytes,
    )
        .into_response()
}

/// An error answer on its way out: small enough to pass in a `Result`.
struct Fail {
    status: StatusCode,
    body: Box<ErrorBody>,
}

impl IntoResponse for Fail {
    fn into_response(self) -> Response {
        json_response(self.status, &*self.body)
    }
}

fn error(status: StatusCode, code: &str, message: impl Into<String>) -> Fail {
    Fail {
        status,
        body: Box::new(ErrorBody {
            error: code.to_owned(),
            message: message.into(),
        }),
    }
}

fn refusal(r: &Refusal) -> Fail {
    let status = match r {
        Refusal::MissingKey | Refusal::BadKey(_) | Refusal::BadFence(_) => StatusCode::BAD_REQUEST,
        Refusal::StaleEpoch { .. } => StatusCode::PRECONDITION_FAILED,
        Refusal::KeyReused { .. } => StatusCode::UNPROCESSABLE_ENTITY,
        Refusal::InFlight { .. } => StatusCode::CONFLICT,
        Refusal::NoSuchIssue { .. } => StatusCode::NOT_FOUND,
        Refusal::Storage(_) => StatusCode::INTERNAL_SERVER_ERROR,
    };
    error(status, r.code(), r.to_string())
}

/// The key of a request: `Ok(None)` without the header, `Err` for a header
/// that is there but unusable (not UTF-8, not a string, sent twice).
fn key_of(headers: &HeaderMap) -> Result<Option<String>, Fail> {
    let mut values = headers.get_all(wire::IDEMPOTENCY_KEY_HEADER).iter();
    let Some(value) = values.next() else {
        return Ok(None);
    };
    let bad = |m: String| Err(refusal(&Refusal::BadKey(wire::KeyError::Malformed(m))));
    if values.next().is_some() {
        return bad("the header was sent more than once".into());
    }
    let Ok(text) = value.to_str() else {
        return bad("it is not printable ASCII".into());
    };
    wire::parse_key_header(text)
        .map(Some)
        .map_err(|e| refusal(&Refusal::BadKey(e)))
}

/// The fence of a request: `Ok(None)` without its headers, `Err` (`400`)
/// for headers that are there but unusable.
fn fence_of(headers: &HeaderMap) -> Result<Option<Fence>, Fail> {
    let one = |name: &str| -> Result<Option<&str>, Fail> {
        let mut values = headers.get_all(name).iter();
        let Some(v) = values.next() else {
            return Ok(None);
        };
        if values.next().is_some() {
            return Err(refusal(&Refusal::BadFence(format!(
                "{name} was sent more than once"
            ))));
        }
        v.to_str()
            .map(Some)
            .map_err(|_| refusal(&Refusal::BadFence(format!("{name} is not printable ASCII"))))
    };
    let (run, epoch) = (one(wire::RUN_HEADER)?, one(wire::EPOCH_HEADER)?);
    wire::parse_fence(run, epoch).map_err(|m| refusal(&Refusal::BadFence(m)))
}

/// Read a whole body of at most `MAX_BODY_BYTES`.
async fn read_body(headers: &HeaderMap, body: Body) -> Result<Bytes, Fail> {
    let limit = wire::MAX_BODY_BYTES;
    let too_large = |n: String| {
        error(
            StatusCode::PAYLOAD_TOO_LARGE,
            "body_too_large",
            format!("the body is {n} bytes; at most {limit} are accepted"),
        )
    };
    if let Some(len) = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok())
    {
        if len > limit as u64 {
            return Err(too_large(len.to_string()));
        }
    }
    match http_body_util::Limited::new(body, limit).collect().await {
        Ok(collected) => Ok(collected.to_bytes()),
        Err(e) if e.is::<http_body_util::LengthLimitError>() => {
            Err(too_large(format!("more than {limit}")))
        }
        Err(e) => Err(error(
            StatusCode::BAD_REQUEST,
            "malformed_body",
            format!("the body could not be read whole: {e}"),
        )),
    }
}

/// Parse a JSON body into `T`, or a `400` that quotes serde.
fn parse<T: DeserializeOwned>(bytes: &[u8], shape: &str) -> Result<T, Fail> {
    serde_json::from_slice(bytes).map_err(|e| {
        error(
            StatusCode::BAD_REQUEST,
            "malformed_body",
            format!("the body must be JSON of the form {shape}: {e}"),
        )
    })
}

async fn blocking<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> Result<T, Fail> {
    tokio::task::spawn_blocking(f).await.map_err(|e| {
        error(
            StatusCode::INTERNAL_SERVER_ERROR,
            "internal",
            format!("the request's task failed: {e}"),
        )
    })
}

async fn create(svc: Svc, req: Request, headers: &HeaderMap, key: Option<String>) -> Response {
    let fence = match fence_of(headers) {
        Ok(f) => f,
        Err(r) => return r.into_response(),
    };
    let result = blocking(move || svc.create_fenced(&req, key.as_deref(), fence.as_ref())).await;
    match result {
        Err(r) => r.into_response(),
        Ok(Err(refused)) => refusal(&refused).into_response(),
        Ok(Ok(Accepted { created, replayed })) => {
            let mut r = json_response(StatusCode::CREATED, &created);
            if replayed {
                r.headers_mut()
                    .insert(wire::REPLAYED_HEADER, HeaderValue::from_static("true"));
            }
            r
        }
    }
}

async fn post_issue(State(svc): State<Svc>, headers: HeaderMap, body: Body) -> Response {
    let key = match key_of(&headers) {
        Ok(k) => k,
        Err(r) => return r.into_response(),
    };
    let bytes = match read_body(&headers, body).await {
        Ok(b) => b,
        Err(r) => return r.into_response(),
    };
    let NewIssue { title, body } = match parse(&bytes, r#"{"title": "…", "body": "…"}"#) {
        Ok(b) => b,
        Err(r) => return r.into_response(),
    };
    create(svc, Request::FileIssue { title, body }, &headers, key).await
}

fn issue_number(path: Result<Path<String>, PathRejection>) -> Result<u64, Fail> {
    let bad = |what: String| {
        error(
            StatusCode::NOT_FOUND,
            "no_such_issue",
            format!("{what} is not an issue number (1, 2, 3, …)"),
        )
    };
    match path {
        Ok(Path(s)) => s
            .parse::<u64>()
            .ok()
            .filter(|n| *n > 0)
            .ok_or_else(|| bad(format!("{s:?}"))),
        Err(e) => Err(bad(e.body_text())),
    }
}

async fn post_comment(
    State(svc): State<Svc>,
    path: Result<Path<String>, PathRejection>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let issue = match issue_number(path) {
        Ok(n) => n,
        Err(r) => return r.into_response(),
    };
    let key = match key_of(&headers) {
        Ok(k) => k,
        Err(r) => return r.into_response(),
    };
    let bytes = match read_body(&headers, body).await {
        Ok(b) => b,
        Err(r) => return r.into_response(),
    };
    let NewComment { body } = match parse(&bytes, r#"{"body": "…"}"#) {
        Ok(b) => b,
        Err(r) => return r.into_response(),
    };
    create(svc, Request::Comment { issue, body }, &headers, key).await
}

async fn post_lookup(State(svc): State<Svc>, headers: HeaderMap, body: Body) -> Response {
    // A lookup reads only: a key that is there but unusable is just not held.
    let key = key_of(&headers).ok().flatten();
    let bytes = match read_body(&headers, body).await {
        Ok(b) => b,
        Err(r) => return r.into_response(),
    };
    let req: LookupRequest = match parse(
        &bytes,
        r#"{"op": "file_issue", "title": "…", "body": "…"} or {"op": "comment", "issue": N, "body": "…"}"#,
    ) {
        Ok(b) => b,
        Err(r) => return r.into_response(),
    };
    let req = Request::from(req);
    match blocking(move || svc.lookup(&req, key.as_deref())).await {
        Ok(answer) => json_response(StatusCode::OK, &answer),
        Err(r) => r.into_response(),
    }
}

async fn get_key(State(svc): State<Svc>, path: Result<Path<String>, PathRejection>) -> Response {
    let key = match path {
        Ok(Path(k)) => k,
        Err(e) => {
            return error(
                StatusCode::BAD_REQUEST,
                "bad_idempotency_key",
                e.body_text(),
            )
            .into_response()
        }
    };
    match blocking(move || svc.lookup_key(&key)).await {
        Ok(answer) => json_response(StatusCode::OK, &answer),
        Err(r) => r.into_response(),
    }
}

async fn get_issues(State(svc): State<Svc>) -> Response {
    match blocking(move || svc.issues()).await {
        Ok(issues) => json_response(StatusCode::OK, &issues),
        Err(r) => r.into_response(),
    }
}

#[derive(Deserialize)]
struct SearchQuery {
    q: String,
}

async fn get_search(
    State(svc): State<Svc>,
    query: Result<Query<SearchQuery>, QueryRejection>,
) -> Response {
    let q = match query {
        Ok(Query(SearchQuery { q })) => q,
        Err(e) => {
            return error(
                StatusCode::BAD_REQUEST,
                "bad_query",
                format!("GET /search needs ?q=TEXT: {}", e.body_text()),
            )
            .into_response()
        }
    };
    match blocking(move || svc.search(&q)).await {
        Ok(answer) => json_response(StatusCode::OK, &answer),
        Err(r) => r.into_response(),
    }
}

async fn get_config(State(svc): State<Svc>) -> Response {
    json_response(StatusCode::OK, &svc.config())
}

async fn not_found() -> Response {
    error(
        StatusCode::NOT_FOUND,
        "not_found",
        "no such route; see GET /config and the tracker's README",
    )
    .into_response()
}

async fn method_not_allowed() -> Response {
    error(
        StatusCode::METHOD_NOT_ALLOWED,
        "method_not_allowed",
        "this route does not take that method",
    )
    .into_response()
}

/// The service's routes (see the crate's README).
pub fn router(svc: Arc<Service>) -> Router {
    Router::new()
        .route("/config", get(get_config))
        .route("/issues", post(post_issue).get(get_issues))
        .route("/issues/{number}/comments", post(post_comment))
        .route("/search", get(get_search))
        .route("/lookup", post(post_lookup))
        .route("/keys/{key}", get(get_key))
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .with_state(svc)
}

/// Serve `svc` on `listener` until `shutdown` completes, then finish the
/// requests under way and return.
pub async fn serve(
    listener: tokio::net::TcpListener,
    svc: Arc<Service>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> io::Result<()> {
    axum::serve(listener, router(svc))
        .with_graceful_shutdown(shutdown)
        .await
}

/// A service running on a thread of its own, for tests and in-process
/// sweeps: it listens on a loopback address and stops on [`Running::stop`]
/// (or when dropped).
#[derive(Debug)]
pub struct Running {
    addr: SocketAddr,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<io::Result<()>>>,
}

impl Running {
    /// The address it listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://ADDR`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Stop listening, finish the requests under way, and wait for the
    /// thread; the service (and its directory lock) is dropped.
    pub fn stop(mut self) {
        self.shutdown();
    }

    fn shutdown(&mut self) {
        if let Some(tx) = self.stop.take() {
            let _already_gone = tx.send(());
        }
        if let Some(t) = self.thread.take() {
            let _result = t.join();
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// Start `svc` on `addr` on a new thread with its own tokio runtime.
pub fn spawn(svc: Service, addr: SocketAddr) -> io::Result<Running> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let listener = runtime.block_on(tokio::net::TcpListener::bind(addr))?;
    let addr = listener.local_addr()?;
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let svc = Arc::new(svc);
    let thread = std::thread::Builder::new()
        .name(format!("tracker-http-{addr}"))
        .spawn(move || {
            runtime.block_on(serve(listener, svc, async move {
                let _either = rx.await;
            }))
        })?;
    Ok(Running {
        addr,
        stop: Some(tx),
        thread: Some(thread),
    })
}
