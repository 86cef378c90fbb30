//! `[[expect]]`: judged when a run ends, printed, kept in summary.json and the report; an
//! unmet one makes `hearsay run` exit 3; bad ones are refused with their place in the
//! file; `hearsay sweep` runs seeds in parallel and gives the same table every time.

use std::path::Path;

use hearsay_tests::{hearsay, path_str, root, scenario, summary};

/// fish-market without its own expectations, plus `extra`.
fn with(dir: &Path, name: &str, extra: &str) -> std::path::PathBuf {
    let text = std::fs::read_to_string(scenario("fish-market.toml")).expect("scenario");
    let text = text.split("\n[[expect]]").next().expect("text");
    let path = dir.join(name);
    std::fs::write(&path, format!("{text}\n{extra}")).expect("write");
    path
}

const MET: &str = r#"
[[expect]]
fact = "fresh fish"
share_at_least = 0.5
by_tick = 100

[[expect]]
npc = "Alice"
knows = "fresh fish"

[[expect]]
fact = "festival"
share_at_most = 0.25
by_tick = 99
"#;

#[test]
fn expectations_are_judged_printed_and_set_the_exit_code() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = with(dir.path(), "met.toml", MET);
    let out = dir.path().join("met");
    let run = hearsay(
        &root(),
        &[
            "run",
            path_str(&file),
            "--out",
            path_str(&out),
            "--ticks",
            "120",
        ],
    );
    let stdout = String::from_utf8_lossy(&run.stdout);
    assert_eq!(run.status.code(), Some(0), "{stdout}");
    assert!(stdout.contains("expectations: 3 of 3 met"), "{stdout}");
    assert!(
        stdout.contains(
            "met          at least 50% of the NPCs know \"fresh fish\" by tick 100: met at tick"
        ),
        "{stdout}"
    );
    assert!(
        stdout.contains("Alice knows \"fresh fish\" by the end: since tick"),
        "{stdout}"
    );
    let s = summary(&out);
    let judged = s["expectations"].as_array().expect("in summary.json");
    assert_eq!(judged.len(), 3);
    assert!(judged.iter().all(|j| j["verdict"] == "met"));
    assert_eq!(judged[0]["spec"]["kind"], "share_at_least");
    let html = std::fs::read_to_string(out.join("report.html")).expect("report");
    assert!(html.contains("id=\"expectations\""));

    // Carol cannot walk from the well to the market in three ticks.
    let unmet = with(
        dir.path(),
        "unmet.toml",
        &format!("{MET}\n[[expect]]\nnpc = \"Carol\"\nreaches = \"market\"\nby_tick = 3\n"),
    );
    let out = dir.path().join("unmet");
    let run = hearsay(
        &root(),
        &[
            "run",
            path_str(&unmet),
            "--out",
            path_str(&out),
            "--ticks",
            "120",
        ],
    );
    let stdout = String::from_utf8_lossy(&run.stdout);
    assert_eq!(run.status.code(), Some(3), "{stdout}");
    assert!(stdout.contains("expectations: 3 of 4 met"), "{stdout}");
    assert!(
        stdout.contains("NOT MET      Carol reaches the market by tick 3: came within"),
        "{stdout}"
    );

    // An expectation past the end of a shortened run is not checked, and does not fail it.
    let out = dir.path().join("short");
    let run = hearsay(
        &root(),
        &[
            "run",
            path_str(&file),
            "--out",
            path_str(&out),
            "--ticks",
            "20",
        ],
    );
    let stdout = String::from_utf8_lossy(&run.stdout);
    assert_eq!(run.status.code(), Some(0), "{stdout}");
    assert!(
        stdout.contains("not checked  at most 25% of the NPCs know \"festival\" by tick 99"),
        "{stdout}"
    );
}

