//! Shared lives with shared tails give every shareable design sweep the
//! report of brute force, byte for byte: the book chapter's five designs,
//! the wrong-person and changing-model worlds (whose probes count the
//! person's questions and the model's repeated asks as behaviour), at
//! depths 1 and 2 on the book's job and at depth 3 on a short one.

use designs::{variants, Design, DesignSubject, Script, Storage};
use sweep::{Config, Report, Subject};

fn json(r: &Report) -> String {
    serde_json::to_string(r).unwrap()
}

fn same(subject: &DesignSubject, depth: u32) {
    let config = Config {
        depth,
        threads: Some(2),
        ..Config::default()
    };
    let shared = sweep::run(subject, &config).unwrap();
    let stats = &shared.stats;
    assert!(stats.shared, "{} shares", subject.name());
    let brute = sweep::run(
        subject,
        &Config {
            share: false,
            ..config
        },
    )
    .unwrap();
    assert_eq!(
        json(&shared),
        json(&brute),
        "{} at depth {depth}",
        subject.name()
    );
}

#[test]
fn every_shareable_design_sweep_is_brute_force_byte_for_byte() {
    let book = Script::load(designs::default_script_path()).unwrap();
    let mut subjects: Vec<DesignSubject> = Design::ALL
        .into_iter()
        .map(|d| d.subject(&book, Storage::Memory))
        .collect();
    subjects.extend(
        variants::person_variants()
            .into_iter()
            .chain(variants::model_variants())
            .map(|v| v.subject(&book)),
    );
    for s in &subjects {
        for depth in [1, 2] {
            same(s, depth);
        }
    }
}

#[test]
fn depth_three_on_a_short_job_is_brute_force_byte_for_byte() {
    let short = Script::synthetic(2);
    for d in Design::ALL {
        same(&d.subject(&short, Storage::Memory), 3);
    }
    // A person wrong at the first question, and a model that mints new
    // calls when asked again.
    let person = variants::person_variants().remove(0);
    let model = variants::model_variants().remove(2);
    for v in [person, model] {
        same(&v.subject(&short), 3);
    }
}
