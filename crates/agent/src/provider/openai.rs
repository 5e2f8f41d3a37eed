//! A client for OpenAI-compatible Chat Completions endpoints.

use std::fmt;

use crate::state::{Message, Role, ToolCall, Usage};
use serde::Deserialize;
use serde_json::{json, Value};

use super::http::Http;
use super::{base_url, fallback_call_id, ApiKey, Prices, ProviderError, Retry, Sleep, Timeouts};
use crate::model::{Model, ModelError, Reply};
use crate::tool::ToolSpec;

/// A [`Model`] that asks an OpenAI-compatible Chat Completions endpoint
/// (`POST {base}/chat/completions`, key as `Authorization: Bearer`).
///
/// Each request carries the whole conversation the loop gives it (the saved
/// state's messages: the task, each reply with its tool calls, each tool
/// result under its call ID), after the system prompt if one is set, and
/// the tools' specs. The reply's tool calls keep the provider's call IDs
/// (a call without one gets `call_t{turn}_{n}`, the same on every ask of
/// that turn) and their arguments as the raw string the model wrote.
/// Usage's `prompt_tokens` and `completion_tokens` become the reply's
/// tokens; dollars come from [`Prices`] by model name.
///
/// `Debug` shows the endpoint, model and tool names, never the key.
pub struct OpenAi {
    http: Http,
    url: String,
    key: ApiKey,
    model: String,
    tools: Vec<ToolSpec>,
    system: Option<String>,
    prices: Prices,
    max_tokens: Option<u32>,
}

impl fmt::Debug for OpenAi {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OpenAi")
            .field("url", &self.url)
            .field("model", &self.model)
            .field("key", &self.key)
            .field(
                "tools",
                &self
                    .tools
                    .iter()
                    .map(|t| t.name.as_str())
                    .collect::<Vec<_>>(),
            )
            .field("timeouts", &self.http.timeouts)
            .field("retry", &self.http.retry)
            .finish_non_exhaustive()
    }
}

impl OpenAi {
    /// OpenAI's public endpoint, the default of `OPENAI_BASE_URL`.
    pub const DEFAULT_BASE_URL: &'static str = "https://api.openai.com/v1";

    /// The wire format's name, for messages.
    pub const FORMAT: &'static str = "OpenAI chat completion";

    /// A client for `model` at `base` (e.g. [`OpenAi::DEFAULT_BASE_URL`],
    /// or `http://localhost:11434/v1` for a local server), with default
    /// [`Timeouts`], [`Retry`] and [`Prices`], no tools and no system
    /// prompt.
    pub fn new(base: &str, key: ApiKey, model: &str) -> Result<OpenAi, ProviderError> {
        let base = base_url(base, "the OpenAI base URL")?;
        if model.trim().is_empty() {
            return Err(ProviderError::Config("the model name is empty".into()));
        }
        Ok(OpenAi {
            http: Http::new(Timeouts::default()),
            url: format!("{base}/chat/completions"),
            key,
            model: model.trim().to_owned(),
            tools: Vec::new(),
            system: None,
            prices: Prices::default(),
            max_tokens: None,
        })
    }

    /// Offer these tools to the model: an agent's [`Tools::specs`](crate::tool::Tools::specs),
    /// each tool in its own words.
    pub fn with_tools(mut self, tools: Vec<ToolSpec>) -> OpenAi {
        self.tools = tools;
        self
    }

    /// Send `prompt` as a system message before the conversation.
    pub fn with_system(mut self, prompt: impl Into<String>) -> OpenAi {
        self.system = Some(prompt.into());
        self
    }

    /// Price replies with `prices`.
    pub fn with_prices(mut self, prices: Prices) -> OpenAi {
        self.prices = prices;
        self
    }

    /// Retry as `retry` says.
    pub fn with_retry(mut self, retry: Retry) -> OpenAi {
        self.http.retry = retry;
        self
    }

    /// Wait no longer than `timeouts`.
    pub fn with_timeouts(mut self, timeouts: Timeouts) -> OpenAi {
        self.http.set_timeouts(timeouts);
        self
    }

    /// Wait between attempts with `sleep` (a test records the waits).
    pub fn with_sleep(mut self, sleep: Sleep) -> OpenAi {
        self.http.sleep = sleep;
        self
    }

    /// Ask for at most `n` output tokens per reply (`max_tokens`).
    pub fn with_max_tokens(mut self, n: u32) -> OpenAi {
        self.max_tokens = Some(n);
        self
    }

    /// The endpoint requests go to.
    pub fn endpoint(&self) -> &str {
        &self.url
    }

