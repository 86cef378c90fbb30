//! Fact tracking: which NPC first held a memory matching a tracked fact, when, and from
//! whose words.
//!
//! The kernel decides substring facts as memories are written (its `learned` lines). A
//! fact given by meaning needs the memories' vectors, which a worker backfills off the
//! tick thread and whose arrival is not a function of the seed; so the runtime decides
//! those after the run, from the run directory, with the same [`FactBook`] rules
//! ([`FactBook::observe_where`]).

use std::collections::BTreeMap;

use bevy_ecs::resource::Resource;
use serde::{Deserialize, Serialize};

use crate::ids::{MemoryId, NpcId};
use crate::memory::MemoryRecord;

/// Similarity below which a knower's words count as a distorted version of the fact.
pub const DISTORTED_BELOW: f64 = 0.6;

/// A tracked fact: known by whoever holds a memory containing any of `patterns`, or
/// whose meaning is close enough to `meaning`'s statement.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FactSpec {
    /// Unique among facts; `learned` lines name the fact by it.
    pub name: String,
    /// Case-insensitive substrings of memory content (may be empty when `meaning` is
    /// given: the kernel then never decides the fact; the runtime does, after the run).
    pub patterns: Vec<String>,
    /// The fact as a statement, matched by embedding similarity.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub meaning: Option<Meaning>,
    /// A knower whose words are less similar than this to the fact's statement (or, for
    /// a substring fact, to its source's words) holds a distorted version; `None` means
    /// [`DISTORTED_BELOW`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub distorted_below: Option<f64>,
}

/// A fact recognised by what memories mean rather than the words they use.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Meaning {
    /// The fact in one sentence. It is embedded once per run with the run's embedder; a
    /// memory teaches the fact when its vector's cosine with this one reaches
    /// `similarity` (with a multilingual embedder, across languages).
    pub statement: String,
    /// Cosine at or above which a memory teaches the fact outright.
    pub similarity: f64,
    /// With `judge`: memories at or above this cosine (and below `similarity`) are put
    /// to the judge as a yes/no question.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub candidate: Option<f64>,
    /// The brain that answers for the candidates.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub judge: Option<String>,
}

impl FactSpec {
    /// A fact known by substrings alone.
    pub fn by_words(name: impl Into<String>, patterns: Vec<String>) -> Self {
        Self {
            name: name.into(),
            patterns,
            meaning: None,
            distorted_below: None,
        }
    }

    /// Below this similarity a knower's version counts as distorted.
    pub fn distorted_below(&self) -> f64 {
        self.distorted_below.unwrap_or(DISTORTED_BELOW)
    }

    /// Whether `content` mentions the fact by one of its substrings.
    pub fn matches(&self, content: &str) -> bool {
        // Every new memory is checked against every fact: ASCII text (nearly all of it)
        // lowercases byte by byte, into a buffer kept for the next memory, and is searched
        // as always (in linear time, whatever a scenario's patterns are). Other text, or
        // a pattern that is not ASCII (some lowercase to ASCII: the Kelvin sign to `k`),
        // is lowercased whole, as always.
        if content.is_ascii() && self.patterns.iter().all(|p| p.is_ascii()) {
            thread_local! {
                static LOWER: std::cell::RefCell<String> =
                    const { std::cell::RefCell::new(String::new()) };
            }
            return LOWER.with_borrow_mut(|lower| {
                lower.clear();
                lower.push_str(content);
                lower.make_ascii_lowercase();
                self.patterns.iter().any(|p| {
                    if p.bytes().any(|b| b.is_ascii_uppercase()) {
                        lower.contains(&p.to_ascii_lowercase())
                    } else {
                        lower.contains(p.as_str())
                    }
                })
            });
        }
        let lower = content.to_lowercase();
        self.patterns
            .iter()
            .any(|p| lower.contains(&p.to_lowercase()))
    }
}

/// How one NPC came to know a fact.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Knower {
    /// The first tick it held a matching memory.
    pub tick: u64,
    /// The speaker whose words taught it, `None` for seed memories and things seen.
    pub from: Option<NpcId>,
    /// The first matching memory.
    pub memory: MemoryId,
}

/// Every tracked fact and its knowers.
#[derive(Resource, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct FactBook {
    /// The facts, in scenario order.
    pub specs: Vec<FactSpec>,
    /// Knowers per fact (same index as `specs`).
    pub knowers: Vec<BTreeMap<NpcId, Knower>>,
    /// (tick, number of knowers) at every tick where it changes, per fact.
    pub curves: Vec<Vec<(u64, u32)>>,
}

impl FactBook {
    /// The facts (by index) whose substrings `content` holds.
    pub fn mentioned_in(&self, content: &str) -> Vec<u16> {
        self.specs
            .iter()
            .enumerate()
            .filter(|(_, spec)| spec.matches(content))
            .map(|(i, _)| i as u16)
            .collect()
    }

    /// A book for `specs`, with no knowers yet.
    pub fn new(specs: Vec<FactSpec>) -> Self {
        let n = specs.len();
        Self {
            specs,
            knowers: vec![BTreeMap::new(); n],
            curves: vec![Vec::new(); n],
        }
    }

