//! Runs are reproducible artifacts: replayed offline tick by tick, resumed after kill -9,
//! forked at a tick.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use hearsay_tests::mock::{MockServer, Reply};
use hearsay_tests::{
    bin, fork_ok, hearsay, log_bytes, of_type, path_str, read_jsonl, root, run_ok, scenario,
    sqlite_rows, summary,
};

/// A few random ticks in `lo..hi`, different on every test run (printed on failure).
fn random_ticks(n: usize, lo: u64, hi: u64) -> Vec<u64> {
    use std::hash::{BuildHasher, RandomState};
    let mut ticks: Vec<u64> = (0..n as u64)
        .map(|i| lo + RandomState::new().hash_one(i) % (hi - lo))
        .collect();
    ticks.sort_unstable();
    ticks.dedup();
    ticks
}

fn completed_ticks(dir: &Path) -> usize {
    hearsay_tests::log_text(dir.join("events.jsonl"))
        .map(|t| t.matches("\"type\":\"tick\"").count())
        .unwrap_or(0)
}

fn spawn(args: &[&str]) -> Child {
    Command::new(bin())
        .args(args)
        .current_dir(root())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("hearsay starts")
}

/// Lets `child` run until `dir` holds `ticks` completed ticks, then SIGKILLs it.
fn kill_at(mut child: Child, dir: &Path, ticks: u64) {
    let started = Instant::now();
    while (completed_ticks(dir) as u64) < ticks {
        if let Some(status) = child.try_wait().expect("child") {
            let mut err = String::new();
            if let Some(mut e) = child.stderr.take() {
                let _ = std::io::Read::read_to_string(&mut e, &mut err);
            }
            panic!("the run ended ({status}) before tick {ticks}: {err}");
        }
        assert!(started.elapsed() < Duration::from_secs(300), "no progress");
        std::thread::sleep(Duration::from_millis(20));
    }
    child.kill().expect("kill -9");
    let _ = child.wait();
}

fn same_bytes(a: &Path, b: &Path, what: &str) {
    let x = hearsay_tests::log_bytes(a.join("events.jsonl")).expect("events");
    let y = hearsay_tests::log_bytes(b.join("events.jsonl")).expect("events");
    assert!(x == y, "{what}: events.jsonl differs");
}

#[test]
fn kill_9_at_random_ticks_then_resume_is_identical() {
    let dir = tempfile::tempdir().expect("tempdir");
    let ticks = ["--ticks", "30"];
    let reference = dir.path().join("reference");
    run_ok(&scenario("rumour-200.toml"), &reference, &ticks);

    let out = dir.path().join("killed");
    let kills = random_ticks(3, 2, 28);
    let rumour = scenario("rumour-200.toml");
    let mut args = vec![
        "run",
        path_str(&rumour),
        "--out",
        path_str(&out),
        "--no-progress",
    ];
    args.extend_from_slice(&ticks);
    let mut child = spawn(&args);
    for &k in &kills {
        kill_at(child, &out, k);
        child = spawn(&["resume", path_str(&out), "--no-progress"]);
    }
    let output = child.wait_with_output().expect("resume ends");
    assert!(
        output.status.success(),
        "killed at {kills:?}; the last resume failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    same_bytes(
        &reference,
        &out,
        &format!("killed at ticks {kills:?} and resumed"),
    );
    // The store's recall state too: the writer gathers a few ticks of recall touches
    // before writing them, so a kill loses some, and resume rebuilds them from the log.
    let recalls = |dir: &Path| -> Vec<(i64, i64, i64)> {
        use sqlx::Row;
        hearsay_tests::sqlite_rows(
            &dir.join("memories.db"),
            "SELECT id, tick_last_recalled, recall_count FROM memory_recalls ORDER BY id",
        )
        .iter()
        .map(|r| (r.get(0), r.get(1), r.get(2)))
        .collect()
    };
    let expected = recalls(&reference);
    assert!(
        expected.iter().any(|r| r.2 > 1),
        "the reference run recalled memories in several ticks"
    );
    assert!(
        recalls(&out) == expected,
        "killed at ticks {kills:?} and resumed: memory_recalls differs"
    );
    replays_identical(&out, 30);

    let store_before = std::fs::read(out.join("memories.db")).expect("the store");
    let again = hearsay(&root(), &["resume", path_str(&out)]);
    assert_eq!(
        again.status.code(),
        Some(2),
        "a finished run has nothing to resume"
    );
    assert!(String::from_utf8_lossy(&again.stderr).contains("nothing to resume"));
    // Refused from the store's last checkpoint, read before the store is loaded: the
    // store as it was, and no write-ahead files left beside it.
    assert!(std::fs::read(out.join("memories.db")).expect("the store") == store_before);
    for leftover in ["memories.db-wal", "memories.db-shm"] {
        assert!(!out.join(leftover).exists(), "{leftover} left behind");
    }
    println!(
        "figure: kill -9 at ticks {kills:?} of 30 (rumour-200), resumed each time: events and the store's recall state identical, replay identical; lost 0 ticks"
    );
}

