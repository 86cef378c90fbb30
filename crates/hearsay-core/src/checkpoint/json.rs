//! A checkpoint's JSON, whole or a delta, written field by field.
//!
//! Why by hand: a run saves a delta after every tick, on the tick thread, and in a big
//! town it is a few hundred bytes per NPC whose state changed, nearly every NPC (its
//! window slid, its evidence grew, it moved or heard something): about two megabytes a
//! tick at 10,000 NPCs, which serde_json wrote key by key through its string escaper.
//! A whole checkpoint, every few dozen ticks, holds every NPC's state in the same
//! parts. Here the keys are literals and the values go through [`crate::line`], which
//! writes what serde_json writes; the parts that are rare or small (the fact book, a
//! fact's changes, a window entry saved whole, a reflection's retry, the wake rules'
//! attention) still go through serde_json. The bytes are serde's: the tests compare
//! them over random checkpoints and deltas and over every checkpoint of a run, and the
//! reader is serde's (the types' `Deserialize`).

use super::{
    Checkpoint, CheckpointDelta, Entry, EvidenceEntry, NpcDelta, NpcState, ReflectionDelta,
    SeqDelta, SetDelta, WindowEntry,
};
use crate::components::{Evidence, KnownBy, Target};
use crate::line::{array, int, json, pos, string};
use crate::observation::HeardLine;

impl CheckpointDelta {
    /// Appends the delta as serde_json writes it (`serde_json::to_writer`).
    pub fn write_json(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(b"{\"next_tick\":");
        int(out, self.next_tick);
        out.extend_from_slice(b",\"prev\":");
        int(out, self.prev);
        out.extend_from_slice(b",\"next_memory_id\":");
        int(out, self.next_memory_id);
        out.extend_from_slice(b",\"digest\":");
        string(out, &self.digest);
        if !self.facts.is_empty() {
            out.extend_from_slice(b",\"facts\":");
            json(out, &self.facts);
        }
        if !self.npcs.is_empty() {
            out.extend_from_slice(b",\"npcs\":");
            array(out, &self.npcs, |out, npc| npc.write_json(out));
        }
        out.push(b'}');
    }
}

impl Checkpoint {
    /// Appends the checkpoint as serde_json writes it (`serde_json::to_writer`).
    pub fn write_json(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(b"{\"next_tick\":");
        int(out, self.next_tick);
        out.extend_from_slice(b",\"next_memory_id\":");
        int(out, self.next_memory_id);
        out.extend_from_slice(b",\"digest\":");
        string(out, &self.digest);
        out.extend_from_slice(b",\"facts\":");
        json(out, &self.facts);
        out.extend_from_slice(b",\"npcs\":");
        array(out, &self.npcs, npc_state);
        out.push(b'}');
    }
}

fn npc_state(out: &mut Vec<u8>, s: &NpcState) {
    out.extend_from_slice(b"{\"position\":");
    pos(out, s.position.0);
    out.extend_from_slice(b",\"target\":");
    target(out, s.target);
    out.extend_from_slice(b",\"hearing\":");
    array(out, &s.hearing.0, heard);
    out.extend_from_slice(b",\"short_term\":");
    array(out, &s.short_term, window_entry);
    if !s.known_by.is_empty() {
        out.extend_from_slice(b",\"known_by\":");
        known_by(out, &s.known_by);
    }
    if !s.learned.is_empty() {
        out.extend_from_slice(b",\"learned\":");
        known_by(out, &s.learned);
    }
    out.extend_from_slice(b",\"reflection\":{\"importance\":");
    int(out, s.reflection.importance);
    out.extend_from_slice(b",\"evidence\":");
    array(out, &s.reflection.evidence, evidence_entry);
    if let Some(retry) = &s.reflection.retry {
        out.extend_from_slice(b",\"retry\":");
        json(out, retry);
    }
    out.push(b'}');
    if !s.attention.is_unused() {
        out.extend_from_slice(b",\"attention\":");
        json(out, &s.attention);
    }
    out.push(b'}');
}

/// `[x,y]`, or `null` for nowhere.
fn target(out: &mut Vec<u8>, t: Target) {
    match t.0 {
        Some(p) => pos(out, p),
        None => out.extend_from_slice(b"null"),
    }
}

