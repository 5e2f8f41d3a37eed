//! How long one `Checkpoint::save` takes, for a realistic run state, on a
//! real directory and in memory, with and without fsync.
//!
//! Run with `cargo bench -p durable`. Std only: for each configuration it
//! takes 11 samples of N saves and prints the median microseconds per save,
//! then the ratios that matter (what syncing costs; what the disk costs over
//! memory, which is why crash sweeps use `MemDir`).

use std::hint::black_box;
use std::sync::Arc;
use std::time::Instant;

use std::collections::BTreeMap;

use durable::testing::MemDir;
use durable::{Dir, DiskDir, Durable, Options, RunId};
use serde::{Deserialize, Serialize};

/// A state shaped like the agent loop's (the bench cannot depend on `agent`,
/// which depends on this crate): the same fields, the same JSON size.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
struct State {
    #[serde(skip)]
    run: String,
    phase: Phase,
    messages: Vec<Message>,
    usage: Usage,
    turns: u32,
    summary: Option<String>,
    calls: Vec<ToolCall>,
    results: BTreeMap<String, ToolResult>,
    attempts: BTreeMap<String, Attempt>,
    files: BTreeMap<String, String>,
}

impl Durable for State {}

impl State {
    fn record_file(&mut self, rel: &str, bytes: &[u8]) {
        self.files
            .insert(rel.to_owned(), durable::hash::sha256_hex(bytes));
    }
}

type Checkpoint = durable::Checkpoint<State>;

#[derive(Clone, Copy, Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
enum Phase {
    #[default]
    Model,
    Tools,
}

#[derive(Clone, Copy, Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
enum Role {
    #[default]
    User,
    Assistant,
    Tool,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
struct Message {
    role: Role,
    #[serde(skip_serializing_if = "String::is_empty")]
    text: String,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    calls: Vec<ToolCall>,
    #[serde(skip_serializing_if = "Option::is_none")]
    call_id: Option<String>,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
struct ToolCall {
    id: String,
    tool: String,
    args: String,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
struct ToolResult {
    output: String,
    is_error: bool,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
struct Attempt {
    key: Option<String>,
    approved: bool,
    at: u64,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
struct Usage {
    input_tokens: u64,
    output_tokens: u64,
    dollars: f64,
}

const SAMPLES: usize = 11;

/// A run part-way through: 20 messages, the last reply's 4 tool calls, their
/// results and attempt markers, a summary and two workspace files. Tool
/// outputs are the bulk, as in real runs (they hold what the agent read).
fn realistic_state(run: &RunId) -> State {
    let mut s = State {
        run: run.as_str().to_owned(),
        ..State::default()
    };
    s.phase = Phase::Tools;
    s.turns = 7;
    s.usage = Usage {
        input_tokens: 184_220,
        output_tokens: 9_310,
        dollars: 0.7342,
    };
    s.summary = Some("The user asked to triage crash groups 1-6. ".repeat(6));
    let log_line = "thread 'main' panicked at src/parser.rs:88:17: index out of bounds\n";
    let calls: Vec<ToolCall> = (1..=4)
        .map(|i| ToolCall {
            id: format!("toolu_01A{i:02}xYz"),
            tool: ["crash_read", "code_search", "code_patch", "issue_file"][i - 1].to_owned(),
            args: format!(
                r#"{{"group": {i}, "path": "src/parser.rs", "query": "index out of bounds"}}"#
            ),
        })
        .collect();
    s.messages.push(Message {
        role: Role::User,
        text: "Triage the crash groups in crashes.json: find each cause, patch it with a \
               test, and file one issue per cause."
            .to_owned(),
        ..Message::default()
    });
    for turn in 0..6 {
        let call = &calls[turn % calls.len()];
        s.messages.push(Message {
            role: Role::Assistant,
            text: format!("Looking at group {turn}: the stack points into the parser."),
            calls: vec![call.clone()],
            call_id: None,
        });
        s.messages.push(Message {
            role: Role::Tool,
            text: log_line.repeat(12),
            calls: vec![],
            call_id: Some(call.id.clone()),
        });
        s.messages.push(Message {
            role: Role::User,
            text: "continue".to_owned(),
            ..Message::default()
        });
    }
    s.messages.push(Message {
        role: Role::Assistant,
        text: "Four things to do for this group.".to_owned(),
        calls: calls.clone(),
        call_id: None,
    });
    assert_eq!(s.messages.len(), 20);
    for c in &calls {
        s.results.insert(
            c.id.clone(),
            ToolResult {
                output: log_line.repeat(10),
                is_error: false,
            },
        );
        s.attempts.insert(
            c.id.clone(),
            Attempt {
                key: Some(durable::key(run.as_str(), &c.id)),
                approved: true,
                ..Attempt::default()
            },
        );
    }
    s.calls = calls;
    s.record_file("src/parser.rs", &[b'x'; 4000]);
    s.record_file("tests/parser_crash.rs", &[b'y'; 800]);
    s
}

/// One configuration under test: an open checkpoint and its samples.
struct Config {
    name: &'static str,
    sync: bool,
    /// Saves per sample: fewer where each one waits for the disk.
    n: u32,
    checkpoint: Checkpoint,
    /// The state it saves (its own run, so each configuration has its lock).
    state: State,
    /// Microseconds per save, one entry per sample.
    samples: Vec<f64>,
}

impl Config {
    fn new(name: &'static str, dir: Arc<dyn Dir>, sync: bool, n: u32, state: State) -> Config {
        let run = RunId::parse(&state.run).expect("valid run ID");
        let opts = Options {
            sync,
            ..Options::default()
        };
        let mut checkpoint = Checkpoint::open(dir, &run, opts).expect("open").checkpoint;
        for _ in 0..n.min(10) {
            checkpoint.save(&state).expect("warm-up save");
        }
        Config {
            name,
            sync,
            n,
            checkpoint,
            state,
            samples: Vec::with_capacity(SAMPLES),
        }
    }

