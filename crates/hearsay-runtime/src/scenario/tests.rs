//! Scenario validation: the good file parses, every bad one is refused at the right spot.

use super::*;

const GOOD: &str = r#"
name = "fish-market"
seed = 42
ticks = 240
language = "en"

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
persona = "A baker who loves cooking fish."
at = [11, 7]

[[events]]
tick = 100
place = "market"
text = "A festival begins at the market."

[[facts]]
name = "fresh fish"
match = ["fresh fish"]

[brain]
provider = "heuristic"

[memory]
store = "sqlite"
recall_k = 5
visibility = "barrier"

[memory.embedder]
provider = "hashing"
"#;

fn problems(text: &str) -> Vec<String> {
    match parse(Path::new("s.toml"), text.as_bytes()) {
        Ok(_) => vec![],
        Err(e) => e.problems().iter().map(|p| p.to_string()).collect(),
    }
}

/// The first problem of `GOOD` with `from` replaced by `to`.
fn first_problem(from: &str, to: &str) -> String {
    assert!(GOOD.contains(from), "{from:?} not in GOOD");
    let found = problems(&GOOD.replacen(from, to, 1));
    assert!(
        !found.is_empty(),
        "replacing {from:?} by {to:?} was accepted"
    );
    found[0].clone()
}

#[test]
fn an_event_after_the_last_tick_is_a_note_not_an_error() {
    // `--ticks 20` (the same as `--set ticks=20`) shortens a run on purpose.
    let s = parse(
        Path::new("s.toml"),
        GOOD.replacen("ticks = 240", "ticks = 20", 1).as_bytes(),
    )
    .expect("valid");
    assert_eq!(
        s.notes,
        vec!["s.toml:28:8: note: the event at tick 100 never fires: this run has ticks 0..19"]
    );
    assert!(
        parse(Path::new("s.toml"), GOOD.as_bytes())
            .expect("valid")
            .notes
            .is_empty()
    );
}

#[test]
fn one_tick_cannot_add_more_than_the_bound() {
    let mut text = GOOD.replacen(
        "hearing_radius = 3",
        "hearing_radius = 3\nmax_listeners = 10000",
        1,
    );
    text.push_str("[[npcs]]\nname = \"N0\"\nat = [1, 1]\n");
    assert!(problems(&text).is_empty(), "3 NPCs are fine");
    let mut crowd = text.clone();
    for i in 1..300 {
        crowd.push_str(&format!("[[npcs]]\nname = \"N{i}\"\nat = [1, 1]\n"));
    }
    assert!(
        problems(&crowd).is_empty(),
        "302 NPCs × 301 listeners = 91,504 memories"
    );
    for i in 300..1500 {
        crowd.push_str(&format!("[[npcs]]\nname = \"N{i}\"\nat = [1, 1]\n"));
    }
    let found = problems(&crowd);
    assert!(
        found[0].starts_with("s.toml:11:17: one tick could add 2262012 memories (1502 NPCs, each talk heard by up to 1501)"),
        "{found:?}"
    );
}

#[test]
fn the_design_example_is_valid() {
    let s = parse(Path::new("s.toml"), GOOD.as_bytes()).expect("valid");
    assert_eq!(s.name, "fish-market");
    assert_eq!((s.seed, s.ticks), (42, 240));
    assert_eq!(s.sight_radius, 6, "defaults to twice the hearing radius");
    assert_eq!(s.npcs[0].memories[0].importance, 8);
    assert_eq!(s.npcs[1].brain, DEFAULT_BRAIN);
    assert_eq!(s.memory.recall_k, 5);
    assert_eq!(s.events[0].place, 0);
}

