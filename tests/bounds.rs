//! Bounds on everything an outsider controls: a model's answer (size, time), a crowd's
//! talk, radii, the size of a run, control characters on the way to a terminal — each
//! case of issue 15 tried again with the real binary.

use std::path::Path;
use std::process::{Command, Output};
use std::time::Instant;

use hearsay_tests::mock::{ChatCall, MockServer, Reply};
use hearsay_tests::{
    assert_untouched, bin, hearsay, of_type, path_str, read_jsonl, root, run_ok, scenario,
    snapshot, summary,
};

fn said(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// fish-market with its brain on `url` (the mock).
fn on_mock(dir: &Path, url: &str, extra: &str) -> std::path::PathBuf {
    let text = std::fs::read_to_string(scenario("fish-market.toml"))
        .expect("scenario")
        .replace(
            "[brain]\nprovider = \"heuristic\"",
            &format!(
                "[brain]\nprovider = \"openai\"\nbase_url = \"{url}\"\nmodel = \"mock\"\nmax_retries = 0\nbreaker_failures = 1000\nthink = \"every_tick\"\n{extra}"
            ),
        );
    let file = dir.join("mock.toml");
    std::fs::write(&file, text).expect("write");
    file
}

#[test]
fn a_model_cannot_fill_memory_or_the_tape() {
    const HUGE: usize = 100 * 1024 * 1024;
    const LONG: usize = 100 * 1024;
    let mock = MockServer::start(|call: &ChatCall| match call.npc.as_str() {
        // 100 MB streamed with no length: refused past the cap, unread.
        "Bob" => Reply::Huge(HUGE),
        // Under the cap but long: decided on, and the tape keeps a prefix.
        "Alice" => Reply::answer(format!(
            "{{\"action\": \"stay\", \"note\": \"{}\"}}",
            "y".repeat(LONG)
        )),
        _ => Reply::answer(r#"{"action": "stay"}"#),
    });
    let dir = tempfile::tempdir().expect("tempdir");
    let file = on_mock(dir.path(), &mock.url, "");
    let out = dir.path().join("run");
    let started = Instant::now();
    run_ok(&file, &out, &["--ticks", "4"]);
    let elapsed = started.elapsed();
    let tape = read_jsonl(&out.join("llm.jsonl"));
    let bob: Vec<_> = tape.iter().filter(|c| c["npc"] == "Bob").collect();
    assert_eq!(bob.len(), 4);
    for call in &bob {
        assert_eq!(call["outcome"], "failed", "{call}");
        assert!(
            call["error"]
                .as_str()
                .is_some_and(|e| e.contains("longer than 262144 bytes (max_response_bytes)")),
            "{call}"
        );
    }
    let alice: Vec<_> = tape.iter().filter(|c| c["npc"] == "Alice").collect();
    for call in &alice {
        let kept = call["response"].as_str().expect("a response").len();
        assert!(kept <= 16 * 1024, "the tape keeps a prefix: {kept}");
        assert!(call["response_bytes"].as_u64() > Some(LONG as u64));
    }
    let tape_bytes = hearsay_tests::log_bytes(out.join("llm.jsonl"))
        .expect("tape")
        .len();
    assert!(
        tape_bytes < 1024 * 1024,
        "the tape's text is {tape_bytes} bytes"
    );
    let rss = summary(&out)["timing"]["peak_rss_mib"]
        .as_f64()
        .expect("peak RSS");
    assert!(rss < 200.0, "peak RSS {rss} MiB");
    println!(
        "figure: a model answering 100 MB four times and 100 KB four times: the tape's text {tape_bytes} bytes, peak RSS {rss:.0} MiB, {:.1} s",
        elapsed.as_secs_f64()
    );
}

#[test]
fn a_trickling_server_is_cut_off_at_timeout_ms() {
    let mock = MockServer::start(|call: &ChatCall| match call.npc.as_str() {
        "Bob" => Reply::Trickle(100),
        _ => Reply::answer(r#"{"action": "stay"}"#),
    });
    let dir = tempfile::tempdir().expect("tempdir");
    let file = on_mock(dir.path(), &mock.url, "timeout_ms = 1000");
    let out = dir.path().join("run");
    let started = Instant::now();
    run_ok(&file, &out, &["--ticks", "2"]);
    let elapsed = started.elapsed().as_secs_f64();
    let tape = read_jsonl(&out.join("llm.jsonl"));
    for call in tape.iter().filter(|c| c["npc"] == "Bob") {
        assert_eq!(call["outcome"], "failed", "{call}");
        assert!(
            call["error"]
                .as_str()
                .is_some_and(|e| e.contains("timed out after 1000 ms")),
            "{call}"
        );
        let latency = call["latency_ms"].as_f64().expect("latency");
        assert!(latency < 5_000.0, "cut off near 1 s, not {latency} ms");
    }
    assert!(elapsed < 30.0, "{elapsed} s");
}

/// A scenario of `n` NPCs all in one cell of a 3 × 3 map.
fn crowd(n: usize, extra_world: &str) -> String {
    let mut s = format!(
        "name = \"crowd\"\nseed = 1\nticks = 3\n\n[world]\nwidth = 3\nheight = 3\nhearing_radius = 2\n{extra_world}\n\
         [[places]]\nname = \"square\"\nat = [1, 1]\n\n"
    );
    for i in 0..n {
        s.push_str(&format!(
            "[[npcs]]\nname = \"N{i}\"\nat = [1, 1]\nmemories = [{{ content = \"The well is dry.\", importance = 8 }}]\n\n"
        ));
    }
    s.push_str("[[facts]]\nname = \"well\"\nmatch = [\"well is dry\"]\n");
    s
}

#[test]
fn a_crowd_hears_the_nearest_max_listeners_and_the_tick_stays_bounded() {
    // 1,000 NPCs in one cell, each talk capped at 8 listeners (the default is 100, which
    // the kernel's own test checks; here it only keeps the debug build quick).
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("crowd.toml");
    std::fs::write(&file, crowd(1000, "max_listeners = 8\n")).expect("write");
    let out = dir.path().join("run");
    let started = Instant::now();
    run_ok(&file, &out, &["--ticks", "2"]);
    let elapsed = started.elapsed();
    let events = read_jsonl(&out.join("events.jsonl"));
    let talks = of_type(&events, "talk");
    assert!(!talks.is_empty(), "the crowd gossips");
    let most = talks
        .iter()
        .map(|t| t["listeners"].as_array().map_or(0, Vec::len))
        .max()
        .unwrap_or(0);
    assert_eq!(most, 8, "each talk reaches max_listeners, no more");
    let memories = summary(&out)["memories"]["total"].as_u64().expect("total");
    let bound = 1000 + 2 * (1000 * 9 + 1000 + 3000);
    assert!(memories <= bound, "{memories} memories, bound {bound}");
    println!(
        "figure: 1,000 NPCs in one cell, max_listeners 8, 2 ticks: {} talks, at most {most} listeners each, {memories} memories, {:.1} s",
        talks.len(),
        elapsed.as_secs_f64()
    );

    // Radii that used to overflow are refused, not silently deaf.
    for radius in ["1500000000", "4294967295"] {
        let bad = dir.path().join(format!("r{radius}.toml"));
        std::fs::write(
            &bad,
            crowd(2, "").replace("hearing_radius = 2", &format!("hearing_radius = {radius}")),
        )
        .expect("write");
        let o = hearsay(&root(), &["validate", path_str(&bad)]);
        assert_eq!(o.status.code(), Some(2), "{}", said(&o));
        assert!(said(&o).contains("hearing_radius must be 0..=200000 cells"));
    }
}

#[test]
fn a_run_that_cannot_fit_is_refused_before_anything_is_written() {
    let dir = tempfile::tempdir().expect("tempdir");
    // 100,000 NPCs for 10 million ticks: at least 4 TB of compressed logs.
    let mut text = String::from(
        "name = \"huge\"\nticks = 10000000\n[world]\nwidth = 1000\nheight = 1000\nhearing_radius = 1\nmax_listeners = 4\n",
    );
    for i in 0..100_000 {
        text.push_str(&format!(
            "[[npcs]]\nname = \"N{i}\"\nat = [{}, {}]\n",
            i % 1000,
            i / 1000
        ));
    }
    let file = dir.path().join("huge.toml");
    std::fs::write(&file, text).expect("write");
    let before = snapshot(dir.path());
    let out = dir.path().join("run");
    let o = hearsay(&root(), &["run", path_str(&file), "--out", path_str(&out)]);
    assert_eq!(o.status.code(), Some(2), "{}", said(&o));
    assert!(
        said(&o).contains("this run writes at least 4.0 TB"),
        "{}",
        said(&o)
    );
    assert_untouched(&before, &snapshot(dir.path()), "refused run");
}

/// The preflight bounds hold on real runs: what they wrote lies between the certain
/// cost and the worst case (`DISK_PER_NPC_TICK_MIN`, `memories_max`).
#[test]
fn the_preflight_bounds_bracket_real_runs() {
    let dir = tempfile::tempdir().expect("tempdir");
    for (name, ticks) in [("fish-market.toml", 240), ("forgetful-village.toml", 120)] {
        let out = dir.path().join(name);
        run_ok(&scenario(name), &out, &["--ticks", &ticks.to_string()]);
        let s = summary(&out);
        let npcs = s["npcs"].as_u64().expect("npcs");
        let logs = ["events.jsonl.zst", "llm.jsonl.zst"]
            .iter()
            .map(|f| std::fs::metadata(out.join(f)).expect("log").len())
            .sum::<u64>();
        let min = npcs * ticks * hearsay_runtime::preflight::DISK_PER_NPC_TICK_MIN;
        assert!(
            logs >= min,
            "{name}: {logs} bytes of logs, certain bound {min}"
        );
        let (scenario_parsed, _) =
            hearsay_runtime::scenario::load(&scenario(name)).expect("scenario");
        let mut scenario_parsed = scenario_parsed;
        scenario_parsed.ticks = ticks;
        let e = hearsay_runtime::preflight::estimate(&scenario_parsed, 0);
        let memories = s["memories"]["total"].as_u64().expect("total");
        assert!(
            memories <= e.memories_max,
            "{name}: {memories} > {}",
            e.memories_max
        );
        println!(
            "figure: preflight on {name} ({ticks} ticks): logs {logs} bytes >= certain {min}; memories {memories} <= worst case {}",
            e.memories_max
        );
    }
}

#[test]
fn run_text_never_drives_the_terminal() {
    // A model that answers with escape sequences and line breaks: raw in plain text,
    // JSON-escaped (so the JSON is valid and decodes to them) in decisions and insights.
    let raw = "\u{1b}]0;pwned\u{7}\u{1b}[2J\nfact x: 9 of 9\u{202e}";
    let escaped = "\\u001b]0;pwned\\u0007\\u001b[2J\\nfact x: 9 of 9\\u202e";
    let mock = MockServer::start(move |call: &ChatCall| {
        let user = call.body["messages"][1]["content"].as_str().unwrap_or("");
        if user.contains("Someone asks you") {
            return Reply::answer(format!("Fish!{raw}"));
        }
        if call.reflect {
            return Reply::answer(format!(
                "{{\"insights\": [{{\"text\": \"I saw{escaped}\", \"importance\": 7, \"evidence\": []}}]}}"
            ));
        }
        Reply::answer(format!(
            "{{\"action\": \"talk\", \"speech\": \"Hello{escaped}\"}}"
        ))
    });
    let dir = tempfile::tempdir().expect("tempdir");
    let file = on_mock(dir.path(), &mock.url, "");
    let text =
        std::fs::read_to_string(&file).expect("read") + "\n[memory.reflect]\nthreshold = 10\n";
    std::fs::write(&file, text).expect("write");
    let out = dir.path().join("run");
    let run = run_ok(&file, &out, &["--ticks", "6"]);
    let ask = hearsay(
        &root(),
        &[
            "ask",
            path_str(&out),
            "--npc",
            "Alice",
            "what did you hear?",
        ],
    );
    assert!(ask.status.success(), "{}", said(&ask));
    let inspect = hearsay(
        &root(),
        &["inspect", path_str(&out), "--npc", "Alice", "--all"],
    );
    assert!(inspect.status.success(), "{}", said(&inspect));
    for (what, o) in [("run", &run), ("ask", &ask), ("inspect", &inspect)] {
        for stream in [&o.stdout, &o.stderr] {
            assert!(
                !stream.contains(&0x1b) && !stream.contains(&0x07),
                "{what} printed a control character: {}",
                String::from_utf8_lossy(stream)
            );
        }
    }
    // Reflections and speech are stored as one line of plain text.
    let events = read_jsonl(&out.join("events.jsonl"));
    let remembered: Vec<&str> = of_type(&events, "memory")
        .iter()
        .filter_map(|m| m["content"].as_str())
        .collect();
    assert!(
        remembered.iter().any(|c| c.starts_with("I saw")),
        "a reflection was stored"
    );
    assert!(
        remembered.iter().any(|c| c.contains("Hello")),
        "the speech was heard and stored"
    );
    for c in &remembered {
        assert!(
            !c.chars().any(|ch| ch.is_control() || ch == '\u{202e}'),
            "a stored memory holds a control character: {c:?}"
        );
    }
    // And the database password never shows, in the user part or the query.
    let pg = dir.path().join("pg.toml");
    std::fs::write(
        &pg,
        std::fs::read_to_string(scenario("fish-market.toml"))
            .expect("scenario")
            .replace("store = \"sqlite\"", "store = \"postgres\""),
    )
    .expect("write");
    let o = Command::new(bin())
        .args([
            "run",
            path_str(&pg),
            "--out",
            path_str(&dir.path().join("pg")),
            "--database-url",
            "postgres://bob:hunter2@127.0.0.1:1/x?password=sesame&sslpassword=opensesame",
        ])
        .output()
        .expect("hearsay");
    assert_ne!(o.status.code(), Some(0), "{}", said(&o));
    for secret in ["hunter2", "sesame"] {
        assert!(!said(&o).contains(secret), "{}", said(&o));
    }
    assert!(said(&o).contains("password=[redacted]"), "{}", said(&o));
}

/// Memory running low stops a run between two ticks, everything before them committed,
/// and `resume` finishes it (a reserve larger than any machine's memory stands in for a
/// machine running out).
#[test]
fn low_memory_stops_a_run_cleanly_and_resume_finishes_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("run");
    let o = Command::new(bin())
        .args([
            "run",
            path_str(&scenario("fish-market.toml")),
            "--out",
            path_str(&out),
            "--ticks",
            "30",
        ])
        .env("HEARSAY_MEMORY_RESERVE_MB", "1000000000")
        .output()
        .expect("hearsay");
    assert_eq!(o.status.code(), Some(1), "{}", said(&o));
    assert!(said(&o).contains("stopped before tick 0"), "{}", said(&o));
    assert!(said(&o).contains("hearsay resume RUN_DIR"), "{}", said(&o));
    assert!(!out.join("summary.json").exists());
    let resumed = hearsay(&root(), &["resume", path_str(&out)]);
    assert!(resumed.status.success(), "{}", said(&resumed));
    let reference = dir.path().join("reference");
    run_ok(
        &scenario("fish-market.toml"),
        &reference,
        &["--ticks", "30"],
    );
    assert_eq!(
        hearsay_tests::log_bytes(out.join("events.jsonl")).expect("a"),
        hearsay_tests::log_bytes(reference.join("events.jsonl")).expect("b"),
        "stopped and resumed: the same run"
    );
}