/// Rewrites the first line of the log at `path` (read and written back through its
/// compression) that `pick` chooses, with what `edit` makes of it.
fn edit_first_line(path: &Path, pick: impl Fn(&str) -> bool, edit: impl FnOnce(&str) -> String) {
    let text = hearsay_tests::log_text(path).expect("a log");
    let mut lines: Vec<String> = text.lines().map(str::to_owned).collect();
    let at = lines
        .iter()
        .position(|l| pick(l))
        .unwrap_or_else(|| panic!("no line to edit in {}", path.display()));
    lines[at] = edit(&lines[at]);
    hearsay_tests::write_log(path, lines.join("\n") + "\n");
}

/// `hearsay replay dir`, which must find every one of the run's `ticks` ticks identical.
fn replays_identical(dir: &Path, ticks: u64) {
    let replay = hearsay(&root(), &["replay", path_str(dir)]);
    assert_eq!(
        (
            replay.status.code(),
            String::from_utf8_lossy(&replay.stdout).trim()
        ),
        (Some(0), format!("identical: {ticks} ticks").as_str()),
        "{}: {}",
        dir.display(),
        String::from_utf8_lossy(&replay.stderr)
    );
}

/// `hearsay replay dir`, which must find a divergence: what it printed.
fn replay_diverges(dir: &Path) -> String {
    let replay = hearsay(&root(), &["replay", path_str(dir)]);
    assert_eq!(
        replay.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&replay.stderr)
    );
    String::from_utf8_lossy(&replay.stdout).into_owned()
}

#[test]
fn replay_is_identical_and_finds_the_first_tampered_tick() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("run");
    run_ok(&scenario("fish-market.toml"), &out, &["--ticks", "60"]);
    replays_identical(&out, 60);

    // Move Bob somewhere else in tick 20's record.
    edit_first_line(
        &out.join("events.jsonl"),
        |l| {
            l.contains("\"tick\":20,")
                && (l.contains("\"type\":\"move\"") || l.contains("\"type\":\"stay\""))
        },
        |l| l.replacen("\"tick\":20,", "\"tick\":20,\"tampered\":true,", 1),
    );
    let stdout = replay_diverges(&out);
    assert!(stdout.starts_with("diverged at tick 20:"), "{stdout}");
    assert!(
        stdout.contains("- recorded:")
            && stdout.contains("tampered")
            && stdout.contains("+ replayed:"),
        "{stdout}"
    );
    assert!(
        stdout.contains("(20 ticks identical before it)"),
        "{stdout}"
    );
}

#[test]
fn a_heuristic_tape_holds_no_request_digest_and_a_changed_decision_diverges_at_its_tick() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("run");
    run_ok(
        &scenario("forgetful-village.toml"),
        &out,
        &["--ticks", "30"],
    );
    // The heuristic brain is deterministic: neither its calls nor its reflections carry
    // the request's digest.
    let tape = read_jsonl(&out.join("llm.jsonl"));
    let calls: Vec<&serde_json::Value> = tape.iter().filter(|c| c.get("npc").is_some()).collect();
    assert!(calls.len() > 100, "{} calls", calls.len());
    assert!(calls.iter().all(|c| c["provider"] == "heuristic"));
    assert!(
        calls.iter().any(|c| c.get("reflection").is_some()),
        "the run reflected at least once"
    );
    for c in &calls {
        assert!(c.get("request").is_none(), "{c}");
        assert!(c["reflection"].get("request").is_none(), "{c}");
    }
    replays_identical(&out, 30);

    // One decision of tick 12 changed on the tape: replay acts on it, and the tick's
    // events are not the ones recorded.
    edit_first_line(
        &out.join("llm.jsonl"),
        |l| l.starts_with("{\"tick\":12,") && l.contains("\"decision\":{\"action\":\"move\""),
        |l| {
            let decision =
                serde_json::from_str::<serde_json::Value>(l).expect("a call")["decision"]
                    .to_string();
            l.replacen(&decision, r#"{"action":"stay"}"#, 1)
        },
    );
    let stdout = replay_diverges(&out);
    assert!(stdout.starts_with("diverged at tick 12:"), "{stdout}");
    assert!(
        stdout.contains("(12 ticks identical before it)"),
        "{stdout}"
    );
}

#[test]
fn an_llm_call_taped_without_its_request_digest_is_a_divergence_named() {
    let mock = MockServer::start(scripted);
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("s.toml");
    std::fs::write(&file, llm_scenario(&mock.url, "every_tick")).expect("write");
    let out = dir.path().join("run");
    run_ok(&file, &out, &[]);
    drop(mock);
    // Every call of a model carries its digest; one of tick 5 loses it.
    let llm = out.join("llm.jsonl");
    let text = hearsay_tests::log_text(&llm).expect("tape");
    assert!(text.lines().all(|l| l.contains("\"request\":\"v2:")));
    let mut npc = String::new();
    edit_first_line(
        &llm,
        |l| l.starts_with("{\"tick\":5,"),
        |l| {
            let mut call: serde_json::Value = serde_json::from_str(l).expect("a call");
            npc = call["npc"].as_str().expect("npc").to_owned();
            call.as_object_mut().expect("an object").remove("request");
            call.to_string()
        },
    );
    let stdout = replay_diverges(&out);
    assert!(
        stdout.starts_with("diverged at tick 5:")
            && stdout.contains(&format!("no request digest for {npc}'s call at tick 5")),
        "{stdout}"
    );
}

