//! `bench pairs`: two builds of hearsay run the same town by turns, so that what one
//! change saves is measured against the machine's own noise.
//!
//!     bench pairs LABEL --a BIN --b BIN [--npcs 10000] [--ticks 40] [--rounds 4]
//!                 [--out docs/bench/pairs.json]
//!
//! Why by turns: this machine is shared, and the same binary reads 3.7 to 5.2 ticks/s at
//! 10,000 NPCs from one hour to the next — more than most single changes save. Runs of A
//! and B alternate (A B, then B A, so neither always goes first), each a fresh process
//! and run directory on the harness's own town (`bench town N T`), and each round's B ÷ A
//! compares two runs minutes apart. The figures are the medians of each side and the
//! median of the rounds' ratios, with how many rounds B did better.
//!
//! Evidence beside the numbers: the commit each binary was built from (`commit`, taken
//! before the first run), and
//! whether every run of both wrote the same `events.jsonl` and `llm.jsonl` text (blake3 of
//! each) — the engine's invariant, and the proof that both sides did the same work. CPU is
//! measured twice: the whole child process by the harness (its `cutime + cstime`, which
//! any build has), and the tick loop alone by the engine (`timing.cpu_ms_per_tick`, which
//! builds before it lack).
//!
//! `bench render --pairs FILE` turns the file into docs/BENCHMARKS.md's generated
//! `bench:pairs` block; `scripts/bench-pairs.sh` builds two commits and does both.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{Value, json};

use super::{arg, cell, commit, f, finish_s, machine, per_tick, save, say, town};

/// What one run measured: key, name in the table, decimals.
const FIGURES: [(&str, &str, usize); 6] = [
    ("process_cpu_s", "CPU, whole process (s)", 2),
    ("cpu_ms_per_tick", "CPU over the ticks (ms per tick)", 1),
    ("ticks_per_second", "ticks/s", 2),
    (
        "finish_s",
        "after the last tick until the process exits: report read back and written (s)",
        2,
    ),
    ("recall_us_per_npc", "recall per NPC (µs)", 2),
    (
        "store_writer_ms_per_tick",
        "the store's writer busy (ms per tick)",
        1,
    ),
];

/// The phases of the tick thread the table shows, per tick (`timing.phases_ms`).
const PHASES: [&str; 7] = [
    "perceive",
    "think",
    "barrier",
    "act",
    "persist",
    "persist.store",
    "persist.checkpoint",
];

pub fn main(args: &[String]) {
    let label = args
        .first()
        .filter(|a| !a.starts_with("--"))
        .cloned()
        .expect("bench pairs LABEL --a BIN --b BIN [--npcs N] [--ticks T] [--rounds R]");
    let bin = |flag: &str| -> PathBuf {
        let path = PathBuf::from(arg(args, flag).unwrap_or_else(|| panic!("{flag} BIN")));
        assert!(path.is_file(), "{flag} {}: no such binary", path.display());
        path
    };
    let (a, b) = (bin("--a"), bin("--b"));
    let number = |flag: &str, default: u64| -> u64 {
        arg(args, flag).map_or(default, |v| {
            v.parse()
                .unwrap_or_else(|_| panic!("{flag} {v}: not a number"))
        })
    };
    let npcs = number("--npcs", 10_000);
    let ticks = number("--ticks", 40);
    let rounds = number("--rounds", 4).max(1);
    let out = PathBuf::from(arg(args, "--out").unwrap_or_else(|| "docs/bench/pairs.json".into()));

    // Before the first run: an edit made while the runs go on is not in either binary,
    // and must not mark them as built from a dirty tree.
    let commits = [commit(&a), commit(&b)];
    let work = tempfile::tempdir().expect("work dir");
    let scenario = work.path().join("town.toml");
    std::fs::write(&scenario, town("town", npcs as usize, ticks, true, "")).expect("scenario");
    let mut runs: [Vec<Value>; 2] = [Vec::new(), Vec::new()];
    for round in 0..rounds {
        // A then B, then B then A: a drift of the machine within a round falls on
        // both sides alike over two rounds.
        let order = if round % 2 == 0 { [0, 1] } else { [1, 0] };
        for side in order {
            let binary = if side == 0 { &a } else { &b };
            let run = run_once(binary, &scenario, &work.path().join("run"));
            say(&format!(
                "{label} round {} {}: {:.2} s CPU, {:.2} ticks/s, recall {:.2} us",
                round + 1,
                ["A", "B"][side],
                f(&run["process_cpu_s"]),
                f(&run["ticks_per_second"]),
                f(&run["recall_us_per_npc"]),
            ));
            runs[side].push(run);
        }
    }
    let result = summarise(&label, commits, npcs, ticks, runs);
    say(&render_one(&label, &result));
    // Under its label, the other pairs kept.
    save(&out, &serde_json::Map::from_iter([(label.clone(), result)]));
    say(&format!("figures in {}", out.display()));
}

