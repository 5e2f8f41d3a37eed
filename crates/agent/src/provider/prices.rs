//! What a model's tokens cost, so a reply's usage becomes dollars and the
//! run's dollar limit means something.

use std::collections::BTreeMap;

/// A model's price in US dollars per million tokens.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Price {
    /// Dollars per million input (prompt) tokens.
    pub input_per_mtok: f64,
    /// Dollars per million output (completion) tokens.
    pub output_per_mtok: f64,
}

impl Price {
    /// What `input` and `output` tokens cost at this price.
    pub fn dollars(self, input: u64, output: u64) -> f64 {
        (input as f64 * self.input_per_mtok + output as f64 * self.output_per_mtok) / 1e6
    }
}

/// Prices by model name.
///
/// A model is found by its exact name, else by the longest name in the
/// table it starts with followed by `-` (so `gpt-4o-mini-2024-07-18` costs
/// what `gpt-4o-mini` costs, not what `gpt-4o` costs). A model not in the
/// table costs nothing: its tokens still count against the token limit, but
/// the dollar limit cannot see it, so give its price with [`Prices::with`]
/// (or the `triage` command's `--price`).
///
/// [`Prices::default`] holds list prices of some widely used models, as
/// published in 2025; they change, so override them for real budgets.
///
/// ```
/// use agent::provider::{Price, Prices};
///
/// let prices = Prices::default().with("my-local-model", Price { input_per_mtok: 0.0, output_per_mtok: 0.0 });
/// assert_eq!(prices.dollars("gpt-4o-mini-2024-07-18", 1_000_000, 0), 0.15);
/// assert_eq!(prices.dollars("unknown", 1_000_000, 1_000_000), 0.0);
/// let custom = Prices::parse("gpt-4o=2/8, other=1.5/3").unwrap();
/// assert_eq!(custom.get("gpt-4o").map(|p| p.output_per_mtok), Some(8.0));
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct Prices {
    by_model: BTreeMap<String, Price>,
}

/// List prices in dollars per million tokens (input, output), 2025.
const LIST: [(&str, f64, f64); 14] = [
    ("gpt-4o", 2.50, 10.00),
    ("gpt-4o-mini", 0.15, 0.60),
    ("gpt-4.1", 2.00, 8.00),
    ("gpt-4.1-mini", 0.40, 1.60),
    ("gpt-4.1-nano", 0.10, 0.40),
    ("o3", 2.00, 8.00),
    ("o3-mini", 1.10, 4.40),
    ("o4-mini", 1.10, 4.40),
    ("claude-3-haiku", 0.25, 1.25),
    ("claude-3-5-haiku", 0.80, 4.00),
    ("claude-3-5-sonnet", 3.00, 15.00),
    ("claude-3-7-sonnet", 3.00, 15.00),
    ("claude-sonnet-4", 3.00, 15.00),
    ("claude-opus-4", 15.00, 75.00),
];

impl Default for Prices {
    fn default() -> Prices {
        let mut p = Prices::empty();
        for (model, input, output) in LIST {
            p.set(
                model,
                Price {
                    input_per_mtok: input,
                    output_per_mtok: output,
                },
            );
        }
        p
    }
}

/// A price list that cannot be read; says which entry and why.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("price entry {entry:?}: {reason} (expected MODEL=INPUT/OUTPUT in dollars per million tokens, entries separated by commas)")]
pub struct PriceError {
    /// The entry.
    pub entry: String,
    /// What is wrong with it.
    pub reason: String,
}

impl Prices {
    /// No prices at all.
    pub fn empty() -> Prices {
        Prices {
            by_model: BTreeMap::new(),
        }
    }

    /// Set (or replace) `model`'s price.
    pub fn set(&mut self, model: &str, price: Price) {
        self.by_model.insert(model.to_owned(), price);
    }

    /// The same table with `model`'s price set.
    pub fn with(mut self, model: &str, price: Price) -> Prices {
        self.set(model, price);
        self
    }

    /// The default table with the entries of `spec` set:
    /// `MODEL=INPUT/OUTPUT[, …]`, dollars per million tokens.
    pub fn parse(spec: &str) -> Result<Prices, PriceError> {
        let mut prices = Prices::default();
        for entry in spec.split(',').map(str::trim).filter(|e| !e.is_empty()) {
            let bad = |reason: &str| PriceError {
                entry: entry.to_owned(),
                reason: reason.to_owned(),
            };
            let (model, rates) = entry.split_once('=').ok_or_else(|| bad("no '='"))?;
            let (input, output) = rates.split_once('/').ok_or_else(|| bad("no '/'"))?;
            let rate = |s: &str| -> Result<f64, PriceError> {
                match s.trim().parse::<f64>() {
                    Ok(v) if v.is_finite() && v >= 0.0 => Ok(v),
                    _ => Err(bad(&format!("{:?} is not an amount ≥ 0", s.trim()))),
                }
            };
            let model = model.trim();
            if model.is_empty() {
                return Err(bad("no model name"));
            }
            prices.set(
                model,
                Price {
                    input_per_mtok: rate(input)?,
                    output_per_mtok: rate(output)?,
                },
            );
        }
        Ok(prices)
    }

    /// `model`'s price: exact name, else the longest table name it extends
    /// with `-…`.
    pub fn get(&self, model: &str) -> Option<Price> {
        if let Some(p) = self.by_model.get(model) {
            return Some(*p);
        }
        self.by_model
            .iter()
            .filter(|(name, _)| {
                model
                    .strip_prefix(name.as_str())
                    .is_some_and(|rest| rest.starts_with('-'))
            })
            .max_by_key(|(name, _)| name.len())
            .map(|(_, p)| *p)
    }

    /// What `input` and `output` tokens of `model` cost; 0 for a model not
    /// in the table.
    pub fn dollars(&self, model: &str, input: u64, output: u64) -> f64 {
        self.get(model).map_or(0.0, |p| p.dollars(input, output))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn longest_prefix_wins_and_parse_errors_name_the_entry() {
        let p = Prices::default();
        assert_eq!(p.get("gpt-4o-mini-2024-07-18"), p.get("gpt-4o-mini"));
        assert_eq!(p.get("gpt-4o-2024-08-06"), p.get("gpt-4o"));
        assert_eq!(p.get("gpt-4o-minix"), p.get("gpt-4o"));
        assert_eq!(p.get("gpt-4"), None);
        assert_eq!(p.dollars("gpt-4o", 2_000_000, 100_000), 6.0);
        for (spec, want) in [
            ("x", "no '='"),
            ("x=1", "no '/'"),
            ("x=1/-2", "\"-2\" is not an amount"),
            ("=1/2", "no model name"),
        ] {
            let e = Prices::parse(spec).unwrap_err().to_string();
            assert!(e.contains(want), "{want:?} not in {e}");
            assert!(e.contains(&format!("{spec:?}")), "{e}");
        }
    }
}
