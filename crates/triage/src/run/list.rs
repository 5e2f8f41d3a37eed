//! `--list-tasks`: the catalog's tasks, one a line, name first.

use std::io::{self, Write};

use serde_json::json;

use super::Shared;
use crate::exit::{Exit, Failure};
use crate::output;
use crate::task::Catalog;

/// `--list-tasks`: one task a line, name first.
pub(crate) fn list_tasks(catalog: &Catalog, printer: &Shared) -> Result<Exit, Failure> {
    let tasks = catalog.all()?;
    let width = tasks.iter().map(|t| t.name.len()).max().unwrap_or(0);
    let p = output::lock(printer);
    for t in &tasks {
        let tools = t.tools();
        let line = format!(
            "{:<width$}  {} [{}; {} checks]",
            t.name,
            t.description,
            tools.join(", "),
            t.checks.len()
        );
        let value = json!({"name": t.name, "description": t.description,
                           "tools": tools, "approval": t.approval,
                           "calls": t.calls.len(), "checks": t.checks.len(),
                           "source": t.source});
        if p.is_json() {
            p.step("", "", value);
        } else {
            let mut out = io::stdout().lock();
            let _ = writeln!(out, "{line}");
        }
    }
    Ok(Exit::Done)
}
