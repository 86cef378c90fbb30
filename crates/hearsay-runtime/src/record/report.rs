//! `report.html`: one self-contained page per run — inline SVG, CSS and script, nothing
//! fetched — with a spread curve per fact (and its logistic SI fit, dashed, with β ± SE
//! and R² in the caption — see [`crate::fit`]), the transmission tree (who told whom, at
//! which tick), the knowers with no source (chains of tellers that do not end at a seed
//! memory or a scenario event), a timeline per NPC, expectations, degradations and what
//! each brain cost.
//!
//! The page is drawn from the run's story (`events.jsonl`) and `summary.json`; it never
//! reads the store. Every text from the run is escaped (NPC speech may hold anything).
//! Geometry is plain numbers in the SVG, with each plot's scale on its `data-*`
//! attributes, so a test can read a curve back and compare it with `summary.json`.
//!
//! Over 600 lines because the page is drawn here whole — the spread curves, the
//! transmission trees, the timelines — in SVG arithmetic that must match `summary.json`
//! number for number; the markup itself lives in `assets/report/`.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::Instant;

use minijinja::Environment;
use serde::Serialize;

use crate::RunError;
use crate::expect::{Judged, Verdict};
use crate::fit::SpreadFit;
use crate::logs::RunManifest;
use crate::rundir::SCENARIO_FILE;
use crate::scenario::{self, Scenario};
use crate::story::{How, Root, Story};
use crate::summary::Summary;

/// The page's file name in a run directory.
pub use crate::rundir::REPORT_FILE;

/// What every page hearsay writes carries near its top; `--out` overwrites only a file
/// that does.
const GENERATOR_MARK: &str = "<meta name=\"generator\" content=\"hearsay\">";

const TEMPLATE: &str = include_str!("../../../../assets/report/report.html");
const CSS: &str = include_str!("../../../../assets/report/report.css");
const SCRIPT: &str = include_str!("../../../../assets/report/report.js");

/// Colours of the facts, in order (then again).
const PALETTE: [&str; 8] = [
    "#1b6ca8", "#c0392b", "#2e8b57", "#8e44ad", "#d35400", "#16a085", "#7f8c8d", "#b7950b",
];

