//! `hearsay trace RUN_DIR --fact NAME [--npc NAME]`: how a fact travelled, hop by hop,
//! with the exact words each knower learned it from and how close those words stayed to
//! the fact (its statement, or the words its chain started from).
//!
//! It reads `summary.json`, which holds every knower's teller, hop depth, similarity and
//! words (a pure function of the run directory: [`crate::spread`]); nothing is
//! recomputed and no model or store is needed.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::Path;

use crate::RunError;
use crate::summary::{FactSummary, KnowerRow, Summary};

/// Longest words shown per hop, in characters (the whole text is in `summary.json`).
pub const WORDS_SHOWN: usize = 160;

/// The chains of `fact` in the run in `dir`: the tree of every knower, or, with `npc`,
/// the one chain from its start to that NPC.
pub fn trace(dir: &Path, fact: &str, npc: Option<&str>) -> Result<String, RunError> {
    crate::rundir::require(dir, &[crate::rundir::MANIFEST_FILE])?;
    let summary = Summary::read(dir)?.ok_or_else(|| {
        RunError::Refused(format!(
            "{} has no {}: the run has not finished (`hearsay resume` finishes it)",
            dir.display(),
            crate::rundir::SUMMARY_FILE
        ))
    })?;
    let Some(f) = summary.facts.iter().find(|f| f.name == fact) else {
        let known: Vec<&str> = summary.facts.iter().map(|f| f.name.as_str()).collect();
        return Err(RunError::BadOption(format!(
            "the run tracks no fact {fact:?}; its facts: {}",
            if known.is_empty() {
                "none".to_owned()
            } else {
                known.join(", ")
            }
        )));
    };
    let mut out = header(f, summary.npcs);
    match npc {
        Some(name) => {
            let Some(chain) = chain(f, name) else {
                return Err(RunError::BadOption(format!(
                    "{name:?} never knew {fact:?} ({} of {} NPCs did)",
                    f.knowers.len(),
                    summary.npcs
                )));
            };
            for k in chain {
                out.push_str(&line(k, 0));
            }
        }
        None => out.push_str(&tree(f)),
    }
    Ok(out)
}

fn header(f: &FactSummary, npcs: usize) -> String {
    let against = match &f.meaning {
        Some(m) => format!("similarity to the statement {:?}", m.statement),
        None => "similarity to the words its chain started from".to_owned(),
    };
    format!(
        "fact {:?}: {} of {npcs} NPCs, longest chain {} hops, {} distorted (below {}); {against}\n",
        f.name,
        f.knowers.len(),
        f.longest_chain.len().saturating_sub(1),
        f.distorted,
        f.distorted_below
    )
}

fn line(k: &KnowerRow, indent: usize) -> String {
    let sim = k
        .similarity
        .map_or_else(|| "   -".to_owned(), |s| format!("{s:.2}"));
    let mut words: String = k.words.chars().take(WORDS_SHOWN).collect();
    if k.words.chars().count() > WORDS_SHOWN {
        words.push('…');
    }
    let words = crate::terminal::safe(&words);
    let from = match &k.from {
        Some(f) => format!(" from {}", crate::terminal::safe(f)),
        None => String::new(),
    };
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{}hop {}  tick {:>4}  {}{from}  sim {sim}  {words:?}",
        "  ".repeat(indent),
        k.depth,
        k.tick,
        crate::terminal::safe(&k.npc),
    );
    s
}

/// The chain from its start to `npc` (its start first), following each knower's teller
/// while the teller is a knower and the chain does not loop.
pub fn chain<'a>(f: &'a FactSummary, npc: &str) -> Option<Vec<&'a KnowerRow>> {
    let by_name: BTreeMap<&str, &KnowerRow> =
        f.knowers.iter().map(|k| (k.npc.as_str(), k)).collect();
    let mut at = *by_name.get(npc)?;
    let mut out = vec![at];
    let mut seen = BTreeSet::from([npc]);
    while let Some(teller) = at.from.as_deref() {
        let Some(next) = by_name.get(teller) else {
            break;
        };
        if !seen.insert(teller) {
            break;
        }
        out.push(next);
        at = next;
    }
    out.reverse();
    Some(out)
}

