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
    if let Err(wrong) = check_refused(dir, name, bytes, location, message) {
        panic!("{wrong}");
    }
}

/// What is wrong with how `validate` and `run` refuse `bytes`, if anything: each must
/// exit 2, name `file:line:col` and say `message`, print nothing on stdout and create
/// no run directory.
fn check_refused(
    dir: &Path,
    name: &str,
    bytes: &[u8],
    location: (usize, usize),
    message: &str,
) -> Result<(), String> {
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
        let mut wrong = Vec::new();
        if output.status.code() != Some(2) {
            wrong.push(format!("exits {:?}, not 2", output.status.code()));
        }
        if !stderr.contains(&expected) {
            wrong.push(format!("does not name {expected}"));
        }
        if !stderr.contains(message) {
            wrong.push(format!("does not say {message:?}"));
        }
        if !output.stdout.is_empty() {
            wrong.push("prints on stdout".to_owned());
        }
        if out.exists() {
            wrong.push("creates a run directory".to_owned());
        }
        if !wrong.is_empty() {
            return Err(format!(
                "{name}: `{}`: {}\n{stderr}",
                args[0],
                wrong.join("; ")
            ));
        }
    }
    Ok(())
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
    for name in [
        "fish-market.toml",
        "fish-market-zh.toml",
        "rumour-200.toml",
        "forgetful-village.toml",
        "fish-market-llm.toml",
    ] {
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

/// Every key a scenario may have, each set once (`tests/every-field.toml`).
fn every_field() -> String {
    std::fs::read_to_string(root().join("tests/every-field.toml")).expect("every-field.toml")
}

/// `(line index, key, value)` of every `key = value` line of `text`, with the table
/// header it is under.
fn entries(text: &str) -> Vec<(usize, String, String, String)> {
    let mut section = String::new();
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.starts_with('[') {
            section = line.to_owned();
        } else if let Some((key, value)) = line.split_once(" = ")
            && !line.starts_with('#')
        {
            out.push((i, section.clone(), key.to_owned(), value.to_owned()));
        }
    }
    out
}

/// `text` with line `i` replaced.
fn with_line(text: &str, i: usize, line: &str) -> String {
    let mut lines: Vec<&str> = text.lines().collect();
    lines[i] = line;
    lines.join("\n") + "\n"
}

#[test]
fn the_every_field_scenario_is_valid() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("every-field.toml");
    std::fs::write(&file, every_field()).expect("write");
    let output = hearsay(dir.path(), &["validate", path_str(&file)]);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
}

/// `whisper` is a heuristic brain's knob: on a model's brain it is refused where it is.
#[test]
fn whisper_on_a_model_brain_is_refused_where_it_is() {
    let dir = tempfile::tempdir().expect("tempdir");
    let text = every_field();
    let (i, ..) = entries(&text)
        .into_iter()
        .find(|(_, s, k, _)| s == "[brains.llm]" && k == "model")
        .expect("[brains.llm] has a model");
    let model = text.lines().nth(i).expect("the line");
    let mutated = with_line(&text, i, &format!("{model}\nwhisper = 0.5"));
    check_refused(
        dir.path(),
        "whisper-llm",
        mutated.as_bytes(),
        (i + 2, 11),
        "whisper is only used with provider = \"heuristic\"",
    )
    .unwrap_or_else(|wrong| panic!("{wrong}"));
}

