//! Model-server replicas (`base_url` as a list): requests spread over the replicas by
//! fewest in flight, within `max_concurrency` each; a replica killed mid-run has its share
//! taken by the others and nothing is lost (every NPC-tick decided by the model, the same
//! events as a run on one healthy server); a replica that is down before tick 0 stops the
//! run, named; the same for the embedder; `summary.json` counts each replica's calls and
//! failures.

use std::path::{Path, PathBuf};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use hearsay_tests::mock::{ChatCall, MockOptions, MockServer, Reply};
use hearsay_tests::{hearsay, of_type, path_str, read_jsonl, root, run_ok, summary};
use serde_json::Value;

/// What N<i> does at a tick: the same whichever replica is asked.
fn decide(call: &ChatCall) -> Reply {
    if call.reflect {
        return Reply::answer(r#"{"insights": []}"#);
    }
    let i: u64 = call.npc.trim_start_matches('N').parse().unwrap_or(0);
    let answer = match (i + call.tick) % 3 {
        0 => {
            serde_json::json!({"action": "talk", "speech": format!("{} heard fresh fish at turn {}", call.npc, call.tick), "x": 0, "y": 0})
        }
        1 => {
            serde_json::json!({"action": "move", "speech": "", "x": (i * 3 + call.tick) % 20, "y": i % 10})
        }
        _ => serde_json::json!({"action": "stay", "speech": "", "x": 0, "y": 0}),
    };
    Reply::slow(answer.to_string(), 15)
}

/// A TOML list of `urls`.
fn list(urls: &[&str]) -> String {
    format!(
        "[{}]",
        urls.iter()
            .map(|u| format!("\"{u}\""))
            .collect::<Vec<_>>()
            .join(", ")
    )
}

/// `npcs` NPCs for `ticks` ticks on a 20 × 10 map; `brain` and `embedder` are the bodies
/// of `[brain]` and `[memory.embedder]`.
fn town(dir: &Path, name: &str, npcs: usize, ticks: u64, brain: &str, memory: &str) -> PathBuf {
    let mut s = format!(
        "name = \"replicas\"\nseed = 11\nticks = {ticks}\n\n[world]\nwidth = 20\nheight = 10\nhearing_radius = 4\n\n\
         [[places]]\nname = \"market\"\nat = [10, 5]\n\n[brain]\n{brain}\n\n[memory]\n{memory}\n\n"
    );
    for i in 0..npcs {
        s.push_str(&format!(
            "[[npcs]]\nname = \"N{i}\"\npersona = \"Person number {i}.\"\nat = [{}, {}]\n\
             memories = [{{ content = \"The market sells fresh fish today.\", importance = 7 }}]\n\n",
            (i * 3) % 20,
            (i * 7) % 10
        ));
    }
    let file = dir.join(name);
    std::fs::write(&file, s).expect("write scenario");
    file
}

fn llm_brain(base_url: &str, extra: &str) -> String {
    format!(
        "provider = \"openai\"\nbase_url = {base_url}\nmodel = \"mock\"\nthink = \"every_tick\"\n\
         retry_base_ms = 20\nmax_retries = 4\ntimeout_ms = 10000\n{extra}"
    )
}

/// A URL nothing listens on (a port bound, then let go).
fn dead_url() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    format!("http://{}/v1", listener.local_addr().expect("addr"))
}

/// Stops `server` (its listener shut, its connections closed) once `ready` says so, or
/// after a minute: the requests it had served when it was gone.
fn kill_when(
    mut server: MockServer,
    ready: impl Fn(&MockServer) -> bool + Send + 'static,
) -> JoinHandle<usize> {
    std::thread::spawn(move || {
        let deadline = Instant::now() + Duration::from_secs(60);
        while !ready(&server) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
        server.stop();
        server.log().len() + server.embedding_counts().0
    })
}

