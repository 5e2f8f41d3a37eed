//! What a clean run of a process subject passes: its points with their
//! counts and the scenarios a sweep of each depth would run
//! ([`Process::list_points`](crate::process::Process::list_points)); and the check that two clean runs name
//! their I/O points alike (a random part in a path cannot be crashed at by
//! name).

use std::fmt;

use crate::process::builder::Process;
use crate::process::error::ProcessError;

/// The points of one clean run, in the order first passed, with how many
/// times each was passed ([`Process::list_points`](crate::process::Process::list_points)).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Listing {
    /// The subject.
    pub subject: String,
    /// Each point and its passes, in the order first passed.
    pub points: Vec<(String, u32)>,
    /// Every hit of the run, in order (`write state.json#2`).
    pub hits: Vec<String>,
    /// Each I/O point made by a thread or process after the first, with
    /// who made it (`thread 2`, by creation order; `main` for the first),
    /// in the order first passed. Named points say nothing of their thread.
    pub threads: Vec<(String, Vec<String>)>,
}

impl Listing {
    /// About how many scenarios a sweep of `depth` runs (the clean run
    /// included), as the sweep's budget estimates it: at most `n^k` at
    /// depth `k` for `n` hits when no restart passes more hits than the
    /// clean run.
    pub fn estimate(&self, depth: u32) -> u64 {
        1 + crate::plan::estimate_scenarios(self.hits.len(), depth, 1) as u64
    }
}

impl fmt::Display for Listing {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "{}: {} hits of {} points in a clean run",
            self.subject,
            self.hits.len(),
            self.points.len()
        )?;
        let width = self
            .points
            .iter()
            .map(|(p, _)| p.chars().count())
            .max()
            .unwrap_or(0);
        for (p, n) in &self.points {
            let pad = width - p.chars().count();
            write!(f, "  {p}{}  ×{n}", " ".repeat(pad))?;
            match self.threads.iter().find(|(q, _)| q == p) {
                Some((_, who)) => writeln!(f, "  on {}", who.join(", "))?,
                None => writeln!(f)?,
            }
        }
        writeln!(
            f,
            "scenarios: depth 1: {}, depth 2: at most {}, depth 3: at most {}",
            self.estimate(1),
            self.estimate(2),
            self.estimate(3)
        )
    }
}

impl Process {
    /// Run the program once to its end (no crash, a fresh world) and list
    /// the points it passes: named ones and, with
    /// [`Process::io_points`], I/O points. Nothing is judged.
    pub fn list_points(&self) -> Result<Listing, ProcessError> {
        if self.argv.is_empty() {
            return Err(ProcessError::NoProgram {
                subject: self.name.clone(),
            });
        }
        if self.io_points.is_some() {
            super::probe().map_err(|reason| ProcessError::Untraceable {
                subject: self.name.clone(),
                reason,
            })?;
        }
        // A fork server is checked before a forked life lists the points,
        // as before a sweep: a server that would be refused is refused
        // here too, by name.
        if self.fork.wanted && self.io_points.is_none() {
            self.check_fork_server()?;
        }
        let (hits, makers) = self.clean_hits()?;
        let mut points: Vec<(String, u32)> = Vec::new();
        for h in &hits {
            match points.iter_mut().find(|(p, _)| *p == h.point) {
                Some((_, n)) => *n += 1,
                None => points.push((h.point.to_string(), 1)),
            }
        }
        Ok(Listing {
            subject: self.name.clone(),
            points,
            hits: hits.iter().map(ToString::to_string).collect(),
            threads: threads_of(&makers),
        })
    }

    /// The hits of one clean run in a fresh world, and who made each I/O
    /// point's call (see `ProcessWorld::makers`).
    #[allow(clippy::type_complexity)]
    fn clean_hits(
        &self,
    ) -> Result<(Vec<crashpoint::Hit>, Vec<(String, Option<String>)>), ProcessError> {
        let mut world = self.try_world().map_err(|reason| ProcessError::World {
            subject: self.name.clone(),
            reason,
        })?;
        let discovery = |reason: String| ProcessError::Discovery {
            subject: self.name.clone(),
            reason,
        };
        let life = crashpoint::record(|| self.run_life(&mut world));
        match life.outcome {
            crashpoint::Outcome::Finished(r) => r.map_err(|e| discovery(e.to_string()))?,
            crashpoint::Outcome::Crashed(hit) => {
                return Err(discovery(format!("it was stopped at {hit}")))
            }
            crashpoint::Outcome::Panicked(m) => {
                return Err(discovery(format!("the harness panicked: {m}")))
            }
        }
        Ok((life.hits, std::mem::take(&mut world.makers)))
    }