impl NpcDelta {
    fn write_json(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(b"{\"npc\":");
        int(out, self.npc);
        if let Some(p) = self.position {
            out.extend_from_slice(b",\"position\":");
            pos(out, p.0);
        }
        if let Some(t) = self.target {
            out.extend_from_slice(b",\"target\":");
            target(out, t);
        }
        if let Some(h) = &self.hearing {
            out.extend_from_slice(b",\"hearing\":");
            array(out, &h.0, heard);
        }
        if let Some(s) = &self.short_term {
            out.extend_from_slice(b",\"short_term\":");
            seq(out, s, window_entry);
        }
        if let Some(k) = &self.known_by {
            out.extend_from_slice(b",\"known_by\":");
            set(out, k);
        }
        if let Some(r) = &self.reflection {
            out.extend_from_slice(b",\"reflection\":");
            reflection(out, r);
        }
        if let Some(a) = &self.attention {
            out.extend_from_slice(b",\"attention\":");
            json(out, a);
        }
        out.push(b'}');
    }
}

/// A `SeqDelta`: the array when whole, else `{"drop", "push"}`, each left out when
/// empty (as its `skip_serializing_if` says).
fn seq<T>(out: &mut Vec<u8>, s: &SeqDelta<T>, entry: fn(&mut Vec<u8>, &T)) {
    match s {
        SeqDelta::Whole(entries) => array(out, entries, entry),
        SeqDelta::Slide { drop, push } => {
            out.push(b'{');
            if *drop != 0 {
                out.extend_from_slice(b"\"drop\":");
                int(out, *drop);
            }
            if !push.is_empty() {
                if *drop != 0 {
                    out.push(b',');
                }
                out.extend_from_slice(b"\"push\":");
                array(out, push, entry);
            }
            out.push(b'}');
        }
    }
}

/// A window entry: its id, or (a checkpoint written before windows were saved by id) the
/// whole memory.
fn window_entry(out: &mut Vec<u8>, e: &WindowEntry) {
    match e {
        Entry::Id(id) => int(out, id.0),
        Entry::Whole(m) => json(out, m),
    }
}

/// An evidence entry: its id, or (a checkpoint written before evidence was saved by id)
/// the whole entry.
fn evidence_entry(out: &mut Vec<u8>, e: &EvidenceEntry) {
    match e {
        Entry::Id(id) => int(out, id.0),
        Entry::Whole(e) => evidence(out, e),
    }
}

fn heard(out: &mut Vec<u8>, line: &HeardLine) {
    out.extend_from_slice(b"{\"speaker\":");
    int(out, line.speaker.0);
    out.extend_from_slice(b",\"speaker_name\":");
    string(out, &line.speaker_name);
    out.extend_from_slice(b",\"text\":");
    string(out, &line.text);
    if let Some(to) = &line.to {
        out.extend_from_slice(b",\"to\":");
        string(out, to);
    }
    if line.whispered {
        out.extend_from_slice(b",\"whispered\":true");
    }
    out.push(b'}');
}

fn set(out: &mut Vec<u8>, s: &SetDelta) {
    out.push(b'{');
    if !s.add.0.is_empty() {
        out.extend_from_slice(b"\"add\":");
        known_by(out, &s.add);
    }
    if !s.remove.0.is_empty() {
        if !s.add.0.is_empty() {
            out.push(b',');
        }
        out.extend_from_slice(b"\"remove\":");
        known_by(out, &s.remove);
    }
    out.push(b'}');
}

/// `{"key": [npc, …]}`, each key once (as a string), in the set's order: what
/// `KnownBy`'s `Serialize` writes.
fn known_by(out: &mut Vec<u8>, k: &KnownBy) {
    out.push(b'{');
    let mut key = None;
    for &(gist, npc) in &k.0 {
        if key == Some(gist) {
            out.push(b',');
        } else {
            if key.is_some() {
                out.extend_from_slice(b"],");
            }
            out.push(b'"');
            int(out, gist);
            out.extend_from_slice(b"\":[");
            key = Some(gist);
        }
        int(out, npc.0);
    }
    if key.is_some() {
        out.push(b']');
    }
    out.push(b'}');
}

fn reflection(out: &mut Vec<u8>, r: &ReflectionDelta) {
    out.extend_from_slice(b"{\"importance\":");
    int(out, r.importance);
    if let Some(e) = &r.evidence {
        out.extend_from_slice(b",\"evidence\":");
        seq(out, e, evidence_entry);
    }
    if let Some(retry) = &r.retry {
        out.extend_from_slice(b",\"retry\":");
        json(out, retry);
    }
    out.push(b'}');
}