#[test]
fn bad_expectations_are_refused_where_they_are_written() {
    let dir = tempfile::tempdir().expect("tempdir");
    let bad = with(
        dir.path(),
        "bad.toml",
        r#"
[[expect]]
fact = "fresh fishes"
share_at_least = 0.5

[[expect]]
fact = "fresh fish"
share_at_least = 1.5

[[expect]]
fact = "fresh fish"
npc = "Alice"
knows = "fresh fish"

[[expect]]
npc = "Zed"
reaches = "harbour"

[[expect]]
fact = "fresh fish"
share_at_least = 0.5
share_at_most = 0.9

[[expect]]
npc = "Bob"
reaches = "market"
by_tick = 240
"#,
    );
    let out = hearsay(&root(), &["validate", path_str(&bad)]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    for needle in [
        "unknown fact \"fresh fishes\"",
        "a share is a fraction of the NPCs, from 0 to 1, not 1.5",
        "not both",
        "unknown NPC \"Zed\"",
        "unknown place \"harbour\"",
        "exactly one of share_at_least, share_at_most, knowers_at_least (2 given)",
        "bad.toml:",
        "6 problems",
    ] {
        assert!(err.contains(needle), "missing {needle:?} in:\n{err}");
    }
    let good = with(dir.path(), "good.toml", MET);
    let out = hearsay(&root(), &["validate", path_str(&good)]);
    assert!(String::from_utf8_lossy(&out.stdout).contains("3 expectations"));
}

#[test]
fn a_sweep_gives_the_same_table_whatever_the_jobs() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = with(dir.path(), "sweep.toml", MET);
    let sweep = |out: &Path, jobs: &str| {
        let run = hearsay(
            &root(),
            &[
                "sweep",
                path_str(&file),
                "--seeds",
                "1..5",
                "--ticks",
                "120",
                "--jobs",
                jobs,
                "--out",
                path_str(out),
                "--set",
                "memory.recall_k=3",
            ],
        );
        assert!(
            run.status.success(),
            "{}",
            String::from_utf8_lossy(&run.stderr)
        );
        assert!(String::from_utf8_lossy(&run.stderr).contains("runs per minute"));
        String::from_utf8_lossy(&run.stdout).into_owned()
    };
    let a = sweep(&dir.path().join("a"), "1");
    let b = sweep(&dir.path().join("b"), "2");
    assert_eq!(a, b, "the same sweep, the same table");
    assert!(
        a.starts_with("sweep fish-market: 5 seeds (1..=5), 120 ticks, 4 NPCs"),
        "{a}"
    );
    assert!(a.contains("set: memory.recall_k=3"), "{a}");
    assert!(
        a.contains("at least 50% of the NPCs know \"fresh fish\" by tick 100"),
        "{a}"
    );
    assert!(a.contains("time to half of the NPCs"), "{a}");
    assert!(a.contains("spread rate β (SI fit)"), "{a}");
    let json: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(dir.path().join("a/sweep.json")).expect("sweep.json"),
    )
    .expect("json");
    let runs = json["runs"].as_array().expect("runs");
    assert_eq!(runs.len(), 5);
    let halves: std::collections::BTreeSet<String> = runs
        .iter()
        .map(|r| r["facts"][0]["half_tick"].to_string())
        .collect();
    assert!(halves.len() > 1, "seeds differ: {halves:?}");
    for (i, r) in runs.iter().enumerate() {
        assert_eq!(r["seed"].as_u64(), Some(i as u64 + 1));
        let seed_dir = dir.path().join(format!("a/seed-{}", i + 1));
        assert_eq!(summary(&seed_dir)["seed"].as_u64(), Some(i as u64 + 1));
        let kept = std::fs::read_to_string(seed_dir.join("scenario.toml")).expect("scenario");
        assert!(
            kept.contains("recall_k = 3"),
            "each run keeps the edited scenario"
        );
    }
    // β over the seeds: the mean of the runs' fitted β, inside its 95 % interval; the
    // runs without a fit are counted apart.
    let beta = &json["facts"][0]["beta"];
    let betas: Vec<f64> = runs
        .iter()
        .filter_map(|r| r["facts"][0]["beta"].as_f64())
        .collect();
    assert_eq!(beta["fitted"].as_u64(), Some(betas.len() as u64), "{beta}");
    assert_eq!(
        beta["unfitted"].as_u64(),
        Some(5 - betas.len() as u64),
        "{beta}"
    );
    assert!(betas.len() >= 2, "most seeds fit \"fresh fish\": {beta}");
    let mean = betas.iter().sum::<f64>() / betas.len() as f64;
    let got = beta["mean"].as_f64().expect("mean");
    assert!((got - mean).abs() < 1e-9, "{beta}");
    let (lo, hi) = (
        beta["lo"].as_f64().expect("lo"),
        beta["hi"].as_f64().expect("hi"),
    );
    assert!(
        lo < mean && mean < hi && betas.iter().all(|b| *b > 0.0),
        "{beta}"
    );
    // The table's mean is the mean of the runs' half ticks.
    let ticks: Vec<f64> = runs
        .iter()
        .filter_map(|r| r["facts"][0]["half_tick"].as_f64())
        .collect();
    let mean = ticks.iter().sum::<f64>() / ticks.len() as f64;
    assert_eq!(json["facts"][0]["mean"].as_f64(), Some(mean));

    let again = hearsay(
        &root(),
        &[
            "sweep",
            path_str(&file),
            "--seeds",
            "1..2",
            "--out",
            path_str(&dir.path().join("a")),
        ],
    );
    assert_eq!(
        again.status.code(),
        Some(2),
        "an existing sweep needs --force"
    );
}
