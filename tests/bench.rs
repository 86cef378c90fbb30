//! The benchmark harness runs, and the two limits that hold on any machine hold here
//! too: an LLM-bound tick costs what the model costs (P1), and under `eventual`
//! visibility a slow embedder costs an LLM-bound tick nothing while nearly every recall
//! uses a current query (P2). (The full suites, release build, are `scripts/bench.sh`.)

use hearsay_tests::{bin, root};

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
    let stdout = String::from_utf8_lossy(&run.stdout);
    assert!(
        run.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&run.stderr)
    );
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
    let stdout = String::from_utf8_lossy(&run.stdout);
    assert!(
        run.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&run.stderr)
    );
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