/// Runs `binary` on `scenario` into `dir` (emptied first and removed after: a 10,000-NPC
/// store is gigabytes), and what it measured.
fn run_once(binary: &Path, scenario: &Path, dir: &Path) -> Value {
    let _ = std::fs::remove_dir_all(dir);
    let cpu_before = children_cpu_s();
    let started = std::time::Instant::now();
    let output = Command::new(binary)
        .arg("run")
        .arg(scenario)
        .arg("--out")
        .arg(dir)
        .arg("--no-progress")
        .env_remove("RUST_LOG")
        .output()
        .expect("hearsay runs");
    let process = started.elapsed();
    let process_cpu_s = children_cpu_s() - cpu_before;
    assert!(
        matches!(output.status.code(), Some(0 | 3)),
        "{} run failed: {}",
        binary.display(),
        String::from_utf8_lossy(&output.stderr)
    );
    let summary: Value = serde_json::from_str(
        &std::fs::read_to_string(dir.join("summary.json")).expect("summary.json"),
    )
    .expect("summary is JSON");
    let text_hash = |name: &str| {
        let text = hearsay_tests::log_bytes(dir.join(name))
            .unwrap_or_else(|e| panic!("{name} of {}: {e}", dir.display()));
        blake3::hash(&text).to_hex().to_string()
    };
    let ticks = summary["ticks"].as_u64().unwrap_or(1).max(1);
    let timing = &summary["timing"];
    let run = json!({
        "process_cpu_s": process_cpu_s,
        "cpu_ms_per_tick": timing["cpu_ms_per_tick"],
        "ticks_per_second": timing["ticks_per_second"],
        "finish_s": finish_s(process, &summary),
        "recall_us_per_npc": timing["recall_us_per_npc"],
        "store_writer_ms_per_tick": timing["store_writer_ms"].as_f64().map(|ms| ms / ticks as f64),
        "phases_ms_per_tick": per_tick(&summary, ticks),
        "events": text_hash("events.jsonl"),
        "tape": text_hash("llm.jsonl"),
    });
    let _ = std::fs::remove_dir_all(dir);
    run
}

/// CPU seconds of this process's children that have ended and been waited for (Linux
/// `/proc/self/stat`: `cutime + cstime`, in clock ticks).
fn children_cpu_s() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").expect("/proc/self/stat");
    // The fields after the command name, which is in parentheses and may hold spaces:
    // the state is field 3, cutime 16 and cstime 17.
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .map_or("", |(_, rest)| rest)
        .split_whitespace()
        .collect();
    let field = |n: usize| -> f64 {
        fields
            .get(n - 3)
            .and_then(|v| v.parse::<f64>().ok())
            .expect("a field of /proc/self/stat")
    };
    (field(16) + field(17)) / rustix::param::clock_ticks_per_second() as f64
}

/// The value of figure `key` in `run` (a phase as `phase.NAME`).
fn figure(run: &Value, key: &str) -> Option<f64> {
    match key.strip_prefix("phase.") {
        Some(phase) => run["phases_ms_per_tick"][phase].as_f64(),
        None => run[key].as_f64(),
    }
}

