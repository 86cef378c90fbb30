//! The terminal view, driven in a real pseudo-terminal: it shows the map with the NPCs
//! where the event log puts them, the tick advancing, pause, step, back, fact and NPC
//! selection; it restores the terminal on quit; `run --watch` shows the run live, and
//! quitting stops it so that `resume` finishes it byte for byte.

use std::path::Path;
use std::time::Duration;

use hearsay_tests::tty::{Tty, shown_tick};
use hearsay_tests::{hearsay, path_str, read_jsonl, root, run_ok, scenario};

const COLS: u16 = 110;
const ROWS: u16 = 34;
const WAIT: Duration = Duration::from_secs(60);

/// Where each NPC stands after `tick`, from the event log.
fn positions_after(dir: &Path, tick: u64) -> Vec<(String, i64, i64)> {
    let mut at: Vec<(String, i64, i64)> = Vec::new();
    for e in read_jsonl(&dir.join("events.jsonl")) {
        if e["tick"].as_u64() > Some(tick) {
            break;
        }
        let cell = match e["type"].as_str() {
            Some("spawn") => &e["at"],
            Some("move") => &e["to"],
            _ => continue,
        };
        let name = e["npc"].as_str().expect("npc").to_owned();
        let (x, y) = (cell[0].as_i64().expect("x"), cell[1].as_i64().expect("y"));
        match at.iter_mut().find(|(n, _, _)| *n == name) {
            Some(p) => *p = (name, x, y),
            None => at.push((name, x, y)),
        }
    }
    at
}

#[test]
fn watch_plays_a_run_and_its_keys_work() {
    let dir = tempfile::tempdir().expect("tempdir");
    let run = dir.path().join("run");
    run_ok(&scenario("fish-market.toml"), &run, &["--ticks", "120"]);
    let mut tty = Tty::spawn(&["watch", path_str(&run), "--speed", "20"], COLS, ROWS);
    let first = tty.wait_for("the view at tick 3 or later", WAIT, |s| {
        shown_tick(s).is_some_and(|t| t >= 3)
    });
    assert!(tty.alternate(), "the view is on the alternate screen");
    assert!(first.contains("fish-market · seed 42"), "{first}");
    assert!(first.contains("▶ fresh fish"), "{first}");
    let t1 = shown_tick(&first).expect("tick");
    tty.wait_for("the tick advancing", WAIT, |s| {
        shown_tick(s).is_some_and(|t| t > t1 + 2)
    });

    tty.send(" ");
    let paused = tty.wait_for("paused", WAIT, |s| s.contains("⏸ paused"));
    let t = shown_tick(&paused).expect("tick");
    std::thread::sleep(Duration::from_millis(400));
    let still = tty.screen();
    assert_eq!(shown_tick(&still), Some(t), "paused means paused:\n{still}");

    // The map: every NPC's initial where the log puts it at the tick shown (cells are
    // two columns wide; the map's border takes the first row and column).
    for (name, x, y) in positions_after(&run, t) {
        let glyph = tty.cell(2 + y as u16, 1 + 2 * x as u16);
        let initial = name.chars().next().expect("name").to_string();
        assert!(
            glyph == initial || glyph.chars().all(|c| c.is_ascii_digit()),
            "{name} should be at ({x}, {y}) at tick {t}, the map shows {glyph:?}:\n{still}"
        );
    }
    let bob = positions_after(&run, t)
        .into_iter()
        .find(|(n, _, _)| n == "Bob")
        .expect("Bob");
    assert!(
        still.contains(&format!("Bob at ({}, {})", bob.1, bob.2)),
        "{still}"
    );

    tty.send(".");
    tty.wait_for("one step forward", WAIT, |s| shown_tick(s) == Some(t + 1));
    tty.send(",,");
    tty.wait_for("two steps back", WAIT, |s| shown_tick(s) == Some(t - 1));
    tty.send("n");
    tty.wait_for("the next NPC", WAIT, |s| s.contains("Alice at ("));
    tty.send("f");
    tty.wait_for("the next fact", WAIT, |s| s.contains("▶ festival"));
    tty.send("q");
    assert_eq!(tty.wait_exit(WAIT), 0);
    assert!(!tty.alternate(), "back on the main screen");
    let raw = String::from_utf8_lossy(&tty.raw()).into_owned();
    let left = raw
        .rfind("\x1b[?1049l")
        .expect("leaves the alternate screen");
    assert!(
        raw[left..].contains("\x1b[?25h") || raw.contains("\x1b[?25h"),
        "cursor shown again"
    );
}

#[test]
fn run_watch_is_live_and_quitting_stops_a_resumable_run() {
    let dir = tempfile::tempdir().expect("tempdir");
    let reference = dir.path().join("reference");
    run_ok(
        &scenario("fish-market.toml"),
        &reference,
        &["--ticks", "80"],
    );

    let out = dir.path().join("watched");
    let fish = scenario("fish-market.toml");
    let args = [
        "run",
        path_str(&fish),
        "--ticks",
        "80",
        "--out",
        path_str(&out),
        "--watch",
        "--speed",
        "20",
    ];
    let mut tty = Tty::spawn(&args, COLS, ROWS);
    let screen = tty.wait_for("the live view past tick 5", WAIT, |s| {
        shown_tick(s).is_some_and(|t| t >= 5)
    });
    assert!(screen.contains("· live"), "{screen}");
    tty.send("q");
    assert_eq!(tty.wait_exit(WAIT), 0);
    let after = tty.screen();
    assert!(after.contains("stopped before tick"), "{after}");
    assert!(after.contains("hearsay resume"), "{after}");
    assert!(
        !out.join("summary.json").exists(),
        "a stopped run is not summarised"
    );

    let resumed = hearsay(&root(), &["resume", path_str(&out), "--no-progress"]);
    assert!(
        resumed.status.success(),
        "{}",
        String::from_utf8_lossy(&resumed.stderr)
    );
    assert_eq!(
        hearsay_tests::log_bytes(out.join("events.jsonl")).expect("events"),
        hearsay_tests::log_bytes(reference.join("events.jsonl")).expect("events"),
        "watched, stopped and resumed: the same run"
    );

    // To the end at full speed: the view says so, and the summary follows on quit.
    let full = dir.path().join("full");
    let args = [
        "run",
        path_str(&fish),
        "--ticks",
        "30",
        "--out",
        path_str(&full),
        "--watch",
        "--speed",
        "0",
    ];
    let mut tty = Tty::spawn(&args, COLS, ROWS);
    tty.wait_for("the end of the run", WAIT, |s| s.contains("■ end of run"));
    tty.send("q");
    assert_eq!(tty.wait_exit(WAIT), 0);
    let after = tty.screen();
    assert!(after.contains("fact \"fresh fish\""), "{after}");
    assert!(full.join("report.html").is_file());
}

#[test]
fn watch_refuses_without_a_terminal() {
    let dir = tempfile::tempdir().expect("tempdir");
    let run = dir.path().join("run");
    run_ok(&scenario("fish-market.toml"), &run, &["--ticks", "5"]);
    let out = hearsay(&root(), &["watch", path_str(&run)]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("needs a terminal"));
}