#[test]
fn a_missing_or_corrupt_tape_is_a_clear_error() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("run");
    run_ok(&scenario("fish-market.toml"), &out, &["--ticks", "10"]);
    let tape = out.join("llm.jsonl");
    let text = hearsay_tests::log_text(&tape).expect("tape");
    let mut lines: Vec<&str> = text.lines().collect();
    lines[5] = "{\"tick\": \"five\"}";
    hearsay_tests::write_log(&tape, lines.join("\n") + "\n");
    let replay = hearsay(&root(), &["replay", path_str(&out)]);
    assert_eq!(replay.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&replay.stderr)
            .contains("llm.jsonl.zst: line 6 is not a brain call")
    );
    std::fs::remove_file(out.join("llm.jsonl.zst")).expect("rm");
    let replay = hearsay(&root(), &["replay", path_str(&out)]);
    assert_eq!(replay.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&replay.stderr).contains("llm.jsonl.zst missing"));
    let replay = hearsay(&root(), &["replay", path_str(dir.path())]);
    assert_eq!(replay.status.code(), Some(2), "not a run directory");
}

#[test]
fn the_same_run_on_one_and_on_many_threads_is_identical() {
    let dir = tempfile::tempdir().expect("tempdir");
    let one = dir.path().join("one");
    let many = dir.path().join("many");
    run_ok(
        &scenario("rumour-200.toml"),
        &one,
        &["--ticks", "15", "--threads", "1"],
    );
    run_ok(
        &scenario("rumour-200.toml"),
        &many,
        &["--ticks", "15", "--threads", "8"],
    );
    same_bytes(&one, &many, "1 vs 8 worker threads");
}

#[test]
fn a_fork_equals_the_original_before_the_fork_tick_then_differs() {
    let dir = tempfile::tempdir().expect("tempdir");
    let original = dir.path().join("original");
    run_ok(&scenario("fish-market.toml"), &original, &["--ticks", "80"]);
    let forked = dir.path().join("forked");
    let fork = hearsay(
        &root(),
        &[
            "fork",
            path_str(&original),
            "--at-tick",
            "40",
            "--out",
            path_str(&forked),
            "--seed",
            "7",
            "--set",
            "memory.scoring.w_rec=0.25",
        ],
    );
    assert!(
        fork.status.success(),
        "{}",
        String::from_utf8_lossy(&fork.stderr)
    );
    assert!(String::from_utf8_lossy(&fork.stdout).starts_with("(continued from tick 40)"));
    let by_tick = |dir: &Path| -> BTreeMap<u64, String> {
        let mut out = BTreeMap::new();
        let mut current = String::new();
        for line in hearsay_tests::log_text(dir.join("events.jsonl"))
            .expect("events")
            .lines()
        {
            current.push_str(line);
            current.push('\n');
            if line.starts_with("{\"type\":\"tick\"") {
                let tick: serde_json::Value = serde_json::from_str(line).expect("json");
                out.insert(
                    tick["tick"].as_u64().expect("tick"),
                    std::mem::take(&mut current),
                );
            }
        }
        out
    };
    let (a, b) = (by_tick(&original), by_tick(&forked));
    assert_eq!(b.len(), 80);
    for t in 0..40 {
        assert_eq!(a[&t], b[&t], "tick {t} is the original's");
    }
    assert!(
        (40..80).any(|t| a[&t] != b[&t]),
        "another seed and weights change the rest"
    );
    let manifest: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(forked.join("run.json")).expect("run.json"))
            .expect("json");
    assert_eq!(manifest["seeds"], serde_json::json!([[0, 42], [40, 7]]));
    assert!(
        std::fs::read_to_string(forked.join("scenario.toml"))
            .expect("scenario")
            .contains("w_rec = 0.25")
    );
    replays_identical(&forked, 80);

    let late = hearsay(
        &root(),
        &[
            "fork",
            path_str(&original),
            "--at-tick",
            "200",
            "--out",
            path_str(&dir.path().join("x")),
        ],
    );
    assert_eq!(late.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&late.stderr).contains("--at-tick 200"));
}

/// Both ways an LLM brain may think: every tick, and only when something changed.
const THINK: [&str; 2] = ["every_tick", "on_change"];

fn llm_scenario(url: &str, think: &str) -> String {
    let mut s = format!(
        "name = \"llm-replay\"\nseed = 3\nticks = 16\n\n[world]\nwidth = 12\nheight = 8\nhearing_radius = 3\n\n\
         [brain]\nprovider = \"openai\"\nbase_url = \"{url}\"\nmodel = \"mock\"\nmax_concurrency = 8\nretry_base_ms = 10\nthink = \"{think}\"\n\n\
         [memory.reflect]\nthreshold = 60\n\n"
    );
    for i in 0..8 {
        s.push_str(&format!(
            "[[npcs]]\nname = \"N{i}\"\nat = [{}, {}]\n\n",
            i % 12,
            (i * 3) % 8
        ));
    }
    s
}