/// The middle value (the mean of the middle two for an even count); none of nothing.
pub(crate) fn median(mut xs: Vec<f64>) -> Option<f64> {
    if xs.is_empty() {
        return None;
    }
    xs.sort_by(f64::total_cmp);
    let mid = xs.len() / 2;
    Some(if xs.len() % 2 == 1 {
        xs[mid]
    } else {
        (xs[mid - 1] + xs[mid]) / 2.0
    })
}

/// Every figure's key, the phases as `phase.NAME`, with its name in the table and its
/// decimals.
fn figures() -> impl Iterator<Item = (String, String, usize)> {
    FIGURES
        .iter()
        .map(|(k, name, d)| ((*k).to_owned(), (*name).to_owned(), *d))
        .chain(
            PHASES
                .iter()
                .map(|p| (format!("phase.{p}"), format!("{p} (ms per tick)"), 1)),
        )
}

/// Medians of each side, the rounds' own B ÷ A and in how many rounds B did better (the
/// lower figure; the higher for ticks per second), and whether every run wrote the same
/// logs.
fn summarise(
    label: &str,
    commits: [Value; 2],
    npcs: u64,
    ticks: u64,
    runs: [Vec<Value>; 2],
) -> Value {
    let mut table = serde_json::Map::new();
    for (key, _, _) in figures() {
        let side =
            |s: usize| -> Vec<f64> { runs[s].iter().filter_map(|r| figure(r, &key)).collect() };
        let (a, b) = (side(0), side(1));
        // Round by round: runs[0][i] and runs[1][i] ran back to back.
        let ratios: Vec<f64> = a
            .iter()
            .zip(&b)
            .filter(|(x, _)| **x > 0.0)
            .map(|(x, y)| y / x)
            .collect();
        let better = |x: &f64, y: &f64| {
            if key == "ticks_per_second" {
                y > x
            } else {
                y < x
            }
        };
        let b_better = a.iter().zip(&b).filter(|(x, y)| better(x, y)).count();
        table.insert(
            key.clone(),
            json!({
                "a": median(a.clone()),
                "b": median(b.clone()),
                "b_over_a": median(ratios.clone()),
                "b_better_rounds": b_better,
                "rounds_compared": a.len().min(b.len()),
            }),
        );
    }
    let same = |what: &str| {
        let mut all = runs.iter().flatten().map(|r| r[what].as_str());
        let first = all.next().flatten();
        first.is_some() && all.all(|h| h == first)
    };
    json!({
        "label": label,
        "machine": machine(),
        "a": { "commit": commits[0], "runs": runs[0] },
        "b": { "commit": commits[1], "runs": runs[1] },
        "town": { "npcs": npcs, "ticks": ticks },
        "rounds": runs[0].len(),
        "same_events": same("events"),
        "same_tape": same("tape"),
        "figures": table,
    })
}

fn short(c: &Value) -> String {
    match (c["sha"].as_str(), c["dirty"].as_bool()) {
        (Some(sha), Some(true)) => {
            format!("{} with uncommitted changes", &sha[..sha.len().min(10)])
        }
        (Some(sha), _) => sha[..sha.len().min(10)].to_owned(),
        (None, _) => "a commit not recorded".into(),
    }
}

/// One pair as a section of the generated block.
fn render_one(label: &str, p: &Value) -> String {
    let yes = |v: &Value| {
        if v.as_bool() == Some(true) {
            "yes"
        } else {
            "**no**"
        }
    };
    let mut s = format!(
        "### {label}\n\nA = {}, B = {}; {} NPCs × {} ticks (`bench town {} {}`), {} rounds by \
         turns. Every run of both wrote the same `events.jsonl`: {}; the same `llm.jsonl`: {}.\n\n\
         | figure | A | B | B ÷ A | B better in |\n|---|---|---|---|---|\n",
        short(&p["a"]["commit"]),
        short(&p["b"]["commit"]),
        p["town"]["npcs"],
        p["town"]["ticks"],
        p["town"]["npcs"],
        p["town"]["ticks"],
        p["rounds"],
        yes(&p["same_events"]),
        yes(&p["same_tape"]),
    );
    for (key, name, decimals) in figures() {
        let v = &p["figures"][&key];
        if v["a"].is_null() && v["b"].is_null() {
            continue;
        }
        s.push_str(&format!(
            "| {name} | {} | {} | {} | {} of {} |\n",
            cell(&v["a"], decimals),
            cell(&v["b"], decimals),
            cell(&v["b_over_a"], 3),
            v["b_better_rounds"],
            v["rounds_compared"],
        ));
    }
    s.push('\n');
    s
}

