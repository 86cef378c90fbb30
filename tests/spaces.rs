//! One vector space per run, end to end: a fork (or a resume) with another embedder
//! embeds every memory again before its first new tick recalls, recalls exactly what a run
//! embedded by the new model from the start recalls, keeps the old vectors, gets them back
//! without embedding when it returns to the old model, and replays exactly. A server that
//! changes the width of its vectors mid-run stops the run; `resume` then re-embeds.

use std::collections::BTreeMap;
use std::path::Path;

use hearsay_tests::mock::{ChatCall, MockOptions, MockServer, Reply};
use hearsay_tests::{fork_ok, hearsay, path_str, read_jsonl, root, run_ok, summary};

/// Decisions that depend on the NPC and the tick only, never on what was recalled: runs
/// with different embedders then make the same memories, and their recalls can be
/// compared one to one.
fn scripted(call: &ChatCall) -> Reply {
    let i: u64 = call.npc.trim_start_matches('N').parse().unwrap_or(0);
    let d = match (i + call.tick) % 3 {
        0 => {
            serde_json::json!({"action": "talk", "speech": format!("{} says the mill burned at {}", call.npc, call.tick), "x": 0, "y": 0})
        }
        1 => {
            serde_json::json!({"action": "move", "speech": "", "x": (i * 5 + call.tick) % 12, "y": call.tick % 8})
        }
        _ => serde_json::json!({"action": "stay", "speech": "", "x": 0, "y": 0}),
    };
    Reply::answer(d.to_string())
}

/// Eight NPCs, 16 ticks, a checkpoint every 4; recall by relevance alone (recency and
/// importance weigh nothing, nothing fades, nobody reflects), so what is recalled depends
/// on the vectors only; every NPC thinks (and recalls) every tick.
fn town(brain: &str, embedder: Option<&str>) -> String {
    let mut s = format!(
        "name = \"spaces\"\nseed = 5\nticks = 16\n\n[run]\ncheckpoint_every = 4\n\n\
         [world]\nwidth = 12\nheight = 8\nhearing_radius = 4\n\n\
         [[places]]\nname = \"mill\"\nat = [6, 4]\n\n\
         [brain]\nprovider = \"openai\"\nbase_url = \"{brain}\"\nmodel = \"mock\"\nmax_concurrency = 8\nretry_base_ms = 10\n\
         think = \"every_tick\"\n\n\
         [memory]\nvisibility = \"barrier\"\nrecall_k = 3\n\n\
         [memory.scoring]\nw_rel = 1.0\nw_rec = 0.0\nw_imp = 0.0\n\n\
         [memory.forget]\nthreshold = 0\n\n[memory.reflect]\nthreshold = 0\n\n"
    );
    if let Some(url) = embedder {
        s.push_str(&embedder_table(url));
    }
    for i in 0..8 {
        s.push_str(&format!(
            "[[npcs]]\nname = \"N{i}\"\nat = [{}, {}]\nmemories = [{{ content = \"the mill by the river grinds wheat\", importance = 5 }}, {{ content = \"N{i} keeps bees\", importance = 3 }}]\n\n",
            (i * 3) % 12,
            (i * 5) % 8
        ));
    }
    s
}

fn embedder_table(url: &str) -> String {
    format!(
        "[memory.embedder]\nprovider = \"openai\"\nbase_url = \"{url}\"\nmodel = \"mock-embed\"\nbatch_size = 64\n\n"
    )
}

/// What each NPC recalled at each tick (from `llm.jsonl`).
fn recalls(dir: &Path) -> BTreeMap<(u64, String), Vec<u64>> {
    read_jsonl(&dir.join("llm.jsonl"))
        .iter()
        .map(|c| {
            let ids = c["recalled"]
                .as_array()
                .expect("recalled")
                .iter()
                .map(|v| v.as_u64().expect("id"))
                .collect();
            (
                (
                    c["tick"].as_u64().expect("tick"),
                    c["npc"].as_str().expect("npc").to_owned(),
                ),
                ids,
            )
        })
        .collect()
}

fn fork(source: &Path, at: u64, out: &Path, sets: &[&str]) -> std::process::Output {
    fork_with(source, at, out, sets, &[])
}

fn fork_with(
    source: &Path,
    at: u64,
    out: &Path,
    sets: &[&str],
    extra: &[&str],
) -> std::process::Output {
    let mut args = extra.to_vec();
    for s in sets {
        args.push("--set");
        args.push(s);
    }
    fork_ok(source, at, out, &args)
}