fn scripted(call: &hearsay_tests::mock::ChatCall) -> Reply {
    if call.reflect {
        // One insight citing the first two memories shown.
        let cited: Vec<u64> = call.memory_ids.iter().copied().take(2).collect();
        let insight = serde_json::json!({"insights": [
            {"text": format!("{} has heard a lot of news", call.npc), "importance": 6, "evidence": cited}
        ]});
        return Reply::slow(insight.to_string(), 20);
    }
    let i: u64 = call.npc.trim_start_matches('N').parse().unwrap_or(0);
    let d = match (i + call.tick) % 3 {
        0 => {
            serde_json::json!({"action": "talk", "speech": format!("news from {} at {}", call.npc, call.tick), "x": 0, "y": 0})
        }
        1 => {
            serde_json::json!({"action": "move", "speech": "", "x": (i * 5 + call.tick) % 12, "y": (call.tick % 8)})
        }
        _ => serde_json::json!({"action": "stay", "speech": "", "x": 0, "y": 0}),
    };
    Reply::slow(d.to_string(), 20)
}

/// The (NPC, tick) of every decision on a run's tape.
fn taped_decisions(dir: &Path) -> Vec<(String, u64)> {
    read_jsonl(&dir.join("llm.jsonl"))
        .iter()
        .filter_map(|c| Some((c["npc"].as_str()?.to_owned(), c["tick"].as_u64()?)))
        .collect()
}

#[test]
fn an_llm_run_replays_offline_with_zero_requests() {
    for think in THINK {
        let mock = MockServer::start(scripted);
        let dir = tempfile::tempdir().expect("tempdir");
        let file = dir.path().join("s.toml");
        std::fs::write(&file, llm_scenario(&mock.url, think)).expect("write");
        // Named by the mode, so that a failure's message says which one failed.
        let out = dir.path().join(think);
        run_ok(&file, &out, &[]);
        let asked = mock.log().len();
        let taped = taped_decisions(&out);
        if think == "every_tick" {
            assert_eq!(mock.decisions().len(), 8 * 16);
        } else {
            assert!(taped.len() < 8 * 16, "{think}: {} decisions", taped.len());
        }
        assert_eq!(mock.decisions().len(), taped.len(), "{think}");
        let events = read_jsonl(&out.join("events.jsonl"));
        let reflections = of_type(&events, "reflected").len();
        assert!(reflections > 0, "{think}: the run reflected at least once");
        assert_eq!(
            asked,
            taped.len() + reflections,
            "{think}: one request per reflection"
        );
        replays_identical(&out, 16);
        assert_eq!(mock.log().len(), asked, "{think}: replay made no request");
        drop(mock);
        replays_identical(&out, 16);
    }
}

#[test]
fn an_llm_run_resumed_after_kill_asks_each_decision_once() {
    for think in THINK {
        let mock = MockServer::start(scripted);
        let dir = tempfile::tempdir().expect("tempdir");
        let file = dir.path().join("s.toml");
        std::fs::write(&file, llm_scenario(&mock.url, think)).expect("write");
        let reference = dir.path().join("reference");
        run_ok(&file, &reference, &[]);
        let before = mock.log().len();
        let expected: std::collections::BTreeSet<(String, u64)> =
            taped_decisions(&reference).into_iter().collect();

        let out = dir.path().join("killed");
        let child = spawn(&[
            "run",
            path_str(&file),
            "--out",
            path_str(&out),
            "--no-progress",
        ]);
        kill_at(child, &out, 7);
        let resumed = hearsay(&root(), &["resume", path_str(&out), "--no-progress"]);
        assert!(
            resumed.status.success(),
            "{think}: {}",
            String::from_utf8_lossy(&resumed.stderr)
        );
        same_bytes(
            &reference,
            &out,
            &format!("an LLM run ({think}) killed and resumed"),
        );
        let mut asked: BTreeMap<(String, u64), usize> = BTreeMap::new();
        for l in mock.log()[before..].iter().filter(|l| !l.call.reflect) {
            *asked.entry((l.call.npc.clone(), l.call.tick)).or_default() += 1;
        }
        let asked_once: std::collections::BTreeSet<(String, u64)> = asked.keys().cloned().collect();
        assert_eq!(
            asked_once, expected,
            "{think}: every decision was asked for"
        );
        if think == "every_tick" {
            assert_eq!(asked.len(), 8 * 16);
        }
        let twice: Vec<_> = asked.iter().filter(|(_, n)| **n > 1).collect();
        // The tick being decided when the process died may be asked again (its tape lines
        // may not have been written); every tick before it is taken from the tape.
        assert!(
            twice.iter().all(|((_, t), _)| *t >= 7),
            "{think}: decided ticks are not asked again: {twice:?}"
        );
    }
}