/// The generated block of every pair in the file, by label.
pub fn render_block(pairs: &Value) -> String {
    let mut s = String::from(
        "## Alternating pairs (generated by `scripts/bench-pairs.sh`; do not edit by hand)\n\n\
         Two builds run the same town by turns (A B, then B A), each run a fresh process and \
         run directory, from `docs/bench/pairs.json`. The A and B columns are each side's \
         median; B ÷ A is the median of the rounds' own ratios (two runs minutes apart), and \
         \"B better in\" counts the rounds where B's figure was the better one (lower; higher \
         for ticks/s). CPU, whole process, is the child's user + system time as the harness \
         measured it (setup and the end of the run included); CPU over the ticks is the \
         engine's own `timing.cpu_ms_per_tick` (absent where a build predates it). The \
         store's writer is SQLite's writer task, busy writing ticks and vectors while the \
         ticks go on (`timing.store_writer_ms`, wall time: it includes waiting for a core). \
         The phases are the tick thread's.\n\n",
    );
    for (label, p) in pairs.as_object().into_iter().flatten() {
        s.push_str(&render_one(label, p));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn commits() -> [Value; 2] {
        [json!({ "sha": "a" }), json!({ "sha": "b" })]
    }

    #[test]
    fn medians_and_the_rounds_own_ratios() {
        assert_eq!(median(vec![3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(vec![4.0, 1.0, 2.0, 3.0]), Some(2.5));
        assert_eq!(median(vec![]), None);
        let run = |cpu: f64| {
            json!({ "process_cpu_s": cpu, "phases_ms_per_tick": { "think": cpu * 10.0 },
                    "events": "e", "tape": "t" })
        };
        let p = summarise(
            "x",
            commits(),
            10,
            5,
            [vec![run(10.0), run(12.0)], vec![run(9.0), run(12.6)]],
        );
        let cpu = &p["figures"]["process_cpu_s"];
        assert_eq!(cpu["a"], 11.0);
        assert_eq!(cpu["b"], 10.8);
        // Rounds 0.9 and 1.05: their median, not the ratio of the medians (0.982).
        assert!((f(&cpu["b_over_a"]) - 0.975).abs() < 1e-9, "{cpu}");
        assert_eq!(cpu["b_better_rounds"], 1);
        assert_eq!(p["figures"]["phase.think"]["b_better_rounds"], 1);
        assert_eq!(p["same_events"], true);
        assert!(p["figures"]["ticks_per_second"]["a"].is_null());
    }

    #[test]
    fn higher_ticks_per_second_is_better_and_a_different_log_is_seen() {
        let run = |tps: f64, events: &str| json!({ "ticks_per_second": tps, "events": events, "tape": "t" });
        let p = summarise(
            "y",
            commits(),
            10,
            5,
            [
                vec![run(5.0, "e"), run(5.0, "e")],
                vec![run(6.0, "e"), run(4.0, "other")],
            ],
        );
        assert_eq!(p["figures"]["ticks_per_second"]["b_better_rounds"], 1);
        assert_eq!(p["same_events"], false);
        assert_eq!(p["same_tape"], true);
        let block = render_block(&json!({ "y": p }));
        assert!(
            block.contains("### y") && block.contains("the same `events.jsonl`: **no**"),
            "{block}"
        );
    }
}