fn models(dir: &Path) -> BTreeMap<String, (u64, u64)> {
    let s = summary(dir);
    s["memories"]["models"]
        .as_object()
        .expect("models")
        .iter()
        .map(|(m, v)| {
            (
                m.clone(),
                (
                    v["in_use"].as_u64().expect("in_use"),
                    v["kept"].as_u64().expect("kept"),
                ),
            )
        })
        .collect()
}

#[test]
fn a_fork_to_another_embedder_recalls_what_that_embedder_would_have() {
    let mock = MockServer::start(scripted);
    let dir = tempfile::tempdir().expect("tempdir");
    let hashing = dir.path().join("hashing.toml");
    std::fs::write(&hashing, town(&mock.url, None)).expect("write");
    let remote = dir.path().join("remote.toml");
    std::fs::write(&remote, town(&mock.url, Some(&mock.url))).expect("write");

    let a = dir.path().join("a");
    run_ok(&hashing, &a, &[]);
    let c = dir.path().join("c");
    run_ok(&remote, &c, &[]);
    let b = dir.path().join("b");
    let url = format!("memory.embedder.base_url={:?}", mock.url);
    let forked = fork(
        &a,
        8,
        &b,
        &[
            "memory.embedder.provider=\"openai\"",
            &url,
            "memory.embedder.model=\"mock-embed\"",
            "memory.embedder.batch_size=64",
        ],
    );
    let said = String::from_utf8_lossy(&forked.stderr);
    assert!(
        said.contains("vector space: mock-embed (384 dimensions)")
            && said.contains("\"hashing-v1\""),
        "the switch is announced: {said}"
    );

    // From the fork tick on, the fork recalls exactly what the run embedded by the new
    // model from the start recalls — and not what the hashing run recalls.
    let (ra, rb, rc) = (recalls(&a), recalls(&b), recalls(&c));
    let after = |r: &BTreeMap<(u64, String), Vec<u64>>| -> BTreeMap<(u64, String), Vec<u64>> {
        r.iter()
            .filter(|((t, _), _)| *t >= 8)
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    };
    assert_eq!(after(&rb).len(), 8 * 8);
    assert!(after(&rb).values().any(|ids| !ids.is_empty()));
    assert_eq!(after(&rb), after(&rc), "the fork recalls as the remote run");
    assert_ne!(
        after(&ra),
        after(&rc),
        "the two embedders recall differently (else this test proves nothing)"
    );
    // The same run from the fork on (the hash chain differs: it covers the ticks before).
    let events = |d: &Path| -> Vec<serde_json::Value> {
        read_jsonl(&d.join("events.jsonl"))
            .into_iter()
            .filter(|e| e["tick"].as_u64().is_some_and(|t| t >= 8) && e["type"] != "tick")
            .collect()
    };
    assert!(
        events(&b) == events(&c),
        "the fork makes the remote run's ticks"
    );

    // Every memory written before the fork was embedded again before tick 8 recalled;
    // the hashing vectors are kept.
    let s = summary(&b);
    let reembed = &s["embedder"]["reembed"];
    let set_aside = reembed["set_aside"]["hashing-v1"]
        .as_u64()
        .expect("set aside");
    assert!(set_aside > 16, "{reembed}");
    assert_eq!(reembed["reembedded"].as_u64(), Some(set_aside));
    assert_eq!(reembed["restored"].as_u64(), Some(0));
    assert_eq!(reembed["finished"].as_bool(), Some(true));
    assert!(reembed["ms"].as_f64().is_some_and(|ms| ms > 0.0));
    let total = s["memories"]["total"].as_u64().expect("total");
    assert_eq!(
        models(&b),
        BTreeMap::from([
            ("hashing-v1".to_owned(), (0, set_aside)),
            ("mock-embed".to_owned(), (total, 0)),
        ])
    );
    assert_eq!(
        models(&a),
        BTreeMap::from([("hashing-v1".to_owned(), (total, 0))])
    );
    assert!(summary(&a)["embedder"].get("reembed").is_none());
    let replay = hearsay(&root(), &["replay", path_str(&b)]);
    assert_eq!(
        String::from_utf8_lossy(&replay.stdout).trim(),
        "identical: 16 ticks"
    );

    // Back to hashing at tick 12: the kept vectors return; only what the fork wrote in
    // ticks 8 to 11 is embedded again, and the run is the hashing run's from tick 12 on.
    let back = dir.path().join("back");
    fork(&b, 12, &back, &["memory.embedder={provider=\"hashing\"}"]);
    let s = summary(&back);
    let reembed = &s["embedder"]["reembed"];
    assert_eq!(reembed["restored"].as_u64(), Some(set_aside));
    let made_8_to_12 = read_jsonl(&b.join("events.jsonl"))
        .iter()
        .filter(|e| {
            e["type"] == "memory" && (8..12).contains(&e["tick"].as_u64().unwrap_or(u64::MAX))
        })
        .count() as u64;
    assert_eq!(reembed["reembedded"].as_u64(), Some(made_8_to_12));
    let rback = recalls(&back);
    let from_12 = |r: &BTreeMap<(u64, String), Vec<u64>>| -> Vec<Vec<u64>> {
        r.iter()
            .filter(|((t, _), _)| *t >= 12)
            .map(|(_, v)| v.clone())
            .collect()
    };
    assert_eq!(
        from_12(&rback),
        from_12(&ra),
        "recall is the hashing run's again"
    );
    let replay = hearsay(&root(), &["replay", path_str(&back)]);
    assert_eq!(
        String::from_utf8_lossy(&replay.stdout).trim(),
        "identical: 16 ticks"
    );

    // Reading commands compare the query with the scenario's embedder's vectors only.
    let inspect = hearsay(
        &root(),
        &[
            "inspect",
            path_str(&b),
            "--npc",
            "N1",
            "--query",
            "the mill",
        ],
    );
    let text = String::from_utf8_lossy(&inspect.stdout);
    assert!(
        inspect.status.success()
            && text.contains("scored in the vector space of mock-embed (384 dimensions)"),
        "{text}{}",
        String::from_utf8_lossy(&inspect.stderr)
    );
    // A run directory whose scenario now names another embedder than its vectors' is
    // refused, never scored across models.
    let edited = dir.path().join("edited");
    std::fs::create_dir(&edited).expect("mkdir");
    for entry in std::fs::read_dir(&a).expect("run dir") {
        let entry = entry.expect("entry");
        std::fs::copy(entry.path(), edited.join(entry.file_name())).expect("copy");
    }
    std::fs::write(
        edited.join("scenario.toml"),
        town(&mock.url, Some(&mock.url)),
    )
    .expect("write");
    for args in [
        vec![
            "inspect",
            path_str(&edited),
            "--npc",
            "N1",
            "--query",
            "the mill",
        ],
        vec!["ask", path_str(&edited), "--npc", "N1", "what burned?"],
    ] {
        let refused = hearsay(&root(), &args);
        let err = String::from_utf8_lossy(&refused.stderr);
        assert_eq!(refused.status.code(), Some(2), "{args:?}: {err}");
        assert!(
            err.contains("by hashing-v1 (1536 dimensions)) than the scenario's embedder, mock-embed (384 dimensions)"),
            "{err}"
        );
    }
    // Nor does MCP add a memory of one model to a store of another.
    let mcp = hearsay(&root(), &["mcp", path_str(&edited), "--allow-writes"]);
    let err = String::from_utf8_lossy(&mcp.stderr);
    assert_eq!(mcp.status.code(), Some(2), "{err}");
    assert!(
        err.contains("add_memory: the run's memories are embedded by \"hashing-v1\""),
        "{err}"
    );
}

