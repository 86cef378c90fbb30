//! Every kind of bad scenario is refused before anything runs: exit code 2, an error
//! naming file:line:col and what is wrong, and no run directory.

use std::path::Path;

use hearsay_tests::{hearsay, path_str, root, run_ok, scenario};

const BASE: &str = r#"name = "tiny"
seed = 3
ticks = 10

[world]
width = 24
height = 16
hearing_radius = 3

[[places]]
name = "market"
at = [15, 8]

[[npcs]]
name = "Bob"
persona = "The fishmonger's son."
at = [14, 8]
memories = [{ content = "The market nearby is selling fresh fish.", importance = 8 }]

[[npcs]]
name = "Alice"
persona = "A baker."
at = [11, 7]

[[events]]
tick = 5
place = "market"
text = "A festival begins."
"#;

/// 1-based line and column of the first `anchor` in `text`.
fn locate(text: &str, anchor: &str) -> (usize, usize) {
    let at = text
        .find(anchor)
        .unwrap_or_else(|| panic!("{anchor:?} not in the scenario"));
    let before = &text[..at];
    let line = before.matches('\n').count() + 1;
    let col = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    (line, col)
}

/// Runs both `validate` and `run` on `bytes` and checks the refusal.
fn assert_refused(dir: &Path, name: &str, bytes: &[u8], location: (usize, usize), message: &str) {
    let file = dir.join(format!("{name}.toml"));
    std::fs::write(&file, bytes).expect("write scenario");
    let out = dir.join(format!("{name}-run"));
    let expected = format!("{}:{}:{}", file.display(), location.0, location.1);
    for args in [
        vec!["validate", path_str(&file)],
        vec!["run", path_str(&file), "--out", path_str(&out)],
    ] {
        let output = hearsay(dir, &args);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(
            output.status.code(),
            Some(2),
            "{name}: `{}` exits 2\n{stderr}",
            args[0]
        );
        assert!(
            stderr.contains(&expected),
            "{name}: stderr names {expected}\n{stderr}"
        );
        assert!(
            stderr.contains(message),
            "{name}: stderr says {message:?}\n{stderr}"
        );
        assert!(output.stdout.is_empty(), "{name}: nothing on stdout");
        assert!(
            !out.exists(),
            "{name}: a refused run creates no run directory"
        );
    }
}

#[test]
fn every_bad_scenario_is_refused_with_file_line_and_column() {
    let dir = tempfile::tempdir().expect("tempdir");
    // (case, replace, with, anchor in the result, message)
    let cases: &[(&str, &str, &str, &str, &str)] = &[
        (
            "unknown-key",
            "seed = 3",
            "seed = 3\nsede = 4",
            "sede",
            "unknown field `sede`",
        ),
        (
            "wrong-type",
            "ticks = 10",
            "ticks = \"ten\"",
            "\"ten\"",
            "invalid type: string \"ten\", expected u64",
        ),
        (
            "toml-syntax",
            "ticks = 10",
            "ticks = = 10",
            "= 10",
            "extra `=`",
        ),
        (
            "off-map",
            "at = [14, 8]",
            "at = [14, 16]",
            "[14, 16]",
            "NPC \"Bob\" at (14, 16) is off the map",
        ),
        (
            "negative-position",
            "at = [11, 7]",
            "at = [-1, 7]",
            "[-1, 7]",
            "off the map",
        ),
        (
            "duplicate-name",
            "name = \"Alice\"",
            "name = \"Bob\"",
            "\"Bob\"\npersona = \"A baker",
            "NPC name \"Bob\" is used twice",
        ),
        (
            "empty-name",
            "name = \"Alice\"",
            "name = \"\"",
            "\"\"",
            "an NPC name is empty",
        ),
        (
            "unknown-place",
            "place = \"market\"",
            "place = \"harbour\"",
            "\"harbour\"",
            "unknown place \"harbour\"",
        ),
        (
            "unknown-brain",
            "at = [11, 7]",
            "at = [11, 7]\nbrain = \"gemini\"",
            "\"gemini\"",
            "unknown brain \"gemini\"",
        ),
        (
            "importance-high",
            "importance = 8",
            "importance = 11",
            "11 }",
            "importance 11 is outside 1–10",
        ),
        (
            "importance-zero",
            "importance = 8",
            "importance = 0",
            "0 }",
            "importance 0 is outside 1–10",
        ),
        ("zero-ticks", "ticks = 10", "ticks = 0", "0\n", "ticks = 0"),
        (
            "event-too-late",
            "tick = 5",
            "tick = 10",
            "10\nplace",
            "never fires",
        ),
    ];
    for (name, from, to, anchor, message) in cases {
        assert!(BASE.contains(from), "{name}: {from:?} is in BASE");
        let text = BASE.replacen(from, to, 1);
        let location = locate(&text, anchor);
        assert_refused(dir.path(), name, text.as_bytes(), location, message);
    }
}

