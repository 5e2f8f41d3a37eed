//! Outcome labels: for every crash, where the call in flight stood, and how
//! the restart settled it.
//!
//! The world follows the latest mutating call of each life through its
//! stages (decided, sent, answered, saved). When a life finds that the one
//! before it crashed, it takes the stage that call had reached as the crash's
//! label; the restart then settles it when it reaches that call: its result
//! was on file, its reply was lost and the model asked again, it was sent
//! again with no marker to warn, or a marker put it on the ladder (rerun
//! because harmless, or a person asked). The judge reports each crash as a
//! count `label <stage>/<settlement>` and a note in words, so the `--scenario`
//! timeline and the JSON report carry it, and [`summary`] counts them.

use agent::observe::Rung;
use agent::state::State;
use sweep::report::Table;
use sweep::Report;

/// Where the in-flight call stood when the life crashed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Stage {
    /// The life had started no call that changes the tracker.
    NoCall,
    /// The loop had decided on the call (and saved its marker, if it marks)
    /// but not sent it.
    NotSent,
    /// The request was sent; no answer had come back.
    Sent,
    /// The answer came back and was not yet saved.
    Acknowledged,
    /// The answer was saved.
    Recorded,
}

impl Stage {
    /// Every stage, in the order a call passes them.
    pub const ALL: [Stage; 5] = [
        Stage::NoCall,
        Stage::NotSent,
        Stage::Sent,
        Stage::Acknowledged,
        Stage::Recorded,
    ];

    /// The short name used in counts.
    pub fn slug(self) -> &'static str {
        match self {
            Stage::NoCall => "idle",
            Stage::NotSent => "not-sent",
            Stage::Sent => "sent",
            Stage::Acknowledged => "acked",
            Stage::Recorded => "recorded",
        }
    }

    /// In words.
    pub fn title(self) -> &'static str {
        match self {
            Stage::NoCall => "no call in flight",
            Stage::NotSent => "not sent",
            Stage::Sent => "sent, not acknowledged",
            Stage::Acknowledged => "acknowledged, not recorded",
            Stage::Recorded => "recorded",
        }
    }
}

/// How the restart settled the call the crash left in flight: before the
/// ladder (nothing to settle, on file, reply lost, made blind), on one of its
/// rungs ([`Rung`], the loop's own word for them), or never.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Settlement {
    /// No call was in flight.
    Nothing,
    /// The restart found the call's result in the checkpoint and skipped it.
    OnFile,
    /// The checkpoint did not hold the reply: the model was asked again.
    ReplyLost,
    /// The reply was on file, the result was not, and no marker said the
    /// call might have gone out: the loop made it (again) without a doubt.
    Blind,
    /// A marker put the call on the resolution ladder, and this rung settled
    /// it: [`Rung::Rerun`] when a repeat is harmless (a held key, or a read),
    /// [`Rung::Person`] when it is not. (The designs have no
    /// [`Rung::Lookup`]: the book chapter's designs ask the person, who looks
    /// the request up.)
    Rung(Rung),
    /// The scenario ended before the restart reached the call (the run
    /// stopped with an error).
    Unsettled,
}

impl Settlement {
    /// Every settlement the designs reach, in ladder order.
    pub const ALL: [Settlement; 7] = [
        Settlement::Nothing,
        Settlement::OnFile,
        Settlement::ReplyLost,
        Settlement::Blind,
        Settlement::Rung(Rung::Rerun),
        Settlement::Rung(Rung::Person),
        Settlement::Unsettled,
    ];

    /// The short name used in counts (a rung's is [`Rung::slug`]).
    pub fn slug(self) -> &'static str {
        match self {
            Settlement::Nothing => "nothing",
            Settlement::OnFile => "on-file",
            Settlement::ReplyLost => "re-asked",
            Settlement::Blind => "blind",
            Settlement::Rung(r) => r.slug(),
            Settlement::Unsettled => "unsettled",
        }
    }

    /// In words (a rung's as the loop's events say it: `rung 1 (rerun if
    /// harmless)`).
    pub fn title(self) -> String {
        match self {
            Settlement::Nothing => "nothing to settle".into(),
            Settlement::OnFile => "result on file, skipped".into(),
            Settlement::ReplyLost => "reply lost, model asked again".into(),
            Settlement::Blind => "no marker: made the call blind".into(),
            Settlement::Rung(r) => format!("rung {r}"),
            Settlement::Unsettled => "never settled: the run stopped".into(),
        }
    }
}

/// The count name of a label.
pub fn count_name(stage: Stage, rung: Settlement) -> String {
    format!("label {}/{}", stage.slug(), rung.slug())
}

/// The label a count name stands for.
pub fn parse_count_name(name: &str) -> Option<(Stage, Settlement)> {
    let (s, r) = name.strip_prefix("label ")?.split_once('/')?;
    let stage = Stage::ALL.into_iter().find(|x| x.slug() == s)?;
    let rung = Settlement::ALL.into_iter().find(|x| x.slug() == r)?;
    Some((stage, rung))
}

#[derive(Clone, Debug, Hash)]
struct Flight {
    call: String,
    turn: usize,
    stage: Stage,
}

/// One crash's label; `rung` is set once the restart settles it.
#[derive(Clone, Debug, Hash)]
pub(crate) struct Crash {
    call: Option<String>,
    turn: usize,
    stage: Stage,
    rung: Option<Settlement>,
}

/// The labels of one scenario, kept in its world.
#[derive(Clone, Debug, Default, Hash)]
pub(crate) struct Labels {
    flight: Option<Flight>,
    crashes: Vec<Crash>,
}