/// Forgetting and reflection across crashes: the forgetful village, killed twice while
/// memories fade and NPCs reflect, resumes to the uninterrupted run's bytes (archive marks,
/// recall counts and reflection tallies rewound with the store); a fork that stops
/// forgetting differs only from its fork tick on.
#[test]
fn forgetting_and_reflection_survive_kill_resume_and_fork() {
    let dir = tempfile::tempdir().expect("tempdir");
    let village = scenario("forgetful-village.toml");
    let ticks = ["--ticks", "160"];
    let reference = dir.path().join("reference");
    run_ok(&village, &reference, &ticks);
    let events = hearsay_tests::read_jsonl(&reference.join("events.jsonl"));
    let forgot: Vec<u64> = hearsay_tests::of_type(&events, "forgot")
        .iter()
        .map(|f| f["tick"].as_u64().expect("tick"))
        .collect();
    assert!(
        forgot.iter().any(|&t| t < 70) && forgot.iter().any(|&t| t > 110),
        "memories fade before and after the kills"
    );

    let out = dir.path().join("killed");
    let mut args = vec![
        "run",
        path_str(&village),
        "--out",
        path_str(&out),
        "--no-progress",
    ];
    args.extend_from_slice(&ticks);
    let mut child = spawn(&args);
    for k in [70, 110] {
        kill_at(child, &out, k);
        child = spawn(&["resume", path_str(&out), "--no-progress"]);
    }
    let output = child.wait_with_output().expect("resume ends");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    same_bytes(&reference, &out, "the forgetful village killed and resumed");
    assert_eq!(
        summary(&out)["memories"],
        summary(&reference)["memories"],
        "the same memories archived"
    );

    let forked = dir.path().join("forked");
    let fork = hearsay(
        &root(),
        &[
            "fork",
            path_str(&reference),
            "--at-tick",
            "100",
            "--out",
            path_str(&forked),
            "--set",
            "memory.forget.threshold=0.0",
            "--no-progress",
        ],
    );
    assert!(
        fork.status.success(),
        "{}",
        String::from_utf8_lossy(&fork.stderr)
    );
    let forked_events = hearsay_tests::read_jsonl(&forked.join("events.jsonl"));
    let after: Vec<&serde_json::Value> = hearsay_tests::of_type(&forked_events, "forgot");
    assert!(
        after.iter().all(|f| f["tick"].as_u64() < Some(100)),
        "nothing is forgotten after the fork"
    );
    replays_identical(&forked, 160);
}

/// A fork counts its earlier ticks' brain calls as it reads them, a tick's calls once the
/// next tick's first comes; a tape whose calls come out of tick order (one of tick 5
/// moved past tick 6's) is read again and counted whole. Either way the fork's summary
/// counts the same calls, reflections and insights, and its events are the same.
#[test]
fn a_fork_of_a_tape_out_of_tick_order_counts_its_earlier_calls_the_same() {
    let dir = tempfile::tempdir().expect("tempdir");
    let village = scenario("forgetful-village.toml");
    let reference = dir.path().join("reference");
    run_ok(&village, &reference, &["--ticks", "40", "--no-progress"]);
    let moved = dir.path().join("moved");
    std::fs::create_dir(&moved).expect("mkdir");
    for entry in std::fs::read_dir(&reference).expect("run directory") {
        let entry = entry.expect("entry");
        std::fs::copy(entry.path(), moved.join(entry.file_name())).expect("copy");
    }
    let tape = moved.join("llm.jsonl");
    let text = hearsay_tests::log_text(&tape).expect("tape");
    let mut lines: Vec<&str> = text.lines().collect();
    let tick = |line: &str| {
        serde_json::from_str::<serde_json::Value>(line).expect("a tape line")["tick"]
            .as_u64()
            .expect("tick")
    };
    let first_of_5 = lines.iter().position(|l| tick(l) == 5).expect("tick 5");
    let last_of_6 = lines.iter().rposition(|l| tick(l) == 6).expect("tick 6");
    let line = lines.remove(first_of_5);
    lines.insert(last_of_6, line);
    let ticks: Vec<u64> = lines.iter().map(|l| tick(l)).collect();
    assert!(
        ticks.windows(2).any(|w| w[0] > w[1]),
        "the tape's calls are out of tick order"
    );
    hearsay_tests::write_log(&tape, format!("{}\n", lines.join("\n")));

    let (in_order, out_of_order) = (dir.path().join("in-order"), dir.path().join("out-of-order"));
    fork_ok(&reference, 30, &in_order, &[]);
    fork_ok(&moved, 30, &out_of_order, &[]);
    same_bytes(
        &in_order,
        &out_of_order,
        "forks of a tape in and out of tick order",
    );
    let brain = |dir: &Path| {
        let b = summary(dir)["brains"]["default"].clone();
        let counts: Vec<serde_json::Value> = ["calls", "model_calls", "reflections", "insights"]
            .iter()
            .map(|k| b[*k].clone())
            .collect();
        (counts, b["thinking"].clone())
    };
    let (counts, thinking) = brain(&in_order);
    assert!(
        counts[0].as_u64() == Some(240) && counts[2].as_u64() > Some(0),
        "every call of the 40 ticks counted, reflections among them: {counts:?}"
    );
    assert_eq!(brain(&out_of_order), (counts, thinking));
}

/// The shipped scenario `name` saving a checkpoint every `k` ticks, written into `dir`.
fn checkpointing_every(dir: &Path, name: &str, k: u64) -> std::path::PathBuf {
    let text = std::fs::read_to_string(scenario(name)).expect("scenario");
    let file = dir.join(format!("{name}-every-{k}.toml"));
    std::fs::write(&file, format!("{text}\n[run]\ncheckpoint_every = {k}\n")).expect("write");
    file
}

