//! Real providers accept every request: the default schema is one hosted strict modes
//! take, a server that refuses what hearsay would send stops the run before anything is
//! written (the preflight), prompts are trimmed to fit a small context instead of
//! overflowing it, and cached prompt tokens are reported. The mock plays each provider
//! as it documents itself (see tests/mock.rs: strict mode, llama.cpp's small context).

use std::path::{Path, PathBuf};
use std::process::Output;

use hearsay_tests::mock::{ChatCall, MockOptions, MockServer, Reply};
use hearsay_tests::{assert_untouched, hearsay, path_str, read_jsonl, root, snapshot, summary};

/// A town of `n` NPCs around the market, all on the mock's brain; `brain_extra` goes into
/// `[brain]`.
fn town(dir: &Path, url: &str, n: usize, brain_extra: &str) -> PathBuf {
    town_named(dir, "town.toml", url, n, brain_extra)
}

fn town_named(dir: &Path, name: &str, url: &str, n: usize, brain_extra: &str) -> PathBuf {
    let mut s = String::from(
        "name = \"providers\"\nseed = 9\nticks = 6\n\n[world]\nwidth = 20\nheight = 12\nhearing_radius = 6\n\n",
    );
    for (i, place) in [
        "market", "well", "bakery", "mill", "harbour", "temple", "inn",
    ]
    .iter()
    .enumerate()
    {
        s.push_str(&format!(
            "[[places]]\nname = \"{place}\"\nat = [{}, {}]\n\n",
            2 + i * 2,
            1 + i % 3
        ));
    }
    s.push_str(&format!(
        "[brain]\nprovider = \"openai\"\nbase_url = \"{url}\"\nmodel = \"mock\"\nmax_retries = 0\nretry_base_ms = 1\nmax_tokens = 64\nthink = \"every_tick\"\n{brain_extra}\n\n\
         [memory]\nshort_term = 5\nrecall_k = 5\n\n"
    ));
    for i in 0..n {
        s.push_str(&format!(
            "[[npcs]]\nname = \"N{i}\"\npersona = \"A townsperson who has lived here for years and knows the gossip of every street.\"\nat = [{}, {}]\n\
             memories = [{{ content = \"The market nearby is selling fresh fish, and the baker is looking for flour.\", importance = 8 }}]\n\n",
            8 + i % 5,
            5 + i / 5
        ));
    }
    s.push_str("[[facts]]\nname = \"fish\"\nmatch = [\"fresh fish\"]\n");
    let file = dir.join(name);
    std::fs::write(&file, s).expect("write");
    file
}

/// N0 tells everyone about the fish every tick; the others walk about (what they hear
/// this tick is never trimmed, so a town where everyone talks at once would not fit a
/// small context whatever is left out).
fn talker() -> impl Fn(&ChatCall) -> Reply + Send + Sync + 'static {
    |call: &ChatCall| {
        if call.reflect {
            return Reply::answer(r#"{"insights": []}"#);
        }
        if call.npc == "N0" {
            return Reply::answer(
                r#"{"action": "talk", "speech": "The market nearby is selling fresh fish.", "x": 0, "y": 0}"#,
            );
        }
        Reply::answer(format!(
            r#"{{"action": "move", "speech": "", "x": {}, "y": {}}}"#,
            call.tick % 20,
            call.tick % 12
        ))
    }
}

