//! `hearsay mcp` against a real MCP client that hearsay did not write: the official
//! Python SDK (scripts/mcp-venv.sh puts it in a venv; scripts/test.sh passes its python
//! as HEARSAY_MCP_PYTHON). It lists the tools, calls each, and its answers are checked
//! against the run's own files; input a tool cannot use comes back as a result with
//! `isError`, an unknown tool as a protocol error, and the server keeps serving; the summary and report are resources; `--allow-writes` adds memories that the backfill worker embeds; the same
//! server runs on a PostgreSQL run by id alone.

use std::path::{Path, PathBuf};
use std::process::Command;

use hearsay_tests::{bin, path_str, read_jsonl, root, run_ok, scenario, summary};
use serde_json::{Value, json};

/// The venv python with `mcp`, or `None` after saying why the suite cannot run (a
/// failure under CI).
fn client_python() -> Option<PathBuf> {
    match std::env::var_os("HEARSAY_MCP_PYTHON") {
        Some(p) => Some(PathBuf::from(p)),
        None if std::env::var("CI").as_deref() == Ok("true") => {
            panic!(
                "HEARSAY_MCP_PYTHON is not set, and under CI the MCP suite must run (scripts/test.sh sets it)"
            )
        }
        None => {
            eprintln!(
                "note: HEARSAY_MCP_PYTHON is not set (scripts/mcp-venv.sh); the MCP suite did not run"
            );
            None
        }
    }
}

