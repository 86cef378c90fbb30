//! The benchmark harness runs, and the two limits that hold on any machine hold here
//! too: an LLM-bound tick costs what the model costs (P1), and under `eventual`
//! visibility a slow embedder costs an LLM-bound tick nothing while nearly every recall
//! uses a current query (P2). (The full suites, release build, are `scripts/bench.sh`.)

use hearsay_tests::{assert_ok, bin, root};

#[test]
fn the_harness_measures_p1_and_p2_within_their_goals() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("results.json");
    let run = std::process::Command::new(env!("CARGO_BIN_EXE_bench"))
        .args(["--quick", "--hearsay"])
        .arg(bin())
        .arg("--out")
        .arg(&out)
        .args(["p1", "p2"])
        .current_dir(root())
        .output()
        .expect("bench runs");
    assert_ok(&run, "bench p1 p2");
    let stdout = String::from_utf8_lossy(&run.stdout);
    let figures: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&out).expect("results")).expect("json");
    let p1 = figures["p1"]["ratio"].as_f64().expect("p1 ratio");
    assert!((1.0..=1.10).contains(&p1), "P1 {p1}:\n{stdout}");
    let p2 = &figures["p2"];
    for run in ["instant", "slow"] {
        let ratio = p2[run]["ratio"].as_f64().expect("p2 ratio");
        assert!((1.0..=1.05).contains(&ratio), "P2 {run} {ratio}:\n{stdout}");
        let share = p2[run]["current_share"].as_f64().expect("p2 share");
        assert!(
            share >= 0.95,
            "P2 {run}: {share} of recall queries current:\n{stdout}"
        );
        assert!(
            p2[run]["recall_bytes_scanned"].as_u64().unwrap_or(0) > 0,
            "P2 {run}: recall read nothing, so it measured nothing:\n{stdout}"
        );
        assert_eq!(p2[run]["unembedded"], 0, "the backfill drains");
    }
    assert!(stdout.contains("p1 ") && stdout.contains("p2 "), "{stdout}");
}

/// `bench pairs` runs two builds by turns and records what each measured, with the
/// evidence: here both sides are the same binary, so every run must have written the
/// same logs, and each side's CPU must be something the runs really spent.
#[test]
fn the_harness_compares_two_builds_by_turns() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("pairs.json");
    let run = std::process::Command::new(env!("CARGO_BIN_EXE_bench"))
        .args([
            "pairs",
            "same-binary",
            "--npcs",
            "60",
            "--ticks",
            "6",
            "--rounds",
            "2",
        ])
        .arg("--a")
        .arg(bin())
        .arg("--b")
        .arg(bin())
        .arg("--out")
        .arg(&out)
        .current_dir(root())
        .output()
        .expect("bench pairs runs");
    assert_ok(&run, "bench pairs");
    let stdout = String::from_utf8_lossy(&run.stdout);
    let all: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&out).expect("pairs.json")).expect("json");
    let p = &all["same-binary"];
    assert_eq!(p["rounds"], 2, "{p}");
    assert_eq!(p["same_events"], true, "one binary, one seed: {stdout}");
    assert_eq!(p["same_tape"], true, "{stdout}");
    assert_eq!(p["town"]["npcs"], 60);
    for side in ["a", "b"] {
        let runs = p[side]["runs"].as_array().expect("runs");
        assert_eq!(runs.len(), 2);
        for r in runs {
            assert!(r["process_cpu_s"].as_f64().unwrap_or(0.0) > 0.0, "{r}");
            assert!(r["cpu_ms_per_tick"].as_f64().unwrap_or(0.0) > 0.0, "{r}");
            assert!(r["phases_ms_per_tick"]["think"].as_f64().is_some(), "{r}");
            assert_eq!(r["events"].as_str().map(str::len), Some(64), "{r}");
        }
        assert!(p[side]["commit"]["binary"].is_string(), "{p}");
    }
    let cpu = &p["figures"]["process_cpu_s"];
    assert!(cpu["b_over_a"].as_f64().is_some_and(|r| r > 0.0), "{cpu}");
    assert!(stdout.contains("### same-binary"), "{stdout}");
}

/// A `perf script` transcript: one sample per `(thread, frames innermost first)`, in the
/// form `perf script -F comm,tid,ip,sym --no-inline` prints.
fn perf_transcript(samples: &[(&str, &[&str])]) -> String {
    let mut text = String::new();
    for (i, (comm, frames)) in samples.iter().enumerate() {
        text.push_str(&format!("{comm} {}\n", 100 + i));
        for (depth, frame) in frames.iter().enumerate() {
            text.push_str(&format!("\t    55d3{depth:08x} {frame}\n"));
        }
        text.push('\n');
    }
    text
}

