//! Overrides do what they say: `--ticks N` is `--set ticks=N`, `--seed S` is
//! `--set seed=S`, a fork's `--set ticks=`/`seed=` take effect and its files agree with
//! what ran, `resume` never rewrites a byte written before the stop, and a closed stdout
//! ends a command quietly with its run intact.

use std::io::Read;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use hearsay_tests::{bin, hearsay, of_type, path_str, read_jsonl, root, run_ok, scenario, summary};

fn manifest(dir: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(dir.join("run.json")).expect("run.json"))
        .expect("json")
}

fn toml_of(dir: &Path) -> toml::Table {
    toml::from_str(&std::fs::read_to_string(dir.join("scenario.toml")).expect("scenario"))
        .expect("toml")
}

#[test]
fn flags_are_the_sets_they_stand_for() {
    let dir = tempfile::tempdir().expect("tempdir");
    let fish = scenario("fish-market.toml");
    let by_flag = dir.path().join("flag");
    let by_set = dir.path().join("set");
    let flag = run_ok(&fish, &by_flag, &["--ticks", "30", "--seed", "7"]);
    run_ok(&fish, &by_set, &["--set", "ticks=30", "--set", "seed=7"]);
    for file in ["events.jsonl.zst", "scenario.toml"] {
        assert_eq!(
            std::fs::read(by_flag.join(file)).expect("a"),
            std::fs::read(by_set.join(file)).expect("b"),
            "{file}: --ticks/--seed and --set differ"
        );
    }
    let t = toml_of(&by_flag);
    assert_eq!(
        t["ticks"].as_integer(),
        Some(30),
        "scenario.toml says what ran"
    );
    assert_eq!(t["seed"].as_integer(), Some(7));
    assert_eq!(manifest(&by_flag)["seeds"], serde_json::json!([[0, 7]]));
    // The rest of the file is the user's, comments included.
    let original = std::fs::read_to_string(&fish).expect("scenario");
    let kept = std::fs::read_to_string(by_flag.join("scenario.toml")).expect("kept");
    assert_eq!(
        kept.lines().filter(|l| l.starts_with('#')).count(),
        original.lines().filter(|l| l.starts_with('#')).count()
    );
    // A shortened run notes the event it will not reach, and runs.
    let notes = String::from_utf8_lossy(&flag.stderr);
    assert!(
        notes.contains("note: the event at tick 100 never fires: this run has ticks 0..29"),
        "{notes}"
    );
    // A lengthened one reaches an event past the file's own ticks.
    let late = dir.path().join("late.toml");
    std::fs::write(&late, original.replacen("tick = 100", "tick = 250", 1)).expect("write");
    let v = hearsay(&root(), &["validate", path_str(&late)]);
    assert!(v.status.success(), "a note, not an error");
    assert!(String::from_utf8_lossy(&v.stdout).contains("never fires"));
    let long = dir.path().join("long");
    let o = hearsay(
        &root(),
        &[
            "run",
            path_str(&late),
            "--out",
            path_str(&long),
            "--ticks",
            "260",
        ],
    );
    // 3: the run finished, and the scenario's own expectation of the festival by tick
    // 120 is not met now that it starts at 250.
    assert_eq!(
        o.status.code(),
        Some(3),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let events = read_jsonl(&long.join("events.jsonl"));
    assert!(
        of_type(&events, "scenario_event")
            .iter()
            .any(|e| e["tick"] == 250),
        "the event at 250 fired in a 260-tick run"
    );
    assert_eq!(summary(&long)["ticks"], 260);
}

#[test]
fn a_forks_ticks_and_seed_take_effect_and_its_files_say_so() {
    let dir = tempfile::tempdir().expect("tempdir");
    let run = dir.path().join("run");
    run_ok(&scenario("fish-market.toml"), &run, &["--ticks", "40"]);
    let r = path_str(&run);
    let longer = dir.path().join("longer");
    let o = hearsay(
        &root(),
        &[
            "fork",
            r,
            "--at-tick",
            "20",
            "--out",
            path_str(&longer),
            "--set",
            "ticks=60",
        ],
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(summary(&longer)["ticks"], 60);
    assert_eq!(manifest(&longer)["ticks"], 60);
    assert_eq!(toml_of(&longer)["ticks"].as_integer(), Some(60));
    let events = read_jsonl(&longer.join("events.jsonl"));
    assert_eq!(of_type(&events, "tick").len(), 60, "it ran 60 ticks");
    let replay = hearsay(&root(), &["replay", path_str(&longer)]);
    assert_eq!(
        String::from_utf8_lossy(&replay.stdout).trim(),
        "identical: 60 ticks"
    );

    let by_set = dir.path().join("by-set");
    let by_flag = dir.path().join("by-flag");
    for (out, args) in [
        (&by_set, vec!["--set", "seed=7"]),
        (&by_flag, vec!["--seed", "7"]),
    ] {
        let mut all = vec!["fork", r, "--at-tick", "20", "--out", path_str(out)];
        all.extend(args);
        let o = hearsay(&root(), &all);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        assert_eq!(
            manifest(out)["seeds"],
            serde_json::json!([[0, 42], [20, 7]])
        );
        assert_eq!(toml_of(out)["seed"].as_integer(), Some(7));
        assert_eq!(summary(out)["seed"], 42, "the run's first seed");
    }
    assert_eq!(
        hearsay_tests::log_bytes(by_set.join("events.jsonl")).expect("a"),
        hearsay_tests::log_bytes(by_flag.join("events.jsonl")).expect("b"),
        "fork --set seed=7 is fork --seed 7"
    );
    let plain = dir.path().join("plain");
    run_ok(&scenario("fish-market.toml"), &plain, &["--ticks", "40"]);
    assert_ne!(
        hearsay_tests::log_bytes(by_set.join("events.jsonl")).expect("a"),
        hearsay_tests::log_bytes(plain.join("events.jsonl")).expect("b"),
        "the seed took effect"
    );
    let short = hearsay(
        &root(),
        &[
            "fork",
            r,
            "--at-tick",
            "20",
            "--out",
            path_str(&dir.path().join("x")),
            "--set",
            "ticks=20",
        ],
    );
    assert_eq!(short.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&short.stderr).contains("a fork at tick 20 needs more ticks"));
}

fn completed_ticks(dir: &Path) -> usize {
    hearsay_tests::log_text(dir.join("events.jsonl"))
        .map(|t| t.matches("\"type\":\"tick\"").count())
        .unwrap_or(0)
}

#[test]
fn resume_keeps_every_byte_written_before_the_stop() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("run");
    let rumour = scenario("rumour-200.toml");
    let mut child = Command::new(bin())
        .args([
            "run",
            path_str(&rumour),
            "--out",
            path_str(&out),
            "--ticks",
            "24",
            "--no-progress",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("hearsay starts");
    let started = Instant::now();
    while completed_ticks(&out) < 12 {
        assert!(
            child.try_wait().expect("child").is_none(),
            "ended before tick 12"
        );
        assert!(started.elapsed() < Duration::from_secs(300), "no progress");
        std::thread::sleep(Duration::from_millis(10));
    }
    child.kill().expect("kill -9");
    let _ = child.wait();
    let done = completed_ticks(&out) as u64;
    let files_before = ["llm.jsonl.zst", "events.jsonl.zst"]
        .map(|f| std::fs::read(out.join(f)).expect("log file"));
    let tape_before = hearsay_tests::log_bytes(out.join("llm.jsonl")).expect("tape");
    let events_before = hearsay_tests::log_bytes(out.join("events.jsonl")).expect("events");
    // What must survive: every tape line of a tick before the last one logged (a resume
    // takes the decided ticks from the tape as they are), and every event line of a tick
    // before the store's last checkpoint (a resume starts there and runs the ticks after
    // it again, to the same text).
    let saved: i64 = {
        use sqlx::Row;
        hearsay_tests::sqlite_rows(
            &out.join("memories.db"),
            "SELECT MAX(next_tick) FROM checkpoints",
        )[0]
        .get(0)
    };
    let saved = u64::try_from(saved).expect("a checkpoint");
    assert!(
        (10..=done).contains(&saved),
        "the last checkpoint before tick {saved}, {done} ticks logged"
    );
    let kept = |bytes: &[u8], until: u64| -> usize {
        let mut end = 0;
        for line in bytes.split_inclusive(|&b| b == b'\n') {
            if !line.ends_with(b"\n") {
                break;
            }
            let value: serde_json::Value = serde_json::from_slice(line).expect("json");
            if value["tick"].as_u64().is_none_or(|t| t >= until) {
                break;
            }
            end += line.len();
        }
        end
    };
    let tape_kept = kept(&tape_before, done - 1);
    let events_kept = kept(&events_before, saved);
    assert!(tape_kept > 0 && events_kept > 0);
    let o = hearsay(&root(), &["resume", path_str(&out)]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let tape_after = hearsay_tests::log_bytes(out.join("llm.jsonl")).expect("tape");
    let events_after = hearsay_tests::log_bytes(out.join("events.jsonl")).expect("events");
    assert!(
        tape_after.starts_with(&tape_before[..tape_kept]),
        "llm.jsonl: a byte written before the stop changed"
    );
    assert!(
        events_after.starts_with(&events_before[..events_kept]),
        "events.jsonl: a byte written before the stop changed"
    );
    // And in the files themselves: the kept text is all in bytes resume never wrote
    // again (zstd decodes it from the part of the file the two share).
    let mut shared = [0; 2];
    for (i, (f, kept)) in [
        ("llm.jsonl.zst", tape_kept),
        ("events.jsonl.zst", events_kept),
    ]
    .into_iter()
    .enumerate()
    {
        let after = std::fs::read(out.join(f)).expect("log file");
        let common = after
            .iter()
            .zip(&files_before[i])
            .take_while(|(a, b)| a == b)
            .count();
        let text = hearsay_tests::decode_zstd(&after[..common]).expect("zstd");
        assert!(
            text.len() >= kept,
            "{f}: the kept text is not all in the bytes kept ({} < {kept})",
            text.len()
        );
        shared[i] = common;
    }
    let replay = hearsay(&root(), &["replay", path_str(&out)]);
    assert_eq!(
        String::from_utf8_lossy(&replay.stdout).trim(),
        "identical: 24 ticks"
    );
    println!(
        "figure: resume after kill -9 at tick {done} of 24 (rumour-200): the first {tape_kept} bytes of the tape's text and {events_kept} of the event log's unchanged, in the first {} and {} bytes of llm.jsonl.zst and events.jsonl.zst, which resume did not write again",
        shared[0], shared[1]
    );
}

#[test]
fn a_closed_stdout_ends_the_command_quietly() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("run");
    let mut child = Command::new(bin())
        .args([
            "run",
            path_str(&scenario("fish-market.toml")),
            "--out",
            path_str(&out),
            "--ticks",
            "30",
        ])
        .current_dir(root())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("hearsay starts");
    // Like `| head` that is already gone: every line the run prints meets a closed pipe.
    drop(child.stdout.take());
    let mut stderr = String::new();
    if let Some(mut e) = child.stderr.take() {
        let _ = e.read_to_string(&mut stderr);
    }
    let status = child.wait().expect("ends");
    assert_eq!(status.code(), Some(0), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(out.join("summary.json").is_file(), "the run is intact");
    let replay = hearsay(&root(), &["replay", path_str(&out)]);
    assert_eq!(
        String::from_utf8_lossy(&replay.stdout).trim(),
        "identical: 30 ticks"
    );
}