#[test]
fn a_server_that_changes_its_vectors_stops_the_run_and_resume_reembeds() {
    let dims = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(384));
    let mock = MockServer::start_with(
        MockOptions {
            embed_dims_now: Some(dims.clone()),
            embed_delay_ms: 30,
            ..MockOptions::default()
        },
        scripted,
    );
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("s.toml");
    let mut text = town(&mock.url, Some(&mock.url)).replace("ticks = 16", "ticks = 40");
    text = text.replace("batch_size = 64", "batch_size = 4");
    std::fs::write(&file, text).expect("write");
    let out = dir.path().join("run");
    let mut child = std::process::Command::new(hearsay_tests::bin())
        .args([
            "run",
            path_str(&file),
            "--out",
            path_str(&out),
            "--no-progress",
        ])
        .current_dir(root())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("hearsay starts");
    let started = std::time::Instant::now();
    while !hearsay_tests::log_text(out.join("events.jsonl"))
        .is_ok_and(|t| t.matches("\"type\":\"tick\"").count() >= 6)
    {
        assert!(started.elapsed().as_secs() < 120, "no progress");
        if let Some(status) = child.try_wait().expect("child") {
            let mut err = String::new();
            if let Some(mut e) = child.stderr.take() {
                let _ = std::io::Read::read_to_string(&mut e, &mut err);
            }
            panic!("the run ended ({status}) too soon: {err}");
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    // The server now serves another model under the same name.
    dims.store(256, std::sync::atomic::Ordering::SeqCst);
    let status = child.wait().expect("wait");
    let mut err = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().expect("stderr"), &mut err)
        .expect("stderr");
    assert_eq!(status.code(), Some(1), "the run stopped: {err}");
    assert!(
        err.contains("256 dimensions where its earlier vectors have 384"),
        "{err}"
    );
    assert!(!out.join("summary.json").exists());

    let resumed = hearsay(&root(), &["resume", path_str(&out), "--no-progress"]);
    let said = String::from_utf8_lossy(&resumed.stderr);
    assert!(resumed.status.success(), "{said}");
    assert!(
        said.contains("vector space: mock-embed (256 dimensions)"),
        "{said}"
    );
    let s = summary(&out);
    let reembed = &s["embedder"]["reembed"];
    assert!(
        reembed["set_aside"]["mock-embed"]
            .as_u64()
            .is_some_and(|n| n > 0),
        "{reembed}"
    );
    assert_eq!(reembed["finished"].as_bool(), Some(true));
    assert_eq!(s["memories"]["unembedded"].as_u64(), Some(0));
    let m = models(&out);
    assert_eq!(m.len(), 1, "one model, both widths under its name: {m:?}");
    let (in_use, kept) = m["mock-embed"];
    assert_eq!(in_use, s["memories"]["total"].as_u64().expect("total"));
    assert!(kept > 0);
}

