//! Limits over a run's whole life.

use crate::state::Usage;

use crate::error::Error;

/// What a run may spend, over its whole life: turns, tokens and dollars are
/// counted in the saved state, so a run that crashes every few turns cannot
/// start each life with a fresh budget. Each limit is checked before every
/// model call; reaching one stops the run with its own typed error
/// ([`Error::TurnLimit`](crate::Error::TurnLimit),
/// [`Error::TokenLimit`](crate::Error::TokenLimit),
/// [`Error::DollarLimit`](crate::Error::DollarLimit)). Restarts have their
/// own limit, [`durable::Options::max_resumes`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Limits {
    /// Model replies the run may get; `None`: no limit.
    pub max_turns: Option<u32>,
    /// Input plus output tokens the run may spend; `None`: no limit.
    pub max_tokens: Option<u64>,
    /// Dollars the run may spend; `None`: no limit.
    pub max_dollars: Option<f64>,
}

impl Limits {
    /// No limit at all (the loop is then bounded only by the model).
    pub const NONE: Limits = Limits {
        max_turns: None,
        max_tokens: None,
        max_dollars: None,
    };
}

impl Default for Limits {
    /// At most [`Limits::DEFAULT_MAX_TURNS`] turns, no token or dollar limit:
    /// every loop should be bounded, even when nobody set a budget.
    fn default() -> Self {
        Limits {
            max_turns: Some(Limits::DEFAULT_MAX_TURNS),
            ..Limits::NONE
        }
    }
}

impl Limits {
    /// The default turn limit.
    pub const DEFAULT_MAX_TURNS: u32 = 100;
}

impl Limits {
    /// Whether a run that has taken `turns` turns and spent `usage` may make
    /// another model call. The counts come from the saved state, so the
    /// limits cover every life.
    pub(crate) fn check(&self, turns: u32, usage: &Usage) -> Result<(), Error> {
        if let Some(limit) = self.max_turns {
            if turns >= limit {
                return Err(Error::TurnLimit { turns, limit });
            }
        }
        let tokens = usage.input_tokens.saturating_add(usage.output_tokens);
        if let Some(limit) = self.max_tokens {
            if tokens >= limit {
                return Err(Error::TokenLimit { tokens, limit });
            }
        }
        if let Some(limit) = self.max_dollars {
            if usage.dollars >= limit {
                return Err(Error::DollarLimit {
                    dollars: usage.dollars,
                    limit,
                });
            }
        }
        Ok(())
    }
}
