//! A client for the Anthropic Messages API.

use std::fmt;

use crate::state::{Message, Role, ToolCall, Usage};
use serde::Deserialize;
use serde_json::{json, Value};

use super::http::Http;
use super::{base_url, fallback_call_id, ApiKey, Prices, ProviderError, Retry, Sleep, Timeouts};
use crate::model::{Model, ModelError, Reply};
use crate::tool::ToolSpec;

/// A [`Model`] that asks the Anthropic Messages API
/// (`POST {base}/v1/messages`, key as `x-api-key`, `anthropic-version:
/// 2023-06-01`).
///
/// The conversation maps as the format wants it: the system prompt apart,
/// each reply as an assistant message of `text` and `tool_use` blocks, and
/// each run of tool results as one user message of `tool_result` blocks. The
/// format carries arguments as a JSON object: a saved call whose arguments
/// are not a JSON object is sent back as `{"raw_arguments": "…"}`, and a
/// `tool_use` input that is not an object is kept as the raw text. Usage's
/// `input_tokens` and `output_tokens` become the reply's tokens; dollars
/// come from [`Prices`].
///
/// `Debug` never shows the key.
pub struct Anthropic {
    http: Http,
    url: String,
    key: ApiKey,
    model: String,
    tools: Vec<ToolSpec>,
    system: Option<String>,
    prices: Prices,
    max_tokens: u32,
}

impl fmt::Debug for Anthropic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Anthropic")
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
            .finish_non_exhaustive()
    }
}

impl Anthropic {
    /// Anthropic's public endpoint, the default of `ANTHROPIC_BASE_URL`.
    pub const DEFAULT_BASE_URL: &'static str = "https://api.anthropic.com";

    /// The API version sent in `anthropic-version`.
    pub const VERSION: &'static str = "2023-06-01";

    /// The wire format's name, for messages.
    pub const FORMAT: &'static str = "Anthropic message";

    /// A client for `model` at `base`, with default [`Timeouts`],
    /// [`Retry`] and [`Prices`], at most 4096 output tokens per reply (the
    /// format requires a bound), no tools and no system prompt.
    pub fn new(base: &str, key: ApiKey, model: &str) -> Result<Anthropic, ProviderError> {
        let base = base_url(base, "the Anthropic base URL")?;
        if model.trim().is_empty() {
            return Err(ProviderError::Config("the model name is empty".into()));
        }
        Ok(Anthropic {
            http: Http::new(Timeouts::default()),
            url: format!("{base}/v1/messages"),
            key,
            model: model.trim().to_owned(),
            tools: Vec::new(),
            system: None,
            prices: Prices::default(),
            max_tokens: 4096,
        })
    }

    /// Offer these tools to the model: an agent's [`Tools::specs`](crate::tool::Tools::specs),
    /// each tool in its own words.
    pub fn with_tools(mut self, tools: Vec<ToolSpec>) -> Anthropic {
        self.tools = tools;
        self
    }

    /// Send `prompt` as the system prompt.
    pub fn with_system(mut self, prompt: impl Into<String>) -> Anthropic {
        self.system = Some(prompt.into());
        self
    }

    /// Price replies with `prices`.
    pub fn with_prices(mut self, prices: Prices) -> Anthropic {
        self.prices = prices;
        self
    }

    /// Retry as `retry` says.
    pub fn with_retry(mut self, retry: Retry) -> Anthropic {
        self.http.retry = retry;
        self
    }

    /// Wait no longer than `timeouts`.
    pub fn with_timeouts(mut self, timeouts: Timeouts) -> Anthropic {
        self.http.set_timeouts(timeouts);
        self
    }

    /// Wait between attempts with `sleep`.
    pub fn with_sleep(mut self, sleep: Sleep) -> Anthropic {
        self.http.sleep = sleep;
        self
    }

