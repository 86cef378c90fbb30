//! report.html: written by every run, self-contained, opened in a real headless Chromium
//! with no console errors; its curves, read back from the drawn SVG geometry, equal
//! summary.json's; the transmission tree has a dot per knower and a line per telling;
//! speech that holds markup stays text.

use std::path::Path;

use hearsay_tests::browser::{Browser, chromium};
use hearsay_tests::{hearsay, path_str, root, run_ok, scenario, summary};
use serde_json::Value;

/// Chromium, or `None` after saying why the test cannot run (a failure under CI).
fn browser_or_skip() -> Option<std::path::PathBuf> {
    match chromium() {
        Some(b) => Some(b),
        None if std::env::var("CI").as_deref() == Ok("true") => {
            panic!(
                "no Chromium, and under CI the report test must run (scripts/test.sh installs Debian's chromium)"
            )
        }
        None => {
            eprintln!("note: no Chromium (apt-get install chromium); the browser test did not run");
            None
        }
    }
}

/// fish-market with a rumour that carries markup and a script.
fn hostile_market(dir: &Path) -> std::path::PathBuf {
    let text = std::fs::read_to_string(scenario("fish-market.toml")).expect("scenario");
    let text = text.replace(
        "The market nearby is selling fresh fish.",
        "The market nearby is selling fresh fish <b>cheap</b> <script>window.__pwned = 1</script>.",
    );
    let path = dir.join("hostile.toml");
    std::fs::write(&path, text).expect("write");
    path
}

const PROBE: &str = r##"(() => {
  const out = {
    ready: document.documentElement.dataset.ready || null,
    scripts: document.scripts.length,
    pwned: typeof window.__pwned,
    bold: document.querySelectorAll("b").length,
    external: Array.from(document.querySelectorAll("[src],link[href]")).length,
    curves: [], trees: [],
    npcRows: document.querySelectorAll("#timelines tbody tr").length,
  };
  for (const svg of document.querySelectorAll("svg.curve")) {
    const d = svg.dataset;
    const line = svg.querySelector("polyline.line");
    const box = line.getBBox();
    out.curves.push({ fact: d.fact, t0: +d.t0, t1: +d.t1, x0: +d.x0, x1: +d.x1,
      n0: +d.n0, n1: +d.n1, y0: +d.y0, y1: +d.y1, width: box.width,
      points: Array.from(line.points).map(p => [p.x, p.y]) });
  }
  for (const svg of document.querySelectorAll("svg.tree")) {
    out.trees.push({ fact: svg.dataset.fact, dots: svg.querySelectorAll("circle").length,
      edges: svg.querySelectorAll("path.edge").length });
  }
  const filter = document.getElementById("npc-filter");
  filter.value = "ca";
  filter.dispatchEvent(new Event("input"));
  out.filtered = Array.from(document.querySelectorAll("#timelines tbody tr"))
    .filter(r => !r.hidden).map(r => r.dataset.npc);
  return JSON.stringify(out);
})()"##;

/// The (tick, knowers) steps a drawn curve goes through, read back through its scale.
fn steps(curve: &Value) -> Vec<(u64, u64)> {
    let f = |k: &str| curve[k].as_f64().expect(k);
    let (t0, t1, x0, x1) = (f("t0"), f("t1"), f("x0"), f("x1"));
    let (n0, n1, y0, y1) = (f("n0"), f("n1"), f("y0"), f("y1"));
    let points: Vec<(f64, f64)> = curve["points"]
        .as_array()
        .expect("points")
        .iter()
        .map(|p| {
            let x = p[0].as_f64().expect("x");
            let y = p[1].as_f64().expect("y");
            (
                t0 + (x - x0) / (x1 - x0) * (t1 - t0),
                n0 + (y0 - y) / (y0 - y1) * (n1 - n0),
            )
        })
        .collect();
    points
        .windows(2)
        .filter(|w| (w[0].0 - w[1].0).abs() < 0.01 && (w[1].1 - w[0].1) > 0.5)
        .map(|w| (w[1].0.round() as u64, w[1].1.round() as u64))
        .collect()
}

#[test]
fn the_report_opens_in_chromium_and_draws_what_the_summary_says() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("run");
    run_ok(&hostile_market(dir.path()), &out, &["--ticks", "150"]);
    let report = out.join("report.html");
    let html = std::fs::read_to_string(&report).expect("run writes report.html");
    assert!(
        html.contains("&lt;script&gt;window.__pwned"),
        "markup is escaped"
    );
    // `hearsay report` writes the same page again, from the run directory alone.
    let again = hearsay(
        &root(),
        &[
            "report",
            path_str(&out),
            "--out",
            path_str(&dir.path().join("again.html")),
        ],
    );
    assert!(
        again.status.success(),
        "{}",
        String::from_utf8_lossy(&again.stderr)
    );
    assert!(String::from_utf8_lossy(&again.stdout).starts_with("wrote "));

    let Some(bin) = browser_or_skip() else {
        return;
    };
    let mut browser = Browser::launch(&bin);
    browser.open(&report);
    let probe: Value =
        serde_json::from_str(browser.eval(PROBE).as_str().expect("a JSON string")).expect("json");
    assert_eq!(browser.errors(), Vec::<String>::new(), "no console errors");
    assert_eq!(probe["ready"], "yes", "the page's script ran to its end");
    assert_eq!(probe["scripts"], 1, "only the report's own script");
    assert_eq!(probe["pwned"], "undefined", "speech never runs as script");
    assert_eq!(
        probe["bold"],
        tags(&html, "<b>"),
        "speech never becomes markup"
    );
    assert_eq!(probe["external"], 0, "nothing is fetched");
    assert_eq!(probe["npcRows"], 4);
    assert_eq!(probe["filtered"], serde_json::json!(["Carol"]));

    let s = summary(&out);
    let facts = s["facts"].as_array().expect("facts");
    let curves = probe["curves"].as_array().expect("curves");
    assert_eq!(curves.len(), facts.len());
    for (fact, curve) in facts.iter().zip(curves) {
        assert_eq!(curve["fact"], fact["name"]);
        assert!(curve["width"].as_f64() > Some(100.0), "the curve is drawn");
        let expected: Vec<(u64, u64)> = fact["curve"]
            .as_array()
            .expect("curve")
            .iter()
            .map(|p| (p[0].as_u64().expect("tick"), p[1].as_u64().expect("n")))
            .collect();
        assert_eq!(steps(curve), expected, "{}", fact["name"]);
    }
    for (fact, tree) in facts.iter().zip(probe["trees"].as_array().expect("trees")) {
        let knowers = fact["knowers"].as_array().expect("knowers");
        assert_eq!(tree["dots"].as_u64(), Some(knowers.len() as u64));
        let told = knowers.iter().filter(|k| !k["from"].is_null()).count();
        assert_eq!(
            tree["edges"].as_u64(),
            Some(told as u64),
            "a line per telling"
        );
    }
}

/// How many times the tag `needle` occurs in the page source (escaped speech never does).
fn tags(html: &str, needle: &str) -> usize {
    html.matches(needle).count()
}