/// A `base_url` list of replicas that is empty, too long, names a server twice or holds
/// a URL that is not one: refused where it is wrong, naming the section.
#[test]
fn bad_base_url_lists_are_refused_where_they_are_wrong() {
    let dir = tempfile::tempdir().expect("tempdir");
    let text = every_field();
    let (i, ..) = entries(&text)
        .into_iter()
        .find(|(_, s, k, _)| s == "[brains.llm]" && k == "base_url")
        .expect("[brains.llm] has a base_url");
    let at = |line: &str, anchor: &str| {
        line.find(anchor)
            .map(|c| c + 1)
            .expect("anchor in the line")
    };
    let many: Vec<String> = (0..65)
        .map(|n| format!("\"http://127.0.0.1:{}/v1\"", 9000 + n))
        .collect();
    let cases: Vec<(&str, String, &str, String)> = vec![
        (
            "empty",
            "base_url = []".to_owned(),
            "[]",
            "base_url in [brains.llm] is an empty list".to_owned(),
        ),
        (
            "too-long",
            format!("base_url = [{}]", many.join(", ")),
            "[",
            "base_url in [brains.llm] lists 65 servers; at most 64".to_owned(),
        ),
        (
            "duplicate",
            "base_url = [\"http://127.0.0.1:8080/v1\", \"http://127.0.0.1:8081/v1\", \"http://127.0.0.1:8080/v1/\"]".to_owned(),
            "\"http://127.0.0.1:8080/v1/\"",
            "base_url in [brains.llm] lists http://127.0.0.1:8080/v1/ twice".to_owned(),
        ),
        (
            "not-a-url",
            "base_url = [\"http://127.0.0.1:8080/v1\", \"127.0.0.1:8081\"]".to_owned(),
            "\"127.0.0.1:8081\"",
            "base_url must start with http:// or https://".to_owned(),
        ),
    ];
    let mut failures = Vec::new();
    for (name, line, anchor, message) in &cases {
        let mutated = with_line(&text, i, line);
        if let Err(wrong) = check_refused(
            dir.path(),
            &format!("base-url-{name}"),
            mutated.as_bytes(),
            (i + 1, at(line, anchor)),
            message,
        ) {
            failures.push(wrong);
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Every key of a scenario that sets every key, misspelled and then given a value of the
/// wrong type, in turn: refused at that key or value.
#[test]
fn every_key_misspelled_or_of_the_wrong_type_is_refused_where_it_is() {
    let dir = tempfile::tempdir().expect("tempdir");
    let text = every_field();
    let mut failures = Vec::new();
    let mut tried = 0;
    for (i, section, key, value) in entries(&text) {
        let wrong_type = match value.chars().next() {
            Some('"') => "12",
            Some('[') => "7",
            _ => "\"x\"",
        };
        let cases = [
            (
                format!("{key}x = {value}"),
                (i + 1, 1),
                format!("unknown field `{key}x`"),
            ),
            (
                format!("{key} = {wrong_type}"),
                (i + 1, key.len() + 4),
                "invalid type".to_owned(),
            ),
        ];
        for (n, (line, location, message)) in cases.into_iter().enumerate() {
            let name = format!("line{}-{n}", i + 1);
            let mutated = with_line(&text, i, &line);
            if let Err(wrong) =
                check_refused(dir.path(), &name, mutated.as_bytes(), location, &message)
            {
                failures.push(format!("{section} {line}: {wrong}"));
            }
            tried += 1;
        }
    }
    println!(
        "figure: bad scenarios: {tried} misspelled keys and wrong types refused at file:line:col"
    );
    assert!(tried > 150, "only {tried} cases");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Every key given a value of the right type that is still wrong (out of range, unknown
/// name, empty, unreachable, contradicting another key), in turn.
#[test]
fn every_field_out_of_range_is_refused_where_it_is() {
    // (table, key, n-th such key in the table, value, what the error says)
    let cases: &[(&str, &str, usize, &str, &str)] = &[
        ("", "name", 1, "\"\"", "the scenario name is empty"),
        ("", "ticks", 1, "0", "ticks = 0: the run would do nothing"),
        (
            "",
            "ticks",
            1,
            "99999999",
            "ticks = 99999999 is more than 10000000",
        ),
        (
            "",
            "language",
            1,
            "\"fr\"",
            "unknown variant `fr`, expected `en` or `zh`",
        ),
        (
            "[world]",
            "width",
            1,
            "0",
            "world width 0 must be 1..=100000",
        ),
        (
            "[world]",
            "height",
            1,
            "200000",
            "world height 200000 must be 1..=100000",
        ),
        (
            "[world]",
            "sight_radius",
            1,
            "1",
            "sight_radius 1 is smaller than hearing_radius 3",
        ),
        ("[[places]]", "name", 1, "\"  \"", "a place name is empty"),
        (
            "[[places]]",
            "at",
            1,
            "[24, 0]",
            "place \"market\" at (24, 0) is off the map",
        ),
        (
            "[[places]]",
            "at",
            1,
            "[0, -1]",
            "place \"market\" at (0, -1) is off the map",
        ),
        (
            "[[npcs]]",
            "name",
            2,
            "\"Bob\"",
            "NPC name \"Bob\" is used twice",
        ),
        (
            "[[npcs]]",
            "at",
            1,
            "[3, 16]",
            "NPC \"Bob\" at (3, 16) is off the map",
        ),
        (
            "[[npcs]]",
            "brain",
            1,
            "\"nobody\"",
            "unknown brain \"nobody\"",
        ),
        (
            "[[npcs.memories]]",
            "content",
            1,
            "\"\"",
            "a memory's content is empty",
        ),
        (
            "[[npcs.memories]]",
            "importance",
            1,
            "11",
            "importance 11 is outside 1–10",
        ),
        (
            "[[npcs.memories]]",
            "importance",
            1,
            "0",
            "importance 0 is outside 1–10",
        ),
        (
            "[[events]]",
            "place",
            1,
            "\"mill\"",
            "unknown place \"mill\"",
        ),
        ("[[events]]", "text", 1, "\"\"", "an event's text is empty"),
        (
            "[[events]]",
            "importance",
            1,
            "0",
            "importance 0 is outside 1–10",
        ),
        ("[[facts]]", "name", 1, "\"\"", "a fact name is empty"),
        (
            "[[facts]]",
            "match",
            1,
            "[]",
            "match needs at least one non-empty string",
        ),
        (
            "[[facts]]",
            "match",
            1,
            "[\"\"]",
            "match needs at least one non-empty string",
        ),
        ("[[expect]]", "fact", 1, "\"gold\"", "unknown fact \"gold\""),
        (
            "[[expect]]",
            "share_at_least",
            1,
            "1.5",
            "a share is a fraction of the NPCs, from 0 to 1, not 1.5",
        ),
        (
            "[[expect]]",
            "share_at_most",
            1,
            "-0.1",
            "from 0 to 1, not -0.1",
        ),
        (
            "[[expect]]",
            "knowers_at_least",
            1,
            "3",
            "knowers_at_least = 3 can never be met: the scenario has 2 NPCs",
        ),
        ("[[expect]]", "npc", 1, "\"Zed\"", "unknown NPC \"Zed\""),
        (
            "[[expect]]",
            "knows",
            1,
            "\"gold\"",
            "unknown fact \"gold\"",
        ),
        (
            "[[expect]]",
            "reaches",
            1,
            "\"mill\"",
            "unknown place \"mill\"",
        ),
        (
            "[[expect]]",
            "within",
            1,
            "200000",
            "within = 200000 covers the whole 24 × 16 map",
        ),
        (
            "[brain]",
            "provider",
            1,
            "\"magic\"",
            "unknown variant `magic`, expected `heuristic` or `openai`",
        ),
        (
            "[brain]",
            "max_concurrency",
            1,
            "0",
            "max_concurrency must be 1..=10000",
        ),
        (
            "[brains.llm]",
            "provider",
            1,
            "\"anthropic\"",
            "unknown variant `anthropic`",
        ),
        (
            "[brains.llm]",
            "base_url",
            1,
            "\"ftp://x\"",
            "base_url must start with http:// or https://",
        ),
        ("[brains.llm]", "base_url", 1, "\"\"", "base_url is empty"),
        ("[brains.llm]", "model", 1, "\"\"", "model is empty"),
        (
            "[brains.llm]",
            "api_key_env",
            1,
            "\"sk-123 abc\"",
            "api_key_env must name an environment variable",
        ),
        (
            "[brains.llm]",
            "timeout_ms",
            1,
            "0",
            "timeout_ms must be 1..=600000 (ten minutes)",
        ),
        (
            "[brains.llm]",
            "max_retries",
            1,
            "1000",
            "max_retries must be 0..=20",
        ),
        (
            "[brains.llm]",
            "retry_base_ms",
            1,
            "99999999999",
            "retry_base_ms must be 0..=60000",
        ),
        (
            "[brains.llm]",
            "requests_per_minute",
            1,
            "0",
            "requests_per_minute must be at least 1",
        ),
        (
            "[brains.llm]",
            "temperature",
            1,
            "3.0",
            "temperature must be between 0 and 2",
        ),
        (
            "[brains.llm]",
            "max_tokens",
            1,
            "4",
            "max_tokens below 16 cannot hold a decision",
        ),
        (
            "[brains.llm]",
            "response_format",
            1,
            "\"yaml\"",
            "unknown variant `yaml`",
        ),
        (
            "[brain]",
            "whisper",
            1,
            "1.5",
            "whisper must be between 0 and 1",
        ),
        (
            "[brain]",
            "whisper",
            1,
            "nan",
            "whisper must be between 0 and 1",
        ),
        (
            "[brains.llm]",
            "breaker_failures",
            1,
            "0",
            "breaker_failures must be at least 1",
        ),
        (
            "[brains.llm]",
            "max_concurrency",
            1,
            "0",
            "max_concurrency must be 1..=10000",
        ),
        (
            "[brains.llm]",
            "think",
            1,
            "\"sometimes\"",
            "unknown variant `sometimes`, expected `every_tick` or `on_change`",
        ),
        (
            "[brains.llm]",
            "max_idle_ticks",
            1,
            "0",
            "max_idle_ticks must be 1..=1000000",
        ),
        (
            "[brains.llm]",
            "reflect_retry_ticks",
            1,
            "0",
            "reflect_retry_ticks must be 1..=1000000",
        ),
        (
            "[brains.llm]",
            "reflect_max_tokens",
            1,
            "8",
            "reflect_max_tokens must be 16..=",
        ),
        (
            "[brain]",
            "retell_noise",
            1,
            "1.5",
            "retell_noise must be from 0 to 1, not 1.5",
        ),
        (
            "[brain]",
            "retell_noise",
            1,
            "-0.1",
            "retell_noise must be from 0 to 1, not -0.1",
        ),
        (
            "[memory]",
            "store",
            1,
            "\"redis\"",
            "unknown variant `redis`, expected `sqlite` or `postgres`",
        ),
        (
            "[[facts]]",
            "statement",
            1,
            "\"  \"",
            "a fact's statement is empty",
        ),
        (
            "[[facts]]",
            "similarity",
            1,
            "1.5",
            "similarity is a cosine similarity, above 0 and at most 1, not 1.5",
        ),
        (
            "[[facts]]",
            "candidate",
            1,
            "0.9",
            "candidate 0.9 is not below similarity 0.8",
        ),
        (
            "[[facts]]",
            "judge",
            1,
            "\"oracle\"",
            "unknown brain \"oracle\"",
        ),
        (
            "[[facts]]",
            "distorted_below",
            1,
            "0.0",
            "distorted_below is a cosine similarity, above 0 and at most 1, not 0",
        ),
        ("[memory]", "recall_k", 1, "0", "recall_k must be 1..=100"),
        ("[memory]", "recall_k", 1, "101", "recall_k must be 1..=100"),
        (
            "[memory]",
            "visibility",
            1,
            "\"sometimes\"",
            "unknown variant `sometimes`",
        ),
        (
            "[memory]",
            "short_term",
            1,
            "1000",
            "short_term must be 0..=100 memories",
        ),
        (
            "[memory]",
            "barrier_timeout_ms",
            1,
            "0",
            "barrier_timeout_ms must be at least 1",
        ),
        (
            "[memory]",
            "drain_timeout_ms",
            1,
            "0",
            "drain_timeout_ms must be at least 1",
        ),
        (
            "[memory]",
            "chunk_chars",
            1,
            "8",
            "chunk_chars must be 16..=100000 characters",
        ),
        (
            "[memory]",
            "chunk_overlap",
            1,
            "300",
            "chunk_overlap must be less than half of chunk_chars (400)",
        ),
        (
            "[memory.scoring]",
            "w_rel",
            1,
            "-1.0",
            "w_rel must be a finite number ≥ 0",
        ),
        (
            "[memory.scoring]",
            "w_rec",
            1,
            "nan",
            "w_rec must be a finite number ≥ 0",
        ),
        (
            "[memory.scoring]",
            "w_imp",
            1,
            "inf",
            "w_imp must be a finite number ≥ 0",
        ),
        (
            "[memory.scoring]",
            "decay",
            1,
            "0.0",
            "decay must be in (0, 1]",
        ),
        (
            "[memory.scoring]",
            "decay",
            1,
            "1.5",
            "decay must be in (0, 1]",
        ),
        (
            "[memory.scoring]",
            "candidates",
            1,
            "0",
            "candidates must be 1..=10000",
        ),
        (
            "[memory.forget]",
            "threshold",
            1,
            "1.0",
            "threshold must be in [0, 1)",
        ),
        (
            "[memory.forget]",
            "strength",
            1,
            "0.0",
            "strength must be a number of ticks > 0",
        ),
        (
            "[memory.forget]",
            "recall_boost",
            1,
            "-1.0",
            "recall_boost must be a finite number ≥ 0",
        ),
        (
            "[memory.reflect]",
            "threshold",
            1,
            "-1",
            "invalid value: integer `-1`, expected u32",
        ),
        (
            "[memory.reflect]",
            "evidence",
            1,
            "0",
            "evidence must be 1..=500 memories",
        ),
        (
            "[memory.reflect]",
            "evidence",
            1,
            "501",
            "evidence must be 1..=500 memories",
        ),
        (
            "[memory.reflect]",
            "insights",
            1,
            "0",
            "insights must be 1..=10",
        ),
        (
            "[memory.reflect]",
            "insights",
            1,
            "11",
            "insights must be 1..=10",
        ),
        (
            "[memory.embedder]",
            "provider",
            1,
            "\"word2vec\"",
            "unknown variant `word2vec`",
        ),
        (
            "[memory.embedder]",
            "base_url",
            1,
            "\"localhost:8081\"",
            "base_url must start with http:// or https://",
        ),
        ("[memory.embedder]", "model", 1, "\" \"", "model is empty"),
        (
            "[memory.embedder]",
            "api_key_env",
            1,
            "\"\"",
            "api_key_env must name an environment variable",
        ),
        (
            "[memory.embedder]",
            "timeout_ms",
            1,
            "0",
            "timeout_ms must be 1..=600000 (ten minutes)",
        ),
        (
            "[memory.embedder]",
            "max_retries",
            1,
            "21",
            "max_retries must be 0..=20",
        ),
        (
            "[memory.embedder]",
            "retry_base_ms",
            1,
            "60001",
            "retry_base_ms must be 0..=60000",
        ),
        (
            "[memory.embedder]",
            "requests_per_minute",
            1,
            "0",
            "requests_per_minute must be at least 1",
        ),
        (
            "[memory.embedder]",
            "batch_size",
            1,
            "0",
            "batch_size must be 1..=10000",
        ),
        (
            "[memory.embedder]",
            "dimensions",
            1,
            "0",
            "dimensions must be 1..=1536",
        ),
        (
            "[memory.embedder]",
            "dimensions",
            1,
            "3072",
            "dimensions must be 1..=1536",
        ),
        (
            "[memory.embedder]",
            "max_concurrency",
            1,
            "0",
            "max_concurrency must be 1..=10000",
        ),
        (
            "[run]",
            "checkpoint_every",
            1,
            "-1",
            "invalid value: integer `-1`, expected u64",
        ),
        // Bounds on everything a scenario's author controls (sizes, counts, time).
        (
            "[world]",
            "hearing_radius",
            1,
            "1500000000",
            "hearing_radius must be 0..=200000 cells",
        ),
        (
            "[world]",
            "sight_radius",
            1,
            "4000000000",
            "sight_radius must be 0..=200000 cells",
        ),
        (
            "[world]",
            "max_listeners",
            1,
            "0",
            "max_listeners must be 1..=10000",
        ),
        (
            "[[npcs]]",
            "name",
            1,
            "\"Bob\\u001b]0;pwned\\u0007\"",
            "an NPC name holds a control character (\\u{1b}, \\u{7})",
        ),
        (
            "[[npcs]]",
            "name",
            1,
            "\"Bob\\nfact \\\"x\\\": 2 of 2\"",
            "an NPC name holds a control character (\\u{a})",
        ),
        (
            "[[places]]",
            "name",
            1,
            "\"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\"",
            "a place name is 119 characters long; at most 100",
        ),
        (
            "[brains.llm]",
            "timeout_ms",
            1,
            "1000000000",
            "timeout_ms must be 1..=600000 (ten minutes)",
        ),
        (
            "[brains.llm]",
            "context_tokens",
            1,
            "100",
            "context_tokens must be more than max_tokens (256) and at most 10000000",
        ),
        (
            "[brains.llm]",
            "max_response_bytes",
            1,
            "10",
            "max_response_bytes must be 1024..=268435456",
        ),
        (
            "[memory.embedder]",
            "max_response_bytes",
            1,
            "999999999999",
            "max_response_bytes must be 1024..=268435456",
        ),
        (
            "[memory.embedder]",
            "batch_size",
            1,
            "100000",
            "batch_size must be 1..=10000",
        ),
        (
            "[memory.embedder]",
            "cache_entries",
            1,
            "4000000000",
            "cache_entries must be 0..=10000000",
        ),
    ];
    let dir = tempfile::tempdir().expect("tempdir");
    let text = every_field();
    let all = entries(&text);
    let mut failures = Vec::new();
    for (n, &(table, key, nth, value, message)) in cases.iter().enumerate() {
        let Some((i, ..)) = all
            .iter()
            .filter(|(_, s, k, _)| s == table && k == key)
            .nth(nth - 1)
        else {
            panic!("every-field.toml has no {key} #{nth} under {table:?}");
        };
        let mutated = with_line(&text, *i, &format!("{key} = {value}"));
        let location = (i + 1, key.len() + 4);
        if let Err(wrong) = check_refused(
            dir.path(),
            &format!("range{n}"),
            mutated.as_bytes(),
            location,
            message,
        ) {
            failures.push(format!("{table} {key} = {value}: {wrong}"));
        }
    }
    println!(
        "figure: bad scenarios: {} out-of-range or dangling values refused at file:line:col",
        cases.len()
    );
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
