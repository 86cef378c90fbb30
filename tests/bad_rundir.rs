//! Bad input at every other entry point: damaged run directories, wrong flags, a missing
//! key, a model server that is not there. Each case must end in a clear error that names
//! what is wrong and where, a non-zero exit, and nothing half-written: the run directory
//! read is byte-for-byte what it was, and no output directory appears.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use hearsay_tests::{hearsay, path_str, root, run_ok, scenario};

/// Every file of `dir` and its bytes.
fn snapshot(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut files = BTreeMap::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return files;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_file() {
            files.insert(path.clone(), std::fs::read(&path).expect("read"));
        }
    }
    files
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("mkdir");
    for entry in std::fs::read_dir(from).expect("read_dir").flatten() {
        std::fs::copy(entry.path(), to.join(entry.file_name())).expect("copy");
    }
}

/// Three finished runs, made once: fish-market seed 42 (the one every case damages), the
/// same scenario with seed 7, and another scenario.
struct Runs {
    _dir: tempfile::TempDir,
    base: PathBuf,
    other_seed: PathBuf,
    other_scenario: PathBuf,
}

fn runs() -> &'static Runs {
    static RUNS: OnceLock<Runs> = OnceLock::new();
    RUNS.get_or_init(|| {
        let dir = tempfile::tempdir().expect("tempdir");
        let base = dir.path().join("base");
        let other_seed = dir.path().join("seed7");
        let other_scenario = dir.path().join("village");
        let fish = scenario("fish-market.toml");
        run_ok(&fish, &base, &["--ticks", "30", "--no-progress"]);
        run_ok(
            &fish,
            &other_seed,
            &["--ticks", "30", "--seed", "7", "--no-progress"],
        );
        run_ok(
            &scenario("forgetful-village.toml"),
            &other_scenario,
            &["--ticks", "30", "--no-progress"],
        );
        Runs {
            _dir: dir,
            base,
            other_seed,
            other_scenario,
        }
    })
}

/// What each command is run with; `{}` is the damaged run directory, `{out}` a fresh
/// directory that must not appear.
const COMMANDS: &[(&str, &[&str])] = &[
    ("replay", &["replay", "{}"]),
    ("resume", &["resume", "{}", "--no-progress"]),
    (
        "fork",
        &[
            "fork",
            "{}",
            "--at-tick",
            "10",
            "--out",
            "{out}",
            "--no-progress",
        ],
    ),
    ("report", &["report", "{}"]),
    ("inspect", &["inspect", "{}", "--npc", "Bob"]),
    ("ask", &["ask", "{}", "--npc", "Bob", "where is the fish?"]),
    ("mcp", &["mcp", "{}"]),
];

struct Case {
    name: &'static str,
    damage: fn(&Path, &Runs),
    /// The commands that must refuse, and a phrase each one's error must contain.
    refused_by: &'static [(&'static str, &'static str)],
}

const ALL_READERS: &[&str] = &[
    "replay", "resume", "fork", "report", "inspect", "ask", "mcp",
];

fn write(dir: &Path, file: &str, bytes: impl AsRef<[u8]>) {
    std::fs::write(dir.join(file), bytes).expect("write");
}

