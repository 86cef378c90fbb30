//! The 200-NPC town runs and its rumours spread from their seeds.

use hearsay_tests::{run_ok, scenario, summary};

#[test]
fn rumours_spread_through_a_town_of_200() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("run");
    run_ok(&scenario("rumour-200.toml"), &out, &["--ticks", "40"]);
    let s = summary(&out);
    assert_eq!(s["npcs"], 200);
    let facts = s["facts"].as_array().expect("facts");
    assert_eq!(facts.len(), 4);
    let mayor = &facts[0];
    assert_eq!(mayor["name"], "mayor");
    let knowers = mayor["knowers"].as_array().expect("knowers").len();
    assert!(
        knowers >= 10,
        "the mayor rumour reaches at least 10 townsfolk in 40 ticks, got {knowers}"
    );
    assert_eq!(s["memories"]["unembedded"], 0);
}
