use std::sync::{Arc, Mutex};

use axum::extract::{Path, State};
use axum::{routing::post, Router};
use crashpoint::{point, scope::Handle};
use sweep::{Config, Counter, LifeError, Subject, Verdict};

/// The bank's state: what it paid outlives every crash; `scope` is the life it serves.
#[derive(Clone, Default)]
struct Bank {
    paid: Arc<Mutex<Vec<u32>>>,
    scope: Arc<Mutex<Option<Handle>>>,
    keyed: bool,
}

/// `POST /pay/{invoice}`, on the server's threads, in the scope of the life it serves.
async fn pay(State(bank): State<Bank>, Path(invoice): Path<u32>) -> &'static str {
    let scope = bank.scope.lock().unwrap_or_else(|e| e.into_inner()).clone();
    crashpoint::task::scoped_in(scope, async move {
        let mut paid = bank.paid.lock().unwrap_or_else(|e| e.into_inner());
        if !(bank.keyed && paid.contains(&invoice)) {
            paid.push(invoice);
        }
        drop(paid);
        point!("bank paid"); // a crash here: paid, and the answer never leaves
        "paid"
    })
    .await
}

/// A fresh bank served on a port of its own, for one world.
struct World {
    bank: Bank,
    url: String,
    next: u32,                        // the job's progress
    _server: tokio::runtime::Runtime, // dropped with the world: the server stops
}

struct Payday {
    keyed: bool, // the fix: the bank refuses an invoice it has paid
}

impl Subject for Payday {
    type World = World;
    fn name(&self) -> String {
        format!(
            "payday over http{}",
            if self.keyed { ", keyed" } else { "" }
        )
    }
    fn counters(&self) -> Vec<Counter> {
        vec![Counter::new("paid twice").required()]
    }
    fn world(&self) -> Result<World, LifeError> {
        let bank = Bank {
            keyed: self.keyed,
            ..Bank::default()
        };
        let server = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_io()
            .build()?;
        let listener = server.block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))?;
        let url = format!("http://{}", listener.local_addr()?);
        let app = Router::new()
            .route("/pay/{invoice}", post(pay))
            .with_state(bank.clone());
        server.spawn(async move { axum::serve(listener, app).await });
        Ok(World {
            bank,
            url,
            next: 0,
            _server: server,
        })
    }
    fn life(&self, w: &mut World) -> Result<(), LifeError> {
        *w.bank.scope.lock().map_err(|_| "poisoned")? = crashpoint::scope::current();
        while w.next < 3 {
            ureq::post(&format!("{}/pay/{}", w.url, w.next)).send_empty()?;
            w.next += 1;
            point!("saved");
        }
        Ok(())
    }
    fn judge(&self, w: &World) -> Verdict {
        let paid = w.bank.paid.lock().unwrap_or_else(|e| e.into_inner());
        let twice = (0..3).filter(|i| paid.iter().filter(|p| *p == i).count() > 1);
        Verdict::new().count("paid twice", twice.count() as u64)
    }
}

fn main() {
    let keyed = std::env::args().any(|a| a == "--fixed");
    let report = sweep::run(&Payday { keyed }, &Config::default()).expect("a sweep");
    println!("{}", sweep::table(&[report.row()]));
}