fn every(phrase: &'static str) -> &'static [(&'static str, &'static str)] {
    let v: Vec<(&str, &str)> = ALL_READERS.iter().map(|c| (*c, phrase)).collect();
    Box::leak(v.into_boxed_slice())
}

fn cases() -> Vec<Case> {
    vec![
        Case {
            name: "events.jsonl.zst missing",
            damage: |d, _| std::fs::remove_file(d.join("events.jsonl.zst")).expect("rm"),
            refused_by: &[
                ("replay", "events.jsonl.zst missing"),
                ("resume", "events.jsonl.zst"),
                ("fork", "events.jsonl.zst missing"),
                ("report", "events.jsonl.zst missing"),
                ("inspect", "events.jsonl.zst missing"),
                ("ask", "events.jsonl.zst missing"),
                ("mcp", "events.jsonl.zst missing"),
            ],
        },
        Case {
            name: "scenario.toml missing",
            damage: |d, _| std::fs::remove_file(d.join("scenario.toml")).expect("rm"),
            refused_by: every("scenario.toml missing"),
        },
        Case {
            name: "run.json not a manifest",
            damage: |d, _| write(d, "run.json", "{}"),
            refused_by: every("run.json: not a run manifest"),
        },
        Case {
            name: "llm.jsonl.zst missing",
            damage: |d, _| std::fs::remove_file(d.join("llm.jsonl.zst")).expect("rm"),
            refused_by: &[
                ("replay", "llm.jsonl.zst missing"),
                ("fork", "llm.jsonl.zst missing"),
            ],
        },
        Case {
            name: "memories.db missing",
            damage: |d, _| std::fs::remove_file(d.join("memories.db")).expect("rm"),
            refused_by: &[
                ("resume", "memories.db: missing"),
                ("fork", "memories.db: missing"),
                ("inspect", "memories.db: missing"),
                ("ask", "memories.db: missing"),
                ("mcp", "memories.db: missing"),
            ],
        },
        Case {
            name: "memories.db empty",
            damage: |d, _| write(d, "memories.db", b""),
            refused_by: &[
                ("resume", "holds no hearsay memory store"),
                ("fork", "holds no hearsay memory store"),
                ("inspect", "holds no hearsay memory store"),
                ("ask", "holds no hearsay memory store"),
                ("mcp", "holds no hearsay memory store"),
            ],
        },
        Case {
            name: "memories.db overwritten with text",
            damage: |d, _| write(d, "memories.db", "these are not the memories\n".repeat(900)),
            refused_by: &[
                ("resume", "memories.db: not a database"),
                ("fork", "memories.db: not a database"),
                ("inspect", "memories.db: not a database"),
                ("ask", "memories.db: not a database"),
                ("mcp", "memories.db: not a database"),
            ],
        },
        Case {
            name: "memories.db cut in half",
            damage: |d, _| {
                let bytes = std::fs::read(d.join("memories.db")).expect("read");
                write(d, "memories.db", &bytes[..bytes.len() / 2]);
            },
            refused_by: &[
                ("resume", "memories.db: damaged"),
                ("fork", "memories.db: damaged"),
            ],
        },
        Case {
            name: "memories.db pages scribbled over",
            damage: |d, _| {
                let mut bytes = std::fs::read(d.join("memories.db")).expect("read");
                // Past the header and schema pages, a deterministic scribble.
                let start = 2 * 16384;
                let end = bytes.len().min(start + 4 * 16384);
                for (i, b) in bytes[start..end].iter_mut().enumerate() {
                    *b = (i as u8).wrapping_mul(37).wrapping_add(11);
                }
                write(d, "memories.db", bytes);
            },
            refused_by: &[
                ("resume", "memories.db: damaged"),
                ("fork", "memories.db: damaged"),
            ],
        },
        Case {
            name: "events.jsonl.zst cut short",
            damage: |d, _| {
                let bytes = std::fs::read(d.join("events.jsonl.zst")).expect("read");
                write(d, "events.jsonl.zst", &bytes[..bytes.len() * 2 / 3]);
            },
            refused_by: every("cut short"),
        },
        Case {
            name: "events.jsonl.zst not zstd",
            damage: |d, _| {
                let mut bytes = std::fs::read(d.join("events.jsonl.zst")).expect("read");
                bytes[..4].copy_from_slice(b"{\"ty");
                write(d, "events.jsonl.zst", bytes);
            },
            refused_by: every("not the start of a zstd frame"),
        },
        Case {
            name: "events.jsonl beside events.jsonl.zst",
            damage: |d, _| {
                let text = hearsay_tests::log_bytes(d.join("events.jsonl")).expect("read");
                write(d, "events.jsonl", text);
            },
            refused_by: every("the same log in the format before"),
        },
        Case {
            name: "events.jsonl.zst edited",
            damage: |d, _| {
                let text = hearsay_tests::log_text(d.join("events.jsonl")).expect("read");
                // Move one NPC's recorded step: still valid JSON, still a known NPC.
                let at = text.find(r#""type":"move""#).expect("a move");
                let line_end = at + text[at..].find('\n').expect("eol");
                let line = &text[at..line_end];
                let edited = line.replacen(r#""to":["#, r#""to":[1"#, 1);
                assert_ne!(line, edited);
                hearsay_tests::write_log(d.join("events.jsonl"), text.replacen(line, &edited, 1));
            },
            refused_by: &[
                ("replay", "the log was edited after it was written"),
                ("resume", "was edited or damaged"),
                ("fork", "was edited or damaged"),
                ("report", "was edited or damaged"),
                ("inspect", "was edited or damaged"),
                ("ask", "was edited or damaged"),
                ("mcp", "was edited or damaged"),
            ],
        },
        Case {
            name: "events.jsonl.zst with a line that is not JSON",
            damage: |d, _| {
                let text = hearsay_tests::log_text(d.join("events.jsonl")).expect("read");
                let mut lines: Vec<&str> = text.lines().collect();
                lines[40] = "{\"type\":\"move\",";
                hearsay_tests::write_log(d.join("events.jsonl"), lines.join("\n") + "\n");
            },
            refused_by: every("line 41"),
        },
        Case {
            name: "events.jsonl.zst of another seed",
            damage: |d, r| {
                std::fs::copy(
                    r.other_seed.join("events.jsonl.zst"),
                    d.join("events.jsonl.zst"),
                )
                .expect("cp");
            },
            refused_by: &[
                ("replay", "diverged at tick 0"),
                ("resume", "does not match the store's checkpoint"),
            ],
        },
        Case {
            name: "llm.jsonl.zst of another seed",
            damage: |d, r| {
                std::fs::copy(r.other_seed.join("llm.jsonl.zst"), d.join("llm.jsonl.zst"))
                    .expect("cp");
            },
            refused_by: &[("replay", "diverged at tick 0")],
        },
        Case {
            name: "llm.jsonl.zst of another scenario",
            damage: |d, r| {
                std::fs::copy(
                    r.other_scenario.join("llm.jsonl.zst"),
                    d.join("llm.jsonl.zst"),
                )
                .expect("cp");
            },
            refused_by: &[("replay", "llm.jsonl"), ("fork", "llm.jsonl")],
        },
    ]
}

fn args_for<'a>(template: &'a [&'a str], dir: &'a str, out: &'a str) -> Vec<&'a str> {
    template
        .iter()
        .map(|a| match *a {
            "{}" => dir,
            "{out}" => out,
            other => other,
        })
        .collect()
}

#[test]
fn a_damaged_run_directory_is_refused_by_every_command_and_left_as_it_was() {
    let runs = runs();
    let work = tempfile::tempdir().expect("tempdir");
    let mut failures = Vec::new();
    let mut checked = 0;
    for case in cases() {
        for (command, phrase) in case.refused_by {
            let dir = work.path().join("run");
            let out = work.path().join("fork-out");
            let _ = std::fs::remove_dir_all(&dir);
            copy_dir(&runs.base, &dir);
            (case.damage)(&dir, runs);
            let before = snapshot(&dir);
            let template = COMMANDS
                .iter()
                .find(|(c, _)| c == command)
                .map(|(_, t)| *t)
                .expect("a known command");
            let args = args_for(template, path_str(&dir), path_str(&out));
            let output = hearsay(&root(), &args);
            let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
            let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
            let mut wrong = Vec::new();
            if output.status.success() {
                wrong.push("exited 0".to_owned());
            }
            let said = format!("{stdout}{stderr}");
            if !said.contains(phrase) {
                wrong.push(format!("its error does not say {phrase:?}"));
            }
            let after = snapshot(&dir);
            if after != before {
                let changed: Vec<String> = before
                    .keys()
                    .chain(after.keys())
                    .filter(|f| before.get(*f) != after.get(*f))
                    .map(|f| {
                        f.file_name()
                            .unwrap_or_default()
                            .to_string_lossy()
                            .into_owned()
                    })
                    .collect();
                wrong.push(format!(
                    "it changed the run directory: {}",
                    changed.join(", ")
                ));
            }
            if out.exists() {
                wrong.push("it left a fork directory behind".to_owned());
                let _ = std::fs::remove_dir_all(&out);
            }
            if !wrong.is_empty() {
                failures.push(format!(
                    "[{}] hearsay {command}: {}\n--- stdout\n{stdout}--- stderr\n{stderr}",
                    case.name,
                    wrong.join("; ")
                ));
            }
            checked += 1;
        }
    }
    println!("figure: bad run directories: {checked} (damage, command) pairs refused cleanly");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn a_missing_or_foreign_path_is_not_a_run_directory() {
    let work = tempfile::tempdir().expect("tempdir");
    let file = work.path().join("notes.txt");
    std::fs::write(&file, "hello").expect("write");
    let missing = work.path().join("nowhere");
    for (path, phrase) in [
        (&missing, "no such run directory"),
        (&file, "is not a directory"),
        (&work.path().to_path_buf(), "is not a hearsay run directory"),
    ] {
        for (command, template) in COMMANDS {
            let out = work.path().join("fork-out");
            let output = hearsay(&root(), &args_for(template, path_str(path), path_str(&out)));
            let stderr = String::from_utf8_lossy(&output.stderr);
            assert_eq!(
                output.status.code(),
                Some(2),
                "{command} {}: {stderr}",
                path.display()
            );
            assert!(
                stderr.contains(phrase),
                "{command} {}: {stderr}",
                path.display()
            );
            assert!(!out.exists());
        }
    }
}

/// `hearsay ARGS` must exit 2 and say `phrase`, and `out` must not exist.
fn refused(args: &[&str], phrase: &str, out: &Path) {
    let output = hearsay(&root(), args);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{args:?}: {stderr}");
    assert!(
        stderr.contains(phrase),
        "{args:?}: wanted {phrase:?} in\n{stderr}"
    );
    assert!(!out.exists(), "{args:?} left {}", out.display());
}

#[test]
fn bad_flags_are_refused_before_anything_is_written() {
    let runs = runs();
    let work = tempfile::tempdir().expect("tempdir");
    let out = work.path().join("out");
    let o = path_str(&out);
    let fish = scenario("fish-market.toml");
    let s = path_str(&fish);
    let base = path_str(&runs.base);
    let before = snapshot(&runs.base);
    let cases: &[(&[&str], &str)] = &[
        (
            &["run", s, "--out", o, "--seed", "abc"],
            "invalid value 'abc' for '--seed",
        ),
        (&["run", s, "--out", o, "--ticks", "0"], "--ticks 0"),
        (
            &["run", s, "--out", o, "--ticks", "99999999999"],
            "--ticks 99999999999",
        ),
        (&["run", s, "--out", o, "--threads", "0"], "--threads"),
        (
            &["run", s, "--out", o, "--set", "world.width=-3"],
            "fish-market.toml (after --set):",
        ),
        (
            &["run", s, "--out", o, "--set", "no_such_key=1"],
            "no_such_key",
        ),
        (
            &["run", s, "--out", o, "--set", "missing-equals"],
            "KEY=VALUE",
        ),
        (
            &["run", s, "--out", o, "--bogus"],
            "unexpected argument '--bogus'",
        ),
        (
            &["fork", base, "--out", o, "--at-tick", "31"],
            "--at-tick 31",
        ),
        (
            &[
                "fork",
                base,
                "--out",
                o,
                "--at-tick",
                "10",
                "--set",
                "npcs=[]",
            ],
            "npcs",
        ),
        (
            &["fork", base, "--out", base, "--at-tick", "10"],
            "is the run being forked",
        ),
        (
            &["inspect", base, "--npc", "Nobody"],
            "no such NPC \"Nobody\"",
        ),
        (
            &["inspect", base, "--npc", "Bob", "--at-tick", "999"],
            "--at-tick 999",
        ),
        (
            &["ask", base, "--npc", "Bob", "   "],
            "the question is empty",
        ),
        (
            &["sweep", s, "--seeds", "5..1", "--out", o],
            "--seeds \"5..1\"",
        ),
        (&["sweep", s, "--seeds", "x", "--out", o], "--seeds \"x\""),
        (&["watch", base], "needs a terminal"),
    ];
    for (args, phrase) in cases {
        refused(args, phrase, &out);
    }
    assert_eq!(
        snapshot(&runs.base),
        before,
        "a refused command changed the run it named"
    );
}

#[test]
fn a_missing_key_or_an_absent_model_server_refuses_the_run_at_once() {
    let work = tempfile::tempdir().expect("tempdir");
    let out = work.path().join("out");
    let o = path_str(&out);
    let llm = scenario("fish-market-llm.toml");
    let s = path_str(&llm);
    // A port nothing listens on: bound, then released.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port");
    let dead = format!("brain.base_url=\"http://127.0.0.1:{port}/v1\"");
    let dead_embedder = format!("memory.embedder.base_url=\"http://127.0.0.1:{port}/v1\"");
    refused(
        &[
            "run",
            s,
            "--out",
            o,
            "--set",
            "brain.api_key_env=\"HEARSAY_TEST_UNSET_KEY\"",
        ],
        "HEARSAY_TEST_UNSET_KEY is not set",
        &out,
    );
    let started = std::time::Instant::now();
    refused(
        &["run", s, "--out", o, "--set", &dead],
        &format!("[brain] at http://127.0.0.1:{port}/v1 cannot be used"),
        &out,
    );
    refused(
        &[
            "run",
            s,
            "--out",
            o,
            "--set",
            &dead,
            "--set",
            &dead_embedder,
        ],
        "cannot be used",
        &out,
    );
    let elapsed = started.elapsed();
    assert!(
        elapsed < std::time::Duration::from_secs(20),
        "refusing took {elapsed:?}"
    );
    // The heuristic brain with a dead embedder: the embedder is checked too.
    let fish = scenario("fish-market.toml");
    refused(
        &[
            "run",
            path_str(&fish),
            "--out",
            o,
            "--set",
            "memory.embedder.provider=\"openai\"",
            "--set",
            &dead_embedder,
            "--set",
            "memory.embedder.model=\"e5\"",
        ],
        "[memory.embedder]",
        &out,
    );
}