    fn sample(&mut self) {
        let start = Instant::now();
        for _ in 0..self.n {
            self.checkpoint.save(black_box(&self.state)).expect("save");
        }
        self.samples
            .push(start.elapsed().as_secs_f64() * 1e6 / f64::from(self.n));
    }

    fn median(&self) -> f64 {
        let mut sorted = self.samples.clone();
        sorted.sort_by(f64::total_cmp);
        sorted[sorted.len() / 2]
    }
}

fn main() {
    let run = RunId::parse("bench-1700000000-ab12cd34").expect("valid run ID");
    let state = realistic_state(&run);
    let bytes = serde_json::to_vec_pretty(&state).expect("serialise");
    let tmp = tempfile::tempdir().expect("tempdir");
    println!(
        "durable save: {} messages, {} calls, {} results, {} bytes of JSON; {SAMPLES} samples each; temp dir {}",
        state.messages.len(),
        state.calls.len(),
        state.results.len(),
        bytes.len(),
        tmp.path().display()
    );

    let disk = || -> Arc<dyn Dir> { Arc::new(DiskDir::new(tmp.path()).expect("disk dir")) };
    let mem = || -> Arc<dyn Dir> { Arc::new(MemDir::new()) };
    let with_run = |suffix: &str| State {
        run: format!("{}-{suffix}", run.as_str()),
        ..state.clone()
    };
    let mut configs = [
        Config::new("DiskDir", disk(), true, 20, with_run("disk-sync")),
        Config::new("DiskDir", disk(), false, 500, with_run("disk-nosync")),
        Config::new("MemDir", mem(), true, 2000, with_run("mem-sync")),
        Config::new("MemDir", mem(), false, 2000, with_run("mem-nosync")),
    ];
    // Round-robin, so that a burst of background load hits every
    // configuration alike instead of skewing one of them.
    for _ in 0..SAMPLES {
        for c in &mut configs {
            c.sample();
        }
    }
    for c in &configs {
        let sync = if c.sync { "on " } else { "off" };
        println!(
            "{:<8} sync {sync}  median {:>9.1} µs/save  ({} saves per sample)",
            c.name,
            c.median(),
            c.n
        );
    }
    let m: Vec<f64> = configs.iter().map(Config::median).collect();
    let [disk_sync, disk_nosync, mem_sync, mem_nosync] = m[..] else {
        unreachable!("four configurations")
    };
    println!(
        "ratio DiskDir sync on / off       {:>8.1}x",
        disk_sync / disk_nosync
    );
    println!(
        "ratio DiskDir / MemDir, sync off  {:>8.1}x",
        disk_nosync / mem_nosync
    );
    println!(
        "ratio DiskDir / MemDir, sync on   {:>8.1}x",
        disk_sync / mem_sync
    );
    println!(
        "ratio MemDir sync on / off        {:>8.2}x",
        mem_sync / mem_nosync
    );
}