/// The same on PostgreSQL, where many runs share the vector tables: the fork's store
/// holds one space, recalls as the remote run on SQLite does, and a fork back restores.
#[test]
fn on_postgres_a_fork_to_another_embedder_recalls_as_on_sqlite() {
    let Some(url) = crate::store_conformance::database_url() else {
        return;
    };
    let mock = MockServer::start(scripted);
    let dir = tempfile::tempdir().expect("tempdir");
    let pg = dir.path().join("pg.toml");
    std::fs::write(
        &pg,
        town(&mock.url, None).replace("[memory]\n", "[memory]\nstore = \"postgres\"\n"),
    )
    .expect("write");
    let remote = dir.path().join("remote.toml");
    std::fs::write(&remote, town(&mock.url, Some(&mock.url))).expect("write");
    let db = ["--database-url", url.as_str()];
    let a = dir.path().join("a");
    run_ok(&pg, &a, &db);
    let c = dir.path().join("c");
    run_ok(&remote, &c, &[]);
    let b = dir.path().join("b");
    let embedder = format!(
        "memory.embedder={{provider=\"openai\", base_url={:?}, model=\"mock-embed\", batch_size=64}}",
        mock.url
    );
    fork_with(&a, 8, &b, &[&embedder], &db);
    let after = |r: BTreeMap<(u64, String), Vec<u64>>| -> Vec<Vec<u64>> {
        r.into_iter()
            .filter(|((t, _), _)| *t >= 8)
            .map(|(_, v)| v)
            .collect()
    };
    assert_eq!(after(recalls(&b)), after(recalls(&c)));
    assert_ne!(after(recalls(&a)), after(recalls(&c)));
    let s = summary(&b);
    let set_aside = s["embedder"]["reembed"]["set_aside"]["hashing-v1"]
        .as_u64()
        .expect("set aside");
    let total = s["memories"]["total"].as_u64().expect("total");
    assert_eq!(
        models(&b),
        BTreeMap::from([
            ("hashing-v1".to_owned(), (0, set_aside)),
            ("mock-embed".to_owned(), (total, 0)),
        ])
    );
    let back = dir.path().join("back");
    fork_with(
        &b,
        12,
        &back,
        &["memory.embedder={provider=\"hashing\"}"],
        &db,
    );
    let s = summary(&back);
    assert_eq!(
        s["embedder"]["reembed"]["restored"].as_u64(),
        Some(set_aside)
    );
    assert_eq!(s["memories"]["unembedded"].as_u64(), Some(0));
    // The source run's vectors are untouched by its fork: still hashing, nothing left out.
    let inspect = hearsay(
        &root(),
        &[
            "inspect",
            path_str(&a),
            "--npc",
            "N1",
            "--query",
            "the mill",
            "--json",
            "--database-url",
            &url,
        ],
    );
    let report: serde_json::Value =
        serde_json::from_slice(&inspect.stdout).unwrap_or(serde_json::Value::Null);
    assert_eq!(
        report["space"],
        "hashing-v1 (1536 dimensions)",
        "{}",
        String::from_utf8_lossy(&inspect.stderr)
    );
    assert!(report.get("other_models").is_none(), "{report}");
}
