//! The variants of the loop's sweep: which tracker, which situation, and
//! whether crashes are power cuts.

use durable::testing::DiskState;

use crate::power::{Power, Writer, WRITERS};

/// The harder situation a variant adds to the plain job.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Situation {
    /// The job as it is.
    Plain,
    /// The tracker records the first request and then drops the connection,
    /// as an MCP server dying mid-call after the service acted.
    FailAfterAccept,
    /// `issue_file` waits for a person's yes.
    ApprovalGate,
}

/// One row of the loop's table: the triage job against a tracker that
/// honours keys or not, in a [`Situation`], with crashes as panics or as
/// power cuts. Its command line and row title follow from its parts
/// ([`LoopVariant::command_args`], [`LoopVariant::title`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct LoopVariant {
    /// Whether the tracker honours keys.
    pub keyed: bool,
    /// The situation.
    pub situation: Situation,
    /// `None`: crashes are panics, the checkpoint and the workspace are
    /// [`MemDir`](durable::testing::MemDir)s and saves are unsynced (the loop's
    /// table). `Some`: both are [`PowerDir`](durable::testing::PowerDir)s whose
    /// crashes are power cuts, saves are synced, and the judge also counts
    /// lost saves and stopped runs.
    pub power: Option<Power>,
}

/// The variant of `keyed` and `situation` whose crashes are panics.
pub const fn plain(keyed: bool, situation: Situation) -> LoopVariant {
    LoopVariant {
        keyed,
        situation,
        power: None,
    }
}

/// The six variants of the loop's table, in table order.
pub const VARIANTS: [LoopVariant; 6] = [
    plain(true, Situation::Plain),
    plain(false, Situation::Plain),
    plain(true, Situation::FailAfterAccept),
    plain(true, Situation::ApprovalGate),
    plain(false, Situation::FailAfterAccept),
    plain(false, Situation::ApprovalGate),
];

/// Every variant: the six of the loop's table ([`VARIANTS`]), then the
/// power-loss ones ([`power_variants`]).
pub fn variants() -> Vec<LoopVariant> {
    VARIANTS.iter().copied().chain(power_variants()).collect()
}

/// The power-loss variants: the plain job, keyed and keyless, for each
/// writer ([`WRITERS`](crate::WRITERS)) and each crash state ([`DiskState::ALL`]).
/// The real writer's titles are `loop keyed | power: <state>`; a
/// mutation's add ` | <writer>`.
pub fn power_variants() -> Vec<LoopVariant> {
    let mut v = Vec::new();
    for writer in WRITERS {
        for keyed in [true, false] {
            for state in DiskState::ALL {
                v.push(LoopVariant {
                    keyed,
                    situation: Situation::Plain,
                    power: Some(Power { state, writer }),
                });
            }
        }
    }
    v
}

impl LoopVariant {
    fn keys_word(self) -> &'static str {
        if self.keyed {
            "keyed"
        } else {
            "keyless"
        }
    }

    /// The command line that sweeps this variant alone, in composed form
    /// (`--variant loop-keyed --crash-state lose --mutation no-dir-fsync`):
    /// what a failure's rerun hint prints.
    pub fn command_args(self) -> String {
        let mut args = format!("--variant loop-{}", self.keys_word());
        match self.situation {
            Situation::Plain => {}
            Situation::FailAfterAccept => args.push_str(" --situation fail-after-accept"),
            Situation::ApprovalGate => args.push_str(" --situation approval-gate"),
        }
        if let Some(p) = self.power {
            args.push_str(&format!(" --crash-state {}", p.state.slug()));
            if p.writer != Writer::Real {
                args.push_str(&format!(" --mutation {}", p.writer.slug()));
            }
        }
        args
    }

    /// The row title: `loop keyed`, `loop keyless, approval gate`,
    /// `loop keyed | power: lose | no dir fsync`, …
    pub fn title(self) -> String {
        let mut title = format!("loop {}", self.keys_word());
        match self.situation {
            Situation::Plain => {}
            Situation::FailAfterAccept => title.push_str(", tool fails after accept"),
            Situation::ApprovalGate => title.push_str(", approval gate"),
        }
        if let Some(p) = self.power {
            title.push_str(&format!(" | power: {}", p.state.slug()));
            if p.writer != Writer::Real {
                title.push_str(&format!(" | {}", p.writer.title()));
            }
        }
        title
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn titles_and_commands_are_unique_and_name_their_parts() {
        let all = variants();
        let titles: std::collections::BTreeSet<String> = all.iter().map(|v| v.title()).collect();
        let commands: std::collections::BTreeSet<String> =
            all.iter().map(|v| v.command_args()).collect();
        assert_eq!(titles.len(), all.len());
        assert_eq!(commands.len(), all.len());
        let table: Vec<String> = VARIANTS.iter().map(|v| v.command_args()).collect();
        assert_eq!(
            table,
            [
                "--variant loop-keyed",
                "--variant loop-keyless",
                "--variant loop-keyed --situation fail-after-accept",
                "--variant loop-keyed --situation approval-gate",
                "--variant loop-keyless --situation fail-after-accept",
                "--variant loop-keyless --situation approval-gate"
            ]
        );
        let v = LoopVariant {
            keyed: false,
            situation: Situation::Plain,
            power: Some(Power {
                state: DiskState::LoseUnsynced,
                writer: Writer::NoDirSync,
            }),
        };
        assert_eq!(v.title(), "loop keyless | power: lose | no dir fsync");
        assert_eq!(
            v.command_args(),
            "--variant loop-keyless --crash-state lose --mutation no-dir-fsync"
        );
    }
}