    /// The model asked.
    pub fn model(&self) -> &str {
        &self.model
    }

    /// The request body for `conversation`.
    pub fn request_body(&self, conversation: &[Message]) -> Value {
        let mut messages = Vec::with_capacity(conversation.len() + 1);
        if let Some(system) = &self.system {
            messages.push(json!({"role": "system", "content": system}));
        }
        for m in conversation {
            messages.push(match m.role {
                Role::User => json!({"role": "user", "content": m.text}),
                Role::Tool => json!({
                    "role": "tool",
                    "tool_call_id": m.call_id.as_deref().unwrap_or_default(),
                    "content": m.text,
                }),
                Role::Assistant => {
                    let mut a = json!({
                        "role": "assistant",
                        "content": if m.text.is_empty() { Value::Null } else { json!(m.text) },
                    });
                    if !m.calls.is_empty() {
                        a["tool_calls"] = m
                            .calls
                            .iter()
                            .map(|c| {
                                json!({"id": c.id, "type": "function",
                                       "function": {"name": c.tool, "arguments": c.args}})
                            })
                            .collect();
                    }
                    a
                }
            });
        }
        let mut body = json!({"model": self.model, "messages": messages});
        if !self.tools.is_empty() {
            body["tools"] = self
                .tools
                .iter()
                .map(|t| {
                    json!({"type": "function", "function": {
                        "name": t.name, "description": t.description, "parameters": t.parameters}})
                })
                .collect();
        }
        if let Some(n) = self.max_tokens {
            body["max_tokens"] = json!(n);
        }
        body
    }

    /// Read a response body as the reply to a conversation holding `turn`
    /// assistant messages.
    pub fn parse_reply(
        &self,
        status: u16,
        body: &str,
        turn: usize,
    ) -> Result<Reply, ProviderError> {
        let malformed = |reason: String| ProviderError::Malformed {
            url: self.url.clone(),
            status,
            format: Self::FORMAT,
            reason: super::error::redact(&reason, self.key.expose()),
        };
        let c: Completion = serde_json::from_str(body).map_err(|e| malformed(e.to_string()))?;
        let choice = c
            .choices
            .into_iter()
            .next()
            .ok_or_else(|| malformed("no choices".into()))?;
        let msg = choice.message;
        let mut text = match msg.content {
            None | Some(Value::Null) => String::new(),
            Some(Value::String(s)) => s,
            Some(Value::Array(parts)) => parts
                .iter()
                .filter_map(|p| p.get("text").and_then(Value::as_str))
                .collect::<Vec<_>>()
                .join(""),
            Some(other) => return Err(malformed(format!("message content is {other}"))),
        };
        if text.is_empty() {
            if let Some(refusal) = msg.refusal {
                text = refusal;
            }
        }
        let calls = wire_calls(msg.tool_calls.unwrap_or_default(), turn);
        let (input, output) = c
            .usage
            .map_or((0, 0), |u| (u.prompt_tokens, u.completion_tokens));
        let priced = c.model.as_deref().unwrap_or(&self.model);
        let dollars = match self.prices.get(priced) {
            Some(p) => p.dollars(input, output),
            None => self.prices.dollars(&self.model, input, output),
        };
        Ok(Reply {
            text,
            calls,
            usage: Usage {
                input_tokens: input,
                output_tokens: output,
                dollars,
            },
        })
    }
}

impl Model for OpenAi {
    fn reply(&self, conversation: &[Message]) -> Result<Reply, ModelError> {
        let turn = conversation
            .iter()
            .filter(|m| m.role == Role::Assistant)
            .count();
        let body = self.request_body(conversation).to_string();
        let auth = format!("Bearer {}", self.key.expose());
        let (status, text) = self.http.post(
            &self.url,
            &[("Authorization", auth.as_str())],
            &body,
            self.key.expose(),
        )?;
        Ok(self.parse_reply(status, &text, turn)?)
    }
}

/// The tool calls of a reply of turn `turn`, with the IDs a provider left
/// out made up ([`fallback_call_id`]) and missing arguments `{}`.
fn wire_calls(calls: Vec<WireCall>, turn: usize) -> Vec<ToolCall> {
    calls
        .into_iter()
        .enumerate()
        .map(|(i, tc)| {
            let id = match tc.id {
                Some(id) if !id.is_empty() => id,
                _ => fallback_call_id(turn, i),
            };
            let args = match tc.function.arguments {
                None | Some(Value::Null) => "{}".to_owned(),
                Some(Value::String(raw)) => raw,
                Some(v) => v.to_string(),
            };
            ToolCall {
                id,
                tool: tc.function.name,
                args,
            }
        })
        .collect()
}

