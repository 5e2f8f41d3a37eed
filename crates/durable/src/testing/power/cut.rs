//! The power cut itself: the two views of a [`PowerDir`](super::PowerDir)
//! (what a reader sees now, what the disk holds) with the unsynced
//! operations between them, and how a cut replaces the present by the
//! disk a [`DiskState`] or an enumerated plan keeps.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::io;
use std::sync::Arc;

use crate::testing::disk_state::DiskState;
use crate::testing::enumerate::{
    survivors, Contents, CutRecord, Names, Op, PersistenceModel, Space,
};

/// The plan and the log of an enumerating directory.
#[derive(Clone, Debug)]
pub(crate) struct Enumerated {
    pub(crate) model: PersistenceModel,
    /// The state each cut applies, in order of the cuts.
    pub(crate) plan: Vec<usize>,
    /// What each cut so far had to choose from.
    pub(crate) log: Vec<CutRecord>,
}

#[derive(Clone, Default)]
pub(crate) struct Inner {
    pub(crate) state: Option<DiskState>,
    /// `Some`: cuts apply enumerated states instead of `state`.
    pub(crate) enumerated: Option<Enumerated>,
    /// Names as a reader sees them now.
    pub(crate) names: BTreeMap<String, u64>,
    /// Contents as a reader sees them now; a node without an entry is empty.
    pub(crate) data: HashMap<u64, Arc<[u8]>>,
    /// Names as of the last `sync_dir`.
    pub(crate) durable_names: BTreeMap<String, u64>,
    /// Contents as of each file's last `sync`; absent means empty.
    pub(crate) durable_data: HashMap<u64, Arc<[u8]>>,
    /// Operations not yet made durable, oldest first.
    pub(crate) pending: Vec<Op>,
    pub(crate) next_node: u64,
    pub(crate) next_temp: u64,
    /// A process booted and has not shut down.
    pub(crate) running: bool,
    pub(crate) cuts: u64,
}

impl Inner {
    pub(crate) fn new_node(&mut self) -> u64 {
        self.next_node += 1;
        self.next_node
    }

    pub(crate) fn node(&self, name: &str) -> io::Result<u64> {
        self.names.get(name).copied().ok_or_else(|| not_found(name))
    }

    /// The disk after a cut in `state`: the durable views with the chosen
    /// unsynced operations applied in order.
    fn survivors(&self, state: DiskState) -> (Names, Contents) {
        survivors(
            state,
            &self.durable_names,
            &self.durable_data,
            &self.pending,
        )
    }

    pub(crate) fn cut(&mut self, state: DiskState) {
        let (names, data) = self.survivors(state);
        self.apply(names, data);
    }

    /// Cut the power in the next state of an enumerating directory's plan
    /// (state 0 when the plan is used up), and log the cut.
    fn cut_enumerated(&mut self) {
        let Some(en) = self.enumerated.as_ref() else {
            return;
        };
        let model = en.model;
        let want = en.plan.get(en.log.len()).copied().unwrap_or(0);
        let record = self.cut_choosing(&model, want);
        if let Some(en) = self.enumerated.as_mut() {
            en.log.push(record);
        }
    }

    /// Cut the power keeping state `want` (the last if there are fewer) of
    /// those `model` allows now.
    pub(crate) fn cut_choosing(&mut self, model: &PersistenceModel, want: usize) -> CutRecord {
        let space = Space::new(
            &self.durable_names,
            &self.durable_data,
            &self.pending,
            model,
        );
        let (disk, record) = space.choose(model, want);
        // No state at all cannot happen (the durable disk is one); if it
        // did, the durable views would be kept.
        let (names, data) = disk.unwrap_or_else(|| self.survivors(DiskState::LoseUnsynced));
        self.apply(names, data);
        record
    }

    /// A cut in the directory's own state or plan.
    pub(crate) fn cut_now(&mut self) {
        if self.enumerated.is_some() {
            self.cut_enumerated();
        } else {
            let state = self.state.unwrap_or(DiskState::LoseUnsynced);
            self.cut(state);
        }
    }

    fn apply(&mut self, names: Names, data: Contents) {
        let live: BTreeSet<u64> = names.values().copied().collect();
        let data: Contents = data
            .into_iter()
            .filter(|(n, d)| live.contains(n) && !d.is_empty())
            .collect();
        self.names = names.clone();
        self.durable_names = names;
        self.data = data.clone();
        self.durable_data = data;
        self.pending.clear();
        self.cuts += 1;
        debug_assert!(self.names == self.durable_names && self.pending.is_empty());
    }

    /// Forget contents nobody can reach any more: no name, durable name or
    /// pending operation refers to them.
    pub(crate) fn collect_garbage(&mut self) {
        let mut live: BTreeSet<u64> = self
            .names
            .values()
            .chain(self.durable_names.values())
            .copied()
            .collect();
        for op in &self.pending {
            match op {
                Op::Write { node, .. }
                | Op::Patch { node, .. }
                | Op::SetLen { node, .. }
                | Op::Create { node, .. } => {
                    live.insert(*node);
                }
                Op::Rename { .. } | Op::Remove { .. } => {}
            }
        }
        self.data.retain(|n, _| live.contains(n));
        self.durable_data.retain(|n, _| live.contains(n));
    }
}

pub(crate) fn not_found(name: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::NotFound,
        format!("power:/{name}: no such file"),
    )
}
