//! The README's first sweep, run: its code is `examples/first_sweep.rs`
//! byte for byte, and the red and green tables the README prints are what
//! the example prints, with and without the fix.

#[allow(dead_code)]
mod example {
    include!("../../examples/first_sweep.rs");

    pub fn table(keyed: bool) -> (String, usize) {
        let report = sweep::run(&Payday { keyed }, &Config::default()).unwrap();
        (sweep::table(&[report.row()]), report.failures().count())
    }
}

fn readme() -> String {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../README.md");
    std::fs::read_to_string(path).unwrap()
}

/// The fenced blocks of `text` whose info string is `lang`, in order.
fn blocks(text: &str, lang: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur: Option<String> = None;
    for line in text.lines() {
        match (&mut cur, line.strip_prefix("```")) {
            (None, Some(info)) if info.trim() == lang => cur = Some(String::new()),
            (Some(_), Some("")) => out.push(cur.take().unwrap()),
            (Some(body), _) => {
                body.push_str(line);
                body.push('\n');
            }
            _ => {}
        }
    }
    out
}

#[test]
fn the_readme_opens_with_the_example_as_it_is() {
    let source = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/examples/first_sweep.rs"
    ))
    .unwrap();
    let first = blocks(&readme(), "rust").into_iter().next();
    assert_eq!(
        first.as_deref(),
        Some(source.as_str()),
        "README.md's first rust block differs from crates/sweep/examples/first_sweep.rs"
    );
}

#[test]
fn the_readme_prints_the_red_table_and_the_green_one() {
    let texts = blocks(&readme(), "text");
    let (red, red_failures) = example::table(false);
    let (green, green_failures) = example::table(true);
    assert!(red_failures > 0, "the unkeyed payday passed every scenario");
    assert_eq!(green_failures, 0, "the keyed payday failed:\n{green}");
    for (name, table) in [("red", &red), ("green", &green)] {
        assert!(
            texts.iter().any(|t| t.trim_end() == table.trim_end()),
            "README.md does not print the {name} table the example prints:\n{table}"
        );
    }
}