impl Labels {
    /// A life starts; if the previous one crashed, label that crash.
    pub(crate) fn boot(&mut self, crashed: bool) {
        if crashed {
            let crash = match self.flight.take() {
                Some(f) => Crash {
                    call: Some(f.call),
                    turn: f.turn,
                    stage: f.stage,
                    rung: None,
                },
                None => Crash {
                    call: None,
                    turn: 0,
                    stage: Stage::NoCall,
                    rung: Some(Settlement::Nothing),
                },
            };
            self.crashes.push(crash);
        }
        self.flight = None;
    }

    /// The mutating call `call` of turn `turn` (0-based) is now in flight.
    pub(crate) fn start(&mut self, call: &str, turn: usize) {
        self.flight = Some(Flight {
            call: call.to_owned(),
            turn,
            stage: Stage::NotSent,
        });
    }

    /// The call in flight reached `stage`.
    pub(crate) fn reach(&mut self, stage: Stage) {
        if let Some(f) = &mut self.flight {
            f.stage = stage;
        }
    }

    fn pending(&mut self) -> impl Iterator<Item = &mut Crash> {
        self.crashes.iter_mut().filter(|c| c.rung.is_none())
    }

    /// The restart settled `call` by `rung`.
    pub(crate) fn settle(&mut self, call: &str, rung: Settlement) {
        for c in self.pending() {
            if c.call.as_deref() == Some(call) {
                c.rung = Some(rung);
            }
        }
    }

    /// A life opened `st`: calls with a result on file are settled.
    pub(crate) fn opened(&mut self, st: &State) {
        for c in self.pending() {
            if c.call
                .as_ref()
                .is_some_and(|id| st.results.contains_key(id))
            {
                c.rung = Some(Settlement::OnFile);
            }
        }
    }

    /// The loop asks the model for turn `turn`: a call of this turn or a
    /// later one still unsettled had its reply lost.
    pub(crate) fn asking(&mut self, turn: usize) {
        for c in self.pending() {
            if c.turn >= turn {
                c.rung = Some(Settlement::ReplyLost);
            }
        }
    }

    /// Feed what decides how the rest of a life changes these labels to
    /// `h`: the call in flight, and each crash not settled yet (a settled
    /// crash only by its place: a tally the rest of the life never reads).
    pub(crate) fn hash_behaviour(&self, mut h: &mut dyn std::hash::Hasher) {
        use std::hash::Hash;
        let flight = self.flight.as_ref().map(|f| (&f.call, f.turn, f.stage));
        flight.hash(&mut h);
        h.write_usize(self.crashes.len());
        for c in &self.crashes {
            match c.rung {
                Some(_) => h.write_u8(0),
                None => (1u8, &c.call, c.turn, c.stage).hash(&mut h),
            }
        }
    }

    /// These labels (the end of a life that stood where another stands
    /// now with the same labels by [`Labels::hash_behaviour`]) with the
    /// crashes `now` had settled by then put back (crashes labelled since,
    /// at the boot of the life, are these labels' own); `None` if `now` has
    /// more crashes.
    pub(crate) fn grafted(&self, now: &Labels) -> Option<Labels> {
        if self.crashes.len() < now.crashes.len() {
            return None;
        }
        let mut out = self.clone();
        for (c, n) in out.crashes.iter_mut().zip(&now.crashes) {
            if n.rung.is_some() {
                *c = n.clone();
            }
        }
        Some(out)
    }

    /// Every crash as (stage, rung, call), unsettled ones as such.
    pub(crate) fn crashes(&self) -> impl Iterator<Item = (Stage, Settlement, Option<&str>)> {
        self.crashes.iter().map(|c| {
            (
                c.stage,
                c.rung.unwrap_or(Settlement::Unsettled),
                c.call.as_deref(),
            )
        })
    }
}

/// The summary table: for each label seen, how many crashes carried it in
/// each report (one column per report, titled as given). A scenario with two
/// crashes contributes two labels; the last row counts crashes.
pub fn summary(columns: &[(String, &Report)]) -> String {
    let mut header = vec!["where the call stood -> how the restart settled it".to_owned()];
    header.extend(columns.iter().map(|(t, _)| t.clone()));
    let tally = |r: &Report, stage: Stage, rung: Settlement| -> u64 {
        let name = count_name(stage, rung);
        r.scenarios.iter().map(|s| s.verdict.get(&name)).sum()
    };
    let mut table = Table::new(header);
    for stage in Stage::ALL {
        for rung in Settlement::ALL {
            let counts: Vec<u64> = columns.iter().map(|(_, r)| tally(r, stage, rung)).collect();
            if counts.iter().all(|n| *n == 0) {
                continue;
            }
            let mut row = vec![format!("{} -> {}", stage.title(), rung.title())];
            row.extend(counts.iter().map(u64::to_string));
            table.row(row);
        }
    }
    let mut total = vec!["crashes".to_owned()];
    total.extend(columns.iter().map(|(_, r)| {
        r.scenarios
            .iter()
            .map(|s| s.scenario.depth() as u64)
            .sum::<u64>()
            .to_string()
    }));
    table.row(total);
    table.text()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A crash settled on the ladder is named by the agent's own rung, in
    /// its words, and every settlement's count name parses back.
    #[test]
    fn a_ladder_settlement_is_named_by_the_agents_rung() {
        assert_eq!(
            Settlement::Rung(Rung::Rerun).title(),
            format!("rung {}", Rung::Rerun)
        );
        assert_eq!(
            Settlement::Rung(Rung::Person).title(),
            "rung 3 (ask a person)"
        );
        assert_eq!(
            count_name(Stage::Sent, Settlement::Rung(Rung::Rerun)),
            "label sent/rerun"
        );
        for stage in Stage::ALL {
            for s in Settlement::ALL {
                assert_eq!(parse_count_name(&count_name(stage, s)), Some((stage, s)));
            }
        }
    }
}