/// Runs `scripts/cpu_profile.py fold` on `transcript` at 10 Hz over 2 ticks: each sample
/// is 50 ms of CPU per tick.
fn fold_profile(transcript: &str) -> std::process::Output {
    use std::io::Write;
    let mut child = std::process::Command::new("python3")
        .arg(root().join("scripts/cpu_profile.py"))
        .args(["fold", "--ticks", "2", "--hz", "10"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("python3 runs the profile folder");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(transcript.as_bytes())
        .expect("transcript written");
    child.wait_with_output().expect("the folder ends")
}

/// Every stage the profile folds, by the function its samples must pass through, on the
/// thread that runs it.
const STAGE_FRAMES: [(&str, &str); 10] = [
    (
        "hearsay-async",
        "hearsay_memory::index::VectorIndex::search_counted",
    ),
    ("hearsay-async", "hearsay_brain::request::digest_of"),
    ("hearsay-async", "hearsay_runtime::run::think::embed_now"),
    (
        "hearsay-async",
        "hearsay_brain::heuristic::HeuristicBrain::decide_now",
    ),
    ("hearsay-async", "hearsay_brain::tape::BrainCall::into_line"),
    (
        "hearsay-async",
        "hearsay_memory::backfill::work::{{closure}}",
    ),
    ("hearsay", "hearsay_core::sim::Sim::act"),
    ("hearsay", "hearsay_runtime::run::runner::Chain::save"),
    ("hearsay", "hearsay_core::systems::record::seal_tick"),
    ("hearsay", "hearsay_runtime::run::runner::finish"),
];

#[test]
fn a_stage_may_be_retired_or_found_under_another_function_and_any_other_must_be_found() {
    // Every stage but the request digest, which the profiled towns no longer take.
    let without = |stage: &str| -> Vec<(&'static str, Vec<&'static str>)> {
        STAGE_FRAMES
            .iter()
            .filter(|(_, f)| !f.contains(stage))
            .map(|&(comm, f)| (comm, vec![f, "start_thread"]))
            .collect()
    };
    let fold = |samples: &[(&str, Vec<&str>)]| {
        let samples: Vec<(&str, &[&str])> =
            samples.iter().map(|(c, f)| (*c, f.as_slice())).collect();
        fold_profile(&perf_transcript(&samples))
    };
    let run = fold(&without("hearsay_brain::request::digest_of"));
    assert_ok(&run, "cpu_profile.py fold");
    let profile: serde_json::Value = serde_json::from_slice(&run.stdout).expect("json");
    assert_eq!(profile["stages"]["Think: the request's digest"], 0.0);
    // The queries' embedding is found under either of its functions (in the NPC's turn,
    // or in batches before the turns).
    let mut batched = without("hearsay_runtime::run::think::embed_now");
    batched.push((
        "hearsay-async",
        vec![
            "hearsay_runtime::run::think::embed_queries::{{closure}}",
            "start_thread",
        ],
    ));
    let run = fold(&batched);
    assert_ok(&run, "cpu_profile.py fold");
    let profile: serde_json::Value = serde_json::from_slice(&run.stdout).expect("json");
    assert!(profile["stages"]["Think: the recall queries' embedding"].as_f64() > Some(0.0));
    // Another stage without a sample is a renamed function: refused, named.
    let run = fold(&without("hearsay_core::systems::record::seal_tick"));
    assert!(!run.status.success());
    assert!(String::from_utf8_lossy(&run.stderr).contains("no sample in Act: sealing the tick"));
}

#[test]
fn the_profile_folds_samples_into_cpu_per_tick_by_thread_and_stage() {
    let mut samples: Vec<(&str, Vec<&str>)> = STAGE_FRAMES
        .iter()
        .map(|&(comm, stage)| (comm, vec!["memcpy", stage, "start_thread"]))
        .collect();
    // Two more samples in the search, its name as perf prints it (hash and offset), one
    // of them cut short before the thread's start; one in SQLite's writer.
    samples.push((
        "hearsay-async",
        vec!["hearsay_memory::index::VectorIndex::search_counted::h0123456789abcdef+0x1f"],
    ));
    samples.push((
        "hearsay-async",
        vec![
            "hearsay_memory::index::VectorIndex::search_counted+0x2a",
            "clone3",
        ],
    ));
    samples.push(("sqlx-sqlite-wor", vec!["sqlite3VdbeExec", "start_thread"]));
    // Perceive's threads are named apart from the tick thread (perf keeps 15 bytes).
    samples.push(("hearsay-observe", vec!["build", "start_thread"]));
    let samples: Vec<(&str, &[&str])> = samples.iter().map(|(c, f)| (*c, f.as_slice())).collect();
    let run = fold_profile(&perf_transcript(&samples));
    assert_ok(&run, "cpu_profile.py fold");
    let profile: serde_json::Value = serde_json::from_slice(&run.stdout).expect("json");
    assert_eq!(profile["samples"], 14);
    assert_eq!(profile["cpu_ms_per_tick"], 700.0);
    assert_eq!(profile["unwound_share"], 0.929, "13 of 14 reach a root");
    assert_eq!(
        profile["threads"]["Perceive's threads (towns of 2,048 NPCs or more)"],
        50.0
    );
    assert_eq!(profile["stages"]["Think: recall's search"], 150.0);
    assert_eq!(profile["stages"]["Persist: the checkpoint"], 50.0);
    assert_eq!(
        profile["threads"]["the async workers (Think, backfill)"],
        400.0
    );
    assert_eq!(profile["threads"]["the tick thread"], 200.0);
    assert_eq!(profile["threads"]["SQLite's writer"], 50.0);
    assert_eq!(profile["own"][0][0], "memcpy");
    assert_eq!(profile["own"][0][1], 500.0);
    assert_eq!(
        profile["own"][1][0], "hearsay_memory::index::VectorIndex::search_counted",
        "hash and offset stripped, both samples one function"
    );
    assert_eq!(profile["own"][1][1], 100.0);
}

#[test]
fn a_profile_with_a_stage_no_sample_reached_is_refused() {
    // The end of the run renamed: its stage would read as costing nothing.
    let samples: Vec<(&str, &[&str])> = STAGE_FRAMES[..9]
        .iter()
        .map(|(comm, stage)| (*comm, std::slice::from_ref(stage)))
        .collect();
    let run = fold_profile(&perf_transcript(&samples));
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(!run.status.success(), "{stderr}");
    assert!(
        stderr.contains("no sample in After the last tick") && stderr.contains("renamed"),
        "{stderr}"
    );
}

#[test]
fn profiles_are_kept_by_label_newest_first_each_with_its_commit() {
    // Two rounds' profiles, then the first label measured again: it replaces its old
    // profile and comes first; the section names each label's commit, and only the
    // newest lists where its samples landed.
    let script = r#"
import json, sys
sys.path.insert(0, "scripts")
from cpu_profile import keep, render
def town(title, ms):
    return {"title": title, "cpu_ms_per_tick": ms, "run_cpu_ms_per_tick": ms - 1,
            "threads": {"the tick thread": 1.0}, "stages": {}, "own": [["a_function", ms]], "ticks_per_second": 2.0,
            "samples": 10, "unwound_share": 1.0}
kept = keep([], "r1", "aaa1111", 499, [town("T", 10.0)])
kept = keep(kept, "r2", "bbb2222", 499, [town("T", 20.0)])
kept = keep(kept, "r1", "ccc3333", 499, [town("T", 30.0)])
print(json.dumps([(p["label"], p["commit"]) for p in kept]))
print(render(kept))
"#;
    let run = std::process::Command::new("python3")
        .args(["-c", script])
        .current_dir(root())
        .output()
        .expect("python3 runs");
    assert_ok(&run, "python3 keep/render");
    let stdout = String::from_utf8_lossy(&run.stdout);
    let mut lines = stdout.lines();
    assert_eq!(
        lines.next(),
        Some(r#"[["r1", "ccc3333"], ["r2", "bbb2222"]]"#)
    );
    let section: String = lines.collect::<Vec<_>>().join("\n");
    let r1 = section.find("### r1").expect("r1 rendered");
    let r2 = section.find("### r2").expect("r2 rendered");
    assert!(r1 < r2, "newest first:\n{section}");
    assert!(section.contains("At commit ccc3333") && section.contains("At commit bbb2222"));
    assert!(!section.contains("aaa1111"), "the replaced profile is gone");
    assert_eq!(
        section.matches("Where the samples landed").count(),
        1,
        "{section}"
    );
    assert!(section.contains("| **the process, as perf sampled it** | **30.0** |"));
    assert!(
        section.contains("| SQLite's writer | – |"),
        "a thread a kept profile has no figure for: {section}"
    );
}
