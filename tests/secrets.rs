//! The API key never leaves the `Authorization` header: every command is run with a
//! sentinel key in the environment — run (with a server that echoes credentials in its
//! errors), replay, resume, fork, inspect, ask, report, sweep, validate, mcp and watch —
//! at debug log level, and every byte each printed or wrote is searched for it.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use hearsay_tests::mock::{ChatCall, MockServer, Reply};
use hearsay_tests::tty::Tty;
use hearsay_tests::{bin, path_str, root};

const SENTINEL: &str = "sk-hearsay-sentinel-every-command-41c9";

fn has_sentinel(bytes: &[u8]) -> bool {
    bytes
        .windows(SENTINEL.len())
        .any(|w| w == SENTINEL.as_bytes())
}

/// Runs `hearsay ARGS` with the sentinel key; its stdout and stderr.
fn hearsay(args: &[&str], stdin: Option<&str>) -> (Option<i32>, Vec<u8>, Vec<u8>) {
    let mut child = Command::new(bin())
        .args(args)
        .current_dir(root())
        .env("HEARSAY_TEST_KEY", SENTINEL)
        .env("RUST_LOG", "debug")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("hearsay starts");
    if let Some(mut input) = child.stdin.take() {
        let _ = input.write_all(stdin.unwrap_or("").as_bytes());
    }
    let out = child.wait_with_output().expect("hearsay ends");
    (out.status.code(), out.stdout, out.stderr)
}

/// Every file under `dir`, recursively.
fn files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).expect("dir") {
        let path = entry.expect("entry").path();
        if path.is_dir() {
            out.extend(files(&path));
        } else {
            out.push(path);
        }
    }
    out
}

fn scenario(url: &str) -> String {
    let mut s = format!(
        "name = \"secret\"\nseed = 3\nticks = 6\n\n[world]\nwidth = 12\nheight = 8\nhearing_radius = 6\n\n\
         [[places]]\nname = \"market\"\nat = [6, 4]\n\n\
         [brain]\nprovider = \"openai\"\nbase_url = \"{url}\"\nmodel = \"mock\"\napi_key_env = \"HEARSAY_TEST_KEY\"\nmax_retries = 0\nretry_base_ms = 1\n\n\
         [memory.embedder]\nprovider = \"openai\"\nbase_url = \"{url}\"\nmodel = \"mock-embed\"\napi_key_env = \"HEARSAY_TEST_KEY\"\n\n\
         [memory]\nvisibility = \"barrier\"\n\n"
    );
    for i in 0..3 {
        s.push_str(&format!(
            "[[npcs]]\nname = \"N{i}\"\nat = [{}, 4]\n\n",
            i * 2
        ));
    }
    s.push_str("[[facts]]\nname = \"fish\"\nmatch = [\"fish\"]\n");
    s
}

#[test]
fn no_command_ever_prints_or_writes_the_key() {
    let mock = MockServer::start(|call: &ChatCall| {
        let user = call.body["messages"][1]["content"].as_str().unwrap_or("");
        if user.contains("Someone asks you") {
            return Reply::answer("Fish, at the market.");
        }
        match (call.npc.as_str(), call.tick % 2) {
            // Echoes the credentials back in its error body (the mock does, like some
            // real servers): hearsay must scrub them from everything it keeps.
            ("N0", 0) => Reply::Status {
                code: 500,
                retry_after: None,
            },
            _ => Reply::answer(
                r#"{"action": "talk", "speech": "Fresh fish at the market.", "x": 0, "y": 0}"#,
            ),
        }
    });
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("s.toml");
    std::fs::write(&file, scenario(&mock.url)).expect("write");
    let run = dir.path().join("run");
    let fork = dir.path().join("fork");
    let sweep = dir.path().join("sweep");
    let mut outputs: Vec<(String, Vec<u8>)> = Vec::new();
    let mut record = |what: &str, (code, out, err): (Option<i32>, Vec<u8>, Vec<u8>)| {
        outputs.push((format!("{what} stdout"), out));
        outputs.push((format!("{what} stderr ({code:?})"), err));
        code
    };
    let f = path_str(&file);
    let r = path_str(&run);
    assert_eq!(
        record("run", hearsay(&["run", f, "--out", r], None)),
        Some(0)
    );
    record("validate", hearsay(&["validate", f], None));
    assert_eq!(record("replay", hearsay(&["replay", r], None)), Some(0));
    record("resume", hearsay(&["resume", r], None));
    let code = record(
        "fork",
        hearsay(
            &[
                "fork",
                r,
                "--at-tick",
                "3",
                "--out",
                path_str(&fork),
                "--seed",
                "9",
            ],
            None,
        ),
    );
    assert_eq!(code, Some(0));
    assert_eq!(
        record(
            "inspect",
            hearsay(&["inspect", r, "--npc", "N1", "--query", "fish"], None)
        ),
        Some(0)
    );
    assert_eq!(
        record(
            "ask",
            hearsay(&["ask", r, "--npc", "N1", "Where is the fish?"], None)
        ),
        Some(0)
    );
    assert_eq!(record("report", hearsay(&["report", r], None)), Some(0));
    let code = record(
        "sweep",
        hearsay(
            &["sweep", f, "--seeds", "1..2", "--out", path_str(&sweep)],
            None,
        ),
    );
    assert_eq!(code, Some(0));
    let session = [
        r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}"#,
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
        r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"ask_npc","arguments":{"npc":"N1","question":"Where is the fish?"}}}"#,
        r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"search_memories","arguments":{"npc":"N1","query":"fish"}}}"#,
        r#"{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"add_memory","arguments":{"npc":"N1","content":"The fish was gone."}}}"#,
    ]
    .join("\n")
        + "\n";
    let (code, out, err) = hearsay(&["mcp", r, "--allow-writes"], Some(&session));
    assert!(
        String::from_utf8_lossy(&out).contains("Fish, at the market."),
        "{}",
        String::from_utf8_lossy(&err)
    );
    record("mcp", (code, out, err));

    // watch, in a real terminal (the key is in its environment too).
    let env = [("HEARSAY_TEST_KEY", SENTINEL), ("RUST_LOG", "debug")];
    let mut tty = Tty::spawn_with_env(&["watch", r, "--speed", "0"], 100, 30, &env);
    tty.wait_for("the end of the run", Duration::from_secs(60), |s| {
        s.contains("end of run")
    });
    tty.send("q");
    tty.wait_exit(Duration::from_secs(30));
    outputs.push(("watch".into(), tty.raw()));

    let calls = mock.log();
    assert!(
        calls
            .iter()
            .any(|l| l.call.authorization.as_deref() == Some(&format!("Bearer {SENTINEL}"))),
        "the key was used"
    );
    for (what, bytes) in &outputs {
        assert!(
            !has_sentinel(bytes),
            "the key leaked into {what}: {}",
            String::from_utf8_lossy(bytes)
        );
    }
    let mut checked = 0;
    for dir in [&run, &fork, &sweep] {
        for path in files(dir) {
            let bytes = std::fs::read(&path).expect("read");
            assert!(
                !has_sentinel(&bytes),
                "the key leaked into {}",
                path.display()
            );
            checked += 1;
        }
    }
    assert!(checked >= 20, "searched {checked} files");
}