    /// Takes note of a new memory; returns the facts (by index) its owner learned from it,
    /// taught by the memory's source.
    pub fn observe(&mut self, memory: &MemoryRecord) -> Vec<usize> {
        self.observe_with(memory, |_| (memory.source, None))
            .into_iter()
            .map(|(idx, _)| idx)
            .collect()
    }

    /// Takes note of a new memory whose teacher depends on the fact: `attribute` gives,
    /// for the fact's index, (the speaker whose words taught it, the memory they came
    /// through). Returns the facts learned, each with that memory.
    pub fn observe_with(
        &mut self,
        memory: &MemoryRecord,
        attribute: impl Fn(usize) -> (Option<NpcId>, Option<MemoryId>),
    ) -> Vec<(usize, Option<MemoryId>)> {
        self.observe_where(memory, |_, spec| spec.matches(&memory.content), attribute)
    }

    /// [`observe_with`](Self::observe_with) where `teaches(idx, spec)` says whether the
    /// memory teaches fact `idx` (the substrings, the meaning, or both).
    pub fn observe_where(
        &mut self,
        memory: &MemoryRecord,
        teaches: impl Fn(usize, &FactSpec) -> bool,
        attribute: impl Fn(usize) -> (Option<NpcId>, Option<MemoryId>),
    ) -> Vec<(usize, Option<MemoryId>)> {
        let mut learned = Vec::new();
        for (idx, spec) in self.specs.iter().enumerate() {
            if self.knowers[idx].contains_key(&memory.npc) || !teaches(idx, spec) {
                continue;
            }
            let (from, via) = attribute(idx);
            self.knowers[idx].insert(
                memory.npc,
                Knower {
                    tick: memory.tick,
                    from,
                    memory: memory.id,
                },
            );
            let count = self.knowers[idx].len() as u32;
            let curve = &mut self.curves[idx];
            match curve.last_mut() {
                Some((tick, n)) if *tick == memory.tick => *n = count,
                _ => curve.push((memory.tick, count)),
            }
            learned.push((idx, via));
        }
        learned
    }

    /// The first tick at which at least `needed` NPCs knew fact `idx`.
    pub fn tick_reaching(&self, idx: usize, needed: u32) -> Option<u64> {
        self.curves[idx]
            .iter()
            .find(|(_, n)| *n >= needed)
            .map(|(t, _)| *t)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memory::MemoryKind;

    fn mem(id: u64, npc: u32, tick: u64, content: &str, source: Option<u32>) -> MemoryRecord {
        MemoryRecord {
            id: MemoryId(id),
            npc: NpcId(npc),
            kind: MemoryKind::Conversation,
            content: content.into(),
            importance: 8,
            tick,
            source: source.map(NpcId),
            core: false,
            evidence: Vec::new(),
            place: Default::default(),
        }
    }

    #[test]
    fn matching_ascii_in_a_kept_buffer_answers_as_lowercasing_does() {
        let spec = |patterns: &[&str]| FactSpec {
            name: "f".into(),
            patterns: patterns.iter().map(|p| p.to_string()).collect(),
            meaning: None,
            distorted_below: None,
        };
        let reference = |patterns: &[&str], content: &str| {
            let lower = content.to_lowercase();
            patterns.iter().any(|p| lower.contains(&p.to_lowercase()))
        };
        let patterns: [&[&str]; 6] = [
            &["Mayor"],
            &["resign", "WINTER"],
            &[""],
            &[],
            &["\u{212A}ing"],
            &["é"],
        ];
        let contents = [
            "The MAYOR will resign before winter.",
            "the mayo",
            "",
            "The king is dead",
            "Café",
            "CAFÉ",
            "mayor\u{212A}",
        ];
        for p in patterns {
            for c in contents {
                assert_eq!(spec(p).matches(c), reference(p, c), "{p:?} in {c:?}");
            }
        }
    }

    #[test]
    fn first_matching_memory_wins_and_curve_follows() {
        let mut book = FactBook::new(vec![FactSpec::by_words(
            "fresh fish",
            vec!["Fresh Fish".into()],
        )]);
        assert_eq!(
            book.observe(&mem(1, 0, 0, "The market sells fresh fish.", None)),
            vec![0]
        );
        assert!(
            book.observe(&mem(2, 1, 3, "Nothing here.", None))
                .is_empty()
        );
        assert_eq!(
            book.observe(&mem(3, 1, 5, "Bob said: FRESH FISH!", Some(0))),
            vec![0]
        );
        assert!(
            book.observe(&mem(4, 1, 6, "fresh fish again", Some(2)))
                .is_empty()
        );
        assert_eq!(book.observe(&mem(5, 2, 5, "fresh fish", Some(1))), vec![0]);
        let alice = book.knowers[0][&NpcId(1)];
        assert_eq!(
            (alice.tick, alice.from, alice.memory),
            (5, Some(NpcId(0)), MemoryId(3))
        );
        assert_eq!(book.curves[0], vec![(0, 1), (5, 3)]);
        assert_eq!(book.tick_reaching(0, 2), Some(5));
        assert_eq!(book.tick_reaching(0, 4), None);
    }
}