#[test]
fn each_bad_input_names_line_column_and_problem() {
    let cases: &[(&str, &str, &str)] = &[
        (
            "seed = 42",
            "seed = 42\ncolour = \"red\"",
            "s.toml:4:1: unknown field `colour`",
        ),
        (
            "ticks = 240",
            "ticks = \"many\"",
            "s.toml:4:9: invalid type: string \"many\", expected u64",
        ),
        ("[world]", "[world", "s.toml:7:7:"),
        ("ticks = 240", "ticks = 0", "s.toml:4:9: ticks = 0"),
        (
            "at = [14, 8]",
            "at = [24, 8]",
            "s.toml:19:6: NPC \"Bob\" at (24, 8) is off the map",
        ),
        (
            "at = [11, 7]",
            "at = [-1, 7]",
            "s.toml:25:6: NPC \"Alice\" at (-1, 7) is off the map",
        ),
        (
            "name = \"Alice\"",
            "name = \"Bob\"",
            "s.toml:23:8: NPC name \"Bob\" is used twice",
        ),
        (
            "name = \"Alice\"",
            "name = \"  \"",
            "s.toml:23:8: an NPC name is empty",
        ),
        (
            "place = \"market\"",
            "place = \"harbour\"",
            "s.toml:29:9: unknown place \"harbour\"",
        ),
        (
            "importance = 8 }",
            "importance = 11 }",
            "s.toml:20:82: importance 11 is outside 1–10",
        ),
        (
            "importance = 8 }",
            "importance = 0 }",
            "s.toml:20:82: importance 0 is outside 1–10",
        ),
        (
            "at = [11, 7]",
            "at = [11, 7]\nbrain = \"gemini\"",
            "s.toml:26:9: unknown brain \"gemini\"",
        ),
        (
            "language = \"en\"",
            "language = \"fr\"",
            "s.toml:5:12: unknown variant `fr`, expected `en` or `zh`",
        ),
        (
            "name = \"Bob\"",
            "name = \"Bob\\nfact x: 4 of 4\"",
            "s.toml:17:8: an NPC name holds a control character (\\u{a})",
        ),
        (
            "name = \"market\"",
            "name = \"\\u001b]0;pwned\\u0007\"",
            "s.toml:13:8: a place name holds a control character (\\u{1b}, \\u{7})",
        ),
        (
            "hearing_radius = 3",
            "hearing_radius = 4000000000",
            "s.toml:10:18: hearing_radius must be 0..=200000 cells",
        ),
        (
            "hearing_radius = 3",
            "hearing_radius = 3\nmax_listeners = 0",
            "s.toml:11:17: max_listeners must be 1..=10000",
        ),
        (
            "provider = \"heuristic\"",
            "provider = \"psychic\"",
            "s.toml:37:12: unknown variant `psychic`",
        ),
        (
            "recall_k = 5",
            "recall_k = 0",
            "s.toml:41:12: recall_k must be 1..=100",
        ),
        (
            "match = [\"fresh fish\"]",
            "match = []",
            "s.toml:34:9: match needs at least one non-empty string",
        ),
        (
            "width = 24",
            "width = 0",
            "s.toml:8:9: world width 0 must be",
        ),
    ];
    for (from, to, expected) in cases {
        let got = first_problem(from, to);
        assert!(
            got.starts_with(expected),
            "replacing {from:?} by {to:?}:\n  got      {got}\n  expected {expected}…"
        );
    }
}

#[test]
fn no_npcs_is_refused() {
    let start = GOOD.find("[[npcs]]").expect("npcs");
    let end = GOOD.find("[[events]]").expect("events");
    let text = format!("{}{}", &GOOD[..start], &GOOD[end..]);
    let found = problems(&text);
    assert!(
        found.iter().any(|p| p.starts_with("s.toml:1:1: no NPCs")),
        "{found:?}"
    );
}

#[test]
fn invalid_utf8_is_refused_at_the_bad_byte() {
    let mut bytes = b"name = \"fish\"\nticks = 3\n# caf".to_vec();
    bytes.push(0xE9);
    bytes.extend_from_slice(b"\n");
    let err = parse(Path::new("s.toml"), &bytes).expect_err("refused");
    let p = err.problems()[0].to_string();
    assert!(
        p.starts_with("s.toml:3:6: the file is not valid UTF-8"),
        "{p}"
    );
}

#[test]
fn all_problems_are_reported_in_file_order() {
    let text = GOOD.replacen("at = [14, 8]", "at = [99, 8]", 1).replacen(
        "place = \"market\"",
        "place = \"nowhere\"",
        1,
    );
    let found = problems(&text);
    assert_eq!(found.len(), 2, "{found:?}");
    assert!(
        found[0].contains(":19:") && found[1].contains(":29:"),
        "{found:?}"
    );
}