/// Escapes text for HTML and SVG.
pub fn esc(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// A linear scale from data to pixels.
#[derive(Clone, Copy, Debug)]
struct Scale {
    d0: f64,
    d1: f64,
    p0: f64,
    p1: f64,
}

impl Scale {
    fn at(self, v: f64) -> f64 {
        let span = (self.d1 - self.d0).max(1e-9);
        self.p0 + (v - self.d0) / span * (self.p1 - self.p0)
    }
}

/// Round numbers for an axis from 0 to `max`: about `n` of them.
fn axis_ticks(max: u64, n: u64) -> Vec<u64> {
    if max == 0 {
        return vec![0];
    }
    let raw = (max as f64 / n.max(1) as f64).max(1.0);
    let magnitude = 10f64.powi(raw.log10().floor() as i32);
    let step = [1.0, 2.0, 5.0, 10.0]
        .iter()
        .map(|m| m * magnitude)
        .find(|s| *s >= raw)
        .unwrap_or(10.0 * magnitude)
        .max(1.0) as u64;
    (0..=max / step).map(|i| i * step).collect()
}

const W: f64 = 640.0;
const LEFT: f64 = 52.0;
const RIGHT: f64 = 16.0;

/// The spread curve of one fact: a step line of knowers over ticks, and the fitted
/// logistic over the ticks it was fitted to (dashed, `class="fit"`), if there is a fit.
fn curve_svg(
    name: &str,
    curve: &[(u64, u32)],
    last_tick: u64,
    npcs: usize,
    half: Option<u64>,
    fit: Option<&SpreadFit>,
) -> String {
    let (h, top, bottom) = (220.0, 14.0, 34.0);
    let x = Scale {
        d0: 0.0,
        d1: last_tick.max(1) as f64,
        p0: LEFT,
        p1: W - RIGHT,
    };
    let y = Scale {
        d0: 0.0,
        d1: npcs.max(1) as f64,
        p0: h - bottom,
        p1: top,
    };
    let mut s = String::new();
    let _ = write!(
        s,
        r#"<svg class="curve" role="img" viewBox="0 0 {W} {h}" data-fact="{}" data-t0="0" data-t1="{}" data-x0="{:.2}" data-x1="{:.2}" data-n0="0" data-n1="{}" data-y0="{:.2}" data-y1="{:.2}">"#,
        esc(name),
        last_tick.max(1),
        x.p0,
        x.p1,
        npcs.max(1),
        y.p0,
        y.p1
    );
    let _ = write!(s, "<title>{} — knowers by tick</title>", esc(name));
    for t in axis_ticks(last_tick, 8) {
        let px = x.at(t as f64);
        let _ = write!(
            s,
            r#"<line class="grid" x1="{px:.2}" y1="{:.2}" x2="{px:.2}" y2="{:.2}"/><text class="label" x="{px:.2}" y="{:.2}" text-anchor="middle">{t}</text>"#,
            y.p1,
            y.p0,
            y.p0 + 16.0
        );
    }
    for n in axis_ticks(npcs as u64, 4) {
        let py = y.at(n as f64);
        let _ = write!(
            s,
            r#"<line class="grid" x1="{:.2}" y1="{py:.2}" x2="{:.2}" y2="{py:.2}"/><text class="label" x="{:.2}" y="{:.2}" text-anchor="end">{n}</text>"#,
            x.p0,
            x.p1,
            x.p0 - 6.0,
            py + 4.0
        );
    }
    let _ = write!(
        s,
        r#"<text class="label" x="{:.2}" y="{:.2}" text-anchor="middle">tick</text>"#,
        (x.p0 + x.p1) / 2.0,
        h - 2.0
    );
    if let Some(t) = half {
        let px = x.at(t as f64);
        let _ = write!(
            s,
            r#"<line class="half" x1="{px:.2}" y1="{:.2}" x2="{px:.2}" y2="{:.2}"/><text class="label half-label" x="{:.2}" y="{:.2}">half by tick {t}</text>"#,
            y.p1,
            y.p0,
            px + 4.0,
            y.p1 + 10.0
        );
    }
    // The step line: flat at the old count up to each change, then up.
    let mut points = vec![(x.at(0.0), y.at(0.0))];
    let mut count = 0u32;
    for &(t, n) in curve {
        points.push((x.at(t as f64), y.at(f64::from(count))));
        points.push((x.at(t as f64), y.at(f64::from(n))));
        count = n;
    }
    points.push((x.at(last_tick.max(1) as f64), y.at(f64::from(count))));
    let pts: Vec<String> = points
        .iter()
        .map(|(a, b)| format!("{a:.2},{b:.2}"))
        .collect();
    let _ = write!(s, r#"<polyline class="line" points="{}"/>"#, pts.join(" "));
    if let (Some(f), Some(&(from, _))) = (fit, curve.first()) {
        let to = last_tick.max(from);
        // One point per tick, at most 200 of them.
        let step = ((to - from) / 200).max(1);
        let mut ticks: Vec<u64> = (from..=to).step_by(step as usize).collect();
        if ticks.last() != Some(&to) {
            ticks.push(to);
        }
        let pts: Vec<String> = ticks
            .iter()
            .map(|&t| {
                let n = crate::fit::logistic(npcs as f64, f.beta, f.t0, t as f64);
                format!("{:.2},{:.2}", x.at(t as f64), y.at(n))
            })
            .collect();
        let _ = write!(
            s,
            r#"<polyline class="fit" data-beta="{}" data-t0="{}" points="{}"/>"#,
            f.beta,
            f.t0,
            pts.join(" ")
        );
    }
    s.push_str("</svg>");
    s
}

fn how_class(how: How) -> &'static str {
    match how {
        How::Seed => "seed",
        How::Witnessed => "witnessed",
        How::Told { .. } => "told",
        How::Invented => "invented",
    }
}

/// Each knower's hop depth and similarity (from `summary.json`), by NPC index.
type HopsOf = std::collections::BTreeMap<usize, (u32, Option<f64>)>;

/// The hops of fact `f` that the summary gives, by NPC index.
fn hops_of(story: &Story, summary: Option<&Summary>, f: usize) -> (HopsOf, f64) {
    let Some(fact) = summary.and_then(|s| s.facts.iter().find(|x| x.name == story.cast.facts[f]))
    else {
        return (HopsOf::new(), hearsay_core::DISTORTED_BELOW);
    };
    let hops = fact
        .knowers
        .iter()
        .filter_map(|k| Some((story.cast.npc(&k.npc)?, (k.depth, k.similarity))))
        .collect();
    (hops, fact.distorted_below)
}

/// A knower's colour by how similar its words stayed: red at or below `below` (a
/// distorted version), through amber, to green at 1.
fn similarity_fill(sim: f64, below: f64) -> String {
    let t = ((sim - below) / (1.0 - below).max(1e-9)).clamp(0.0, 1.0);
    format!("hsl({:.0},70%,42%)", 120.0 * t)
}

/// The transmission tree of one fact drawn over ticks: a dot per knower (one row each,
/// in the order they learned), an elbow from each teller's dot to the listener's; each
/// dot coloured by the similarity of the knower's words when the summary gives it.
fn tree_svg(story: &Story, fact: usize, last_tick: u64, hops: &HopsOf, below: f64) -> String {
    let knowers = &story.knowers[fact];
    let names = &story.cast.npcs;
    let rows = knowers.len().max(1);
    let row_h = if rows > 120 {
        6.0
    } else if rows > 40 {
        10.0
    } else {
        16.0
    };
    let labels = rows <= 120;
    let (top, bottom) = (10.0, 30.0);
    let h = top + bottom + row_h * rows as f64;
    let x = Scale {
        d0: 0.0,
        d1: last_tick.max(1) as f64,
        p0: LEFT,
        p1: W - RIGHT - if labels { 70.0 } else { 0.0 },
    };
    let row_of: std::collections::BTreeMap<usize, usize> = knowers
        .iter()
        .enumerate()
        .map(|(i, k)| (k.npc, i))
        .collect();
    let y = |i: usize| top + row_h * (i as f64 + 0.5);
    let mut s = String::new();
    let _ = write!(
        s,
        r#"<svg class="tree" role="img" viewBox="0 0 {W} {h:.0}" data-fact="{}" data-knowers="{}"><title>{} — who told whom</title>"#,
        esc(&story.cast.facts[fact]),
        knowers.len(),
        esc(&story.cast.facts[fact])
    );
    for t in axis_ticks(last_tick, 8) {
        let px = x.at(t as f64);
        let _ = write!(
            s,
            r#"<line class="grid" x1="{px:.2}" y1="{top}" x2="{px:.2}" y2="{:.2}"/><text class="label" x="{px:.2}" y="{:.2}" text-anchor="middle">{t}</text>"#,
            h - bottom,
            h - bottom + 16.0
        );
    }
    let mut edges = String::new();
    let mut dots = String::new();
    for (i, k) in knowers.iter().enumerate() {
        let (px, py) = (x.at(k.tick as f64), y(i));
        let who = esc(&names[k.npc]);
        let how = match k.how {
            How::Seed => "knew it from the start".to_owned(),
            How::Witnessed => "saw it".to_owned(),
            How::Told { by } => format!("heard it from {}", esc(&names[by])),
            How::Invented => "came up with it".to_owned(),
        };
        if let How::Told { by } = k.how
            && let Some(&j) = row_of.get(&by)
        {
            let teller = &knowers[j];
            let _ = write!(
                edges,
                r#"<path class="edge" d="M{:.2} {:.2}V{py:.2}H{px:.2}"/>"#,
                x.at(teller.tick as f64),
                y(j)
            );
        }
        let (hop, paint) = match hops.get(&k.npc) {
            Some((depth, Some(sim))) => (
                format!(", hop {depth}, similarity {sim:.2}"),
                format!(
                    r#" data-similarity="{sim:.4}" style="fill:{}""#,
                    similarity_fill(*sim, below)
                ),
            ),
            Some((depth, None)) => (format!(", hop {depth}"), String::new()),
            None => (String::new(), String::new()),
        };
        let _ = write!(
            dots,
            r#"<circle class="{}" data-npc="{who}"{paint} cx="{px:.2}" cy="{py:.2}" r="{:.1}"><title>{who}, tick {}{hop}: {how} — “{}”</title></circle>"#,
            how_class(k.how),
            (row_h / 3.0).clamp(2.0, 4.5),
            k.tick,
            esc(&k.content)
        );
        if labels {
            let _ = write!(
                dots,
                r#"<text class="name" x="{:.2}" y="{:.2}">{who}</text>"#,
                px + 6.0,
                py + 3.5
            );
        }
    }
    s.push_str(&edges);
    s.push_str(&dots);
    s.push_str("</svg>");
    s
}

/// The same tree as nested lists: roots (seeds, witnesses, inventions), then whoever
/// each one told, with the words at each hop and their similarity.
fn tree_list(story: &Story, fact: usize, hops: &HopsOf) -> String {
    let knowers = &story.knowers[fact];
    let names = &story.cast.npcs;
    let mut children: std::collections::BTreeMap<usize, Vec<usize>> = Default::default();
    let mut roots = Vec::new();
    let known: std::collections::BTreeSet<usize> = knowers.iter().map(|k| k.npc).collect();
    for (i, k) in knowers.iter().enumerate() {
        match k.how {
            How::Told { by } if known.contains(&by) => {
                children.entry(by).or_default().push(i);
            }
            _ => roots.push(i),
        }
    }
    let mut out = String::new();
    let mut seen = std::collections::BTreeSet::new();
    fn walk(
        i: usize,
        story: &Story,
        fact: usize,
        hops: &HopsOf,
        children: &std::collections::BTreeMap<usize, Vec<usize>>,
        seen: &mut std::collections::BTreeSet<usize>,
        out: &mut String,
    ) {
        let k = &story.knowers[fact][i];
        if !seen.insert(k.npc) {
            return;
        }
        let names = &story.cast.npcs;
        let how = match k.how {
            How::Seed => " — from the start".to_owned(),
            How::Witnessed => " — saw it".to_owned(),
            How::Told { by } => format!(" — from {}", esc(&names[by])),
            How::Invented => " — came up with it".to_owned(),
        };
        let hop = match hops.get(&k.npc) {
            Some((depth, Some(sim))) => {
                format!(r#" <span class="hop">hop {depth}, similarity {sim:.2}</span>"#)
            }
            Some((depth, None)) => format!(r#" <span class="hop">hop {depth}</span>"#),
            None => String::new(),
        };
        let _ = write!(
            out,
            r#"<li class="{}"><b>{}</b> <span class="tick">tick {}</span>{how}{hop} <q>{}</q>"#,
            how_class(k.how),
            esc(&names[k.npc]),
            k.tick,
            esc(&k.content)
        );
        if let Some(kids) = children.get(&k.npc) {
            out.push_str("<ul>");
            for &c in kids {
                walk(c, story, fact, hops, children, seen, out);
            }
            out.push_str("</ul>");
        }
        out.push_str("</li>");
    }
    out.push_str(r#"<ul class="tree-list">"#);
    for &r in &roots {
        walk(r, story, fact, hops, &children, &mut seen, &mut out);
    }
    // Knowers in a loop of tellers are reached from no root.
    for (i, k) in knowers.iter().enumerate() {
        if !seen.contains(&k.npc) {
            walk(i, story, fact, hops, &children, &mut seen, &mut out);
        }
    }
    out.push_str("</ul>");
    let _ = names;
    out
}

/// An SVG path of one vertical stroke (`stroke`: where it starts and how long, e.g.
/// `5v12`) per pixel column that `ticks` (in order) fall on.
fn strokes(x: Scale, ticks: &[u64], stroke: &str) -> String {
    let mut d = String::new();
    let mut last_px = -1i64;
    for &t in ticks {
        let px = x.at(t as f64).round() as i64;
        if px != last_px {
            let _ = write!(d, "M{px} {stroke}");
            last_px = px;
        }
    }
    d
}

/// How many times an NPC talked: `12`, or `12 (3 to someone, 2 whispered)`.
fn talks_cell(life: &crate::story::Life) -> String {
    let n = life.talks.len();
    let mut how = Vec::new();
    if life.addressed > 0 {
        how.push(format!("{} to someone", life.addressed));
    }
    if life.whispers > 0 {
        how.push(format!("{} whispered", life.whispers));
    }
    if how.is_empty() {
        n.to_string()
    } else {
        format!("{n} ({})", how.join(", "))
    }
}

/// One NPC's run on one line: talks as strokes, facts learned as dots, reflections as
/// diamonds; under `think = "on_change"`, the ticks it thought as short marks under the
/// axis (the gaps between them are the ticks it carried on without thinking).
fn timeline_svg(story: &Story, npc: usize, last_tick: u64) -> String {
    let h = 22.0;
    let x = Scale {
        d0: 0.0,
        d1: last_tick.max(1) as f64,
        p0: 4.0,
        p1: W - 4.0,
    };
    let life = &story.lives[npc];
    let mut s = String::new();
    let _ = write!(
        s,
        r#"<svg class="timeline" viewBox="0 0 {W} {h}"><line class="axis" x1="{:.1}" y1="11" x2="{:.1}" y2="11"/>"#,
        x.p0, x.p1
    );
    if !life.thoughts.is_empty() {
        let _ = write!(
            s,
            r#"<path class="thoughts" d="{}"><title>{} thought in {} ticks and carried on without thinking in {}</title></path>"#,
            strokes(x, &life.thoughts, "15v6"),
            esc(&story.cast.npcs[npc]),
            life.thoughts.len(),
            life.continued
        );
    }
    if !life.talks.is_empty() {
        let _ = write!(
            s,
            r#"<path class="talks" d="{}"><title>{} talked in {} ticks</title></path>"#,
            strokes(x, &life.talks, "5v12"),
            esc(&story.cast.npcs[npc]),
            life.talks.len()
        );
    }
    for &(t, n) in &life.reflections {
        let px = x.at(t as f64);
        let _ = write!(
            s,
            r#"<path class="reflection" d="M{px:.1} 5l5 6l-5 6l-5 -6z"><title>tick {t}: reflected ({n} insights)</title></path>"#
        );
    }
    for (f, knowers) in story.knowers.iter().enumerate() {
        if let Some(k) = knowers.iter().find(|k| k.npc == npc) {
            let how = match k.how {
                How::Told { by } => format!("from {}", esc(&story.cast.npcs[by])),
                How::Seed => "from the start".into(),
                How::Witnessed => "seen".into(),
                How::Invented => "of its own making".into(),
            };
            let _ = write!(
                s,
                r#"<circle class="learned" data-fact="{f}" cx="{:.1}" cy="11" r="4.5" fill="{}"><title>tick {}: learned {} ({how})</title></circle>"#,
                x.at(k.tick as f64),
                PALETTE[f % PALETTE.len()],
                k.tick,
                esc(&story.cast.facts[f])
            );
        }
    }
    s.push_str("</svg>");
    s
}

#[derive(Serialize)]
struct FactView {
    index: usize,
    name: String,
    color: &'static str,
    knowers: usize,
    share_pct: String,
    half_tick: Option<u64>,
    fit: String,
    curve: String,
    tree: String,
    tree_list: String,
    hop_note: Option<String>,
    told: usize,
    unsourced: Vec<Unsourced>,
}

#[derive(Serialize)]
struct Unsourced {
    npc: String,
    tick: u64,
    chain: String,
    root: String,
    content: String,
}

#[derive(Serialize)]
struct NpcView {
    name: String,
    thought: String,
    /// Its talks, with how many were addressed or whispered when any were.
    talks: String,
    steps: u64,
    memories: u64,
    forgotten: u64,
    reflections: usize,
    failures: u64,
    knows: String,
    timeline: String,
}

#[derive(Serialize)]
struct Row {
    cells: Vec<String>,
}

#[derive(Serialize)]
struct ExpectView {
    met: bool,
    verdict: &'static str,
    expect: String,
    detail: String,
}

/// What the page needs besides the story.
pub struct ReportInput<'a> {
    /// The run directory (shown in the title).
    pub dir: &'a Path,
    /// The run's scenario; the page shows its seed and tick count.
    pub scenario: &'a Scenario,
    /// `summary.json`, if the run finished.
    pub summary: Option<&'a Summary>,
}

/// Renders the page.
pub fn render(input: &ReportInput<'_>, story: &Story) -> Result<String, RunError> {
    let last_tick = story.completed.saturating_sub(1);
    let names = &story.cast.npcs;
    let npcs = names.len();
    let facts: Vec<FactView> = story
        .cast
        .facts
        .iter()
        .enumerate()
        .map(|(f, name)| {
            let curve = story.curve(f);
            let (hops, below) = hops_of(story, input.summary, f);
            let summary_fact = input
                .summary
                .and_then(|s| s.facts.iter().find(|x| &x.name == name));
            let fit = crate::fit::fit_si(&curve, npcs as u32, last_tick);
            let half = story.knowers[f]
                .get(npcs.div_ceil(2).saturating_sub(1))
                .map(|k| k.tick);
            let unsourced = story
                .unsourced(f)
                .into_iter()
                .map(|(k, chain, root)| {
                    let chain_names: Vec<&str> = chain.iter().map(|&i| names[i].as_str()).collect();
                    let root = match root {
                        Root::Invented(i) => {
                            let t = story.knowing(f, i).map_or(0, |k| k.tick);
                            format!("{} came up with it at tick {t}", names[i])
                        }
                        Root::Broken(i) => {
                            format!("{} never held it in memory (or the tellers loop)", names[i])
                        }
                        Root::Seed(i) | Root::Witnessed(i) => names[i].clone(),
                    };
                    Unsourced {
                        npc: names[k.npc].clone(),
                        tick: k.tick,
                        chain: chain_names.join(" ← "),
                        root,
                        content: k.content.clone(),
                    }
                })
                .collect();
            FactView {
                index: f,
                name: name.clone(),
                color: PALETTE[f % PALETTE.len()],
                knowers: story.knowers[f].len(),
                share_pct: format!(
                    "{:.0}",
                    story.knowers[f].len() as f64 * 100.0 / npcs.max(1) as f64
                ),
                half_tick: half,
                fit: crate::fit::describe(fit.as_ref()),
                curve: curve_svg(name, &curve, last_tick, npcs, half, fit.as_ref()),
                tree: tree_svg(story, f, last_tick, &hops, below),
                tree_list: tree_list(story, f, &hops),
                hop_note: summary_fact.map(|x| {
                    let against = match &x.meaning {
                        Some(m) => format!("the statement “{}”", m.statement),
                        None => "the words its chain started from".to_owned(),
                    };
                    format!(
                        "Colour: how similar each knower's words stayed to {against} (red at or below {below}: {} distorted versions); longest chain {} hops{}.",
                        x.distorted,
                        x.longest_chain.len().saturating_sub(1),
                        if x.longest_chain.is_empty() {
                            String::new()
                        } else {
                            format!(" ({})", x.longest_chain.join(" → "))
                        }
                    )
                }),
                told: story.knowers[f]
                    .iter()
                    .filter(|k| matches!(k.how, How::Told { .. }))
                    .count(),
                unsourced,
            }
        })
        .collect();
    let npc_views: Vec<NpcView> = (0..npcs)
        .map(|i| {
            let life = &story.lives[i];
            let knows: Vec<String> = story
                .knowers
                .iter()
                .enumerate()
                .filter_map(|(f, ks)| {
                    ks.iter()
                        .find(|k| k.npc == i)
                        .map(|k| format!("{} ({})", story.cast.facts[f], k.tick))
                })
                .collect();
            let thought = if life.thoughts.is_empty() && life.continued == 0 {
                "every tick".to_owned()
            } else {
                format!(
                    "{} of {}",
                    life.thoughts.len(),
                    life.thoughts.len() as u64 + life.continued
                )
            };
            NpcView {
                name: names[i].clone(),
                thought,
                talks: talks_cell(life),
                steps: life.steps,
                memories: life.memories,
                forgotten: life.forgotten,
                reflections: life.reflections.len(),
                failures: life.brain_failures + life.recall_failures,
                knows: knows.join(", "),
                timeline: timeline_svg(story, i, last_tick),
            }
        })
        .collect();
    let summary = input.summary;
    let expectations: Vec<ExpectView> = summary
        .map(|s| s.expectations.as_slice())
        .unwrap_or_default()
        .iter()
        .map(|j: &Judged| ExpectView {
            met: j.verdict == Verdict::Met,
            verdict: match j.verdict {
                Verdict::Met => "met",
                Verdict::Unmet => "not met",
                Verdict::Unchecked => "not checked",
            },
            expect: j.expect.clone(),
            detail: j.detail.clone(),
        })
        .collect();
    let degraded: Vec<Row> = summary
        .map(|s| {
            let d = &s.degraded;
            vec![
                (
                    "recall failures (NPC-ticks without memories)",
                    d.recall_failures,
                ),
                ("brain failures (NPC-ticks that stayed)", d.brain_failures),
                ("fallbacks to the heuristic brain", d.fallbacks),
                ("reflection failures", d.reflection_failures),
                ("embedding barrier timeouts", d.barrier_timeouts),
                ("embedding retries", d.embed_retries),
            ]
            .into_iter()
            .map(|(k, v)| Row {
                cells: vec![k.to_owned(), v.to_string()],
            })
            .collect()
        })
        .unwrap_or_default();
    let brains: Vec<Row> = summary
        .map(|s| {
            s.brains
                .iter()
                .map(|(name, b)| Row {
                    cells: vec![
                        name.clone(),
                        b.provider.clone(),
                        b.calls.to_string(),
                        b.model_calls.to_string(),
                        b.prompt_tokens.to_string(),
                        b.completion_tokens.to_string(),
                        format!("{:.0}", b.latency_ms_p50),
                        format!("{:.0}", b.latency_ms_p95),
                        b.retries.to_string(),
                        b.failures.to_string(),
                        b.fallbacks.to_string(),
                        b.reflections.to_string(),
                        b.thinking.think.clone(),
                        b.thinking.thoughts.to_string(),
                        b.thinking.continued.to_string(),
                        format!("{:.3}", b.thinking.calls_per_npc_tick),
                        b.thinking
                            .wake
                            .iter()
                            .map(|(r, n)| format!("{r} {n}"))
                            .collect::<Vec<_>>()
                            .join(", "),
                        b.thinking.reflections_deferred.to_string(),
                    ],
                })
                .collect()
        })
        .unwrap_or_default();
    let memories = summary.map(|s| {
        let kinds: Vec<String> = s
            .memories
            .by_kind
            .iter()
            .map(|(k, n)| format!("{k} {n}"))
            .collect();
        format!(
            "{} ({}), archived {}, unembedded {}",
            s.memories.total,
            kinds.join(", "),
            s.memories.archived,
            s.memories.unembedded
        )
    });
    let happenings: Vec<Row> = story
        .happenings
        .iter()
        .map(|(t, place, text, n)| Row {
            cells: vec![t.to_string(), place.clone(), text.clone(), n.to_string()],
        })
        .collect();
    let ctx = minijinja::context! {
        name => &story.cast.name,
        dir => input.dir.display().to_string(),
        seed => input.scenario.seed,
        ticks => input.scenario.ticks,
        completed => story.completed,
        npcs => npcs,
        speeches => story.speeches,
        finished => summary.is_some(),
        memories => memories,
        timing => summary.map(|s| format!("{:.2} s, {:.1} ticks/s", s.timing.wall_ms / 1000.0, s.timing.ticks_per_second)),
        store => summary.map(|s| s.store.backend.as_str()),
        all_sourced => facts.iter().all(|f| f.unsourced.is_empty()),
        facts => minijinja::Value::from(minijinja::value::Serde(&facts)),
        npc_rows => minijinja::Value::from(minijinja::value::Serde(&npc_views)),
        expectations => minijinja::Value::from(minijinja::value::Serde(&expectations)),
        degraded => minijinja::Value::from(minijinja::value::Serde(&degraded)),
        brains => minijinja::Value::from(minijinja::value::Serde(&brains)),
        happenings => minijinja::Value::from(minijinja::value::Serde(&happenings)),
        css => CSS,
        script => SCRIPT,
    };
    let mut env = Environment::new();
    env.set_undefined_behavior(minijinja::UndefinedBehavior::Strict);
    env.add_template("report.html", TEMPLATE)
        .and_then(|()| env.get_template("report.html"))
        .and_then(|t| t.render(ctx))
        .map_err(|e| RunError::Provider(format!("the report template failed: {e:#}")))
}

/// What writing a report produced.
#[derive(Clone, Debug)]
pub struct Written {
    /// The page's path: `report.html` in the run directory, or the `out` given.
    pub path: PathBuf,
    /// Its size in bytes.
    pub bytes: usize,
    /// How long reading the log and drawing took.
    pub seconds: f64,
}

/// Writes `report.html` for the run in `dir` (or to `out`), from its files alone.
pub fn write_for_dir(dir: &Path, out: Option<&Path>) -> Result<Written, RunError> {
    let started = Instant::now();
    crate::rundir::require(
        dir,
        &[
            crate::rundir::MANIFEST_FILE,
            SCENARIO_FILE,
            crate::rundir::EVENTS_FILE,
        ],
    )?;
    let manifest = RunManifest::read(dir)?;
    let path = dir.join(SCENARIO_FILE);
    let current = std::fs::read_to_string(&path).map_err(|e| RunError::RunDir {
        path: path.clone(),
        problem: format!("cannot read it ({e})"),
    })?;
    let mut scenario = scenario::parse(&path, current.as_bytes())?;
    scenario.seed = manifest.seed_at(0);
    scenario.ticks = manifest.ticks;
    let summary = Summary::read(dir)?;
    let story = Story::read(dir, &scenario)?;
    crate::logs::check_not_cut_short(dir, scenario.ticks, story.completed)?;
    let target = match out {
        None => dir.join(REPORT_FILE),
        Some(out) => report_target(out)?,
    };
    // Into a run directory: as its writer, so never while a run is writing it.
    let _lock = match target.parent() {
        Some(parent) if crate::rundir::Marker::read(parent).is_some() || parent == dir => {
            Some(crate::rundir::DirLock::acquire(parent)?)
        }
        _ => None,
    };
    write(
        &ReportInput {
            dir,
            scenario: &scenario,
            summary: summary.as_ref(),
        },
        &story,
        &target,
        started,
    )
}

/// Where `--out` puts the page: `out` itself, or `out/report.html` for a directory. It
/// may be a new file, or a page hearsay wrote before — never a run's own file, never a
/// link, never a file hearsay did not write.
fn report_target(out: &Path) -> Result<PathBuf, RunError> {
    let refuse = |path: &Path, problem: &str| RunError::OutDir {
        path: path.to_owned(),
        problem: format!("{problem}; nothing was written"),
    };
    let target = match std::fs::symlink_metadata(out) {
        Ok(meta) if meta.is_dir() => out.join(REPORT_FILE),
        _ => out.to_owned(),
    };
    let parent = match target.parent() {
        Some(p) if p.as_os_str().is_empty() => Path::new("."),
        Some(p) => p,
        None => return Err(refuse(&target, "is not a file path")),
    };
    if !parent.is_dir() {
        return Err(refuse(parent, "is not a directory"));
    }
    let name = target
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let in_a_run = crate::rundir::Marker::read(parent).is_some()
        || parent.join(crate::rundir::MANIFEST_FILE).is_file();
    if in_a_run && name != REPORT_FILE && crate::rundir::RUN_FILES.contains(&name.as_str()) {
        return Err(refuse(
            &target,
            "is one of a run's own files; a report goes to report.html or outside the run",
        ));
    }
    match std::fs::symlink_metadata(&target) {
        Err(_) => Ok(target),
        Ok(meta) if meta.file_type().is_symlink() => Err(refuse(&target, "is a symbolic link")),
        Ok(meta) if !meta.is_file() => Err(refuse(&target, "is not a regular file")),
        Ok(_) if is_report(&target) => Ok(target),
        Ok(_) => Err(refuse(
            &target,
            "exists and is not a report hearsay wrote; choose a new file",
        )),
    }
}

/// Whether the file at `path` is a page hearsay wrote (its generator mark near the top).
fn is_report(path: &Path) -> bool {
    use std::io::Read;
    let mut head = Vec::with_capacity(4096);
    std::fs::File::open(path)
        .and_then(|f| f.take(4096).read_to_end(&mut head))
        .is_ok()
        && String::from_utf8_lossy(&head).contains(GENERATOR_MARK)
}

/// Renders and writes the page to `target`.
pub fn write(
    input: &ReportInput<'_>,
    story: &Story,
    target: &Path,
    started: Instant,
) -> Result<Written, RunError> {
    let html = render(input, story)?;
    // Written whole, then renamed: a reader never sees half a page.
    crate::rundir::write_file(target, html.as_bytes())?;
    Ok(Written {
        path: target.to_owned(),
        bytes: html.len(),
        seconds: started.elapsed().as_secs_f64(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_npcs_talks_say_how_many_were_addressed_or_whispered() {
        let mut life = crate::story::Life {
            talks: vec![1, 2, 3, 4, 5],
            ..Default::default()
        };
        assert_eq!(talks_cell(&life), "5");
        life.addressed = 2;
        assert_eq!(talks_cell(&life), "5 (2 to someone)");
        life.whispers = 1;
        assert_eq!(talks_cell(&life), "5 (2 to someone, 1 whispered)");
        life.addressed = 0;
        assert_eq!(talks_cell(&life), "5 (1 whispered)");
    }

    #[test]
    fn text_is_escaped_and_axes_are_round() {
        assert_eq!(
            esc(r#"<script>alert("x")</script> & 'y'"#),
            "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt; &amp; &#39;y&#39;"
        );
        assert_eq!(axis_ticks(240, 8), vec![0, 50, 100, 150, 200]);
        assert_eq!(axis_ticks(4, 4), vec![0, 1, 2, 3, 4]);
        assert_eq!(axis_ticks(0, 4), vec![0]);
        assert_eq!(
            axis_ticks(1000, 8),
            (0..=5).map(|i| i * 200).collect::<Vec<_>>()
        );
    }

    #[test]
    fn the_fitted_curve_is_drawn_over_the_fitted_ticks_and_follows_the_logistic() {
        let fit = SpreadFit {
            beta: 0.5,
            beta_se: 0.01,
            t0: 10.0,
            r2: 0.99,
            samples: 18,
        };
        let svg = curve_svg(
            "f",
            &[(2, 1), (10, 50), (15, 99)],
            19,
            100,
            None,
            Some(&fit),
        );
        let line = svg
            .split(r#"<polyline class="fit""#)
            .nth(1)
            .expect("a fit line");
        let points: Vec<(f64, f64)> = line
            .split("points=\"")
            .nth(1)
            .and_then(|p| p.split('"').next())
            .expect("points")
            .split(' ')
            .filter_map(|p| p.split_once(','))
            .map(|(x, y)| (x.parse().expect("x"), y.parse().expect("y")))
            .collect();
        assert_eq!(points.len(), 18, "one point per tick from 2 to 19");
        // The middle point is at t0: half of the 100 NPCs, half-way up the plot.
        let x = Scale {
            d0: 0.0,
            d1: 19.0,
            p0: LEFT,
            p1: W - RIGHT,
        };
        let y = Scale {
            d0: 0.0,
            d1: 100.0,
            p0: 220.0 - 34.0,
            p1: 14.0,
        };
        let at_t0 = points[8];
        assert!((at_t0.0 - x.at(10.0)).abs() < 0.01, "{at_t0:?}");
        assert!((at_t0.1 - y.at(50.0)).abs() < 0.01, "{at_t0:?}");
        assert!(!curve_svg("f", &[(2, 1)], 19, 100, None, None).contains("class=\"fit\""));
    }

    #[test]
    fn the_curve_steps_through_every_change() {
        let svg = curve_svg("f", &[(0, 1), (4, 2)], 10, 4, Some(4), None);
        let points = svg
            .split("points=\"")
            .nth(1)
            .and_then(|p| p.split('"').next())
            .expect("points");
        let xy: Vec<(f64, f64)> = points
            .split(' ')
            .map(|p| {
                let (a, b) = p.split_once(',').expect("x,y");
                (a.parse().expect("x"), b.parse().expect("y"))
            })
            .collect();
        // (0,0) (0,0)→(0,1) (4,1)→(4,2) (10,2), in pixels.
        assert_eq!(xy.len(), 6);
        assert_eq!(xy[1].0, xy[2].0);
        assert!(xy[2].1 < xy[1].1, "up is smaller y");
        assert_eq!(xy[5].1, xy[4].1);
        assert!(svg.contains(r#"data-t1="10""#) && svg.contains(r#"data-n1="4""#));
    }
}
