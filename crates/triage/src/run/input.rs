//! Phase 1 of a run: the input that can be checked without touching the
//! state directory (task, run ID, mode, prices, tracker URL, the options
//! that name a tool), so bad input creates nothing.

use agent::provider::Prices;
use durable::RunId;

use crate::exit::Failure;
use crate::live::Mode;
use crate::remote;
use crate::stored::{self, StoreUrl};
use crate::task::{self, Catalog, Task};
use crate::Cli;

/// What phase 1 read: the task named (if any), the mode the environment
/// asks for, and the model's prices.
pub(crate) struct Input {
    pub(crate) task: Option<Task>,
    pub(crate) env_mode: Mode,
    pub(crate) prices: Prices,
}

/// Check the input that needs no state directory: bad input is refused
/// before anything is created.
pub(crate) fn check_input(cli: &Cli, catalog: &Catalog) -> Result<Input, Failure> {
    let task = cli.task.as_deref().map(|n| catalog.get(n)).transpose()?;
    if let Some(id) = &cli.run {
        RunId::parse(id).map_err(Failure::from)?;
    }
    let env_mode = Mode::from_env(cli.model.as_deref(), |k| std::env::var(k).ok())
        .map_err(|e| Failure::usage("live", e.to_string()))?;
    let prices = Prices::parse(cli.price.as_deref().unwrap_or(""))
        .map_err(|e| Failure::usage("price", e.to_string()))?;
    if let Some(url) = &cli.tracker {
        remote::check_url(url)?;
    }
    for (option, tool) in tool_options(cli) {
        let known = task::tool_names();
        if !known.contains(tool) {
            return Err(
                Failure::usage("unknown_tool", format!("{option} {tool:?}: no such tool"))
                    .hint(format!("the tools are {}", known.join(", "))),
            );
        }
        if let Some(task) = &task {
            check_tool_option(task, option, tool)?;
        }
    }
    Ok(Input {
        task,
        env_mode,
        prices,
    })
}

/// The variables the command reads besides the provider's: a bad value is
/// refused (exit 2) before anything is created, not when a point or the
/// tracker first reads it.
pub(crate) fn check_env() -> Result<(), Failure> {
    remote::check_env()?;
    crate::stored::sqlite_busy()?;
    // Under a harness (`CRASHSWEEP_FD`) the variable is not read.
    if std::env::var_os("CRASHSWEEP_FD").is_none() {
        if let Some(at) = std::env::var_os("CRASHSWEEP_DIE_AT") {
            let at = at.to_string_lossy();
            at.parse::<crashpoint::Hit>().map_err(|e| {
                Failure::usage("usage", format!("CRASHSWEEP_DIE_AT={at:?}: {e}"))
                    .hint("write the point and its occurrence, as in CRASHSWEEP_DIE_AT='seeds filed#1', or unset it")
            })?;
        }
    }
    Ok(())
}

/// The options that name a tool: `--die-after`, `--signal-after`.
pub(crate) fn tool_options(cli: &Cli) -> impl Iterator<Item = (&'static str, &String)> {
    [
        ("--die-after", cli.die_after.as_ref()),
        ("--signal-after", cli.signal_after.as_ref()),
    ]
    .into_iter()
    .filter_map(|(option, tool)| tool.map(|t| (option, t)))
}

/// `--die-after TOOL` (and `--signal-after TOOL`) must name a tool the task
/// calls.
pub(crate) fn check_tool_option(task: &Task, option: &str, tool: &str) -> Result<(), Failure> {
    let tools = task.tools();
    if tools.contains(&tool) {
        return Ok(());
    }
    Err(Failure::usage(
        "unknown_tool",
        format!("{option} {tool}: task {} never calls {tool}", task.name),
    )
    .hint(format!("it calls {}", tools.join(", "))))
}

/// Where a run's store is, by `--store` and `--state`.
pub(crate) enum Store {
    /// A state directory: `--state DIR`, or `--store DIR` (then the flags
    /// rewritten to say `--state DIR`).
    Dir(Option<Box<Cli>>),
    /// A database store (`sqlite:PATH` or `postgres://…`).
    Database(StoreUrl),
}

/// Read `--store` against `--state` and `--lease-secs`: `--store DIR` is
/// `--state DIR`, and a lease is for a database store only.
pub(crate) fn store_of(cli: &Cli) -> Result<Store, Failure> {
    let parsed = cli.store.as_deref().map(StoreUrl::parse).transpose()?;
    if !matches!(parsed, Some(StoreUrl::Sqlite(_) | StoreUrl::Postgres(_)))
        && cli.lease_secs != stored::DEFAULT_LEASE_SECS
    {
        return Err(Failure::usage(
            "usage",
            "--lease-secs is for a database --store (sqlite:PATH or postgres://…): a directory's \
             runs are held by a lock file, with no lease to time out",
        )
        .hint("leave --lease-secs out, or run on a database store"));
    }
    Ok(match parsed {
        None => Store::Dir(None),
        Some(StoreUrl::Dir(dir)) => {
            if cli.state.as_ref().is_some_and(|s| *s != dir) {
                return Err(Failure::usage(
                    "usage",
                    "--store DIR and --state DIR name two directories: a directory store is its state directory",
                )
                .hint("pass one of them"));
            }
            let mut c = cli.clone();
            c.state = Some(dir);
            c.store = None;
            Store::Dir(Some(Box::new(c)))
        }
        Some(url) => Store::Database(url),
    })
}