#[test]
fn openai_brains_and_embedders_are_validated() {
    let with = |extra: &str| format!("{GOOD}\n{extra}");
    let ok = with(
        "[brains.gemini]\nprovider = \"openai\"\nbase_url = \"https://generativelanguage.googleapis.com/v1beta/openai/\"\n\
         model = \"gemini-2.5-flash\"\napi_key_env = \"GEMINI_API_KEY\"\nmax_concurrency = 8\nrequests_per_minute = 60\n",
    );
    let s = parse(Path::new("s.toml"), ok.as_bytes()).expect("valid");
    let llm = s.brains["gemini"].llm.clone().expect("an LLM brain");
    assert_eq!(llm.remote.api_key_env.as_deref(), Some("GEMINI_API_KEY"));
    assert_eq!(llm.remote.requests_per_minute, Some(60));
    assert_eq!(s.brains["gemini"].max_concurrency, 8);
    assert_eq!(
        s.memory.visibility,
        Visibility::Barrier,
        "hashing embedder: barrier by default"
    );

    let cases: &[(&str, &str)] = &[
        (
            "[brains.x]\nprovider = \"openai\"\nmodel = \"m\"\n",
            "provider = \"openai\" in [brains.x] needs base_url",
        ),
        (
            "[brains.x]\nprovider = \"openai\"\nbase_url = \"http://h/v1\"\n",
            "needs model",
        ),
        (
            "[brains.x]\nprovider = \"openai\"\nbase_url = \"ftp://h\"\nmodel = \"m\"\n",
            "base_url must start with http:// or https://",
        ),
        (
            "[brains.x]\nprovider = \"openai\"\nbase_url = \"http://h/v1\"\nmodel = \"m\"\napi_key_env = \"sk-123 secret\"\n",
            "api_key_env must name an environment variable",
        ),
        (
            "[brains.x]\nprovider = \"heuristic\"\nbase_url = \"http://h/v1\"\n",
            "base_url in [brains.x] is only used with provider = \"openai\"",
        ),
        (
            "[brains.x]\nprovider = \"openai\"\nbase_url = \"http://h/v1\"\nmodel = \"m\"\ntemperature = 5.0\n",
            "temperature must be between 0 and 2",
        ),
        (
            "[brains.x]\nprovider = \"openai\"\nbase_url = \"http://h/v1\"\nmodel = \"m\"\nresponse_format = \"yaml\"\n",
            "unknown variant `yaml`",
        ),
        (
            "[brains.x]\nprovider = \"openai\"\nbase_url = \"http://h/v1\"\nmodel = \"m\"\nrequests_per_minute = 0\n",
            "requests_per_minute must be at least 1",
        ),
    ];
    for (extra, expected) in cases {
        let found = problems(&with(extra));
        assert!(
            found.iter().any(|p| p.contains(expected)),
            "{extra:?}: expected {expected:?} in {found:?}"
        );
    }

    let embed = GOOD.replace(
        "[memory.embedder]\nprovider = \"hashing\"",
        "[memory.embedder]\nprovider = \"openai\"\nbase_url = \"http://127.0.0.1:8081/v1\"\nmodel = \"multilingual-e5-small\"\nbatch_size = 32",
    );
    let s = parse(
        Path::new("s.toml"),
        embed.replace("visibility = \"barrier\"\n", "").as_bytes(),
    )
    .expect("valid");
    assert!(matches!(s.memory.embedder, EmbedderSpec::Openai { .. }));
    assert_eq!(
        s.memory.visibility,
        Visibility::Eventual,
        "remote embedder: eventual by default"
    );
    assert_eq!((s.memory.batch_size, s.memory.embed_concurrency), (32, 4));
    let bad = GOOD.replace(
        "[memory.embedder]\nprovider = \"hashing\"",
        "[memory.embedder]\nprovider = \"hashing\"\nmodel = \"x\"",
    );
    assert!(
        problems(&bad)
            .iter()
            .any(|p| p
                .contains("model in [memory.embedder] is only used with provider = \"openai\""))
    );
}

#[test]
fn whisper_is_a_share_for_the_heuristic_brain_alone() {
    let s = parse(Path::new("s.toml"), GOOD.as_bytes()).expect("valid");
    assert_eq!(s.brains["default"].whisper, 0.0, "no whispers unless asked");
    let half = GOOD.replace(
        "provider = \"heuristic\"",
        "provider = \"heuristic\"\nwhisper = 0.5",
    );
    let s = parse(Path::new("s.toml"), half.as_bytes()).expect("valid");
    assert_eq!(s.brains["default"].whisper, 0.5);
    for bad in ["1.5", "-0.1", "nan"] {
        assert_eq!(
            first_problem(
                "provider = \"heuristic\"",
                &format!("provider = \"heuristic\"\nwhisper = {bad}")
            ),
            "s.toml:38:11: whisper must be between 0 and 1",
            "{bad}"
        );
    }
    assert_eq!(
        first_problem(
            "provider = \"heuristic\"",
            "provider = \"openai\"\nbase_url = \"http://127.0.0.1:1/v1\"\nmodel = \"m\"\nwhisper = 0.5"
        ),
        "s.toml:40:11: whisper is only used with provider = \"heuristic\""
    );
}

