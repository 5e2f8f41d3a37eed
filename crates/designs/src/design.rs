//! The five designs of the comparison table: what each saves, and whether
//! it sends keys or writes markers. ([`Design::subject`], which makes one a
//! sweep subject, is with [`DesignSubject`](crate::DesignSubject).)

use crate::modes::Modes;

/// One version of the loop being compared.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Design {
    /// Saves only at the end of each turn: a crash mid-turn forgets the reply.
    SaveOncePerTurn,
    /// Saves the reply before running its calls, and each result.
    SaveAfterReply,
    /// As above, and sends an idempotency key the tracker honours.
    Keys,
    /// As above without keys, and writes a marker before each mutating call.
    Markers,
    /// Keys and markers: the design the chapter settles on.
    KeysMarkers,
}

impl Design {
    /// All five, in the table's order.
    pub const ALL: [Design; 5] = [
        Design::SaveOncePerTurn,
        Design::SaveAfterReply,
        Design::Keys,
        Design::Markers,
        Design::KeysMarkers,
    ];

    /// The row title of the book chapter's table.
    pub fn title(self) -> &'static str {
        match self {
            Design::SaveOncePerTurn => "save once per turn",
            Design::SaveAfterReply => "save after the reply",
            Design::Keys => "+ idempotency keys",
            Design::Markers => "+ attempt markers, no keys",
            Design::KeysMarkers => "keys and markers",
        }
    }

    /// The command-line name (`--variant`).
    pub fn slug(self) -> &'static str {
        match self {
            Design::SaveOncePerTurn => "save-once-per-turn",
            Design::SaveAfterReply => "save-after-reply",
            Design::Keys => "keys",
            Design::Markers => "markers",
            Design::KeysMarkers => "keys-markers",
        }
    }

    /// The design named by `slug`.
    pub fn from_slug(slug: &str) -> Option<Design> {
        Design::ALL.into_iter().find(|d| d.slug() == slug)
    }

    pub(crate) fn saves_each_step(self) -> bool {
        self != Design::SaveOncePerTurn
    }
    pub(crate) fn sends_keys(self) -> bool {
        matches!(self, Design::Keys | Design::KeysMarkers)
    }
    pub(crate) fn marks(self) -> bool {
        matches!(self, Design::Markers | Design::KeysMarkers)
    }
    /// The loop's points on branches this design never takes: the five
    /// designs share one loop, and only some save a marker or each result
    /// (`sweep::Subject::points_not_taken`).
    pub(crate) fn points_not_taken(self) -> Vec<&'static str> {
        let mut v = Vec::new();
        if !self.marks() {
            v.push("marker saved");
        }
        if !self.saves_each_step() {
            v.push("result saved");
        }
        v
    }
    /// Whether the design, run with `modes`, sends idempotency keys: its own
    /// or added by [`Modes::keys`].
    pub(crate) fn sends_keys_with(self, modes: &Modes) -> bool {
        self.sends_keys() || modes.keys
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each design is found by its own slug, and nothing else is one.
    #[test]
    fn a_slug_names_its_design() {
        for d in Design::ALL {
            assert_eq!(Design::from_slug(d.slug()), Some(d));
        }
        let slugs: Vec<&str> = Design::ALL.iter().map(|d| d.slug()).collect();
        assert_eq!(
            slugs,
            [
                "save-once-per-turn",
                "save-after-reply",
                "keys",
                "markers",
                "keys-markers"
            ]
        );
        for bad in ["", "Keys", "keys markers", "key"] {
            assert_eq!(Design::from_slug(bad), None, "{bad:?}");
        }
    }
}