fn said(o: &std::process::Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

#[test]
fn a_replica_killed_mid_run_loses_nothing_and_the_others_carry_its_share() {
    const NPCS: usize = 6;
    const TICKS: u64 = 16;
    let a = MockServer::start(decide);
    let b = MockServer::start(decide);
    let c = MockServer::start(decide);
    let (a_url, b_url, c_url) = (a.url.clone(), b.url.clone(), c.url.clone());
    let dir = tempfile::tempdir().expect("tempdir");
    let brain = llm_brain(&list(&[&a_url, &b_url, &c_url]), "max_concurrency = 2");
    let file = town(dir.path(), "three.toml", NPCS, TICKS, &brain, "");
    // B dies a quarter of the way in.
    let killer = kill_when(b, |b| b.log().len() >= 8);
    let out = dir.path().join("three");
    let o = run_ok(&file, &out, &[]);
    let b_served = killer.join().expect("the killer");
    assert!(
        said(&o).contains(&format!(
            "network: [brain] model \"mock\" at {b_url} with no key"
        )),
        "every replica is announced: {}",
        said(&o)
    );

    // Nothing lost: every NPC-tick decided by the model, none by the fallback.
    let calls = read_jsonl(&out.join("llm.jsonl"));
    assert_eq!(calls.len(), NPCS * TICKS as usize);
    assert!(
        calls.iter().all(|c| c["outcome"] == "ok"),
        "every call answered: {:?}",
        calls.iter().find(|c| c["outcome"] != "ok")
    );
    let s = summary(&out);
    let brain = &s["brains"]["default"];
    assert_eq!(
        (brain["failures"].as_u64(), brain["fallbacks"].as_u64()),
        (Some(0), Some(0)),
        "{brain}"
    );
    let replicas = brain["replicas"].as_array().expect("per-replica figures");
    assert_eq!(replicas.len(), 3, "{brain}");
    let calls_of = |r: &Value| r["calls"].as_u64().expect("calls");
    assert_eq!(replicas[1]["url"], b_url.as_str());
    assert!(
        replicas[1]["failures"].as_u64() >= Some(1),
        "the dead replica's failures are counted: {}",
        replicas[1]
    );
    assert_eq!(
        calls_of(&replicas[1]) - replicas[1]["failures"].as_u64().unwrap_or(0),
        b_served as u64,
        "its answered calls are the ones it served before it died"
    );
    // The other two carried the load: every answer they gave is counted, none failed.
    for (r, mock) in [(&replicas[0], &a), (&replicas[2], &c)] {
        assert_eq!(r["failures"], 0, "{r}");
        assert_eq!(calls_of(r), mock.log().len() as u64, "{r}");
        assert!(
            r["latency_ms_mean"].as_f64() >= Some(10.0),
            "the mock takes 15 ms: {r}"
        );
        assert!(
            r["latency_ms_max"].as_f64() >= r["latency_ms_p95"].as_f64(),
            "{r}"
        );
    }
    assert_eq!(
        a.log().len() + c.log().len() + b_served,
        NPCS * TICKS as usize,
        "each decision answered once, by one replica"
    );
    assert!(
        a.log().len() + c.log().len() > NPCS * TICKS as usize / 2,
        "after B died, A and C took everything"
    );
    assert!(
        replicas[0]["retries"].as_u64().unwrap_or(0) + replicas[2]["retries"].as_u64().unwrap_or(0)
            >= 1,
        "B's failed attempts were retried on the others"
    );

    // Which replica answered changes nothing: the same events as on one healthy server.
    let one = MockServer::start(decide);
    let single = town(
        dir.path(),
        "one.toml",
        NPCS,
        TICKS,
        &llm_brain(&format!("\"{}\"", one.url), "max_concurrency = 2"),
        "",
    );
    let out_one = dir.path().join("one");
    run_ok(&single, &out_one, &[]);
    let events = hearsay_tests::log_bytes(out.join("events.jsonl")).expect("events");
    let events_one = hearsay_tests::log_bytes(out_one.join("events.jsonl")).expect("events");
    assert!(
        events == events_one,
        "a replica's death changed the run's events"
    );
    let s_one = summary(&out_one);
    let one_replica = s_one["brains"]["default"]["replicas"]
        .as_array()
        .expect("a single server is one replica");
    assert_eq!(one_replica.len(), 1);
    assert_eq!(calls_of(&one_replica[0]), (NPCS * TICKS as usize) as u64);
}

#[test]
fn requests_spread_over_replicas_by_fewest_in_flight_within_max_concurrency_each() {
    let slow = |call: &ChatCall| {
        Reply::slow(
            if call.reflect {
                r#"{"insights": []}"#.to_owned()
            } else {
                r#"{"action": "stay", "speech": "", "x": 0, "y": 0}"#.to_owned()
            },
            80,
        )
    };
    let mocks = [
        MockServer::start(slow),
        MockServer::start(slow),
        MockServer::start(slow),
    ];
    let urls: Vec<&str> = mocks.iter().map(|m| m.url.as_str()).collect();
    let dir = tempfile::tempdir().expect("tempdir");
    let file = town(
        dir.path(),
        "spread.toml",
        18,
        3,
        &llm_brain(&list(&urls), "max_concurrency = 2"),
        "",
    );
    let out = dir.path().join("spread");
    let started = Instant::now();
    run_ok(&file, &out, &[]);
    let took = started.elapsed();
    for (i, m) in mocks.iter().enumerate() {
        assert!(
            m.max_in_flight() <= 2,
            "replica {i}: {} in flight at once, more than max_concurrency",
            m.max_in_flight()
        );
        assert!(
            m.log().len() >= 9,
            "replica {i} got {} of 54 calls: the share of the fewest in flight is a third",
            m.log().len()
        );
    }
    assert_eq!(
        mocks.iter().map(|m| m.max_in_flight()).max(),
        Some(2),
        "the bound is reached"
    );
    // 18 NPCs over 3 × 2 slots: three rounds of 80 ms a tick, at the least.
    assert!(took >= Duration::from_millis(3 * 3 * 80), "{took:?}");
    let replicas = summary(&out)["brains"]["default"]["replicas"].clone();
    let counted: Vec<u64> = replicas
        .as_array()
        .expect("replicas")
        .iter()
        .map(|r| r["calls"].as_u64().expect("calls"))
        .collect();
    let served: Vec<u64> = mocks.iter().map(|m| m.log().len() as u64).collect();
    assert_eq!(
        counted, served,
        "summary.json counts what each replica served"
    );
}

#[test]
fn a_replica_down_before_tick_0_stops_the_run_naming_it() {
    let live = MockServer::start(decide);
    let dead = dead_url();
    let dir = tempfile::tempdir().expect("tempdir");
    // A brain replica that does not answer at all.
    let file = town(
        dir.path(),
        "dead-brain.toml",
        2,
        2,
        &llm_brain(&list(&[&live.url, &dead]), ""),
        "",
    );
    let out = dir.path().join("dead-brain");
    let o = hearsay(&root(), &["run", path_str(&file), "--out", path_str(&out)]);
    assert_eq!(o.status.code(), Some(2), "{}", said(&o));
    assert!(said(&o).contains(&dead), "names the replica: {}", said(&o));
    assert!(said(&o).contains("[brain]"), "{}", said(&o));
    assert!(!out.exists(), "nothing was written");

    // An embedder replica that does not answer, and one that answers but cannot embed.
    let down = MockServer::start_with(
        MockOptions {
            embed_down: std::sync::Arc::new(std::sync::atomic::AtomicBool::new(true)),
            ..MockOptions::default()
        },
        decide,
    );
    for (name, bad, says) in [
        ("dead-embedder", dead.clone(), dead.clone()),
        (
            "failing-embedder",
            down.url.clone(),
            format!("{} (replica 2 of 2)", down.url),
        ),
    ] {
        let memory = format!(
            "[memory.embedder]\nprovider = \"openai\"\nbase_url = {}\nmodel = \"mock-embed\"\nmax_retries = 1\nretry_base_ms = 5",
            list(&[&live.url, &bad])
        );
        let file = town(
            dir.path(),
            &format!("{name}.toml"),
            2,
            2,
            "provider = \"heuristic\"",
            &memory,
        );
        let out = dir.path().join(name);
        let o = hearsay(&root(), &["run", path_str(&file), "--out", path_str(&out)]);
        assert_eq!(o.status.code(), Some(2), "{name}: {}", said(&o));
        assert!(
            said(&o).contains("[memory.embedder]"),
            "{name}: {}",
            said(&o)
        );
        assert!(said(&o).contains(&says), "{name}: names it: {}", said(&o));
        assert!(!out.exists(), "{name}: nothing was written");
    }
    assert!(live.log().is_empty(), "no run call was made");
}

#[test]
fn an_embedder_replica_that_dies_mid_run_is_replaced_by_the_other() {
    let a = MockServer::start_with(
        MockOptions {
            embed_delay_ms: 5,
            ..MockOptions::default()
        },
        decide,
    );
    let b = MockServer::start_with(
        MockOptions {
            embed_delay_ms: 5,
            ..MockOptions::default()
        },
        decide,
    );
    let b_url = b.url.clone();
    let memory = |urls: &str| {
        format!(
            "visibility = \"barrier\"\n\n[memory.embedder]\nprovider = \"openai\"\nbase_url = {urls}\nmodel = \"mock-embed\"\n\
             batch_size = 4\nmax_concurrency = 1\nretry_base_ms = 5\nmax_retries = 4"
        )
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let file = town(
        dir.path(),
        "embed.toml",
        8,
        20,
        "provider = \"heuristic\"",
        &memory(&list(&[&a.url, &b_url])),
    );
    let killer = kill_when(b, |b| b.embedding_counts().0 >= 6);
    let out = dir.path().join("embed");
    run_ok(&file, &out, &[]);
    let b_served = killer.join().expect("the killer");
    let s = summary(&out);
    assert_eq!(s["memories"]["unembedded"], 0, "{}", s["memories"]);
    assert_eq!(s["degraded"]["embed_retries"], 0, "{}", s["degraded"]);
    let replicas = s["embedder"]["replicas"].as_array().expect("replicas");
    assert_eq!(replicas.len(), 2);
    assert_eq!(replicas[1]["url"], b_url.as_str());
    assert!(
        replicas[1]["failures"].as_u64() >= Some(1),
        "the dead replica's failures are counted: {}",
        replicas[1]
    );
    assert!(
        a.embedding_counts().0 > b_served,
        "A took B's share: {} against B's {b_served}",
        a.embedding_counts().0
    );
    assert_eq!(replicas[0]["failures"], 0);
    assert!(!of_type(&read_jsonl(&out.join("events.jsonl")), "tick").is_empty());

    // The same events as with one embedder that never failed.
    let one = town(
        dir.path(),
        "embed-one.toml",
        8,
        20,
        "provider = \"heuristic\"",
        &memory(&format!("\"{}\"", a.url)),
    );
    let out_one = dir.path().join("embed-one");
    run_ok(&one, &out_one, &[]);
    assert!(
        hearsay_tests::log_bytes(out.join("events.jsonl")).expect("events")
            == hearsay_tests::log_bytes(out_one.join("events.jsonl")).expect("events"),
        "the embedder replica's death changed the run's events"
    );
}