/// A fork that edits the scenario between two of its source's checkpoints runs the
/// ticks from the checkpoint before to the fork tick again from the tape, under the
/// scenario they first ran with, and the edit from the fork tick on: the same run, byte
/// for byte, as the fork of a source that saved a checkpoint at the fork tick itself.
/// A fork of that fork, edited again, still replays every tick under the settings it ran
/// with.
#[test]
fn an_edited_fork_between_checkpoints_runs_as_one_at_a_checkpoint_and_replays_stage_by_stage() {
    let dir = tempfile::tempdir().expect("tempdir");
    let every = |k: u64| checkpointing_every(dir.path(), "fish-market.toml", k);
    let original = dir.path().join("original");
    run_ok(&every(10), &original, &["--ticks", "60"]);
    let dense = dir.path().join("dense");
    run_ok(&every(1), &dense, &["--ticks", "60"]);
    // `--set` before each of `sets`.
    let fork = |from: &Path, at: u64, out: &Path, sets: &[&str]| {
        let args: Vec<&str> = sets.iter().flat_map(|set| ["--set", set]).collect();
        fork_ok(from, at, out, &args);
    };
    // The edits change what the ticks after the fork do at once: the strict threshold
    // archives memories from the fork tick on, and NPCs hear only their neighbours.
    let edit = [
        "memory.forget.threshold=0.9",
        "memory.forget.strength=0.2",
        "world.hearing_radius=1",
    ];
    let between = dir.path().join("between");
    let at_one = dir.path().join("at-one");
    for (from, out) in [(&original, &between), (&dense, &at_one)] {
        fork(from, 15, out, &edit);
    }
    for file in ["events.jsonl", "llm.jsonl"] {
        assert!(
            log_bytes(between.join(file)).expect("log")
                == log_bytes(at_one.join(file)).expect("log"),
            "{file}: the fork from the checkpoint at tick 10 differs from the one from tick 15's"
        );
    }
    let events = read_jsonl(&between.join("events.jsonl"));
    let forgot = of_type(&events, "forgot");
    assert!(
        forgot.iter().any(|f| f["tick"].as_u64() >= Some(15)),
        "the edit takes effect from the fork tick"
    );
    assert!(
        forgot.iter().all(|f| f["tick"].as_u64() >= Some(15)),
        "and not before it"
    );
    // Up to the fork tick the source's events; from it on, the edit's.
    let ticks_of = |run: &Path| -> Vec<Vec<serde_json::Value>> {
        let mut ticks: Vec<Vec<serde_json::Value>> = Vec::new();
        for e in read_jsonl(&run.join("events.jsonl")) {
            let tick = e["tick"].as_u64().expect("every event has a tick") as usize;
            ticks.resize_with(ticks.len().max(tick + 1), Vec::new);
            ticks[tick].push(e);
        }
        ticks
    };
    let (source_ticks, forked_ticks) = (ticks_of(&original), ticks_of(&between));
    assert_eq!(source_ticks[..15], forked_ticks[..15]);
    assert_ne!(source_ticks[15..], forked_ticks[15..]);
    replays_identical(&between, 60);

    let first = dir.path().join("first");
    fork(&original, 20, &first, &["memory.forget.threshold=0.9"]);
    let second = dir.path().join("second");
    fork(&first, 40, &second, &["world.hearing_radius=1"]);
    let manifest: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(second.join("run.json")).expect("run.json"))
            .expect("json");
    let stages: Vec<u64> = manifest["earlier_scenarios"]
        .as_array()
        .expect("earlier scenarios")
        .iter()
        .map(|s| s["until_tick"].as_u64().expect("tick"))
        .collect();
    assert_eq!(stages, vec![20, 40]);
    let forgot = of_type(&read_jsonl(&second.join("events.jsonl")), "forgot").len();
    assert!(
        forgot > 0,
        "the strict threshold of the first fork archives memories"
    );
    for run in [&first, &second] {
        replays_identical(run, 60);
    }
}

/// The ticks an edited fork runs again before its fork tick can only be decided by the
/// source's tape (the edited scenario's brains would decide them otherwise): a fork whose
/// tape lost them — here cut back by hand, its store rewound to the checkpoint before —
/// is refused at the first such tick, naming the tape, not run under the edit.
#[test]
fn an_edited_fork_missing_a_taped_tick_before_its_fork_tick_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = checkpointing_every(dir.path(), "fish-market.toml", 10);
    let source = dir.path().join("source");
    run_ok(&file, &source, &["--ticks", "30"]);
    let forked = dir.path().join("forked");
    fork_ok(&source, 15, &forked, &["--set", "world.hearing_radius=1"]);
    // As if stopped after tick 11 with its tape short: the checkpoints after tick 9 gone,
    // the tape's lines of tick 12 on gone.
    hearsay_tests::sqlite_exec(
        &forked.join("memories.db"),
        "DELETE FROM checkpoints WHERE next_tick > 10",
    );
    let tape = hearsay_tests::log_text(forked.join("llm.jsonl")).expect("tape");
    let kept: String = tape
        .lines()
        .filter(|line| {
            let v: serde_json::Value = serde_json::from_str(line).expect("json");
            v["tick"].as_u64().is_some_and(|t| t < 12)
        })
        .map(|line| format!("{line}\n"))
        .collect();
    assert!(kept.len() < tape.len(), "the tape lost its later ticks");
    std::fs::remove_file(forked.join("llm.jsonl.zst")).expect("remove");
    hearsay_tests::write_log(forked.join("llm.jsonl"), &kept);
    let resumed = hearsay(&root(), &["resume", path_str(&forked), "--no-progress"]);
    assert_ne!(resumed.status.code(), Some(0));
    let err = String::from_utf8_lossy(&resumed.stderr);
    assert!(
        err.contains("tick 12 comes before the fork's tick") && err.contains("llm.jsonl"),
        "{err}"
    );
}

