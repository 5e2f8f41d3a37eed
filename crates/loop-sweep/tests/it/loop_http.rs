//! The loop's sweep with the model over a real socket: each life's model is
//! an `OpenAi` client of the loopback test provider, which serves the
//! sweep's job turn by turn in the Chat Completions format. Every crash
//! point, single and double, keyed, must give the scripted sweep's counts,
//! and the provider must have seen exactly the model calls the judge
//! counted: the crash points (`reply arrived` among them, right after the
//! HTTP response) hold across HTTP.

use std::sync::Arc;

use agent::model::Model;
use agent::provider::{ApiKey, OpenAi, Retry};
use sweep::Config;
use test_provider::{openai, Script, TestProvider};

#[test]
fn crash_points_hold_with_the_model_over_http() {
    let job = loop_sweep::JOB;
    let server = TestProvider::start(Script::by_turn(openai::transcript(job).unwrap())).unwrap();
    let url = server.url();
    let scripted =
        loop_sweep::subject(loop_sweep::plain(true, loop_sweep::Situation::Plain), None).unwrap();
    let http = scripted.clone().with_model(
        "model over HTTP",
        Arc::new(move || {
            let key = ApiKey::new("sk-loopback").map_err(|e| e.to_string())?;
            let client = OpenAi::new(&url, key, "test-model")
                .map_err(|e| e.to_string())?
                .with_retry(Retry::never());
            Ok(Box::new(client) as Box<dyn Model>)
        }),
    );
    let config = Config::default();
    let want = sweep::run(&scripted, &config).unwrap();
    let got = sweep::run(&http, &config).unwrap();
    assert_eq!(got.failures().count(), 0);
    assert_eq!(got.row().variant, "loop keyed, model over HTTP");
    let (w, g) = (want.row(), got.row());
    assert_eq!(
        (&g.depth_counts, &g.cells),
        (&w.depth_counts, &w.cells),
        "the same counts over HTTP"
    );
    assert_eq!(got.scenarios.len(), want.scenarios.len());
    // The judge counts model calls beyond the clean run's: each scenario
    // made the clean run's calls (one per reply) plus its own extra ones,
    // and the sweep's clean run (run `clean_runs` times, to check it is
    // deterministic) records the hits.
    let clean = agent::model::Transcript::parse(job, "job")
        .unwrap()
        .replies
        .len() as u64;
    let extra: u64 = got
        .scenarios
        .iter()
        .map(|s| got.value(s, "model calls"))
        .sum();
    assert_eq!(
        server.count() as u64,
        (got.scenarios.len() as u64 + u64::from(config.clean_runs)) * clean + extra,
        "one request per model call the judge counted"
    );
    eprintln!(
        "{} scenarios over HTTP, {} requests; row {:?}",
        got.scenarios.len(),
        server.count(),
        g
    );
}
