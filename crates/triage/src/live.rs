//! Live mode: with a provider's key in the environment, the replies come
//! from a real model instead of the task's recording.
//!
//! The environment follows the ecosystem's conventions:
//!
//! | variable | meaning | default |
//! | --- | --- | --- |
//! | `OPENAI_API_KEY` | key for an OpenAI-compatible endpoint; set: live | — |
//! | `OPENAI_BASE_URL` | the endpoint's base URL | `https://api.openai.com/v1` |
//! | `OPENAI_MODEL` | the model, unless `--model NAME` | `gpt-4o-mini` |
//! | `ANTHROPIC_API_KEY` | key for the Anthropic Messages API (if no OpenAI key) | — |
//! | `ANTHROPIC_BASE_URL` | its base URL | `https://api.anthropic.com` |
//! | `ANTHROPIC_MODEL` | the model, unless `--model NAME` | `claude-sonnet-4-20250514` |
//!
//! An empty variable counts as unset. The key is read here, handed to the
//! client as an [`ApiKey`] (which never prints itself) and never written:
//! not to the output, not to the checkpoint, not to a recording.

use std::fmt;

use agent::model::Model;
use agent::provider::{Anthropic, ApiKey, OpenAi, Prices, ProviderError};
use agent::tool::ToolSpec;

/// Where the replies come from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Mode {
    /// The task's recorded replies (no key set).
    Replay,
    /// A provider.
    Live(Live),
}

/// A provider and the model asked there.
#[derive(Clone, PartialEq, Eq)]
pub struct Live {
    /// Which wire format.
    pub provider: Provider,
    /// The base URL.
    pub base_url: String,
    /// The model.
    pub model: String,
    key: ApiKey,
}

impl fmt::Debug for Live {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Live")
            .field("provider", &self.provider)
            .field("base_url", &self.base_url)
            .field("model", &self.model)
            .field("key", &self.key)
            .finish()
    }
}

/// The wire formats the command speaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Provider {
    /// An OpenAI-compatible Chat Completions endpoint.
    OpenAi,
    /// The Anthropic Messages API.
    Anthropic,
}

impl Provider {
    /// Its name in the output and the checkpoint.
    pub fn name(self) -> &'static str {
        match self {
            Provider::OpenAi => "openai",
            Provider::Anthropic => "anthropic",
        }
    }
}

/// The model asked when neither `--model` nor the environment names one.
pub const DEFAULT_OPENAI_MODEL: &str = "gpt-4o-mini";
/// The Anthropic model asked by default.
pub const DEFAULT_ANTHROPIC_MODEL: &str = "claude-sonnet-4-20250514";