    /// Ask for at most `n` output tokens per reply.
    pub fn with_max_tokens(mut self, n: u32) -> Anthropic {
        self.max_tokens = n;
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
        let mut messages: Vec<Value> = Vec::new();
        let mut results: Vec<Value> = Vec::new();
        let flush = |messages: &mut Vec<Value>, results: &mut Vec<Value>| {
            if !results.is_empty() {
                messages.push(json!({"role": "user", "content": std::mem::take(results)}));
            }
        };
        for m in conversation {
            match m.role {
                Role::Tool => results.push(json!({
                    "type": "tool_result",
                    "tool_use_id": m.call_id.as_deref().unwrap_or_default(),
                    "content": m.text,
                })),
                Role::User => {
                    flush(&mut messages, &mut results);
                    messages.push(json!({"role": "user", "content": m.text}));
                }
                Role::Assistant => {
                    flush(&mut messages, &mut results);
                    let mut content = Vec::new();
                    if !m.text.is_empty() {
                        content.push(json!({"type": "text", "text": m.text}));
                    }
                    for c in &m.calls {
                        let input = match serde_json::from_str::<Value>(&c.args) {
                            Ok(v @ Value::Object(_)) => v,
                            _ => json!({"raw_arguments": c.args}),
                        };
                        content.push(
                            json!({"type": "tool_use", "id": c.id, "name": c.tool, "input": input}),
                        );
                    }
                    messages.push(json!({"role": "assistant", "content": content}));
                }
            }
        }
        flush(&mut messages, &mut results);
        let mut body =
            json!({"model": self.model, "max_tokens": self.max_tokens, "messages": messages});
        if let Some(system) = &self.system {
            body["system"] = json!(system);
        }
        if !self.tools.is_empty() {
            body["tools"] = self
                .tools
                .iter()
                .map(|t| json!({"name": t.name, "description": t.description, "input_schema": t.parameters}))
                .collect();
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
        let m: WireMessage = serde_json::from_str(body).map_err(|e| malformed(e.to_string()))?;
        let mut text = String::new();
        let mut calls = Vec::new();
        for block in m.content {
            match block {
                Block::Text { text: t } => text.push_str(&t),
                Block::ToolUse { id, name, input } => {
                    let id = if id.is_empty() {
                        fallback_call_id(turn, calls.len())
                    } else {
                        id
                    };
                    let args = match input {
                        Value::String(raw) => raw,
                        Value::Null => "{}".to_owned(),
                        v => v.to_string(),
                    };
                    calls.push(ToolCall {
                        id,
                        tool: name,
                        args,
                    });
                }
                Block::Other => {}
            }
        }
        let (input, output) = m
            .usage
            .map_or((0, 0), |u| (u.input_tokens, u.output_tokens));
        let priced = m.model.as_deref().unwrap_or(&self.model);
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

impl Model for Anthropic {
    fn reply(&self, conversation: &[Message]) -> Result<Reply, ModelError> {
        let turn = conversation
            .iter()
            .filter(|m| m.role == Role::Assistant)
            .count();
        let body = self.request_body(conversation).to_string();
        let (status, text) = self.http.post(
            &self.url,
            &[
                ("x-api-key", self.key.expose()),
                ("anthropic-version", Self::VERSION),
            ],
            &body,
            self.key.expose(),
        )?;
        Ok(self.parse_reply(status, &text, turn)?)
    }
}

#[derive(Deserialize)]
struct WireMessage {
    #[serde(default)]
    content: Vec<Block>,
    #[serde(default)]
    usage: Option<WireUsage>,
    #[serde(default)]
    model: Option<String>,
}

#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Block {
    Text {
        text: String,
    },
    ToolUse {
        #[serde(default)]
        id: String,
        name: String,
        #[serde(default)]
        input: Value,
    },
    #[serde(other)]
    Other,
}

#[derive(Deserialize)]
struct WireUsage {
    #[serde(default)]
    input_tokens: u64,
    #[serde(default)]
    output_tokens: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conversation_maps_to_blocks_and_back() {
        let m = Anthropic::new(
            "http://127.0.0.1:9",
            ApiKey::new("sk-ant-x").unwrap(),
            "claude-sonnet-4-20250514",
        )
        .unwrap()
        .with_system("sys");
        let conv = [
            Message {
                role: Role::User,
                text: "task".into(),
                ..Message::default()
            },
            Message {
                role: Role::Assistant,
                text: "looking".into(),
                calls: vec![
                    ToolCall {
                        id: "t1".into(),
                        tool: "search".into(),
                        args: r#"{"q":1}"#.into(),
                    },
                    ToolCall {
                        id: "t2".into(),
                        tool: "search".into(),
                        args: "{bad".into(),
                    },
                ],
                ..Message::default()
            },
            Message {
                role: Role::Tool,
                text: "a".into(),
                call_id: Some("t1".into()),
                ..Message::default()
            },
            Message {
                role: Role::Tool,
                text: "b".into(),
                call_id: Some("t2".into()),
                ..Message::default()
            },
        ];
        let body = m.request_body(&conv);
        assert_eq!(body["system"], "sys");
        assert_eq!(body["messages"].as_array().map(Vec::len), Some(3));
        // Arguments that are a JSON object go as the input itself; any
        // other text goes as a string beside it.
        assert_eq!(body["messages"][1]["content"][1]["input"], json!({"q": 1}));
        assert_eq!(
            body["messages"][1]["content"][2]["input"],
            json!({"raw_arguments": "{bad"})
        );
        assert_eq!(body["messages"][2]["content"][1]["tool_use_id"], "t2");
        let r = m
            .parse_reply(
                200,
                r#"{"content": [{"type": "text", "text": "ok"}, {"type": "thinking", "thinking": "…"},
                    {"type": "tool_use", "id": "toolu_1", "name": "search", "input": {"q": "x"}}],
                    "usage": {"input_tokens": 1000000, "output_tokens": 0}}"#,
                1,
            )
            .unwrap();
        assert_eq!(r.text, "ok");
        assert_eq!(r.calls[0].id, "toolu_1");
        assert_eq!(r.calls[0].args, r#"{"q":"x"}"#);
        assert_eq!(r.usage.dollars, 3.0);
        assert!(m.parse_reply(200, "{", 0).is_err());
    }
}
