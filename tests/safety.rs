//! Nothing a user owns is destroyed: every data-loss case of issue 15 tried again with
//! the real binary, each now refused (exit 2, with what was found) and the directory
//! around it byte-for-byte as it was; symlinks in run directories are refused, never
//! followed; two writers of one directory are refused at once.

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use hearsay_tests::mock::{ChatCall, MockServer, Reply};
use hearsay_tests::{assert_untouched, bin, hearsay, path_str, root, run_ok, scenario, snapshot};

fn said(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// `args` in `cwd` exits 2 saying `phrase`, and nothing under `watched` changed.
fn refused_untouched(cwd: &Path, args: &[&str], phrase: &str, watched: &Path) {
    let before = snapshot(watched);
    let o = hearsay(cwd, args);
    assert_eq!(o.status.code(), Some(2), "{args:?}: {}", said(&o));
    assert!(
        said(&o).contains(phrase),
        "{args:?}: wanted {phrase:?} in {}",
        said(&o)
    );
    assert_untouched(&before, &snapshot(watched), &format!("{args:?}"));
}

/// A project directory that happens to hold a `scenario.toml`, with work in it.
fn project(at: &Path) {
    std::fs::create_dir_all(at.join("src")).expect("mkdir");
    std::fs::copy(scenario("fish-market.toml"), at.join("scenario.toml")).expect("copy");
    std::fs::write(at.join("notes.txt"), "my notes").expect("write");
    std::fs::write(at.join("src/main.rs"), "fn main() {}").expect("write");
    std::fs::write(at.join("sweep.json"), "{}").expect("write");
}

#[test]
fn force_replaces_only_what_hearsay_made() {
    let dir = tempfile::tempdir().expect("tempdir");
    let proj = dir.path().join("proj");
    project(&proj);
    let elsewhere = dir.path().join("elsewhere.toml");
    std::fs::copy(scenario("fish-market.toml"), &elsewhere).expect("copy");
    let e = path_str(&elsewhere);
    let watched = dir.path();
    // `--out .` from inside the project.
    refused_untouched(
        &proj,
        &[
            "run",
            "scenario.toml",
            "--out",
            ".",
            "--force",
            "--ticks",
            "5",
        ],
        "is the current directory",
        watched,
    );
    // `--out proj --force` from beside it, the scenario inside it.
    refused_untouched(
        dir.path(),
        &[
            "run",
            "proj/scenario.toml",
            "--out",
            "proj",
            "--force",
            "--ticks",
            "5",
        ],
        "an input of this command",
        watched,
    );
    // The scenario elsewhere: the project is not a hearsay run, whatever it holds.
    refused_untouched(
        dir.path(),
        &["run", e, "--out", "proj", "--force", "--ticks", "5"],
        "is not a hearsay run directory",
        watched,
    );
    // A directory above the current one.
    refused_untouched(
        &proj.join("src"),
        &["run", e, "--out", "..", "--force", "--ticks", "5"],
        "is the current directory or one above it",
        watched,
    );
    // sweep --force on a directory that holds a sweep.json.
    refused_untouched(
        dir.path(),
        &[
            "sweep", e, "--seeds", "1..2", "--ticks", "5", "--out", "proj", "--force",
        ],
        "is not a hearsay sweep directory",
        watched,
    );
    // A real run of hearsay's, with one file of the user's added: refused too.
    let run = dir.path().join("run");
    run_ok(&elsewhere, &run, &["--ticks", "5"]);
    std::fs::write(run.join("mine.txt"), "keep").expect("write");
    refused_untouched(
        dir.path(),
        &["run", e, "--out", "run", "--force", "--ticks", "5"],
        "\"mine.txt\"",
        watched,
    );
    std::fs::remove_file(run.join("mine.txt")).expect("rm");
    // A sweep's directory is not a run's, nor the other way round.
    let sweep = dir.path().join("sweep");
    let o = hearsay(
        dir.path(),
        &[
            "sweep", e, "--seeds", "1..2", "--ticks", "5", "--out", "sweep",
        ],
    );
    assert!(o.status.success(), "{}", said(&o));
    refused_untouched(
        dir.path(),
        &["run", e, "--out", "sweep", "--force", "--ticks", "5"],
        "it is a hearsay sweep directory",
        watched,
    );
    refused_untouched(
        dir.path(),
        &[
            "sweep", e, "--seeds", "1..2", "--ticks", "5", "--out", "run", "--force",
        ],
        "it is a hearsay run directory",
        watched,
    );
    // What hearsay made, it replaces.
    let o = hearsay(
        dir.path(),
        &["run", e, "--out", "run", "--force", "--ticks", "6"],
    );
    assert!(o.status.success(), "{}", said(&o));
    assert!(
        std::fs::read_to_string(run.join("run.json"))
            .expect("manifest")
            .contains("\"ticks\": 6")
    );
    let o = hearsay(
        dir.path(),
        &[
            "sweep", e, "--seeds", "3..4", "--ticks", "5", "--out", "sweep", "--force",
        ],
    );
    assert!(o.status.success(), "{}", said(&o));
    assert!(sweep.join("seed-3").is_dir() && !sweep.join("seed-1").exists());
    println!(
        "figure: --force: 7 directories hearsay did not make (or did not make alone) refused, each left byte-identical; 2 of its own replaced"
    );
}

#[test]
fn a_fork_never_replaces_its_source_and_reports_never_overwrite_a_run() {
    let dir = tempfile::tempdir().expect("tempdir");
    let run = dir.path().join("run");
    run_ok(&scenario("fish-market.toml"), &run, &["--ticks", "20"]);
    let r = path_str(&run);
    let watched = dir.path();
    refused_untouched(
        dir.path(),
        &["fork", r, "--at-tick", "10", "--out", r, "--force"],
        "is the run being forked",
        watched,
    );
    refused_untouched(
        &root(),
        &[
            "fork",
            r,
            "--at-tick",
            "10",
            "--out",
            path_str(dir.path()),
            "--force",
        ],
        "is the run being forked",
        watched,
    );
    refused_untouched(
        dir.path(),
        &[
            "fork",
            r,
            "--at-tick",
            "10",
            "--out",
            path_str(&run.join("inner")),
        ],
        "is inside the run being forked",
        watched,
    );
    for own in [
        "events.jsonl.zst",
        "summary.json",
        "run.json",
        "llm.jsonl.zst",
        "memories.db",
    ] {
        refused_untouched(
            dir.path(),
            &["report", r, "--out", path_str(&run.join(own))],
            "is one of a run's own files",
            watched,
        );
    }
    // A file of the user's is not overwritten; a page hearsay wrote is.
    let mine = dir.path().join("mine.html");
    std::fs::write(&mine, "<p>my page</p>").expect("write");
    refused_untouched(
        dir.path(),
        &["report", r, "--out", path_str(&mine)],
        "is not a report hearsay wrote",
        watched,
    );
    let page = dir.path().join("page.html");
    for _ in 0..2 {
        let o = hearsay(dir.path(), &["report", r, "--out", path_str(&page)]);
        assert!(o.status.success(), "{}", said(&o));
    }
    // `--out DIR` writes DIR/report.html and leaves no temporary file anywhere.
    let out_dir = dir.path().join("pages");
    std::fs::create_dir(&out_dir).expect("mkdir");
    let o = hearsay(dir.path(), &["report", r, "--out", path_str(&out_dir)]);
    assert!(o.status.success(), "{}", said(&o));
    assert!(out_dir.join("report.html").is_file());
    let strays: Vec<_> = snapshot(dir.path())
        .into_keys()
        .filter(|p| p.to_string_lossy().contains(".tmp"))
        .collect();
    assert!(strays.is_empty(), "temporary files left: {strays:?}");
}

#[test]
fn a_symlink_in_a_run_directory_is_refused_never_followed() {
    let dir = tempfile::tempdir().expect("tempdir");
    let run = dir.path().join("run");
    run_ok(&scenario("fish-market.toml"), &run, &["--ticks", "20"]);
    let r = path_str(&run);
    let precious = dir.path().join("precious.txt");
    std::fs::write(&precious, "do not overwrite").expect("write");
    let fork = dir.path().join("fork");
    let f = path_str(&fork);
    let commands: Vec<Vec<&str>> = vec![
        vec!["report", r],
        vec!["resume", r],
        vec!["replay", r],
        vec!["inspect", r, "--npc", "Bob"],
        vec!["ask", r, "--npc", "Bob", "where is the fish?"],
        vec!["fork", r, "--at-tick", "5", "--out", f],
    ];
    let mut tried = 0;
    for name in [
        "summary.json",
        "report.html",
        "events.jsonl.zst",
        "llm.jsonl.zst",
        "run.json",
        ".report.html.1-0.tmp",
    ] {
        let path = run.join(name);
        let saved = std::fs::read(&path).ok();
        let _ = std::fs::remove_file(&path);
        std::os::unix::fs::symlink(&precious, &path).expect("ln -s");
        for args in &commands {
            refused_untouched(dir.path(), args, "symbolic link", dir.path());
            tried += 1;
        }
        std::fs::remove_file(&path).expect("rm link");
        if let Some(bytes) = saved {
            std::fs::write(&path, bytes).expect("restore");
        }
    }
    assert_eq!(
        std::fs::read_to_string(&precious).expect("read"),
        "do not overwrite"
    );
    assert!(!fork.exists());
    println!(
        "figure: symlinks: 6 planted links × 6 commands = {tried} refused, the target untouched"
    );
}

/// A run that takes a while (a mock model answering in 150 ms), started in the background.
fn slow_run(mock: &MockServer, dir: &Path, out: &Path) -> std::process::Child {
    let file = dir.join("slow.toml");
    let text = std::fs::read_to_string(scenario("fish-market.toml"))
        .expect("scenario")
        .replace(
            "[brain]\nprovider = \"heuristic\"",
            &format!(
                "[brain]\nprovider = \"openai\"\nbase_url = \"{}\"\nmodel = \"mock\"\nmax_retries = 0",
                mock.url
            ),
        );
    assert!(
        text.contains("provider = \"openai\""),
        "fish-market has a [brain]"
    );
    std::fs::write(&file, text).expect("write");
    Command::new(bin())
        .args([
            "run",
            path_str(&file),
            "--out",
            path_str(out),
            "--ticks",
            "30",
            "--no-progress",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("hearsay starts")
}

#[test]
fn two_writers_of_one_directory_are_refused_at_once() {
    let mock = MockServer::start(|_: &ChatCall| Reply::slow(r#"{"action": "stay"}"#, 150));
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("run");
    let mut first = slow_run(&mock, dir.path(), &out);
    let started = Instant::now();
    while !out.join("events.jsonl.zst").exists() {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "the run never started"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let e = scenario("fish-market.toml");
    let o = path_str(&out);
    for args in [
        vec!["run", path_str(&e), "--out", o, "--force", "--ticks", "5"],
        vec!["resume", o],
        vec!["report", o],
        vec!["fork", o, "--at-tick", "0", "--out", o, "--force"],
    ] {
        let t = Instant::now();
        let second = hearsay(&root(), &args);
        assert_eq!(second.status.code(), Some(2), "{args:?}: {}", said(&second));
        assert!(
            said(&second).contains("another hearsay process")
                || said(&second).contains("is the run being forked"),
            "{args:?}: {}",
            said(&second)
        );
        assert!(t.elapsed() < Duration::from_secs(10), "refused at once");
    }
    assert!(
        first.try_wait().expect("child").is_none(),
        "the first run goes on"
    );
    let status = first.wait().expect("first ends");
    assert!(status.success(), "the first run finished");
    let replay = hearsay(&root(), &["replay", o]);
    assert_eq!(
        String::from_utf8_lossy(&replay.stdout).trim(),
        "identical: 30 ticks"
    );
}