impl Mode {
    /// The mode the environment asks for: live with the first key set
    /// (`OPENAI_API_KEY`, then `ANTHROPIC_API_KEY`), else replay. `model`
    /// is `--model NAME`. `env` reads a variable (the process environment,
    /// or a test's).
    pub fn from_env(
        model: Option<&str>,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<Mode, ProviderError> {
        let get = |name: &str| env(name).filter(|v| !v.trim().is_empty());
        let (provider, key, base, default_base, model_var, default_model) =
            if let Some(key) = get("OPENAI_API_KEY") {
                (
                    Provider::OpenAi,
                    key,
                    get("OPENAI_BASE_URL"),
                    OpenAi::DEFAULT_BASE_URL,
                    "OPENAI_MODEL",
                    DEFAULT_OPENAI_MODEL,
                )
            } else if let Some(key) = get("ANTHROPIC_API_KEY") {
                (
                    Provider::Anthropic,
                    key,
                    get("ANTHROPIC_BASE_URL"),
                    Anthropic::DEFAULT_BASE_URL,
                    "ANTHROPIC_MODEL",
                    DEFAULT_ANTHROPIC_MODEL,
                )
            } else {
                return Ok(Mode::Replay);
            };
        let key = ApiKey::new(key.trim())?;
        let model = model
            .map(str::to_owned)
            .or_else(|| get(model_var))
            .unwrap_or_else(|| default_model.to_owned());
        Ok(Mode::Live(Live {
            provider,
            base_url: base
                .unwrap_or_else(|| default_base.to_owned())
                .trim()
                .trim_end_matches('/')
                .to_owned(),
            model: model.trim().to_owned(),
            key,
        }))
    }

    /// How the first line of output names the mode.
    pub fn describe(&self) -> String {
        match self {
            Mode::Replay => "replay of the recorded replies (no API key set)".to_owned(),
            Mode::Live(l) => format!(
                "live: {} model {} at {}",
                l.provider.name(),
                l.model,
                l.base_url
            ),
        }
    }

    /// The mode as the checkpoint records it: `replay`, or
    /// `live PROVIDER MODEL BASE_URL`.
    pub fn record(&self) -> String {
        match self {
            Mode::Replay => "replay".to_owned(),
            Mode::Live(l) => format!("live {} {} {}", l.provider.name(), l.model, l.base_url),
        }
    }

    /// Whether the replies come from a provider.
    pub fn is_live(&self) -> bool {
        matches!(self, Mode::Live(_))
    }
}

/// The text after `--help`'s options: the exit codes, then live mode.
pub fn after_help() -> String {
    format!(
        "{}\n\n{LIVE_HELP}\n\n{}",
        crate::exit::EXIT_CODES_HELP.trim_end(),
        crate::stored::STORE_HELP.trim_end()
    )
}

/// Live mode, as `--help` explains it.
pub const LIVE_HELP: &str = "\
Live mode:
  With OPENAI_API_KEY set, the replies come from a model behind an
  OpenAI-compatible Chat Completions endpoint instead of the task's
  recording: OPENAI_BASE_URL (default https://api.openai.com/v1), the model
  from --model or OPENAI_MODEL (default gpt-4o-mini). With only
  ANTHROPIC_API_KEY set, the Anthropic Messages API (ANTHROPIC_BASE_URL,
  ANTHROPIC_MODEL; default claude-sonnet-4-20250514). Without a key the
  command replays the recording. The first line of output names the mode
  and the checkpoint records it; a run goes on in the mode it started in (a
  live run needs its key to resume). Tools, checkpoints, approvals,
  --die-after and resume work alike in both modes, and a resumed live run
  never asks the model again for a reply it saved. 429 and 5xx answers are
  retried with backoff; the key is never printed or saved. --record FILE
  turns a live run into a task file that replays without a key.
";

/// What the live model is told before the task.
pub const SYSTEM_PROMPT: &str = "You are a careful triage agent for a small code base. \
Use the tools to look at the tracker, file issues, comment on them and patch files in the \
workspace. Check the tracker with search before filing, so you never file a crash twice. \
Call tools only with valid JSON arguments. When the work is done, answer with a short \
summary of what you did, and call no tool in that reply.";

impl Live {
    /// The client for this provider, with the tools described by `tools`
    /// (each tool's own words: [`agent::tool::Tools::specs`]), the system
    /// prompt and `prices`.
    pub fn model(
        &self,
        prices: Prices,
        tools: Vec<ToolSpec>,
    ) -> Result<Box<dyn Model>, ProviderError> {
        Ok(match self.provider {
            Provider::OpenAi => Box::new(
                OpenAi::new(&self.base_url, self.key.clone(), &self.model)?
                    .with_tools(tools)
                    .with_system(SYSTEM_PROMPT)
                    .with_prices(prices),
            ),
            Provider::Anthropic => Box::new(
                Anthropic::new(&self.base_url, self.key.clone(), &self.model)?
                    .with_tools(tools)
                    .with_system(SYSTEM_PROMPT)
                    .with_prices(prices),
            ),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn env(vars: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let m: BTreeMap<String, String> = vars
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        move |k| m.get(k).cloned()
    }

    #[test]
    fn the_environment_picks_the_mode() {
        assert_eq!(Mode::from_env(None, env(&[])).unwrap(), Mode::Replay);
        assert_eq!(
            Mode::from_env(None, env(&[("OPENAI_API_KEY", " ")])).unwrap(),
            Mode::Replay
        );
        let m = Mode::from_env(None, env(&[("OPENAI_API_KEY", "sk-1")])).unwrap();
        assert_eq!(
            m.describe(),
            "live: openai model gpt-4o-mini at https://api.openai.com/v1"
        );
        let m = Mode::from_env(
            None,
            env(&[
                ("OPENAI_API_KEY", "sk-1"),
                ("OPENAI_BASE_URL", "http://127.0.0.1:8080/v1/"),
                ("OPENAI_MODEL", "local"),
                ("ANTHROPIC_API_KEY", "sk-ant"),
            ]),
        )
        .unwrap();
        assert_eq!(m.record(), "live openai local http://127.0.0.1:8080/v1");
        let m = Mode::from_env(
            Some("claude-x"),
            env(&[
                ("ANTHROPIC_API_KEY", "sk-ant"),
                ("ANTHROPIC_MODEL", "ignored"),
            ]),
        )
        .unwrap();
        assert_eq!(
            m.record(),
            "live anthropic claude-x https://api.anthropic.com"
        );
        assert!(!format!("{m:?}").contains("sk-ant"));
        assert!(!m.describe().contains("sk-ant") && !m.record().contains("sk-ant"));
    }
}