    /// Two clean runs must name their points alike: a point whose name
    /// holds a random part is refused, naming the first such hit and the
    /// mask that would cover it. (Hits that only come in another order are
    /// left to the sweep's own check of clean runs.)
    pub(in crate::process) fn check_io_names(&self) -> Result<(), ProcessError> {
        let (a, _) = self.clean_hits()?;
        let (b, _) = self.clean_hits()?;
        let mut sa: Vec<&str> = a.iter().map(|h| h.point.as_ref()).collect();
        let mut sb: Vec<&str> = b.iter().map(|h| h.point.as_ref()).collect();
        sa.sort_unstable();
        sb.sort_unstable();
        if sa == sb {
            return Ok(());
        }
        // Compared as sets (threads may make their calls in any order): the
        // first hit of each run that the other did not pass.
        let lacking = |x: &[crashpoint::Hit], y: &[crashpoint::Hit]| {
            let y: std::collections::HashSet<&crashpoint::Hit> = y.iter().collect();
            x.iter().position(|h| !y.contains(h))
        };
        let (ia, ib) = (lacking(&a, &b), lacking(&b, &a));
        let step = ia.or(ib).unwrap_or(a.len().min(b.len()));
        let shown = |x: &[crashpoint::Hit], i: Option<usize>| {
            i.and_then(|i| x.get(i))
                .map_or("(no hit)".into(), ToString::to_string)
        };
        let (first, second) = (shown(&a, ia), shown(&b, ib));
        Err(ProcessError::IoNamesDiffer {
            subject: self.name.clone(),
            step: step + 1,
            suggestion: suggest_mask(&first, &second),
            first,
            second,
        })
    }
}

/// The I/O points of `makers` that a thread or process after the first
/// made, each with every maker (`main` for the first), in the order first
/// passed.
fn threads_of(makers: &[(String, Option<String>)]) -> Vec<(String, Vec<String>)> {
    let mut all: Vec<(String, Vec<String>)> = Vec::new();
    for (point, who) in makers {
        let who = who.clone().unwrap_or_else(|| "main".to_owned());
        match all.iter_mut().find(|(p, _)| p == point) {
            Some((_, w)) if !w.contains(&who) => w.push(who),
            Some(_) => {}
            None => all.push((point.clone(), vec![who])),
        }
    }
    all.retain(|(_, w)| w.iter().any(|x| x != "main"));
    all
}

/// A regular expression for the part where `a` and `b` differ: as many
/// letters, digits and `_` as that part has (`[A-Za-z0-9_]{6}`).
pub(crate) fn suggest_mask(a: &str, b: &str) -> String {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    let pre = a.iter().zip(&b).take_while(|(x, y)| x == y).count();
    let suf = a[pre..]
        .iter()
        .rev()
        .zip(b[pre..].iter().rev())
        .take_while(|(x, y)| x == y)
        .count();
    let len = a.len().saturating_sub(pre + suf).max(1);
    format!("[A-Za-z0-9_]{{{len}}}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_mask_is_suggested_for_the_differing_part() {
        assert_eq!(
            suggest_mask("rename tmpab12cd→s#1", "rename tmpxy98zz→s#1"),
            "[A-Za-z0-9_]{6}"
        );
    }

    #[test]
    fn a_listing_shows_counts_and_estimates() {
        let l = Listing {
            subject: "p".into(),
            points: vec![("write a".into(), 2), ("rename a.tmp→a".into(), 1)],
            hits: vec![
                "write a#1".into(),
                "write a#2".into(),
                "rename a.tmp→a#1".into(),
            ],
            threads: vec![("rename a.tmp→a".into(), vec!["thread 2".into()])],
        };
        assert_eq!(l.estimate(1), 4);
        assert_eq!(l.estimate(2), 13);
        let text = l.to_string();
        assert!(
            text.starts_with("p: 3 hits of 2 points in a clean run\n"),
            "{text}"
        );
        assert!(text.contains("  write a         ×2\n"), "{text}");
        assert!(
            text.contains("  rename a.tmp→a  ×1  on thread 2\n"),
            "{text}"
        );
        assert!(text.contains("depth 1: 4, depth 2: at most 13"), "{text}");
    }

    #[test]
    fn points_made_by_a_thread_after_the_first_name_every_maker() {
        let makers = [
            ("write log".to_owned(), None),
            ("write a".to_owned(), None),
            ("write log".to_owned(), Some("thread 2".to_owned())),
            ("write log".to_owned(), None),
            ("rename b.tmp→b".to_owned(), Some("thread 3".to_owned())),
        ];
        assert_eq!(
            threads_of(&makers),
            [
                (
                    "write log".to_owned(),
                    vec!["main".into(), "thread 2".into()]
                ),
                ("rename b.tmp→b".to_owned(), vec!["thread 3".into()]),
            ]
        );
    }
}