/// Runs the Python client with `args` for `hearsay` and `calls`; its report.
fn session(python: &Path, dir: &Path, args: &[&str], calls: Value) -> Value {
    let plan = json!({ "command": bin(), "args": args, "calls": calls });
    let plan_path = dir.join(format!("plan-{}.json", std::process::id()));
    std::fs::write(&plan_path, plan.to_string()).expect("plan");
    let out = Command::new(python)
        .arg(root().join("tests/mcp/client.py"))
        .arg(&plan_path)
        .current_dir(root())
        .env_remove("RUST_LOG")
        .output()
        .expect("python starts");
    assert!(
        out.status.success(),
        "the MCP client failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("the client prints JSON")
}

/// A tool's answer to input it could not use: a result with `isError`, whose text the
/// model reads (not a protocol error).
fn tool_error(call: &Value) -> String {
    assert!(
        call["error"].is_null(),
        "a protocol error, not a tool result: {call}"
    );
    assert_eq!(call["is_error"], true, "expected isError: {call}");
    call["text"][0].as_str().unwrap_or_default().to_owned()
}

/// A JSON-RPC error: its message.
fn protocol_error(call: &Value) -> String {
    assert!(
        call["error"]["code"].is_i64(),
        "expected a protocol error: {call}"
    );
    call["error"]["message"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

fn error_of(call: &Value) -> String {
    if let Some(m) = call["error"]["message"].as_str() {
        return m.to_owned();
    }
    assert_eq!(call["is_error"], true, "expected an error: {call}");
    call["text"][0].as_str().unwrap_or_default().to_owned()
}

#[test]
fn an_mcp_client_reads_the_world_and_memories_of_a_run() {
    let Some(python) = client_python() else {
        return;
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let run = dir.path().join("run");
    run_ok(&scenario("fish-market.toml"), &run, &["--ticks", "120"]);
    let question = "Where can I buy fresh fish?";
    let calls = json!([
        { "tool": "list_npcs" },
        { "tool": "search_memories", "arguments": { "npc": "Alice", "query": "fresh fish at the market", "k": 3 } },
        { "tool": "npc_timeline", "arguments": { "npc": "Alice", "from_tick": 0, "to_tick": 10 } },
        { "tool": "fact_spread", "arguments": { "fact": "fresh fish" } },
        { "tool": "ask_npc", "arguments": { "npc": "Carol", "question": question, "at_tick": 10 } },
        { "tool": "ask_npc", "arguments": { "npc": "Alice", "question": question } },
        // Bad calls: input the tool cannot use comes back as a tool result with isError
        // (the model can read it and correct the call); an unknown tool is a protocol
        // error. The server goes on serving.
        { "tool": "search_memories", "arguments": { "npc": "Zed", "query": "fish" } },
        { "tool": "search_memories", "arguments": { "npc": "Bob", "query": "fish", "k": 0 } },
        { "tool": "search_memories", "arguments": { "npc": "Bob", "query": "fish", "k": 500 } },
        { "tool": "search_memories", "arguments": { "npc": "Bob", "query": "fish", "k": "three" } },
        { "tool": "search_memories", "arguments": { "npc": "Bob" } },
        { "tool": "fact_spread", "arguments": { "fact": "gold" } },
        { "tool": "npc_timeline", "arguments": { "npc": "Bob", "from_tick": 50, "to_tick": 10 } },
        { "tool": "ask_npc", "arguments": { "npc": "Bob", "question": question, "at_tick": 9999 } },
        { "tool": "add_memory", "arguments": { "npc": "Bob", "content": "x" } },
        { "tool": "no_such_tool" },
        { "tool": "list_npcs" },
        { "read_resource": "hearsay://run/summary.json" },
        { "read_resource": "hearsay://run/report.html" },
        { "read_resource": "hearsay://run/../../etc/passwd" }
    ]);
    let before = std::fs::read(run.join("memories.db")).expect("store");
    let report = session(&python, dir.path(), &["mcp", path_str(&run)], calls);
    assert_eq!(report["server"], "hearsay");
    let names: Vec<&str> = report["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .map(|t| t["name"].as_str().expect("name"))
        .collect();
    assert_eq!(
        names,
        [
            "ask_npc",
            "fact_spread",
            "list_npcs",
            "npc_timeline",
            "search_memories"
        ],
        "read-only: no add_memory"
    );
    for t in report["tools"].as_array().expect("tools") {
        assert_eq!(t["input_schema"]["type"], "object", "{t}");
        assert!(t["output_schema"].is_object(), "{t}");
        assert!(t["description"].as_str().is_some_and(|d| d.len() > 20));
    }
    let search = &report["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .find(|t| t["name"] == "search_memories")
        .expect("search")["input_schema"];
    assert_eq!(search["required"], json!(["npc", "query"]));
    let c = report["calls"].as_array().expect("calls");
    let s = summary(&run);

    // list_npcs: the scenario's NPCs, their memory counts as the summary counts them.
    let npcs = c[0]["structured"]["npcs"].as_array().expect("npcs");
    assert_eq!(npcs.len(), 4);
    assert_eq!(npcs[0]["name"], "Bob");
    let total: u64 = npcs
        .iter()
        .map(|n| n["memories"].as_u64().expect("n"))
        .sum();
    assert_eq!(Some(total), s["memories"]["total"].as_u64());
    assert_eq!(c[0]["structured"]["ticks"], 120);
    // Where the event log leaves Bob.
    let events = read_jsonl(&run.join("events.jsonl"));
    let bob_last = events
        .iter()
        .rev()
        .filter(|e| e["npc"] == "Bob" && (e["type"] == "move" || e["type"] == "spawn"))
        .map(|e| {
            if e["type"] == "move" {
                e["to"].clone()
            } else {
                e["at"].clone()
            }
        })
        .next()
        .expect("Bob moved");
    assert_eq!(npcs[0]["position"], bob_last);

    // search_memories: three, ranked, about fresh fish, in the run's one vector space.
    let found = c[1]["structured"]["memories"].as_array().expect("found");
    assert_eq!(found.len(), 3);
    assert_eq!(
        c[1]["structured"]["model"], "hashing-v1 (1536 dimensions)",
        "the space the query was compared in"
    );
    assert_eq!(c[1]["structured"]["other_models"], serde_json::json!({}));
    assert!(
        found
            .windows(2)
            .all(|w| w[0]["score"].as_f64() >= w[1]["score"].as_f64())
    );
    assert!(
        found[0]["memory"]["content"]
            .as_str()
            .is_some_and(|t| t.contains("fresh fish"))
    );

    // npc_timeline: Alice's memories in ticks 0..=10, exactly as the event log has them.
    let logged: Vec<Value> = events
        .iter()
        .filter(|e| e["type"] == "memory" && e["npc"] == "Alice" && e["tick"].as_u64() <= Some(10))
        .map(|e| e["id"].clone())
        .collect();
    let entries: Vec<Value> = c[2]["structured"]["entries"]
        .as_array()
        .expect("entries")
        .iter()
        .map(|e| e["id"].clone())
        .collect();
    assert_eq!(entries, logged);

    // fact_spread: what summary.json says.
    let fact = &s["facts"][0];
    let spread = &c[3]["structured"];
    assert_eq!(spread["knowers"], fact["knowers"]);
    assert_eq!(spread["curve"], fact["curve"]);
    assert_eq!(spread["half_tick"], fact["half_tick"]);

    // ask_npc: Carol did not know at tick 10; Alice knows at the end.
    assert_eq!(
        c[4]["structured"]["answer"],
        "I don't know anything about that."
    );
    assert_eq!(c[4]["structured"]["tick"], 10);
    assert!(
        c[5]["structured"]["answer"]
            .as_str()
            .is_some_and(|a| a.contains("fresh fish"))
    );

    for (i, input, needle) in [
        (6, true, "no such NPC \"Zed\""),
        (7, true, "k must be from 1 to 50, not 0"),
        (8, true, "k must be from 1 to 50, not 500"),
        // rmcp reports arguments that do not fit the schema as tool results too (the
        // specification counts input validation as a tool execution error).
        (9, true, "invalid type"),
        (10, true, "missing field `query`"),
        (
            11,
            true,
            "no tracked fact \"gold\"; the run tracks: fresh fish, festival",
        ),
        (12, true, "from_tick 50 is after to_tick 10"),
        (13, true, "--at-tick 9999"),
        (14, false, "tool not found"),
        (15, false, "tool not found"),
    ] {
        let message = if input {
            tool_error(&c[i])
        } else {
            protocol_error(&c[i])
        };
        assert!(
            message.contains(needle),
            "call {i}: {message:?} lacks {needle:?}"
        );
    }
    // The run's summary and report, as resources: listed with their sizes, read as the
    // files are; nothing else is (a path in the URI reaches no file).
    let resources = report["resources"].as_array().expect("resources");
    let listed: Vec<&str> = resources
        .iter()
        .map(|r| r["uri"].as_str().expect("uri"))
        .collect();
    assert_eq!(
        listed,
        ["hearsay://run/summary.json", "hearsay://run/report.html"]
    );
    for (i, file, mime) in [
        (17, "summary.json", "application/json"),
        (18, "report.html", "text/html"),
    ] {
        let on_disk = std::fs::read_to_string(run.join(file)).expect("file");
        assert_eq!(
            c[i]["contents"][0]["text"].as_str(),
            Some(on_disk.as_str()),
            "{file}"
        );
        assert_eq!(c[i]["contents"][0]["mime_type"], mime);
        let size = resources
            .iter()
            .find(|r| r["uri"].as_str().is_some_and(|u| u.ends_with(file)));
        assert_eq!(
            size.expect("listed")["size"].as_u64(),
            Some(on_disk.len() as u64)
        );
    }
    assert!(protocol_error(&c[19]).contains("no resource"), "{}", c[19]);
    assert_eq!(
        c[16]["structured"]["npcs"].as_array().map(Vec::len),
        Some(4),
        "still serving"
    );
    assert_eq!(
        std::fs::read(run.join("memories.db")).expect("store"),
        before,
        "a read-only server changes nothing"
    );
}

#[test]
fn with_writes_an_added_memory_is_embedded_and_found() {
    let Some(python) = client_python() else {
        return;
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let run = dir.path().join("run");
    run_ok(&scenario("fish-market.toml"), &run, &["--ticks", "30"]);
    let total = summary(&run)["memories"]["total"].as_u64().expect("total");
    let calls = json!([
        { "tool": "add_memory", "arguments": { "npc": "Dave", "content": "A grey cat haunts the old mill at night.", "importance": 9 } },
        { "until_found": {
            "tool": "search_memories",
            "arguments": { "npc": "Dave", "query": "grey cat haunting the mill", "k": 1 },
            "contains": "A grey cat haunts the old mill", "timeout": 30 } },
        { "tool": "add_memory", "arguments": { "npc": "Dave", "content": "x", "importance": 11 } },
        { "tool": "add_memory", "arguments": { "npc": "Dave", "content": "   " } },
        { "tool": "add_memory", "arguments": { "npc": "Nobody", "content": "x" } }
    ]);
    let report = session(
        &python,
        dir.path(),
        &["mcp", path_str(&run), "--allow-writes"],
        calls,
    );
    let names: Vec<&str> = report["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert!(names.contains(&"add_memory"));
    let c = report["calls"].as_array().expect("calls");
    let added = &c[0]["structured"];
    assert_eq!(added["id"].as_u64(), Some(total + 1));
    assert_eq!(added["tick"], 29, "dated at the run's last tick");
    let found = &c[1]["structured"]["memories"][0]["memory"];
    assert_eq!(
        found["id"], added["id"],
        "embedded by the worker, then found: {}",
        c[1]
    );
    assert!(tool_error(&c[2]).contains("importance must be from 1 to 10, not 11"));
    assert!(tool_error(&c[3]).contains("content is empty"));
    assert!(tool_error(&c[4]).contains("no such NPC \"Nobody\""));

    // In the store: text, importance, and a vector by the run's own embedder.
    let db = run.join("memories.db");
    let out = Command::new("python3")
        .args([
            "-c",
            "import sqlite3, sys; db = sqlite3.connect(sys.argv[1]); \
             print(db.execute('SELECT content, importance, kind, tick_created, embedding_model FROM memories WHERE id = ?', (int(sys.argv[2]),)).fetchone())",
            path_str(&db),
            &added["id"].to_string(),
        ])
        .output()
        .expect("python3");
    let row = String::from_utf8_lossy(&out.stdout);
    assert!(
        row.contains(
            "'A grey cat haunts the old mill at night.', 9, 'observation', 29, 'hashing-v1'"
        ),
        "{row}"
    );
}

/// The same server on a run kept in PostgreSQL, found by its id alone (no run
/// directory): the world, the memories and the fact spread come from the database; a
/// question about an earlier tick needs the run's event log and says so.
#[test]
fn the_server_reads_a_postgres_run_by_id() {
    let Some(python) = client_python() else {
        return;
    };
    let Some(url) = crate::store_conformance::database_url() else {
        return;
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let text = std::fs::read_to_string(scenario("fish-market.toml")).expect("scenario");
    let file = dir.path().join("pg.toml");
    std::fs::write(
        &file,
        text.replace("store = \"sqlite\"", "store = \"postgres\""),
    )
    .expect("write");
    let run = dir.path().join("run");
    run_ok(&file, &run, &["--ticks", "60", "--database-url", &url]);
    let s = summary(&run);
    assert_eq!(s["store"]["backend"], "postgres");
    let run_id = s["store"]["run_id"].as_i64().expect("run id").to_string();
    let question = "Where can I buy fresh fish?";
    let calls = json!([
        { "tool": "list_npcs" },
        { "tool": "fact_spread", "arguments": { "fact": "fresh fish" } },
        { "tool": "search_memories", "arguments": { "npc": "Alice", "query": "fresh fish", "k": 2 } },
        { "tool": "npc_timeline", "arguments": { "npc": "Bob" } },
        { "tool": "ask_npc", "arguments": { "npc": "Alice", "question": question } },
        { "tool": "ask_npc", "arguments": { "npc": "Alice", "question": question, "at_tick": 10 } }
    ]);
    let args = [
        "mcp",
        "--database-url",
        url.as_str(),
        "--run",
        run_id.as_str(),
    ];
    let report = session(&python, dir.path(), &args, calls);
    let c = report["calls"].as_array().expect("calls");
    assert_eq!(
        c[0]["structured"]["run"],
        format!("PostgreSQL run {run_id}")
    );
    assert_eq!(c[0]["structured"]["ticks"], 60);
    assert_eq!(c[0]["structured"]["npcs"].as_array().map(Vec::len), Some(4));
    assert_eq!(c[1]["structured"]["knowers"], s["facts"][0]["knowers"]);
    assert_eq!(c[1]["structured"]["curve"], s["facts"][0]["curve"]);
    assert_eq!(
        c[2]["structured"]["memories"].as_array().map(Vec::len),
        Some(2)
    );
    let bob: usize = read_jsonl(&run.join("events.jsonl"))
        .iter()
        .filter(|e| e["type"] == "memory" && e["npc"] == "Bob")
        .count();
    assert_eq!(
        c[3]["structured"]["entries"].as_array().map(Vec::len),
        Some(bob)
    );
    assert!(
        c[4]["structured"]["answer"]
            .as_str()
            .is_some_and(|a| a.contains("fresh fish"))
    );
    assert!(error_of(&c[5]).contains("no event log"), "{}", c[5]);

    // Through the run directory the event log is there, so earlier ticks can be asked.
    let calls = json!([{ "tool": "ask_npc", "arguments": { "npc": "Alice", "question": question, "at_tick": 10 } }]);
    let report = session(
        &python,
        dir.path(),
        &["mcp", path_str(&run), "--database-url", &url],
        calls,
    );
    assert_eq!(report["calls"][0]["structured"]["tick"], 10);

    let missing = Command::new(bin())
        .args(["mcp", "--database-url", &url, "--run", "999999999"])
        .stdin(std::process::Stdio::null())
        .output()
        .expect("hearsay");
    assert_eq!(missing.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&missing.stderr).contains("no such run"));
    assert!(missing.stdout.is_empty(), "stdout is the protocol's alone");
}

/// A run directory is data for the MCP server too: a `run.json` that keeps an "earlier
/// scenario" calling a server `scenario.toml` does not show is refused, as an MCP error,
/// and nothing reaches that server.
#[test]
fn an_mcp_call_takes_no_server_from_run_json() {
    let Some(python) = client_python() else {
        return;
    };
    let mock = hearsay_tests::mock::MockServer::start(|_: &hearsay_tests::mock::ChatCall| {
        hearsay_tests::mock::Reply::answer(r#"{"action": "stay"}"#)
    });
    let recorder = hearsay_tests::mock::Recorder::start();
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("s.toml");
    std::fs::write(&file, crate::trust::scenario(&mock.url, &mock.url, None)).expect("write");
    let run = dir.path().join("run");
    run_ok(&file, &run, &[]);
    let manifest_path = run.join("run.json");
    let mut manifest: Value =
        serde_json::from_str(&std::fs::read_to_string(&manifest_path).expect("run.json"))
            .expect("json");
    let elsewhere = format!("http://{}/v1", recorder.addr);
    manifest["earlier_scenarios"] = json!([{
        "until_tick": 3,
        "text": crate::trust::scenario(&elsewhere, &elsewhere, None),
    }]);
    std::fs::write(&manifest_path, manifest.to_string()).expect("write");
    let calls = json!([
        { "tool": "ask_npc", "arguments": { "npc": "N0", "question": "Fish?", "at_tick": 1 } },
        { "tool": "search_memories", "arguments": { "npc": "N0", "query": "fish" } },
    ]);
    let report = session(&python, dir.path(), &["mcp", path_str(&run)], calls);
    let c = report["calls"].as_array().expect("calls");
    let refused = error_of(&c[0]);
    assert!(
        refused.contains("run.json") && refused.contains("which scenario.toml does not"),
        "{refused}"
    );
    assert!(c[1]["structured"]["memories"].is_array(), "{}", c[1]);
    // scenario.toml itself edited to send a key off the machine over http: refused too.
    manifest["earlier_scenarios"] = json!([]);
    std::fs::write(&manifest_path, manifest.to_string()).expect("write");
    let alias = format!("http://0.0.0.0:{}/v1", recorder.addr.port());
    std::fs::write(
        run.join("scenario.toml"),
        crate::trust::scenario(&alias, &alias, Some("HOME")),
    )
    .expect("write");
    let calls = json!([
        { "tool": "ask_npc", "arguments": { "npc": "N0", "question": "Fish?" } },
        { "tool": "search_memories", "arguments": { "npc": "N0", "query": "fish" } },
    ]);
    let report = session(&python, dir.path(), &["mcp", path_str(&run)], calls);
    for call in report["calls"].as_array().expect("calls") {
        let refused = error_of(call);
        assert!(
            refused.contains("plain http") && refused.contains("$HOME"),
            "{refused}"
        );
    }
    assert!(recorder.log().is_empty(), "{:?}", recorder.log());
}