#[test]
fn think_defaults_by_provider_and_max_idle_needs_on_change() {
    use hearsay_core::{ThinkMode, wake};
    let s = parse(Path::new("s.toml"), GOOD.as_bytes()).expect("valid");
    assert_eq!(s.brains["default"].mind.think, ThinkMode::EveryTick);
    assert_eq!(
        s.brains["default"].mind.reflect_retry_ticks,
        wake::REFLECT_RETRY_TICKS_DEFAULT
    );
    let on_change = GOOD.replace(
        "provider = \"heuristic\"",
        "provider = \"heuristic\"\nthink = \"on_change\"\nmax_idle_ticks = 3",
    );
    let s = parse(Path::new("s.toml"), on_change.as_bytes()).expect("valid");
    assert_eq!(
        s.brains["default"].mind.think,
        ThinkMode::OnChange { max_idle_ticks: 3 }
    );
    assert_eq!(
        s.world_setup().npcs[0].mind.think,
        ThinkMode::OnChange { max_idle_ticks: 3 },
        "each NPC gets its brain's"
    );
    let llm = GOOD.replace(
        "provider = \"heuristic\"",
        "provider = \"openai\"\nbase_url = \"http://127.0.0.1:1/v1\"\nmodel = \"m\"",
    );
    let s = parse(Path::new("s.toml"), llm.as_bytes()).expect("valid");
    assert_eq!(
        s.brains["default"].mind.think,
        ThinkMode::OnChange {
            max_idle_ticks: wake::MAX_IDLE_TICKS_DEFAULT
        },
        "an openai brain thinks on change unless told"
    );
    assert_eq!(
        s.brains["default"]
            .llm
            .as_ref()
            .map(|l| l.reflect_max_tokens),
        Some(512)
    );
    assert_eq!(
        first_problem(
            "provider = \"heuristic\"",
            "provider = \"heuristic\"\nmax_idle_ticks = 3"
        ),
        "s.toml:38:18: max_idle_ticks is only used with think = \"on_change\""
    );
    assert_eq!(
        first_problem(
            "provider = \"heuristic\"",
            "provider = \"heuristic\"\nreflect_max_tokens = 300"
        ),
        "s.toml:38:22: reflect_max_tokens in [brain] is only used with provider = \"openai\""
    );
}

#[test]
fn a_fact_by_meaning_is_checked_key_by_key_where_it_is() {
    let fact = |body: &str| {
        GOOD.replace(
            "[[facts]]\nname = \"fresh fish\"\nmatch = [\"fresh fish\"]",
            &format!("[[facts]]\nname = \"fresh fish\"\n{body}"),
        )
    };
    let ok = parse(
        Path::new("s.toml"),
        fact("statement = \"Fresh fish at the market\"").as_bytes(),
    )
    .expect("a statement alone is a fact");
    let m = ok.facts[0].meaning.as_ref().expect("meaning");
    assert_eq!(
        (m.similarity, m.candidate.is_none()),
        (SIMILARITY_DEFAULT, true)
    );
    assert!(ok.facts[0].patterns.is_empty());
    // Line 33 holds the fact's name; the body starts on line 34.
    for (body, wanted) in [
        (
            "",
            "s.toml:33:8: fact \"fresh fish\" gives neither match nor statement",
        ),
        (
            "match = [\"fish\"]\nsimilarity = 0.7",
            "s.toml:35:14: similarity needs a statement",
        ),
        (
            "statement = \"fish\"\ncandidate = 0.5",
            "s.toml:35:13: candidate needs a judge",
        ),
        (
            "statement = \"fish\"\njudge = \"default\"",
            "s.toml:35:9: judge needs candidate",
        ),
    ] {
        let got = problems(&fact(body));
        assert!(
            got.first().is_some_and(|p| p.starts_with(wanted)),
            "{body:?}: wanted {wanted:?}, got {got:?}"
        );
    }
}

#[test]
fn retell_noise_is_a_chance_for_the_heuristic_brain_only() {
    let s = parse(Path::new("s.toml"), GOOD.as_bytes()).expect("valid");
    assert_eq!(
        s.brains["default"].retell_noise, 0.0,
        "no noise unless asked"
    );
    let noisy = GOOD.replace(
        "provider = \"heuristic\"",
        "provider = \"heuristic\"\nretell_noise = 0.25",
    );
    let s = parse(Path::new("s.toml"), noisy.as_bytes()).expect("valid");
    assert_eq!(s.brains["default"].retell_noise, 0.25);
    assert_eq!(
        first_problem(
            "provider = \"heuristic\"",
            "provider = \"heuristic\"\nretell_noise = 1.5"
        ),
        "s.toml:38:16: retell_noise must be from 0 to 1, not 1.5"
    );
    assert_eq!(
        first_problem(
            "provider = \"heuristic\"",
            "provider = \"openai\"\nbase_url = \"http://127.0.0.1:1/v1\"\nmodel = \"m\"\nretell_noise = 0.5"
        ),
        "s.toml:40:16: retell_noise is only used with provider = \"heuristic\""
    );
}