/// A fork with `--set` killed while it runs its source's ticks again (from the source's
/// checkpoint before the fork tick) resumes under the scenario those ticks ran with and
/// switches at the fork tick, as the uninterrupted fork did: the same events, byte for
/// byte. The fork saves its next checkpoint after tick 19, so a kill at any tick before
/// that makes the resume start again from the source's checkpoint at 10.
#[test]
fn an_edited_fork_killed_before_its_fork_tick_resumes_identical() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = checkpointing_every(dir.path(), "rumour-200.toml", 10);
    let source = dir.path().join("source");
    run_ok(&file, &source, &["--ticks", "30"]);
    let args = |out: &Path| -> Vec<String> {
        [
            "fork",
            path_str(&source),
            "--at-tick",
            "15",
            "--out",
            path_str(out),
            "--no-progress",
            "--set",
            "world.hearing_radius=1",
            "--set",
            "memory.forget.strength=0.2",
        ]
        .map(str::to_owned)
        .to_vec()
    };
    let whole = dir.path().join("whole");
    let done = hearsay(
        &root(),
        &args(&whole).iter().map(String::as_str).collect::<Vec<_>>(),
    );
    assert!(
        done.status.success(),
        "{}",
        String::from_utf8_lossy(&done.stderr)
    );
    let killed = dir.path().join("killed");
    let child = spawn(&args(&killed).iter().map(String::as_str).collect::<Vec<_>>());
    kill_at(child, &killed, 13);
    let at = completed_ticks(&killed);
    assert!(
        at < 20,
        "killed after tick {at}, before the fork's first checkpoint"
    );
    let resumed = hearsay(&root(), &["resume", path_str(&killed), "--no-progress"]);
    assert!(
        resumed.status.success(),
        "killed after {at} ticks: {}",
        String::from_utf8_lossy(&resumed.stderr)
    );
    same_bytes(
        &whole,
        &killed,
        &format!("the fork killed after {at} ticks and resumed"),
    );
    replays_identical(&killed, 30);
}

#[test]
fn a_fork_at_a_delta_checkpoint_continues_the_run_byte_for_byte() {
    // The store keeps whole checkpoints now and then and deltas between; a fork (and a
    // resume) at a delta's tick reads the whole one before it and every delta up to the
    // tick. Without edits, the fork's ticks are the source's, byte for byte.
    use sqlx::Row;
    let dir = tempfile::tempdir().expect("tempdir");
    let source = dir.path().join("source");
    run_ok(
        &scenario("fish-market.toml"),
        &source,
        &["--ticks", "60", "--set", "run.checkpoint_every=1"],
    );
    let rows = sqlite_rows(
        &source.join("memories.db"),
        "SELECT next_tick, base FROM checkpoints ORDER BY next_tick",
    );
    let kinds: Vec<(i64, Option<i64>)> = rows
        .iter()
        .map(|r| (r.get("next_tick"), r.get("base")))
        .collect();
    assert_eq!(kinds.len(), 60, "a checkpoint after every tick");
    let wholes = kinds.iter().filter(|(_, b)| b.is_none()).count();
    assert!((2..30).contains(&wholes), "whole now and then: {kinds:?}");
    // The delta furthest from its whole checkpoint: the longest chain to apply.
    let (at, base) = kinds
        .iter()
        .filter_map(|&(t, b)| b.map(|b| (t, b)))
        .max_by_key(|&(t, b)| (t - b, t))
        .expect("a delta");
    assert!(at - base >= 3, "a chain of several deltas: {kinds:?}");
    // And the last whole checkpoint: after the first, a run writes its chain's base,
    // brought up to the tick by the tick's delta, rather than capturing the world again.
    let (last_whole, _) = *kinds
        .iter()
        .rfind(|(_, b)| b.is_none())
        .expect("a whole checkpoint");
    assert!(
        last_whole > kinds[0].0,
        "a whole one after the first: {kinds:?}"
    );
    for (at, what) in [
        (at, format!("deltas since {base}")),
        (last_whole, "whole".to_owned()),
    ] {
        let forked = dir.path().join(format!("forked-{at}"));
        let at_tick = at.to_string();
        let o = hearsay(
            &root(),
            &[
                "fork",
                path_str(&source),
                "--at-tick",
                &at_tick,
                "--out",
                path_str(&forked),
            ],
        );
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        same_bytes(&source, &forked, &format!("fork at tick {at} ({what})"));
    }
}

