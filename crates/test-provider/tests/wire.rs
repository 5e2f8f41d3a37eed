//! The response bodies in the two wire formats, and the transcripts turned
//! into them (the mutants the crate's own tests missed).

use serde_json::{json, Value};
use test_provider::{anthropic, openai, Response};

fn body(r: &Response) -> Value {
    serde_json::from_str(&r.body).unwrap_or_else(|e| panic!("{:?} is not JSON: {e}", r.body))
}

const TRANSCRIPT: &str = r#"{"replies": [
    {"text": "looking", "calls": [{"id": "c1", "tool": "search", "args": {"query": "crash"}},
                                  {"id": "c2", "tool": "issue_file", "args": "{not json"}],
     "usage": {"input_tokens": 10, "output_tokens": 4}},
    {"text": "done", "usage": {"input_tokens": 20, "output_tokens": 2}}
]}"#;

#[test]
fn an_openai_completion_with_text_only_stops() {
    let r = openai::completion("hello", &[], 3, 1);
    assert_eq!((r.status, r.fault, r.headers.len()), (200, None, 0));
    let v = body(&r);
    assert_eq!(
        v["choices"],
        json!([{
            "index": 0,
            "message": {"role": "assistant", "content": "hello"},
            "finish_reason": "stop"
        }])
    );
    assert_eq!(
        v["usage"],
        json!({"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4})
    );
}

#[test]
fn an_openai_completion_with_calls_sends_their_raw_arguments() {
    let r = openai::completion(
        "",
        &[("c1", "search", "{\"q\": 1}"), ("c2", "x", "{bad")],
        5,
        2,
    );
    let v = body(&r);
    let choice = &v["choices"][0];
    assert_eq!(choice["finish_reason"], "tool_calls");
    assert_eq!(
        choice["message"],
        json!({
            "role": "assistant",
            "content": null,
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "search", "arguments": "{\"q\": 1}"}},
                {"id": "c2", "type": "function", "function": {"name": "x", "arguments": "{bad"}}
            ]
        })
    );
}

#[test]
fn an_openai_error_has_the_status_and_the_error_body() {
    let r = openai::error(429, "slow down");
    assert_eq!(r.status, 429);
    assert_eq!(
        body(&r),
        json!({"error": {"message": "slow down", "type": "test_error", "code": null}})
    );
}

#[test]
fn an_anthropic_message_with_text_only_ends_its_turn() {
    let r = anthropic::message("hello", &[], 3, 1);
    assert_eq!((r.status, r.fault), (200, None));
    let v = body(&r);
    assert_eq!(v["content"], json!([{"type": "text", "text": "hello"}]));
    assert_eq!(v["stop_reason"], "end_turn");
    assert_eq!(v["role"], "assistant");
    assert_eq!(v["usage"], json!({"input_tokens": 3, "output_tokens": 1}));
}

#[test]
fn an_anthropic_message_sends_object_arguments_as_input_and_others_as_text() {
    let r = anthropic::message(
        "",
        &[
            ("t1", "search", "{\"q\": 1}"),
            ("t2", "x", "{bad"),
            ("t3", "y", "[1, 2]"),
        ],
        5,
        2,
    );
    let v = body(&r);
    // No text block for empty text.
    assert_eq!(
        v["content"],
        json!([
            {"type": "tool_use", "id": "t1", "name": "search", "input": {"q": 1}},
            {"type": "tool_use", "id": "t2", "name": "x", "input": "{bad"},
            {"type": "tool_use", "id": "t3", "name": "y", "input": "[1, 2]"}
        ])
    );
    assert_eq!(v["stop_reason"], "tool_use");
    let with_text = body(&anthropic::message(
        "let me look",
        &[("t1", "search", "{}")],
        1,
        1,
    ));
    assert_eq!(
        with_text["content"][0],
        json!({"type": "text", "text": "let me look"})
    );
    assert_eq!(with_text["content"][1]["input"], json!({}));
}

#[test]
fn an_anthropic_error_has_the_status_and_the_error_body() {
    let r = anthropic::error(529, "overloaded");
    assert_eq!(r.status, 529);
    assert_eq!(
        body(&r),
        json!({"type": "error", "error": {"type": "test_error", "message": "overloaded"}})
    );
}

#[test]
fn a_transcript_becomes_one_response_per_reply() {
    type Build = fn(&str, &[(&str, &str, &str)], u64, u64) -> Response;
    type Read = fn(&str) -> Result<Vec<Response>, String>;
    let formats: [(Read, Build); 2] = [
        (openai::transcript, openai::completion),
        (anthropic::transcript, anthropic::message),
    ];
    for (transcript, build) in formats {
        assert_eq!(
            transcript(TRANSCRIPT).unwrap(),
            [
                build(
                    "looking",
                    &[
                        ("c1", "search", r#"{"query":"crash"}"#),
                        ("c2", "issue_file", "{not json")
                    ],
                    10,
                    4
                ),
                build("done", &[], 20, 2),
            ]
        );
    }
    assert!(openai::transcript("[").unwrap_err().starts_with("not JSON"));
    assert_eq!(
        anthropic::transcript("{}").unwrap_err(),
        "no \"replies\" array"
    );
}
