//! The tracer of a forked life (point protocol 3): the life is the fork
//! server's child, already running its program, so the tracer seizes it by
//! its pid and tells it so; the life installs its filter only then.

use std::io::Write;
use std::sync::mpsc::{self, Sender};
use std::sync::Arc;

use nix::sys::ptrace;
use nix::unistd::Pid;

use super::call::Names;
use super::select::IoPoints;
use super::tracer::{options, refusal, trace_to_end, Started, Tree};
use super::Event;

/// Trace `pid`, a life forked by a fork server (point protocol 3): a
/// tracer thread of its own seizes it with the tracer's options, then
/// writes `seized` to `go` (the harness's end of the life's point socket);
/// the life installs its filter only then. Events go to `events` as for
/// [`start`](super::tracer::start). `Err`: why it could not be seized (the life is not told to
/// go on: whoever forked it kills it).
///
/// The life is no child of the harness but its grandchild (the server's
/// child): Yama's `ptrace_scope` 1 allows the seize, since the harness is
/// its ancestor. Its exit is reported to the tracer first, as a child's is.
pub(super) fn attach(
    pid: u32,
    go: std::os::unix::net::UnixStream,
    io: Arc<IoPoints>,
    names: Names,
    events: Sender<Event>,
    tree: Tree,
) -> Result<Started, String> {
    let raw = i32::try_from(pid).map_err(|_| format!("pid {pid} is no process id"))?;
    let (seized_tx, seized_rx) = mpsc::channel::<Result<(), String>>();
    std::thread::Builder::new()
        .name("crashsweep-tracer".into())
        .spawn(move || {
            let main = Pid::from_raw(raw);
            if let Err(e) = ptrace::seize(main, options()) {
                let _ = seized_tx.send(Err(refusal(&std::io::Error::from_raw_os_error(e as i32))));
                return;
            }
            tree.insert(raw);
            if (&go).write_all(b"seized\n").is_err() {
                // It is gone already: its end is traced as any other.
                tree.kill_all();
            }
            drop(go);
            let _ = seized_tx.send(Ok(()));
            trace_to_end(main, false, &io, &names, &events, &tree);
        })
        .map_err(|e| format!("the tracer thread could not start: {e}"))?;
    match seized_rx.recv() {
        Ok(Ok(())) => Ok(Started { pid }),
        Ok(Err(why)) => Err(why),
        Err(_) => Err("the tracer thread ended before it seized the life".into()),
    }
}