#[test]
fn a_run_directory_of_the_format_before_resumes_replays_and_forks_in_its_own_format() {
    let dir = tempfile::tempdir().expect("tempdir");
    let ticks = ["--ticks", "30"];
    let rumour = scenario("rumour-200.toml");
    let reference = dir.path().join("reference");
    run_ok(&rumour, &reference, &ticks);

    // A run killed at tick 12, its logs then as format 1 held them: plain lines, the
    // last one perhaps torn.
    let out = dir.path().join("old");
    let mut args = vec![
        "run",
        path_str(&rumour),
        "--out",
        path_str(&out),
        "--no-progress",
    ];
    args.extend_from_slice(&ticks);
    kill_at(spawn(&args), &out, 12);
    for log in ["events.jsonl", "llm.jsonl"] {
        let text = hearsay_tests::log_bytes(out.join(log)).expect("log");
        std::fs::write(out.join(log), text).expect("write");
        std::fs::remove_file(out.join(format!("{log}.zst"))).expect("rm");
    }

    let resumed = hearsay(&root(), &["resume", path_str(&out), "--no-progress"]);
    assert!(
        resumed.status.success(),
        "{}",
        String::from_utf8_lossy(&resumed.stderr)
    );
    for log in ["events.jsonl", "llm.jsonl"] {
        assert!(
            !out.join(format!("{log}.zst")).exists(),
            "{log}: resume kept the directory's format"
        );
        assert!(
            std::fs::read(out.join(log)).expect("plain")
                == hearsay_tests::log_bytes(reference.join(log)).expect("reference"),
            "{log}: the resumed run of the format before is the uninterrupted one"
        );
    }
    replays_identical(&out, 30);

    // A fork of it is a new run directory: the format of today, the same text.
    let fork = dir.path().join("fork");
    fork_ok(&out, 20, &fork, &[]);
    assert!(!fork.join("events.jsonl").exists() && fork.join("events.jsonl.zst").is_file());
    same_bytes(&reference, &fork, "a fork at tick 20 of the same seed");
    println!(
        "figure: a format-1 run directory killed at tick 12 resumed in format 1, byte-identical to the uninterrupted run; replayed identical; forked at tick 20 into format 2, the same text"
    );
}

/// `tests/fixtures/tape-v1`, copied into `to`: a run written by the hearsay before
/// request digests took their current form (see its README).
fn first_form_run(to: &Path) {
    let from = root().join("tests/fixtures/tape-v1");
    std::fs::create_dir_all(to).expect("mkdir");
    for entry in std::fs::read_dir(&from).expect("fixture") {
        let entry = entry.expect("entry");
        if entry.file_name() != "README.md" {
            std::fs::copy(entry.path(), to.join(entry.file_name())).expect("copy");
        }
    }
}

/// The request digests of a tape, with their ticks: each call's and its reflection's.
fn tape_digests(dir: &Path) -> Vec<(u64, String)> {
    let mut digests = Vec::new();
    for line in read_jsonl(&dir.join("llm.jsonl")) {
        let tick = line["tick"].as_u64().expect("tick");
        for digest in [&line["request"], &line["reflection"]["request"]] {
            if let Some(d) = digest.as_str() {
                digests.push((tick, d.to_owned()));
            }
        }
    }
    digests
}

fn first_form(digest: &str) -> bool {
    digest.len() == 32 && digest.bytes().all(|b| b.is_ascii_hexdigit())
}

#[test]
fn a_tape_of_first_form_digests_replays_forks_and_catches_a_changed_one() {
    let dir = tempfile::tempdir().expect("tempdir");
    let old = dir.path().join("old");
    first_form_run(&old);
    let digests = tape_digests(&old);
    assert!(
        digests.len() > 100 && digests.iter().all(|(_, d)| first_form(d)),
        "the fixture is a first-form tape"
    );
    replays_identical(&old, 24);

    // A fork continues it as a tape is written now, where the heuristic brain's calls
    // carry no digest (its decisions follow from the request itself); the tape then holds
    // both, and replays.
    let fork = dir.path().join("fork");
    fork_ok(&old, 12, &fork, &[]);
    let digests = tape_digests(&fork);
    assert!(
        digests
            .iter()
            .all(|(tick, digest)| *tick < 12 && first_form(digest)),
        "{digests:?}"
    );
    assert_eq!(
        digests,
        tape_digests(&old)
            .into_iter()
            .filter(|(t, _)| *t < 12)
            .collect::<Vec<_>>()
    );
    assert!(
        read_jsonl(&fork.join("llm.jsonl"))
            .iter()
            .any(|c| c["tick"].as_u64().is_some_and(|t| t >= 12) && c.get("npc").is_some()),
        "the fork's own calls are on its tape"
    );
    // The same seed and scenario: the events the older hearsay wrote, byte for byte.
    same_bytes(&old, &fork, "a fork at tick 12 of a first-form run");
    replays_identical(&fork, 24);

    // One first-form digest changed: replay compares it in its own form and says where.
    let tape = old.join("llm.jsonl");
    let text = hearsay_tests::log_text(&tape).expect("tape");
    let (_, at_tick_5) = tape_digests(&old)
        .into_iter()
        .find(|(t, _)| *t == 5)
        .expect("a call at tick 5");
    let flipped = format!("{}0", &at_tick_5[..31]);
    let flipped = if flipped == at_tick_5 {
        format!("{}1", &at_tick_5[..31])
    } else {
        flipped
    };
    hearsay_tests::write_log(&tape, text.replacen(&at_tick_5, &flipped, 1));
    let replay = hearsay(&root(), &["replay", path_str(&old)]);
    assert_eq!(replay.status.code(), Some(1));
    let stdout = String::from_utf8_lossy(&replay.stdout);
    assert!(
        stdout.starts_with("diverged at tick 5:")
            && stdout.contains(&format!("digest {at_tick_5} against {flipped}")),
        "{stdout}"
    );
    println!(
        "figure: a tape of first-form request digests (hearsay at eadc6ec) replays identical; forked at tick 12 it keeps them before the fork tick and writes none after (the heuristic brain), replays identical, its events byte-identical; one changed digest diverges at its tick"
    );
}
