//! The loop's in-memory subjects capture their worlds while a life runs:
//! each restart starts from the copy taken at its crash hit, so a sweep runs
//! well under one life per scenario (without captures each scenario ran its
//! crashed life again), and its report is brute force's, byte for byte.

use sweep::Config;

#[test]
fn captured_restarts_run_under_one_life_per_scenario_with_the_brute_force_report() {
    let subject = loop_sweep::subject(loop_sweep::plain(true, loop_sweep::Situation::Plain), None)
        .expect("the loop's job loads");
    let config = Config {
        depth: 2,
        threads: Some(2),
        ..Config::default()
    };
    let shared = sweep::run(&subject, &config).unwrap();
    let stats = &shared.stats;
    assert!(stats.shared);
    let per = stats.lives as f64 / stats.scenarios as f64;
    // 0.33 with captures; 1.31 without (each scenario ran its crashed
    // life again, leaves reaching a world seen before excepted).
    assert!(per < 0.8, "{per:.2} lives per scenario: {stats:?}");
    let brute = sweep::run(
        &subject,
        &Config {
            share: false,
            ..config
        },
    )
    .unwrap();
    assert_eq!(
        serde_json::to_string(&shared).unwrap(),
        serde_json::to_string(&brute).unwrap()
    );
}
