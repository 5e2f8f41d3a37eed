//! `tracker`: the fake issue tracker as a service.
//!
//! ```text
//! tracker serve --dir DIR --addr 127.0.0.1:0 [--keyless] [--key-ttl-secs N] [--uncertain-lookup]
//! tracker mcp --dir DIR [--keyless] [--key-ttl-secs N] [--uncertain-lookup]
//! ```
//!
//! `serve` prints `listening on http://ADDR` as its first line and serves the
//! HTTP API of the crate's README until SIGTERM or SIGINT, then finishes the
//! requests under way and exits 0. `mcp` serves the same tracker's tools
//! over MCP on stdin/stdout until the client closes them (or SIGTERM).
#![forbid(unsafe_code)]

use std::io::Write;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};
use rmcp::ServiceExt;
use tracker::service::{Options, Service};
use tracker::Mode;

#[derive(Debug, Parser)]
#[command(
    name = "tracker",
    version,
    about = "The fake issue tracker as a service (HTTP or MCP)."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Serve the HTTP API on ADDR until SIGTERM.
    Serve {
        #[command(flatten)]
        common: Common,
        /// The address to listen on (a loopback address; port 0 picks one).
        #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:0")]
        addr: SocketAddr,
    },
    /// Serve the tracker's tools over MCP on stdin/stdout.
    Mcp {
        #[command(flatten)]
        common: Common,
    },
}

#[derive(Debug, Args)]
struct Common {
    /// The directory the records live in (tracker.json; created if missing).
    #[arg(long, value_name = "DIR")]
    dir: PathBuf,
    /// Ignore idempotency keys, like the keyless tracker.
    #[arg(long)]
    keyless: bool,
    /// How long keys are kept, in seconds (published at GET /config).
    #[arg(long, value_name = "N", default_value_t = 86_400)]
    key_ttl_secs: u64,
    /// Lookups by arguments answer cant_tell (a lagging search index).
    #[arg(long)]
    uncertain_lookup: bool,
    /// For chaos tests: hold every new request this long before recording
    /// it, so a kill can land while requests are in flight.
    #[arg(long, value_name = "MS", hide = true)]
    hold_ms: Option<u64>,
}

impl Common {
    fn open(&self) -> Result<Service, String> {
        let mut opts = if self.keyless {
            Options::keyless()
        } else {
            Options::keyed()
        };
        opts.key_ttl = Some(Duration::from_secs(self.key_ttl_secs));
        opts.uncertain_lookup = self.uncertain_lookup;
        if let Some(ms) = self.hold_ms {
            opts.hold = Some(Arc::new(move |_| {
                std::thread::sleep(Duration::from_millis(ms))
            }));
        }
        debug_assert!(
            opts.mode
                == if self.keyless {
                    Mode::Keyless
                } else {
                    Mode::Keyed
                }
        );
        Service::open(&self.dir, opts).map_err(|e| e.to_string())
    }
}

/// Install the SIGTERM and SIGINT handlers now (before anyone is told where
/// we listen), and resolve on the first of them.
fn stop_signal() -> Result<impl std::future::Future<Output = ()>, String> {
    use tokio::signal::unix::{signal, SignalKind};
    let handler = |kind: SignalKind, name: &str| {
        signal(kind).map_err(|e| format!("cannot install the {name} handler: {e}"))
    };
    let mut term = handler(SignalKind::terminate(), "SIGTERM")?;
    let mut int = handler(SignalKind::interrupt(), "SIGINT")?;
    Ok(async move {
        tokio::select! {
            _ = term.recv() => {}
            _ = int.recv() => {}
        }
    })
}

async fn serve(common: &Common, addr: SocketAddr) -> Result<(), String> {
    let stop = stop_signal()?;
    let svc = Arc::new(common.open()?);
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|e| format!("cannot listen on {addr}: {e}"))?;
    let local = listener
        .local_addr()
        .map_err(|e| format!("cannot read the address: {e}"))?;
    {
        let mut out = std::io::stdout().lock();
        writeln!(out, "listening on http://{local}")
            .and_then(|()| out.flush())
            .map_err(|e| format!("cannot write to stdout: {e}"))?;
    }
    tracker::http::serve(listener, svc, stop)
        .await
        .map_err(|e| format!("serving on {local}: {e}"))
}

/// Stdin, copied by a thread of its own into a pipe the runtime polls.
/// Tokio's own stdin reads on the runtime's blocking pool, and the runtime
/// waits for that read when it shuts down: a stop (SIGTERM) before the
/// client hung up would wait for ever. The copying thread instead ends with
/// the process.
fn stdin_reader() -> std::io::Result<tracker::mcp::Reader> {
    let (read, mut write) = std::io::pipe()?;
    std::thread::spawn(move || {
        // It ends when stdin does (the client hung up: the pipe closes and
        // the server sees the end) or the server closed the pipe.
        let _ = std::io::copy(&mut std::io::stdin().lock(), &mut write);
    });
    let read = tokio::net::unix::pipe::Receiver::from_owned_fd(read.into())?;
    Ok(Box::new(read))
}

async fn mcp(common: &Common) -> Result<(), String> {
    let stop = stop_signal()?;
    let svc = Arc::new(common.open()?);
    tracker::mcp::serve_until(
        tracker::mcp::McpServer::new(svc).into_dyn(),
        stdin_reader().map_err(|e| format!("cannot read stdin: {e}"))?,
        Box::new(tokio::io::stdout()),
        Box::pin(stop),
    )
    .await
    .map_err(|e| e.to_string())
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("tracker: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let result = runtime.block_on(async {
        match &cli.command {
            Command::Serve { common, addr } => serve(common, *addr).await,
            Command::Mcp { common } => mcp(common).await,
        }
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("tracker: {e}");
            ExitCode::FAILURE
        }
    }
}
