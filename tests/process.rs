//! What the `hearsay` binary sets up for its own process before any command runs.

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use hearsay_tests::{bin, path_str, run_ok, scenario};

/// The `THP_enabled` line of a live process's status: whether the kernel may back its
/// memory with transparent huge pages.
fn thp_enabled(pid: u32) -> Option<bool> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("THP_enabled:"))?;
    Some(line.split_whitespace().nth(1)? == "1")
}

/// Starts `hearsay mcp` on `run` (with `env`), waits for its answer to `initialize` —
/// `main` has run by then — and reads whether huge pages are on for it.
fn huge_pages_of_a_server(run: &std::path::Path, env: Option<(&str, &str)>) -> Option<bool> {
    let mut cmd = Command::new(bin());
    cmd.args(["mcp", path_str(run)])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .env_remove("MIMALLOC_ALLOW_THP");
    if let Some((k, v)) = env {
        cmd.env(k, v);
    }
    let mut child = cmd.spawn().expect("hearsay starts");
    let pid = child.id();
    let mut stdin = child.stdin.take().expect("stdin");
    let init = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"process-test","version":"0"}}}"#;
    writeln!(stdin, "{init}").expect("write initialize");
    // The answer is read on a thread of its own, so that a server that never answers
    // fails the test in bounded time rather than hanging it.
    let stdout = child.stdout.take().expect("stdout");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut line = String::new();
        let _ = BufReader::new(stdout).read_line(&mut line);
        let _ = tx.send(line);
    });
    let Ok(line) = rx.recv_timeout(Duration::from_secs(30)) else {
        let _ = child.kill();
        let _ = child.wait();
        panic!("hearsay mcp did not answer initialize within 30 s");
    };
    assert!(line.contains("\"id\":1"), "an answer to initialize: {line}");
    let enabled = thp_enabled(pid);
    // End of input ends the server; bounded, then killed.
    drop(stdin);
    let deadline = Instant::now() + Duration::from_secs(10);
    while child.try_wait().expect("wait").is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    enabled
}

#[test]
fn the_binary_turns_transparent_huge_pages_off_unless_mimalloc_is_told() {
    let Some(ours) = thp_enabled(std::process::id()) else {
        assert_ne!(
            std::env::var("CI").as_deref(),
            Ok("true"),
            "under CI the check must run, and this kernel's /proc/<pid>/status has no THP_enabled line"
        );
        eprintln!(
            "note: this kernel's /proc/<pid>/status has no THP_enabled line; nothing to check"
        );
        return;
    };
    assert!(
        ours,
        "the test process itself may use huge pages (else the check below proves nothing)"
    );
    let dir = tempfile::tempdir().expect("tempdir");
    let run = dir.path().join("run");
    run_ok(&scenario("fish-market.toml"), &run, &["--ticks", "2"]);
    assert_eq!(
        huge_pages_of_a_server(&run, None),
        Some(false),
        "hearsay turns them off for itself"
    );
    assert_eq!(
        huge_pages_of_a_server(&run, Some(("MIMALLOC_ALLOW_THP", "1"))),
        Some(true),
        "MIMALLOC_ALLOW_THP set: mimalloc decides, and it allows them"
    );
}
