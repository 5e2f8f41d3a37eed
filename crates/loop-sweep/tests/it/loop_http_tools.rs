//! The loop's sweep with its tracker tools going through the HTTP client
//! to the world's tracker served on 127.0.0.1 (one server per scenario):
//! the crash points hold across a real socket. Every crash of the loop,
//! once per scenario (depth 1), keyed and keyless, plain and with the
//! tracker failing after it accepted.
//!
//! The same job in process is the comparison: the HTTP rows lose exactly
//! the tracker's own point (`tracker accepted`, on the server's thread,
//! outside the sweep's scope) and nothing else, and keep every count the
//! judge requires at zero.

use loop_sweep::{plain, LoopVariant, Situation};
use sweep::{Config, Report};

fn run(variant: LoopVariant, http: bool) -> Report {
    let mut subject = loop_sweep::subject(variant, None).expect("the loop's job loads");
    if http {
        subject = subject.over_http();
    }
    let config = Config {
        depth: 1,
        // Over HTTP the tracker's own point passes on the server's thread,
        // outside the life's scope (see `LoopSubject::over_http`): a sweep
        // refuses that by default; here it is what the test compares.
        refuse_unscoped: !http,
        ..Config::default()
    };
    sweep::run(&subject, &config).expect("the sweep runs")
}

fn total(report: &Report, counter: &str) -> u64 {
    report
        .scenarios
        .iter()
        .map(|s| s.verdict.get(counter))
        .sum()
}

#[test]
fn the_crash_points_hold_across_a_real_socket() {
    for variant in [
        plain(true, Situation::Plain),
        plain(false, Situation::Plain),
        plain(true, Situation::FailAfterAccept),
    ] {
        let name = variant.title();
        let local = run(variant, false);
        let http = run(variant, true);
        let failed: Vec<String> = http
            .failures()
            .take(5)
            .map(|s| {
                format!(
                    "{}: {}",
                    s.scenario,
                    s.failure
                        .as_ref()
                        .map(ToString::to_string)
                        .unwrap_or_default()
                )
            })
            .collect();
        assert!(failed.is_empty(), "{name} over HTTP: {failed:#?}");
        for counter in ["dups", "missing", "gate"] {
            assert_eq!(total(&http, counter), 0, "{name} over HTTP: {counter}");
        }
        let keyed = variant.keyed;
        if keyed {
            assert_eq!(
                total(&http, "asks"),
                0,
                "{name} over HTTP: a keyed run asked"
            );
        } else {
            assert!(
                total(&http, "asks") > 0,
                "{name} over HTTP: the ladder never asked"
            );
        }
        // The same scenarios but those crashing at the tracker's own point.
        let names = |r: &Report| -> Vec<String> {
            r.scenarios
                .iter()
                .map(|s| s.scenario.to_string())
                .filter(|n| !n.starts_with("tracker accepted"))
                .collect()
        };
        assert!(
            local
                .scenarios
                .iter()
                .any(|s| s.scenario.to_string().starts_with("tracker accepted")),
            "{name}: the in-process sweep crashes at the tracker's point"
        );
        assert_eq!(names(&http), names(&local), "{name}: scenarios");
        assert!(
            http.scenarios.len() > 20,
            "{name} over HTTP: {} scenarios",
            http.scenarios.len()
        );
    }
}
