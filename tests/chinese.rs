//! The Chinese scenario spreads its fact, with memories phrased in Chinese.

use hearsay_tests::{of_type, read_jsonl, run_ok, scenario, summary};

#[test]
fn the_chinese_scenario_spreads_its_fact() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("run");
    let output = run_ok(&scenario("fish-market-zh.toml"), &out, &[]);
    assert!(String::from_utf8_lossy(&output.stdout).contains("新鲜的鱼"));

    let s = summary(&out);
    let fish = &s["facts"][0];
    assert_eq!(fish["name"], "新鲜的鱼");
    let taught: Vec<_> = fish["knowers"]
        .as_array()
        .expect("knowers")
        .iter()
        .filter(|k| !k["from"].is_null())
        .collect();
    assert!(
        taught.len() >= 2,
        "the fact spreads by word of mouth: {fish}"
    );

    let events = read_jsonl(&out.join("events.jsonl"));
    let memories = of_type(&events, "memory");
    let has = |prefix: &str| {
        memories
            .iter()
            .any(|m| m["content"].as_str().is_some_and(|c| c.starts_with(prefix)))
    };
    assert!(has("我对大家说：附近的市场在卖新鲜的鱼"));
    assert!(has("小明说：附近的市场在卖新鲜的鱼"));
    assert!(has("我决定移动到 ("));
    assert_eq!(s["memories"]["unembedded"], 0);
}
