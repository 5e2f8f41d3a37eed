//! A payouts job in Rust whose crash points speak the point protocol when
//! `crashsweep` runs it: the same job as the Python, Go and Node examples
//! under `clients/`, so the same judge serves it.
//!
//! It pays `alice`, `bob` and `carol` (10, 20, 30) from the current
//! directory: each payment appends a line to `ledger.txt` (the outside
//! world), then `state.json` (`{"next": k}`) is saved crash-safely. The
//! plain version has the at-least-once bug (a crash between a payment and
//! its save pays again on restart); `--fixed` gives each payment a key and
//! looks it up in the ledger first, as a receiver that honours keys would.
//!
//! It calls `crashpoint::ready()` first: under a fork server
//! (`crashsweep --fork-server`) every life is forked there.
//!
//! Flags for the harness's own tests: `--thread` passes each `paid` point on
//! a second thread; `--hang-on-restart` sleeps for ever in any life after
//! the first (a hung program for the time limit to kill);
//! `--thread-before-ready` starts a thread named `poller` before `ready()`,
//! and `--load-before-ready` reads `state.json` before it (both wrong under
//! a fork server, and refused).
//!
//! ```text
//! crashsweep --world <empty dir> --judge "python3 $PWD/clients/examples/judge.py" \
//!     -- target/debug/examples/payouts --fixed
//! ```

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::path::Path;

const PAYEES: [(&str, u32); 3] = [("alice", 10), ("bob", 20), ("carol", 30)];

fn main() -> std::io::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let fixed = args.iter().any(|a| a == "--fixed");
    let thread = args.iter().any(|a| a == "--thread");
    let hang = args.iter().any(|a| a == "--hang-on-restart");
    let early = match args.iter().any(|a| a == "--load-before-ready") {
        true => Some(load()?),
        false => None,
    };
    if args.iter().any(|a| a == "--thread-before-ready") {
        // Running (and so named) before ready() looks.
        let (started, running) = std::sync::mpsc::channel();
        std::thread::Builder::new()
            .name("poller".into())
            .spawn(move || {
                let _ = started.send(());
                loop {
                    std::thread::sleep(std::time::Duration::from_secs(3600));
                }
            })?;
        let _ = running.recv();
    }
    crashpoint::ready();
    if hang {
        if Path::new("started").exists() {
            crashpoint::point!("hanging");
            loop {
                std::thread::sleep(std::time::Duration::from_secs(3600));
            }
        }
        File::create("started")?.sync_all()?;
    }
    crashpoint::point!("start");
    let mut next = match early {
        Some(n) => n,
        None => load()?,
    };
    while next < PAYEES.len() {
        let (payee, amount) = PAYEES[next];
        let key = format!("{payee}-{next}");
        if !(fixed && paid(&key)?) {
            pay(payee, amount, fixed.then_some(&key))?;
        }
        if thread {
            crashpoint::join(std::thread::spawn(|| crashpoint::point!("paid")));
        } else {
            crashpoint::point!("paid");
        }
        next += 1;
        save(next)?;
    }
    println!("done");
    Ok(())
}

fn load() -> std::io::Result<usize> {
    match fs::read_to_string("state.json") {
        Ok(s) => {
            let n = s
                .trim()
                .trim_start_matches("{\"next\":")
                .trim_end_matches('}')
                .trim();
            n.parse()
                .map_err(|_| std::io::Error::other(format!("state.json is corrupt: {s:?}")))
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(0),
        Err(e) => Err(e),
    }
}

fn paid(key: &str) -> std::io::Result<bool> {
    match fs::read_to_string("ledger.txt") {
        Ok(s) => Ok(s.lines().any(|l| l.ends_with(&format!(" key={key}")))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(e),
    }
}

fn pay(payee: &str, amount: u32, key: Option<&String>) -> std::io::Result<()> {
    let mut f = OpenOptions::new()
        .create(true)
        .append(true)
        .open("ledger.txt")?;
    match key {
        Some(k) => writeln!(f, "{payee} {amount} key={k}")?,
        None => writeln!(f, "{payee} {amount}")?,
    }
    f.sync_all()
}

fn save(next: usize) -> std::io::Result<()> {
    let mut f = File::create("state.json.tmp")?;
    write!(f, "{{\"next\": {next}}}")?;
    f.sync_all()?;
    crashpoint::point!("mid-save");
    fs::rename("state.json.tmp", "state.json")?;
    File::open(".")?.sync_all()
}