fn evidence(out: &mut Vec<u8>, e: &Evidence) {
    out.extend_from_slice(b"{\"id\":");
    int(out, e.id.0);
    if let Some(source) = e.source {
        out.extend_from_slice(b",\"source\":");
        int(out, source.0);
    }
    if !e.facts.is_empty() {
        out.extend_from_slice(b",\"facts\":");
        array(out, &e.facts, |out, f| int(out, *f));
    }
    out.push(b'}');
}

/// What `write` appends to an empty buffer, as text: for the tests that compare a writer
/// with serde.
#[cfg(test)]
pub(crate) fn written(write: impl FnOnce(&mut Vec<u8>)) -> String {
    let mut out = Vec::new();
    write(&mut out);
    String::from_utf8(out).expect("the writers write UTF-8")
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use rand::{RngExt, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    use super::*;
    use crate::checkpoint::FactDelta;
    use crate::checkpoint::SavedReflection;
    use crate::components::{Evidence, Hearing, Position, ReflectionRetry};
    use crate::facts::{FactBook, Knower};
    use crate::grid::Pos;
    use crate::ids::{MemoryId, NpcId};
    use crate::memory::MemoryKind;
    use crate::observation::RecentMemory;
    use crate::wake::{Attention, Intent};

    /// Text with what needs escaping now and then, and beyond ASCII.
    fn text(rng: &mut ChaCha8Rng) -> String {
        let words = [
            "fish", "N42", "said:", "\"the\"", "mayor\\", "鱼", "\n", "\u{1}", "",
        ];
        (0..rng.random_range(0..5))
            .map(|_| words[rng.random_range(0..words.len())])
            .collect::<Vec<_>>()
            .join(" ")
    }

    fn seq<T>(rng: &mut ChaCha8Rng, entry: impl Fn(&mut ChaCha8Rng) -> T) -> SeqDelta<T> {
        let entries = |rng: &mut ChaCha8Rng| {
            let n = rng.random_range(0..4);
            (0..n).map(|_| entry(rng)).collect::<Vec<_>>()
        };
        if rng.random_bool(0.3) {
            SeqDelta::Whole(entries(rng))
        } else {
            SeqDelta::Slide {
                drop: if rng.random_bool(0.5) {
                    0
                } else {
                    rng.random_range(1..40)
                },
                push: entries(rng),
            }
        }
    }

    fn known_by(rng: &mut ChaCha8Rng) -> KnownBy {
        let keys = [0, 7, u64::MAX, 5_454_746_917_428_910_390];
        KnownBy(
            (0..rng.random_range(0..6))
                .map(|_| {
                    (
                        keys[rng.random_range(0..keys.len())],
                        NpcId(rng.random_range(0..50)),
                    )
                })
                .collect(),
        )
    }

    fn maybe<T>(rng: &mut ChaCha8Rng, f: impl FnOnce(&mut ChaCha8Rng) -> T) -> Option<T> {
        rng.random_bool(0.5).then(|| f(rng))
    }

    fn at(rng: &mut ChaCha8Rng) -> Pos {
        Pos::new(rng.random_range(-3..200), rng.random_range(-3..200))
    }

    fn hearing(r: &mut ChaCha8Rng) -> Hearing {
        Hearing(
            (0..r.random_range(0..3))
                .map(|_| HeardLine {
                    speaker: NpcId(r.random()),
                    speaker_name: text(r).into(),
                    text: Arc::from(text(r)),
                    to: maybe(r, |r| text(r).into()),
                    whispered: r.random_bool(0.3),
                })
                .collect(),
        )
    }

    fn window_entry(r: &mut ChaCha8Rng) -> WindowEntry {
        if r.random_bool(0.9) {
            WindowEntry::Id(MemoryId(r.random()))
        } else {
            WindowEntry::Whole(RecentMemory {
                id: MemoryId(r.random()),
                kind: MemoryKind::Conversation,
                content: Arc::from(text(r)),
                importance: r.random(),
                tick: r.random(),
                source: maybe(r, |r| text(r).into()),
                place: Default::default(),
            })
        }
    }

    fn evidence(r: &mut ChaCha8Rng) -> Evidence {
        Evidence {
            id: MemoryId(r.random()),
            source: maybe(r, |r| NpcId(r.random_range(0..20))),
            facts: (0..r.random_range(0..3)).map(|_| r.random()).collect(),
        }
    }

    /// Mostly an id, as a store saves it; now and then whole, as earlier versions did.
    fn evidence_entry(r: &mut ChaCha8Rng) -> EvidenceEntry {
        if r.random_bool(0.8) {
            Entry::Id(MemoryId(r.random()))
        } else {
            Entry::Whole(evidence(r))
        }
    }

    fn retry(r: &mut ChaCha8Rng) -> Option<ReflectionRetry> {
        maybe(r, |r| ReflectionRetry {
            tick: r.random(),
            importance: r.random(),
        })
    }

    fn attention(r: &mut ChaCha8Rng) -> Attention {
        Attention {
            intent: if r.random_bool(0.5) {
                Intent::Walk
            } else {
                Intent::None
            },
            earshot: (0..r.random_range(0..3))
                .map(|_| NpcId(r.random()))
                .collect(),
            last_thought: maybe(r, |r| r.random()),
        }
    }

    fn npc(rng: &mut ChaCha8Rng) -> NpcDelta {
        NpcDelta {
            npc: rng.random(),
            position: maybe(rng, |r| Position(at(r))),
            target: maybe(rng, |r| Target(maybe(r, at))),
            hearing: maybe(rng, hearing),
            short_term: maybe(rng, |r| seq(r, window_entry)),
            known_by: maybe(rng, |r| SetDelta {
                add: known_by(r),
                remove: known_by(r),
            }),
            reflection: maybe(rng, |r| ReflectionDelta {
                importance: r.random(),
                evidence: maybe(r, |r| seq(r, evidence_entry)),
                retry: maybe(r, retry),
            }),
            attention: maybe(rng, attention),
        }
    }

    /// An NPC's whole state: the attention left at its default (unused) half the time.
    fn state(r: &mut ChaCha8Rng) -> NpcState {
        let many = |r: &mut ChaCha8Rng| r.random_range(0..4);
        NpcState {
            position: Position(at(r)),
            target: Target(maybe(r, at)),
            hearing: hearing(r),
            short_term: (0..many(r)).map(|_| window_entry(r)).collect(),
            known_by: known_by(r),
            learned: known_by(r),
            reflection: SavedReflection {
                importance: r.random(),
                evidence: (0..many(r)).map(|_| evidence_entry(r)).collect(),
                retry: retry(r),
            },
            attention: maybe(r, attention).unwrap_or_default(),
        }
    }

    /// Random whole checkpoints: the bytes serde_json writes.
    #[test]
    fn a_whole_checkpoint_is_written_as_serde_json_writes_it() {
        let mut rng = ChaCha8Rng::seed_from_u64(34);
        for round in 0..1_000 {
            let mut facts = FactBook::default();
            if rng.random_bool(0.5) {
                facts.knowers.push(
                    [(
                        NpcId(rng.random()),
                        Knower {
                            tick: rng.random(),
                            from: maybe(&mut rng, |r| NpcId(r.random())),
                            memory: MemoryId(rng.random()),
                        },
                    )]
                    .into(),
                );
                facts.curves.push(vec![(rng.random(), rng.random())]);
            }
            let checkpoint = Checkpoint {
                next_tick: rng.random(),
                next_memory_id: rng.random(),
                digest: text(&mut rng),
                facts,
                npcs: (0..rng.random_range(0..4))
                    .map(|_| state(&mut rng))
                    .collect(),
            };
            assert_eq!(
                written(|out| checkpoint.write_json(out)),
                serde_json::to_string(&checkpoint).expect("encodes"),
                "round {round}: {checkpoint:?}"
            );
        }
    }

    /// Random deltas, every optional part absent and present, strings that need escaping:
    /// the bytes serde_json writes.
    #[test]
    fn a_delta_is_written_as_serde_json_writes_it() {
        let mut rng = ChaCha8Rng::seed_from_u64(21);
        for round in 0..3_000 {
            let delta = CheckpointDelta {
                next_tick: rng.random(),
                prev: rng.random(),
                next_memory_id: rng.random(),
                digest: text(&mut rng),
                facts: (0..rng.random_range(0..2))
                    .map(|_| FactDelta {
                        fact: rng.random_range(0..4),
                        knowers: vec![(
                            NpcId(rng.random()),
                            Knower {
                                tick: rng.random(),
                                from: maybe(&mut rng, |r| NpcId(r.random())),
                                memory: MemoryId(rng.random()),
                            },
                        )],
                        gone: vec![],
                        curve: maybe(&mut rng, |r| seq(r, |r| (r.random(), r.random()))),
                    })
                    .collect(),
                npcs: (0..rng.random_range(0..4)).map(|_| npc(&mut rng)).collect(),
            };
            assert_eq!(
                written(|out| delta.write_json(out)),
                serde_json::to_string(&delta).expect("encodes"),
                "round {round}: {delta:?}"
            );
        }
    }
}