fn said(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

#[test]
fn the_default_runs_clean_against_a_strict_provider_and_full_bounds_are_stopped_first() {
    let mock = MockServer::start_with(
        MockOptions {
            strict: true,
            ..MockOptions::default()
        },
        talker(),
    );
    let dir = tempfile::tempdir().expect("tempdir");
    let file = town(dir.path(), &mock.url, 4, "");
    let out = dir.path().join("run");
    let o = hearsay(&root(), &["run", path_str(&file), "--out", path_str(&out)]);
    assert!(o.status.success(), "{}", said(&o));
    let b = &summary(&out)["brains"]["default"];
    assert_eq!(b["failures"], 0, "{b}");
    assert_eq!(b["model_calls"], b["calls"]);
    assert!(
        said(&o).contains("preflight: [brain] model \"mock\": a valid tick-0 decision for N0"),
        "{}",
        said(&o)
    );
    assert_eq!(mock.preflight_log().len(), 1, "one probe per brain");
    let decisions = mock.decisions().len();
    assert_eq!(decisions, 24, "the probe is not part of the run");
    assert_eq!(read_jsonl(&out.join("llm.jsonl")).len(), 24);

    // The full bounds, which this provider refuses: the preflight stops the run before
    // anything exists, with the server's own words and what to change.
    let full = town(
        dir.path(),
        &mock.url,
        4,
        "response_format = \"json_schema_full\"",
    );
    let out = dir.path().join("full");
    let before = snapshot(dir.path());
    for args in [
        vec!["run", path_str(&full), "--out", path_str(&out)],
        vec!["check", path_str(&full)],
    ] {
        let o = hearsay(&root(), &args);
        assert_eq!(o.status.code(), Some(2), "{}", said(&o));
        let text = said(&o);
        for needle in [
            "preflight: [brain] model \"mock\"",
            "the server refused the request (HTTP 400): Invalid schema for response_format 'decision': In context=('properties', 'speech'), 'maxLength' is not permitted.",
            "use response_format = \"json_schema\"",
            "nothing was written",
        ] {
            assert!(text.contains(needle), "{args:?}: {needle:?} in {text}");
        }
    }
    assert_untouched(&before, &snapshot(dir.path()), "refused by the preflight");
    assert_eq!(mock.decisions().len(), decisions, "no run call was made");

    // Without the preflight, the same run "succeeds" with no model ever deciding: what the
    // preflight is there to stop.
    let o = hearsay(
        &root(),
        &[
            "run",
            path_str(&full),
            "--out",
            path_str(&out),
            "--no-preflight",
        ],
    );
    assert!(o.status.success(), "{}", said(&o));
    let b = &summary(&out)["brains"]["default"];
    assert_eq!(b["model_calls"], 0, "{b}");
    println!(
        "figure: strict provider: the default json_schema ran 24 of 24 decisions by the model; json_schema_full refused by the preflight (exit 2, nothing written); with --no-preflight it ran {} calls, {} by the model",
        b["calls"], b["model_calls"]
    );
}

#[test]
fn a_small_context_is_trimmed_to_fit_and_never_overflows() {
    // llama.cpp with 700 tokens per slot (its /props and token count on): a crowd of 15,
    // seven places, five recalled and five recent memories do not fit untrimmed.
    let mock = MockServer::start_with(
        MockOptions {
            context_tokens: Some(700),
            ..MockOptions::default()
        },
        talker(),
    );
    let dir = tempfile::tempdir().expect("tempdir");
    let file = town(dir.path(), &mock.url, 15, "");
    let out = dir.path().join("run");
    let o = hearsay(&root(), &["run", path_str(&file), "--out", path_str(&out)]);
    assert!(o.status.success(), "{}", said(&o));
    assert!(
        said(&o)
            .contains("of 700 per request (llama.cpp /props), counted by the server's tokenizer"),
        "{}",
        said(&o)
    );
    let b = summary(&out)["brains"]["default"].clone();
    assert_eq!(b["context_overflows"], 0, "{b}");
    assert_eq!(b["failures"], 0, "{b}");
    let trimmed = b["trimmed_prompts"].as_u64().expect("trimmed");
    assert!(trimmed > 0, "{b}");
    let tape = read_jsonl(&out.join("llm.jsonl"));
    let marked = tape
        .iter()
        .filter(|c| c["trimmed"].as_array().is_some_and(|t| !t.is_empty()))
        .count() as u64;
    assert!(
        marked > 0 && marked <= trimmed,
        "{marked} marked, {trimmed} counted"
    );
    assert!(
        tape.iter()
            .filter_map(|c| c["trimmed"].as_array())
            .flatten()
            .all(|t| t.as_str().is_some_and(|t| t.contains(" -> "))),
    );
    // Every request the server saw fits: no prompt over 700 - 64 tokens was sent.
    for l in mock.log() {
        assert!(hearsay_tests::mock::mock_tokens(&l.call.body) + 64 <= 700);
    }
    // The system message is the stable prefix: the server reused it.
    let cached = b["cached_prompt_tokens"].as_u64().expect("cached");
    let prompt = b["prompt_tokens"].as_u64().expect("prompt");
    assert!(cached > 0, "{b}");
    assert!(said(&o).contains("% of prompt tokens cached"));
    println!(
        "figure: a 700-token context, 15 NPCs x 6 ticks: {} calls, {trimmed} prompts trimmed to fit, 0 overflows; prompt tokens p50 {} p95 {}; {:.0}% of prompt tokens cached",
        b["calls"],
        b["prompt_tokens_p50"],
        b["prompt_tokens_p95"],
        cached as f64 * 100.0 / prompt.max(1) as f64
    );
    // The replay needs none of it.
    let replay = hearsay(&root(), &["replay", path_str(&out)]);
    assert_eq!(
        String::from_utf8_lossy(&replay.stdout).trim(),
        "identical: 6 ticks"
    );

    // A context that cannot hold even the trimmed prompt: refused before anything exists.
    let tiny = MockServer::start_with(
        MockOptions {
            context_tokens: Some(200),
            ..MockOptions::default()
        },
        talker(),
    );
    let file = town_named(dir.path(), "tiny.toml", &tiny.url, 15, "");
    let out = dir.path().join("tiny");
    let before = snapshot(dir.path());
    let o = hearsay(&root(), &["run", path_str(&file), "--out", path_str(&out)]);
    assert_eq!(o.status.code(), Some(2), "{}", said(&o));
    assert!(
        said(&o).contains("need more than the 200 of the context (llama.cpp /props), even trimmed"),
        "{}",
        said(&o)
    );
    assert!(said(&o).contains("raise context_tokens"));
    assert_untouched(&before, &snapshot(dir.path()), "refused: too small");
    assert!(tiny.log().is_empty() && tiny.preflight_log().is_empty());

    // A scenario's context_tokens is held to as well, with no server to say.
    let plain = MockServer::start(talker());
    let file = town_named(
        dir.path(),
        "budget.toml",
        &plain.url,
        15,
        "context_tokens = 2000",
    );
    let out = dir.path().join("scenario-budget");
    let o = hearsay(&root(), &["run", path_str(&file), "--out", path_str(&out)]);
    assert!(o.status.success(), "{}", said(&o));
    assert!(said(&o).contains("of 2000 per request (scenario), counted by UTF-8 bytes"));
    assert!(summary(&out)["brains"]["default"]["trimmed_prompts"].as_u64() > Some(0));
}

#[test]
fn an_embedder_of_the_wrong_width_or_a_dead_model_is_stopped_by_the_preflight() {
    let mock = MockServer::start(talker());
    let dir = tempfile::tempdir().expect("tempdir");
    let mut text = std::fs::read_to_string(town(dir.path(), &mock.url, 3, "")).expect("read");
    text.push_str(&format!(
        "\n[memory.embedder]\nprovider = \"openai\"\nbase_url = \"{}\"\nmodel = \"e\"\ndimensions = 100\n",
        mock.url
    ));
    let file = dir.path().join("wide.toml");
    std::fs::write(&file, &text).expect("write");
    let babbler = MockServer::start_with(
        MockOptions {
            script_preflight: true,
            ..MockOptions::default()
        },
        |_: &ChatCall| Reply::answer("I would rather not say."),
    );
    let babbling = town_named(dir.path(), "babble.toml", &babbler.url, 3, "");
    let healthy = town_named(dir.path(), "healthy.toml", &mock.url, 3, "");
    let before = snapshot(dir.path());
    let out = dir.path().join("run");
    let o = hearsay(&root(), &["run", path_str(&file), "--out", path_str(&out)]);
    assert_eq!(o.status.code(), Some(2), "{}", said(&o));
    assert!(
        said(&o).contains("returned a vector of 384 dimensions, not the 100 asked for"),
        "{}",
        said(&o)
    );
    // A model that never answers with a valid decision.
    let o = hearsay(&root(), &["check", path_str(&babbling)]);
    assert_eq!(o.status.code(), Some(2), "{}", said(&o));
    assert!(
        said(&o).contains("3 answers, none a valid decision"),
        "{}",
        said(&o)
    );
    assert!(said(&o).contains("json_schema_full"));
    assert_untouched(&before, &snapshot(dir.path()), "refused by the preflight");
    // And `check` on a healthy one says what it found.
    let o = hearsay(&root(), &["check", path_str(&healthy)]);
    assert!(o.status.success(), "{}", said(&o));
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(
        stdout.starts_with("ok: [brain] model \"mock\": a valid tick-0 decision for N0 in "),
        "{stdout}"
    );
    assert!(stdout.contains("json_schema accepted"));
    assert!(stdout.contains("of 8192 per request (default), counted by UTF-8 bytes"));
}
