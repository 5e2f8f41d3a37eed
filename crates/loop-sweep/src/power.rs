//! Power loss for the loop's sweep: the checkpoint directory and the
//! workspace are [`PowerDir`](durable::testing::PowerDir)s whose crashes are power cuts in a chosen
//! [`DiskState`](durable::testing::DiskState), the checkpoint written by the real writer or a mutation
//! of it, and a watch on the checkpoint file that sees a restart resume from
//! an older checkpoint than the last save that returned.
//!
//! The pattern is `designs`' harder worlds: a mutation is a directory wrapper that
//! drops one call of the shipped writer (`durable::write::write_atomic`, unchanged),
//! and each life boots the directories and shuts them down when it ends
//! without a crash, so a boot after a crash cuts the power first.

use std::sync::Arc;

use durable::testing::SaveWatch;
use durable::Dir;

pub use durable::testing::{Power, Writer};

/// The writers the loop's power-loss tables show, the real one first
/// ([`Writer::InPlace`] and [`Writer::RemoveFirst`] are left out of the
/// named states' tables; the enumerated sweep runs them).
pub const WRITERS: [Writer; 3] = [Writer::Real, Writer::NoFileSync, Writer::NoDirSync];

/// The agent state inside a checkpoint file's bytes, if they parse.
fn saved_state(bytes: &[u8]) -> Option<agent::state::State> {
    #[derive(serde::Deserialize)]
    struct File {
        state: agent::state::State,
    }
    serde_json::from_slice::<File>(bytes).ok().map(|f| f.state)
}

/// The checkpoint directory as the agent sees it, watched for lost saves
/// ([`SaveWatch`], outermost, over the power-loss directory or a mutant of
/// it): each lost save is noted with the agent state it held. A file that
/// does not parse is not counted (the life stops on it, and `stopped`
/// counts that).
pub(crate) fn watch(inner: Arc<dyn Dir>, run: Option<&durable::RunId>) -> SaveWatch {
    let watch = match run {
        Some(run) => SaveWatch::checkpoint(inner, run),
        None => SaveWatch::new(inner, format!("{}.json", crate::RUN)),
    };
    watch.describe_with(|bytes| {
        saved_state(bytes).map(|st| {
            format!(
                "phase {}, turns {}, {} message(s), {} marker(s) and {} \
                     result(s) for the last reply's {} call(s)",
                st.phase,
                st.turns,
                st.messages.len(),
                st.attempts.len(),
                st.results.len(),
                st.calls.len()
            )
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use durable::testing::{DiskState, PowerDir};
    use durable::write::{write_atomic, WriteOptions};

    const SYNCED: WriteOptions = WriteOptions {
        sync: true,
        points: false,
    };

    fn watched(writer: Writer, state: DiskState) -> (PowerDir, SaveWatch) {
        let dir = PowerDir::new(state);
        let run = durable::RunId::parse("r").unwrap();
        (dir.clone(), watch(writer.wrap(dir), Some(&run)))
    }

    fn state(turns: u32) -> Vec<u8> {
        let st = agent::state::State {
            turns,
            ..agent::state::State::default()
        };
        let file = serde_json::json!({"version": durable::checkpoint::FORMAT_VERSION, "run": "r", "state": st});
        serde_json::to_vec(&file).unwrap()
    }

    #[test]
    fn the_real_writer_loses_no_returned_save() {
        for s in DiskState::ALL {
            let (dir, w) = watched(Writer::Real, s);
            dir.boot();
            write_atomic(&w, "r.json", &state(1), SYNCED).unwrap();
            write_atomic(&w, "r.json", &state(2), SYNCED).unwrap();
            assert!(dir.boot(), "no shutdown: a power cut");
            w.boot();
            assert_eq!(w.read("r.json").unwrap(), Some(state(2)), "{s:?}");
            assert_eq!(w.lost(), 0, "{s:?}");
        }
    }

    #[test]
    fn a_writer_without_the_directory_fsync_loses_a_returned_save() {
        let (dir, w) = watched(Writer::NoDirSync, DiskState::LoseUnsynced);
        dir.boot();
        write_atomic(&w, "r.json", &state(1), SYNCED).unwrap();
        dir.power_cut();
        w.boot();
        assert_eq!(w.read("r.json").unwrap(), None);
        assert_eq!(w.lost(), 1);
        let notes = w.notes();
        assert!(
            notes[0].starts_with("a restart resumed from no checkpoint although a save of phase"),
            "{notes:?}"
        );
    }

    #[test]
    fn the_save_under_way_may_be_found_and_only_the_first_read_counts() {
        let (dir, w) = watched(Writer::Real, DiskState::Process);
        dir.boot();
        write_atomic(&w, "r.json", &state(1), SYNCED).unwrap();
        // A save dies after its rename, before the directory fsync.
        let t = w.create_temp(".r.json-").unwrap();
        w.write(&t, &state(2)).unwrap();
        w.rename(&t, "r.json").unwrap();
        w.boot();
        assert_eq!(w.read("r.json").unwrap(), Some(state(2)));
        dir.write("r.json", &state(7)).unwrap();
        assert_eq!(w.read("r.json").unwrap(), Some(state(7)));
        assert_eq!(w.lost(), 0);
    }
}
