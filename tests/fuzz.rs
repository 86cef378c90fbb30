//! Fuzzing (proptest), bounded in time: every parser of outside input is fed random
//! bytes and mutations of a committed corpus (tests/fuzz/corpus/<target>/) — scenario
//! files, model answers (decisions and insights), texts for the hashing embedder and the
//! chunker, event logs and tapes — and must never panic; what it accepts must hold the
//! invariants the rest of hearsay relies on.
//!
//! Each target runs for `HEARSAY_FUZZ_SECONDS` (5 by default; scripts/test.sh runs them in
//! a step of their own at 60, two at a time) from the base seed `HEARSAY_FUZZ_SEED` (else a fresh one, printed). A failing input is
//! shrunk by proptest, written to target/fuzz-failures/ and reported; add it to the
//! corpus once fixed.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use hearsay_brain::parse::{parse_decision, parse_insights};
use hearsay_core::{Decision, Grid, MemoryId, NpcId, Observation, Pos, SeenNpc};
use hearsay_memory::chunk::{Chunking, reassemble};
use hearsay_memory::{HashingEmbedder, VECTOR_DIMS};
use proptest::prelude::*;
use proptest::test_runner::{Config, RngAlgorithm, TestCaseError, TestRng, TestRunner};

fn budget() -> Duration {
    let secs = std::env::var("HEARSAY_FUZZ_SECONDS")
        .ok()
        .and_then(|s| s.parse::<f64>().ok())
        .unwrap_or(5.0);
    Duration::from_secs_f64(secs)
}

fn base_seed() -> u64 {
    std::env::var("HEARSAY_FUZZ_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            use std::hash::{BuildHasher, RandomState};
            RandomState::new().hash_one(std::process::id())
        })
}

fn corpus(target: &str) -> Vec<Vec<u8>> {
    let dir = hearsay_tests::root().join("tests/fuzz/corpus").join(target);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .collect();
    files.sort();
    let items: Vec<Vec<u8>> = files.iter().filter_map(|p| std::fs::read(p).ok()).collect();
    assert!(!items.is_empty(), "no corpus in {}", dir.display());
    items
}

/// Random bytes, or a corpus item with a few mutations (byte flips, insertions,
/// deletions, duplicated spans).
fn inputs(target: &str) -> impl Strategy<Value = Vec<u8>> {
    let corpus = corpus(target);
    let n = corpus.len();
    let mutation = (0u8..4, any::<usize>(), any::<u8>(), 1usize..24);
    prop_oneof![
        1 => proptest::collection::vec(any::<u8>(), 0..600),
        4 => (0..n, proptest::collection::vec(mutation, 1..10)).prop_map(move |(i, ops)| {
            let mut b = corpus[i].clone();
            for (op, at, byte, len) in ops {
                let at = if b.is_empty() { 0 } else { at % b.len() };
                match op {
                    0 if !b.is_empty() => b[at] ^= byte | 1,
                    1 => b.splice(at..at, std::iter::repeat_n(byte, len)).for_each(drop),
                    2 if !b.is_empty() => {
                        let end = (at + len).min(b.len());
                        b.drain(at..end);
                    }
                    _ if !b.is_empty() => {
                        let end = (at + len).min(b.len());
                        let span: Vec<u8> = b[at..end].to_vec();
                        b.splice(at..at, span).for_each(drop);
                    }
                    _ => {}
                }
            }
            b
        }),
    ]
}

