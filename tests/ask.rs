//! `hearsay ask`: an NPC answers from its memories as they were at a tick — what it had
//! heard by then and from whom, or that it does not know — in its own language, and the
//! run directory is left exactly as it was.

use std::collections::BTreeMap;
use std::path::Path;

use hearsay_tests::{hearsay, path_str, root, run_ok, scenario};

/// Every file of a run directory and its bytes.
fn files(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    std::fs::read_dir(dir)
        .expect("run dir")
        .map(|e| {
            let e = e.expect("entry");
            (
                e.file_name().to_string_lossy().into_owned(),
                std::fs::read(e.path()).expect("read"),
            )
        })
        .collect()
}

fn ask(dir: &Path, args: &[&str]) -> (Option<i32>, String, String) {
    let mut all = vec!["ask", path_str(dir)];
    all.extend_from_slice(args);
    let out = hearsay(&root(), &all);
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn an_npc_answers_from_what_it_knew_then_and_nothing_changes() {
    let dir = tempfile::tempdir().expect("tempdir");
    let run = dir.path().join("run");
    run_ok(&scenario("fish-market.toml"), &run, &["--ticks", "80"]);
    let before = files(&run);
    let question = "Where can I buy fresh fish?";

    let (code, out, err) = ask(&run, &["--npc", "Alice", "--at-tick", "60", question]);
    assert_eq!(code, Some(0), "{err}");
    assert!(out.starts_with("Alice (tick 60, heuristic brain \"default\"): From what I remember: The market nearby is selling fresh fish ("), "{out}");
    assert!(out.contains("told me, at tick"), "{out}");

    let (_, json, _) = ask(
        &run,
        &["--npc", "Alice", "--at-tick", "60", "--json", question],
    );
    let answer: serde_json::Value = serde_json::from_str(&json).expect("json");
    let recalled = answer["recalled"].as_array().expect("recalled");
    assert!(!recalled.is_empty() && recalled.len() <= 5);
    assert!(
        recalled.iter().all(|m| m["tick"].as_u64() < Some(60)),
        "only what it knew by then"
    );
    assert!(recalled[0]["relevance"].as_f64() > Some(0.0));
    assert!(
        recalled[0]["content"]
            .as_str()
            .is_some_and(|c| c.contains("fresh fish"))
    );

    // Carol hears it only at tick 54 (see README): before that she does not know.
    let (_, early, _) = ask(&run, &["--npc", "Carol", "--at-tick", "10", question]);
    assert!(
        early.contains("I don't know anything about that."),
        "{early}"
    );
    let (_, bob, _) = ask(&run, &["--npc", "Bob", "--at-tick", "0", question]);
    assert!(bob.contains("I have known it all along"), "{bob}");

    let (code, _, err) = ask(&run, &["--npc", "Zed", question]);
    assert_eq!(code, Some(2));
    assert!(
        err.contains("no such NPC") && err.contains("Bob, Alice, Carol, Dave"),
        "{err}"
    );
    let (code, _, err) = ask(&run, &["--npc", "Bob", "--at-tick", "500", question]);
    assert_eq!(code, Some(2));
    assert!(err.contains("--at-tick 500"), "{err}");
    let (code, _, _) = ask(&run, &["--npc", "Bob", "  "]);
    assert_eq!(code, Some(2), "an empty question");

    assert!(
        files(&run) == before,
        "asking changes nothing in the run directory"
    );
}

#[test]
fn a_chinese_npc_answers_in_chinese() {
    let dir = tempfile::tempdir().expect("tempdir");
    let run = dir.path().join("run");
    run_ok(&scenario("fish-market-zh.toml"), &run, &["--ticks", "60"]);
    let names = std::fs::read_to_string(run.join("scenario.toml")).expect("scenario");
    let second = names
        .split("[[npcs]]")
        .nth(2)
        .and_then(|t| t.split("name = \"").nth(1))
        .and_then(|t| t.split('"').next())
        .expect("a second NPC")
        .to_owned();
    let (code, out, err) = ask(&run, &["--npc", &second, "市场在卖什么？"]);
    assert_eq!(code, Some(0), "{err}");
    assert!(
        out.contains("据我所知") || out.contains("这件事我一点也不知道"),
        "{out}"
    );
}
