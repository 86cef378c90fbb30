//! The 200-NPC town runs and its rumours spread from their seeds.

use hearsay_tests::{run_ok, scenario, summary};

#[test]
fn rumours_spread_through_a_town_of_200() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("run");
    run_ok(&scenario("rumour-200.toml"), &out, &["--ticks", "40"]);
    let s = summary(&out);
    assert_eq!(s["npcs"], 200);
    let facts = s["facts"].as_array().expect("facts");
    assert_eq!(facts.len(), 4);
    let mayor = &facts[0];
    assert_eq!(mayor["name"], "mayor");
    let knowers = mayor["knowers"].as_array().expect("knowers").len();
    assert!(
        knowers >= 10,
        "the mayor rumour reaches at least 10 townsfolk in 40 ticks, got {knowers}"
    );
    assert_eq!(s["memories"]["unembedded"], 0);
}

/// Every `talk` line's words in an event log.
fn talks(run: &std::path::Path) -> Vec<String> {
    hearsay_tests::read_jsonl(&run.join("events.jsonl"))
        .iter()
        .filter(|e| e["type"] == "talk")
        .filter_map(|e| e["text"].as_str().map(str::to_owned))
        .collect()
}

#[test]
fn the_spread_of_each_rumour_is_fitted_in_the_summary() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("run");
    let printed = run_ok(&scenario("rumour-200.toml"), &out, &["--ticks", "120"]);
    let s = summary(&out);
    let mayor = &s["facts"][0];
    let fit = &mayor["fit"];
    let beta = fit["beta"].as_f64().expect("the mayor rumour has a fit");
    assert!(beta > 0.0, "{fit}");
    assert!(fit["beta_se"].as_f64().is_some_and(|se| se >= 0.0), "{fit}");
    assert!(fit["r2"].as_f64().is_some_and(|r2| r2 <= 1.0), "{fit}");
    assert!(fit["t0"].as_f64().is_some(), "{fit}");
    let first = mayor["curve"][0][0].as_u64().expect("curve");
    assert_eq!(
        fit["samples"].as_u64(),
        Some(120 - first),
        "one sample per tick"
    );
    let table = String::from_utf8_lossy(&printed.stdout);
    assert!(table.contains("SI fit: β = "), "{table}");
    let report = std::fs::read_to_string(out.join("report.html")).expect("report");
    assert!(
        report.contains(r#"<polyline class="fit""#),
        "the fitted curve is drawn"
    );
}

#[test]
fn noisy_retellings_drift_reproducibly_and_replay() {
    let dir = tempfile::tempdir().expect("tempdir");
    let noisy = [
        "--ticks",
        "40",
        "--seed",
        "7",
        "--set",
        "brain.retell_noise=0.3",
    ];
    let (a, b) = (dir.path().join("a"), dir.path().join("b"));
    run_ok(&scenario("rumour-200.toml"), &a, &noisy);
    run_ok(&scenario("rumour-200.toml"), &b, &noisy);
    let events = |run: &std::path::Path| {
        hearsay_tests::log_bytes(run.join("events.jsonl")).expect("events.jsonl")
    };
    assert_eq!(events(&a), events(&b), "the same seed, the same drift");

    let seeds = [
        "The mayor is going to resign before winter.",
        "A smuggler's boat was seen at the docks at night.",
        "Mira Potter and Lev Carter will marry at the temple.",
    ];
    let said = talks(&a);
    let drifted = said.iter().filter(|w| !seeds.contains(&w.as_str())).count();
    assert!(
        drifted > 0 && drifted < said.len(),
        "some retellings drift, not all: {drifted} of {}",
        said.len()
    );

    // Without noise every talk passes the words on as they are.
    let plain = dir.path().join("plain");
    run_ok(
        &scenario("rumour-200.toml"),
        &plain,
        &["--ticks", "40", "--seed", "7"],
    );
    let words = talks(&plain);
    assert!(!words.is_empty());
    assert!(
        words.iter().all(|w| seeds.contains(&w.as_str())),
        "no drift without noise"
    );
    assert_ne!(events(&a), events(&plain));

    let replay = hearsay_tests::hearsay(
        &hearsay_tests::root(),
        &["replay", hearsay_tests::path_str(&a)],
    );
    assert!(
        replay.status.success(),
        "a noisy run replays exactly:\n{}\n{}",
        String::from_utf8_lossy(&replay.stdout),
        String::from_utf8_lossy(&replay.stderr)
    );
}