/// Runs `check` on inputs from `strategy` until the time budget is spent.
/// `check` answers whether the input was accepted (parsed), so the figure shows the fuzzer
/// reaches past the first byte.
fn fuzz<S: Strategy>(
    target: &str,
    strategy: S,
    check: impl Fn(S::Value) -> Result<bool, TestCaseError>,
) where
    S::Value: std::fmt::Debug,
{
    let accepted = std::sync::atomic::AtomicU64::new(0);
    let check = |v: S::Value| {
        if check(v)? {
            accepted.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
        Ok(())
    };
    let deadline = Instant::now() + budget();
    let base = base_seed();
    let mut inputs = 0u64;
    let mut round = 0u64;
    while Instant::now() < deadline {
        let seed = base.wrapping_add(round);
        let mut seed_bytes = [0u8; 32];
        seed_bytes[..8].copy_from_slice(&seed.to_le_bytes());
        let config = Config {
            cases: 200,
            failure_persistence: None,
            ..Config::default()
        };
        let mut runner = TestRunner::new_with_rng(
            config,
            TestRng::from_seed(RngAlgorithm::ChaCha, &seed_bytes),
        );
        if let Err(e) = runner.run(&strategy, check) {
            let dir = hearsay_tests::root().join("target/fuzz-failures");
            let _ = std::fs::create_dir_all(&dir);
            let path = dir.join(format!("{target}-{seed}.txt"));
            let _ = std::fs::write(&path, format!("{e}"));
            panic!(
                "fuzz {target} (seed {seed}; rerun with HEARSAY_FUZZ_SEED={seed}): {e}\n(written to {})",
                path.display()
            );
        }
        inputs += 200;
        round += 1;
    }
    let accepted = accepted.into_inner();
    println!(
        "figure: fuzz {target}: {inputs} inputs in {:.0} s from seed {base}, {accepted} accepted, 0 panics",
        budget().as_secs_f64()
    );
    assert!(
        accepted > 0,
        "fuzz {target}: no input was accepted; the corpus or the mutations are broken"
    );
}

#[test]
fn scenario_files_never_panic_and_every_problem_says_where() {
    fuzz("scenario", inputs("scenario"), |bytes| {
        match hearsay_runtime::scenario::parse(Path::new("fuzz.toml"), &bytes) {
            Ok(s) => {
                prop_assert!(!s.npcs.is_empty());
                prop_assert!(s.npcs.iter().all(|n| s.grid.contains(n.at)));
                return Ok(true);
            }
            Err(hearsay_runtime::ScenarioError::Invalid { problems, .. }) => {
                prop_assert!(!problems.is_empty());
                for p in &problems {
                    prop_assert!(p.location.starts_with("fuzz.toml:"), "{}", p.location);
                }
            }
            Err(_) => {}
        }
        Ok(false)
    });
}

#[test]
fn model_answers_never_panic_and_what_is_accepted_is_bounded() {
    let grid = Grid {
        width: 24,
        height: 16,
    };
    let shown = [MemoryId(3), MemoryId(9), MemoryId(12)];
    // An NPC at (3, 3) with Carol next to it and Dave in earshot: whatever `to` an answer
    // names, an accepted one addresses only them, and whispers only to Carol.
    let seen = |id, name: &str, x, y| SeenNpc {
        id: NpcId(id),
        name: name.into(),
        at: Pos::new(x, y),
        audible: true,
    };
    let obs = Observation {
        npc: NpcId(0),
        name: "Alice".into(),
        tick: 0,
        at: Pos::new(3, 3),
        target: None,
        seen_npcs: vec![seen(1, "Carol", 4, 4), seen(2, "Dave", 5, 3)],
        seen_places: vec![],
        heard: vec![],
        witnessed: vec![],
        recent: Default::default(),
        known_by: vec![],
    };
    fuzz("decision", inputs("decision"), |bytes| {
        let text = String::from_utf8_lossy(&bytes);
        let mut accepted = false;
        if let Ok(parsed) = parse_decision(&text, grid, &obs, 280) {
            accepted = true;
            match parsed.decision {
                Decision::Talk { speech, to } => {
                    prop_assert!(speech.chars().count() <= 280);
                    prop_assert!(matches!(to, None | Some(NpcId(1 | 2))), "{to:?}");
                }
                Decision::Whisper { speech, to } => {
                    prop_assert!(speech.chars().count() <= 280);
                    prop_assert_eq!(to, NpcId(1));
                }
                Decision::Move { to } => prop_assert!(grid.contains(to), "{to}"),
                Decision::Stay => {}
            }
        }
        if let Ok(parsed) = parse_insights(&text, &shown, 3, 200) {
            accepted = true;
            prop_assert!(parsed.insights.len() <= 3);
            for i in &parsed.insights {
                prop_assert!(i.content.chars().count() <= 200);
                prop_assert!((1..=10).contains(&i.importance));
                prop_assert!(i.evidence.iter().all(|e| shown.contains(e)));
            }
        }
        Ok(accepted)
    });
}

#[test]
fn any_text_embeds_and_chunks_back_to_itself() {
    let lossy = inputs("text").prop_map(|b| String::from_utf8_lossy(&b).into_owned());
    let strategy = (prop_oneof![lossy, any::<String>()], 1usize..60, 0usize..30);
    fuzz("text", strategy, |(text, chars, overlap)| {
        let v = HashingEmbedder.embed_one(&text);
        prop_assert_eq!(v.len(), VECTOR_DIMS);
        prop_assert!(v.iter().all(|x| x.is_finite()));
        let norm: f32 = v.iter().map(|x| x * x).sum::<f32>().sqrt();
        prop_assert!(norm == 0.0 || (norm - 1.0).abs() < 1e-3, "{}", norm);
        let chunking = Chunking { chars, overlap };
        let ranges = chunking.split(&text);
        prop_assert!(
            ranges
                .iter()
                .all(|r| text.is_char_boundary(r.start) && text.is_char_boundary(r.end))
        );
        let pieces: Vec<(std::ops::Range<usize>, &str)> = ranges
            .iter()
            .map(|r| (r.clone(), &text[r.clone()]))
            .collect();
        prop_assert_eq!(reassemble(text.len(), &pieces), Some(text.clone()));
        Ok(true)
    });
}

#[test]
fn event_logs_never_panic() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (scenario, _) =
        hearsay_runtime::scenario::load(&hearsay_tests::scenario("fish-market.toml"))
            .expect("scenario");
    let cast = hearsay_runtime::story::Cast::new(&scenario);
    let events_path = dir.path().join("events.jsonl");
    fuzz("events", inputs("events"), |bytes| {
        std::fs::write(&events_path, &bytes).expect("write");
        let log = hearsay_runtime::logs::EventLog::read(&events_path);
        let mut reader = hearsay_runtime::story::FrameReader::new(bytes.as_slice(), &events_path);
        let mut frames = 0;
        for _ in 0..10_000 {
            match reader.next_frame(&cast) {
                Ok(Some(_)) => frames += 1,
                Ok(None) | Err(_) => break,
            }
        }
        Ok(log.is_ok() || frames > 0)
    });
}