#[test]
fn no_npcs_and_invalid_utf8_are_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let start = BASE.find("[[npcs]]").expect("npcs");
    let end = BASE.find("[[events]]").expect("events");
    let no_npcs = format!("{}{}", &BASE[..start], &BASE[end..]);
    assert_refused(dir.path(), "no-npcs", no_npcs.as_bytes(), (1, 1), "no NPCs");

    let mut bytes = BASE
        .replacen("A baker.", "A baker from Caf\u{0}", 1)
        .into_bytes();
    let nul = bytes.iter().position(|&b| b == 0).expect("marker");
    bytes[nul] = 0xE9; // Latin-1 'é': not UTF-8
    let text = String::from_utf8_lossy(&bytes).into_owned();
    let location = locate(&text, "\u{FFFD}");
    assert_refused(dir.path(), "latin1", &bytes, location, "not valid UTF-8");
}

#[test]
fn a_missing_scenario_file_is_bad_input() {
    let dir = tempfile::tempdir().expect("tempdir");
    let output = hearsay(dir.path(), &["run", "no-such-file.toml"]);
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("cannot read scenario no-such-file.toml"),
        "{stderr}"
    );
    assert!(!dir.path().join("runs").exists());
}

#[test]
fn an_existing_run_directory_needs_force_and_only_a_run_directory_is_replaced() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("tiny.toml");
    std::fs::write(&file, BASE).expect("write");
    let out = dir.path().join("run");
    run_ok(&file, &out, &[]);

    let again = hearsay(&root(), &["run", path_str(&file), "--out", path_str(&out)]);
    assert_eq!(again.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&again.stderr).contains("already exists"));
    run_ok(&file, &out, &["--force"]);

    let precious = dir.path().join("precious");
    std::fs::create_dir(&precious).expect("mkdir");
    std::fs::write(precious.join("thesis.txt"), "do not delete").expect("write");
    let refused = hearsay(
        &root(),
        &[
            "run",
            path_str(&file),
            "--out",
            path_str(&precious),
            "--force",
        ],
    );
    assert_eq!(refused.status.code(), Some(2));
    assert!(
        precious.join("thesis.txt").is_file(),
        "--force never deletes a directory that is not a run"
    );
}

#[test]
fn the_shipped_scenarios_validate() {
    for name in ["fish-market.toml", "fish-market-zh.toml", "rumour-200.toml"] {
        let output = hearsay(&root(), &["validate", path_str(&scenario(name))]);
        assert!(
            output.status.success(),
            "{name}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        assert!(String::from_utf8_lossy(&output.stdout).starts_with("ok: "));
    }
}

#[test]
fn a_zero_tick_override_is_bad_input() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("run");
    let output = hearsay(
        &root(),
        &[
            "run",
            path_str(&scenario("fish-market.toml")),
            "--ticks",
            "0",
            "--out",
            path_str(&out),
        ],
    );
    assert_eq!(output.status.code(), Some(2));
    assert!(!out.exists());
}
