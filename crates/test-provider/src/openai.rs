//! Response bodies in the OpenAI Chat Completions wire format.

use serde_json::{json, Value};

use crate::{transcript_replies, Response};

/// A `200 OK` chat completion: one choice whose message has `text` (null
/// when empty) and the tool calls `(id, function name, raw arguments)`,
/// with the usage given. `arguments` is sent as the raw string, as the
/// provider does, so it may be invalid JSON.
pub fn completion(
    text: &str,
    calls: &[(&str, &str, &str)],
    prompt_tokens: u64,
    completion_tokens: u64,
) -> Response {
    let tool_calls: Vec<Value> = calls
        .iter()
        .map(|(id, name, args)| {
            json!({"id": id, "type": "function", "function": {"name": name, "arguments": args}})
        })
        .collect();
    let mut message = json!({"role": "assistant", "content": if text.is_empty() { Value::Null } else { json!(text) }});
    if !tool_calls.is_empty() {
        message["tool_calls"] = Value::Array(tool_calls);
    }
    let finish = if calls.is_empty() {
        "stop"
    } else {
        "tool_calls"
    };
    Response::ok(
        json!({
            "id": "chatcmpl-test",
            "object": "chat.completion",
            "model": "test-model",
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                      "total_tokens": prompt_tokens + completion_tokens}
        })
        .to_string(),
    )
}

/// An error response with the provider's error body:
/// `{"error": {"message": …, "type": …}}`.
pub fn error(status: u16, message: &str) -> Response {
    Response::json(
        status,
        json!({"error": {"message": message, "type": "test_error", "code": null}}).to_string(),
    )
}

/// One completion per reply of a transcript file (the format
/// `agent::model::Transcript` reads), for [`Script::by_turn`](crate::Script::by_turn).
pub fn transcript(json: &str) -> Result<Vec<Response>, String> {
    Ok(transcript_replies(json)?
        .iter()
        .map(|(text, calls, input, output)| {
            let calls: Vec<(&str, &str, &str)> = calls
                .iter()
                .map(|(id, tool, args)| (id.as_str(), tool.as_str(), args.as_str()))
                .collect();
            completion(text, &calls, *input, *output)
        })
        .collect())
}