#[test]
fn compressed_logs_never_panic() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (scenario, _) =
        hearsay_runtime::scenario::load(&hearsay_tests::scenario("fish-market.toml"))
            .expect("scenario");
    let cast = hearsay_runtime::story::Cast::new(&scenario);
    let events_path = dir.path().join("events.jsonl.zst");
    let tape_path = dir.path().join("llm.jsonl.zst");
    fuzz("zstd", inputs("zstd"), |bytes| {
        std::fs::write(&events_path, &bytes).expect("write");
        std::fs::write(&tape_path, &bytes).expect("write");
        let log = hearsay_runtime::logs::EventLog::read(&events_path);
        let tape = hearsay_runtime::logs::Tape::read(&tape_path);
        let mut frames = 0;
        if let Ok(mut reader) = hearsay_runtime::story::FrameReader::open(&events_path) {
            for _ in 0..10_000 {
                match reader.next_frame(&cast) {
                    Ok(Some(_)) => frames += 1,
                    Ok(None) | Err(_) => break,
                }
            }
        }
        // The pass a resume reads with (the text not kept) agrees with the whole read:
        // the same refusal or the same ticks, and the same recall state at every tick.
        let mut lines = Vec::new();
        let index = hearsay_runtime::logs::TickIndex::read(&events_path, None, |tick, _, line| {
            lines.push((tick, line.to_owned()));
            Ok(())
        });
        prop_assert_eq!(index.is_ok(), log.is_ok());
        // A log cut back to a tick it closes (or refused: never cut elsewhere) reads
        // back as exactly the ticks before it.
        if let (Ok(log), Ok(index)) = (&log, &index) {
            prop_assert_eq!(&index.ticks, &log.index.ticks);
            prop_assert_eq!(&index.tick_ends, &log.index.tick_ends);
            prop_assert_eq!(lines.len(), log.lines.len());
            for next in 0..=index.completed() {
                let mut recalls = hearsay_runtime::logs::Recalls::default();
                for (_, line) in lines.iter().filter(|(tick, _)| *tick < next) {
                    recalls.add(line);
                }
                let mut whole = hearsay_runtime::logs::Recalls::default();
                for line in log.through(next) {
                    whole.add(line);
                }
                let whole = whole.into_map();
                prop_assert_eq!(recalls.into_map(), whole);
                std::fs::write(&events_path, &bytes).expect("write");
                // A reader of one NPC counts the same by a pass as from what a log opened
                // for that NPC kept.
                for npc in ["Alice", "Bob"] {
                    let by = |focus: Option<&str>| {
                        hearsay_runtime::logs::EventsFile::open_for(&events_path, focus)
                            .and_then(|f| f.recalls(next, npc, |_| true))
                            .map_err(|e| TestCaseError::fail(e.to_string()))
                    };
                    prop_assert_eq!(by(None)?, by(Some(npc))?);
                }
                if index.cut_back(next).is_ok() {
                    let again = hearsay_runtime::logs::EventLog::read(&events_path)
                        .map_err(|e| TestCaseError::fail(e.to_string()))?;
                    prop_assert_eq!(again.index.completed(), next);
                }
            }
        }
        Ok(log.is_ok() || tape.is_ok() || frames > 0)
    });
}

#[test]
fn tapes_never_panic() {
    let dir = tempfile::tempdir().expect("tempdir");
    let tape_path = dir.path().join("llm.jsonl");
    fuzz("tape", inputs("tape"), |bytes| {
        std::fs::write(&tape_path, &bytes).expect("write");
        Ok(hearsay_runtime::logs::Tape::read(&tape_path).is_ok())
    });
}