#[derive(Deserialize)]
struct Completion {
    #[serde(default)]
    choices: Vec<Choice>,
    #[serde(default)]
    usage: Option<CompletionUsage>,
    #[serde(default)]
    model: Option<String>,
}

#[derive(Deserialize)]
struct Choice {
    message: ChoiceMessage,
}

#[derive(Deserialize)]
struct ChoiceMessage {
    #[serde(default)]
    content: Option<Value>,
    #[serde(default)]
    refusal: Option<String>,
    #[serde(default)]
    tool_calls: Option<Vec<WireCall>>,
}

#[derive(Deserialize)]
struct WireCall {
    #[serde(default)]
    id: Option<String>,
    function: WireFunction,
}

#[derive(Deserialize)]
struct WireFunction {
    name: String,
    #[serde(default)]
    arguments: Option<Value>,
}

#[derive(Deserialize)]
struct CompletionUsage {
    #[serde(default)]
    prompt_tokens: u64,
    #[serde(default)]
    completion_tokens: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn client() -> OpenAi {
        OpenAi::new(
            "http://127.0.0.1:9/v1/",
            ApiKey::new("sk-test-key").unwrap(),
            "gpt-4o-mini",
        )
        .unwrap()
    }

    #[test]
    fn request_carries_the_conversation_and_tools() {
        let m = client()
            .with_system("be brief")
            .with_tools(vec![ToolSpec::new(
                "search",
                "find",
                json!({"type": "object"}),
            )]);
        assert_eq!(m.endpoint(), "http://127.0.0.1:9/v1/chat/completions");
        assert_eq!(m.model(), "gpt-4o-mini");
        let conv = [
            Message {
                role: Role::User,
                text: "task".into(),
                ..Message::default()
            },
            Message {
                role: Role::Assistant,
                calls: vec![ToolCall {
                    id: "c1".into(),
                    tool: "search".into(),
                    args: "{bad".into(),
                }],
                ..Message::default()
            },
            Message {
                role: Role::Tool,
                text: "[]".into(),
                call_id: Some("c1".into()),
                ..Message::default()
            },
        ];
        let body = m.request_body(&conv);
        assert_eq!(
            body["messages"],
            json!([
                {"role": "system", "content": "be brief"},
                {"role": "user", "content": "task"},
                {"role": "assistant", "content": null, "tool_calls": [
                    {"id": "c1", "type": "function", "function": {"name": "search", "arguments": "{bad"}}]},
                {"role": "tool", "tool_call_id": "c1", "content": "[]"}
            ])
        );
        assert_eq!(body["tools"][0]["function"]["name"], "search");
        assert_eq!(body["model"], "gpt-4o-mini");
        assert!(!body.to_string().contains("sk-test-key"));
    }

    #[test]
    fn replies_keep_ids_raw_args_and_price_usage() {
        let m = client();
        let r = m
            .parse_reply(
                200,
                r#"{"model": "gpt-4o-mini-2024-07-18", "choices": [{"message": {"content": null, "tool_calls": [
                    {"id": "call_A", "type": "function", "function": {"name": "search", "arguments": "{\"query\": \"x\""}},
                    {"type": "function", "function": {"name": "search", "arguments": {"query": "y"}}},
                    {"id": "", "type": "function", "function": {"name": "search"}}]}}],
                    "usage": {"prompt_tokens": 1000000, "completion_tokens": 0}}"#,
                2,
            )
            .unwrap();
        assert_eq!(r.calls[0].id, "call_A");
        assert_eq!(r.calls[0].args, r#"{"query": "x""#);
        assert_eq!(r.calls[1].id, "call_t3_2");
        assert_eq!(r.calls[1].args, r#"{"query":"y"}"#);
        // An empty ID is no ID.
        assert_eq!(r.calls[2].id, "call_t3_3");
        assert_eq!(r.calls[2].args, "{}");
        assert_eq!(r.usage.input_tokens, 1_000_000);
        assert_eq!(r.usage.dollars, 0.15);
        for (body, want) in [
            ("not json", "expected ident"),
            (r#"{"choices": []}"#, "no choices"),
            (
                r#"{"choices": [{"message": {"content": 5}}]}"#,
                "message content is 5",
            ),
        ] {
            let e = m.parse_reply(200, body, 0).unwrap_err().to_string();
            assert!(
                e.starts_with("http://127.0.0.1:9/v1/chat/completions: HTTP 200, but the body is not a OpenAI chat completion reply: "),
                "{e}"
            );
            assert!(e.contains(want), "{want:?} not in {e}");
        }
        assert!(!format!("{m:?}").contains("sk-test-key"));
    }
}
