//! Response bodies in the Anthropic Messages wire format.

use serde_json::{json, Value};

use crate::{transcript_replies, Response};

/// A `200 OK` message with `text` (omitted when empty) and the tool uses
/// `(id, tool name, raw arguments)`. The format carries arguments as a JSON
/// object (`input`): arguments that are not a JSON object are sent as a
/// JSON string instead, which a client must keep as the raw text.
pub fn message(
    text: &str,
    calls: &[(&str, &str, &str)],
    input_tokens: u64,
    output_tokens: u64,
) -> Response {
    let mut content = Vec::new();
    if !text.is_empty() {
        content.push(json!({"type": "text", "text": text}));
    }
    for (id, name, args) in calls {
        let input = match serde_json::from_str::<Value>(args) {
            Ok(v @ Value::Object(_)) => v,
            _ => json!(args),
        };
        content.push(json!({"type": "tool_use", "id": id, "name": name, "input": input}));
    }
    let stop = if calls.is_empty() {
        "end_turn"
    } else {
        "tool_use"
    };
    Response::ok(
        json!({
            "id": "msg_test", "type": "message", "role": "assistant", "model": "test-model",
            "content": content, "stop_reason": stop,
            "usage": {"input_tokens": input_tokens, "output_tokens": output_tokens}
        })
        .to_string(),
    )
}

/// An error response with the provider's error body:
/// `{"type": "error", "error": {"type": …, "message": …}}`.
pub fn error(status: u16, message: &str) -> Response {
    Response::json(
        status,
        json!({"type": "error", "error": {"type": "test_error", "message": message}}).to_string(),
    )
}

/// One message per reply of a transcript file, for
/// [`Script::by_turn`](crate::Script::by_turn).
pub fn transcript(json: &str) -> Result<Vec<Response>, String> {
    Ok(transcript_replies(json)?
        .iter()
        .map(|(text, calls, input, output)| {
            let calls: Vec<(&str, &str, &str)> = calls
                .iter()
                .map(|(id, tool, args)| (id.as_str(), tool.as_str(), args.as_str()))
                .collect();
            message(text, &calls, *input, *output)
        })
        .collect())
}