/// The similarity of each knower's words (in `fact.knowers` order) as the summary
/// measures it ([`crate::spread::hops`]), from the knowers' teller links alone: with
/// `statement`, the cosine with it; else with the words at the start of the knower's
/// chain. `None` where a vector is missing. For readers without the event log (a
/// PostgreSQL run read by id).
pub fn similarities(
    fact: &FactSummary,
    vectors: &BTreeMap<hearsay_core::MemoryId, Vec<Vec<f32>>>,
    statement: Option<&[f32]>,
) -> Vec<Option<f64>> {
    let of = |m: u64| vectors.get(&hearsay_core::MemoryId(m));
    fact.knowers
        .iter()
        .map(|k| {
            let sim = match statement {
                Some(s) => of(k.memory).and_then(|v| crate::spread::cosine(v, s)),
                None => {
                    let start = chain(fact, &k.npc).and_then(|c| c.first().copied());
                    match start {
                        Some(o) if o.memory == k.memory => Some(1.0),
                        Some(o) => of(k.memory)
                            .zip(of(o.memory))
                            .and_then(|(a, b)| crate::spread::cosine_between(a, b)),
                        None => None,
                    }
                }
            };
            sim.map(|s| s.clamp(-1.0, 1.0))
        })
        .collect()
}

/// Every knower as a tree: the chains' starts (no teller, or a teller who never knew
/// it), each followed by those it told, by tick.
fn tree(f: &FactSummary) -> String {
    let knowers: BTreeSet<&str> = f.knowers.iter().map(|k| k.npc.as_str()).collect();
    let mut told: BTreeMap<&str, Vec<&KnowerRow>> = BTreeMap::new();
    let mut roots = Vec::new();
    for k in &f.knowers {
        match k.from.as_deref() {
            Some(t) if knowers.contains(t) && t != k.npc => told.entry(t).or_default().push(k),
            _ => roots.push(k),
        }
    }
    let mut out = String::new();
    let mut shown = BTreeSet::new();
    let mut stack: Vec<(&KnowerRow, usize)> = roots.iter().rev().map(|k| (*k, 0)).collect();
    while let Some((k, indent)) = stack.pop() {
        if !shown.insert(k.npc.as_str()) {
            continue;
        }
        out.push_str(&line(k, indent));
        if let Some(children) = told.get(k.npc.as_str()) {
            stack.extend(children.iter().rev().map(|c| (*c, indent + 1)));
        }
    }
    // Knowers in a loop of tellers (each told by another of the loop): none is a start.
    for k in &f.knowers {
        if !shown.contains(k.npc.as_str()) {
            out.push_str(&line(k, 0));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(
        npc: &str,
        tick: u64,
        from: Option<&str>,
        depth: u32,
        sim: f64,
        words: &str,
    ) -> KnowerRow {
        KnowerRow {
            npc: npc.into(),
            tick,
            from: from.map(str::to_owned),
            depth,
            similarity: Some(sim),
            memory: tick,
            words: words.into(),
        }
    }

    fn fact() -> FactSummary {
        FactSummary {
            name: "fish".into(),
            knowers: vec![
                row("Bob", 0, None, 0, 1.0, "fresh fish at the market"),
                row(
                    "Alice",
                    2,
                    Some("Bob"),
                    1,
                    0.9,
                    "Bob said: fresh fish at the market",
                ),
                row(
                    "Carol",
                    3,
                    Some("Alice"),
                    2,
                    0.7,
                    "Alice said: fish at the market",
                ),
                row(
                    "Dave",
                    3,
                    Some("Bob"),
                    1,
                    0.9,
                    "Bob said: fresh fish at the market",
                ),
            ],
            curve: vec![(0, 1), (2, 2), (3, 4)],
            share: 1.0,
            half_tick: Some(2),
            hops: Vec::new(),
            distorted: 0,
            distorted_below: 0.6,
            longest_chain: vec!["Bob".into(), "Alice".into(), "Carol".into()],
            meaning: None,
            fit: None,
        }
    }

    #[test]
    fn a_chain_runs_from_its_start_to_the_npc_with_the_words_at_each_hop() {
        let f = fact();
        let names: Vec<&str> = chain(&f, "Carol")
            .expect("knower")
            .iter()
            .map(|k| k.npc.as_str())
            .collect();
        assert_eq!(names, ["Bob", "Alice", "Carol"]);
        assert!(chain(&f, "Eve").is_none());
        let text: String = chain(&f, "Carol")
            .unwrap()
            .iter()
            .map(|k| line(k, 0))
            .collect();
        assert_eq!(
            text,
            "hop 0  tick    0  Bob  sim 1.00  \"fresh fish at the market\"\n\
             hop 1  tick    2  Alice from Bob  sim 0.90  \"Bob said: fresh fish at the market\"\n\
             hop 2  tick    3  Carol from Alice  sim 0.70  \"Alice said: fish at the market\"\n"
        );
    }

    #[test]
    fn the_tree_nests_each_knower_under_its_teller() {
        let t = tree(&fact());
        let firsts: Vec<String> = t
            .lines()
            .map(|l| {
                let indent = l.len() - l.trim_start().len();
                format!("{indent}:{}", l.split_whitespace().nth(4).unwrap_or(""))
            })
            .collect();
        assert_eq!(firsts, ["0:Bob", "2:Alice", "4:Carol", "2:Dave"]);
    }
}
