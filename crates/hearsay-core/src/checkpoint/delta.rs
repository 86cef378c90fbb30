//! Checkpoint deltas: what changed in the world between two saved ticks.
//!
//! A whole checkpoint holds every NPC's state, so saving one after every tick cost the
//! town's whole state every tick (and, while it held each NPC's `KnownBy` whole, more
//! per tick the longer a run went; now it holds only what was learned since the save
//! before, [`super::KnownSoFar`]). From one tick to the next, though, little changes: a
//! few entries slide through each window, a few pairs join `KnownBy`, positions move. A
//! store therefore keeps a whole checkpoint now and then and, after each of the ticks
//! between, a [`CheckpointDelta`]:
//! the NPCs whose state changed, and for each only the parts that did, windows as a
//! slide (entries dropped from the front, entries pushed at the back). A reader takes
//! the whole checkpoint and applies the deltas after it in order
//! ([`Checkpoint::apply`]); what comes out equals, field for field, the checkpoint the
//! run would have saved whole at that tick (the tests check it tick by tick).
//!
//! The delta's JSON (`{"next_tick", "prev", …, "npcs": [{"npc": 3, "position": …}]}`)
//! is its own shape, never mistaken for a whole checkpoint's: a store records which one
//! a row is.

use std::collections::{BTreeSet, VecDeque};

use serde::{Deserialize, Deserializer, Serialize};

use super::{Checkpoint, CheckpointError, EvidenceEntry, NpcState, SavedReflection, WindowEntry};
use crate::components::{Hearing, KnownBy, Position, ReflectionRetry, Target};
use crate::facts::{FactBook, Knower};
use crate::ids::NpcId;
use crate::wake::Attention;

/// The most entries [`SeqDelta::between`] drops from the front looking for a slide
/// before it saves the sequence whole (windows slide by one or two).
const SLIDE_TRIES: usize = 32;

/// How a sequence changed: in the JSON, `{"drop": 1, "push": [...]}` (either left out
/// when empty) or the new sequence as an array.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum SeqDelta<T> {
    /// Replaced: the new sequence. (First: an array must never be read as a slide, which
    /// serde would otherwise accept in the array form of a struct.)
    Whole(Vec<T>),
    /// `drop` entries left the front and `push` joined the back.
    Slide {
        /// Entries gone from the front.
        #[serde(default, skip_serializing_if = "is_zero")]
        drop: usize,
        /// Entries added at the back, in order.
        #[serde(default = "Vec::new", skip_serializing_if = "Vec::is_empty")]
        push: Vec<T>,
    },
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

/// A sequence [`SeqDelta`] can compare and change: a `Vec` or a `VecDeque`.
pub trait Sequence<T> {
    /// Its length.
    fn len(&self) -> usize;
    /// Whether it is empty.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// The entry at `i` (`i < len`).
    fn at(&self, i: usize) -> &T;
    /// Drops `n` entries from the front (`n <= len`) and pushes `push` at the back.
    fn slide(&mut self, n: usize, push: Vec<T>);
    /// Replaces every entry with `with`.
    fn replace(&mut self, with: Vec<T>);
}

impl<T: Clone> Sequence<T> for Vec<T> {
    fn len(&self) -> usize {
        self.len()
    }
    fn at(&self, i: usize) -> &T {
        &self[i]
    }
    fn slide(&mut self, n: usize, push: Vec<T>) {
        self.drain(..n);
        self.extend(push);
    }
    fn replace(&mut self, with: Vec<T>) {
        *self = with;
    }
}

impl<T: Clone> Sequence<T> for VecDeque<T> {
    fn len(&self) -> usize {
        self.len()
    }
    fn at(&self, i: usize) -> &T {
        &self[i]
    }
    fn slide(&mut self, n: usize, push: Vec<T>) {
        self.drain(..n);
        self.extend(push);
    }
    fn replace(&mut self, with: Vec<T>) {
        *self = with.into();
    }
}

impl<T: Clone + PartialEq> SeqDelta<T> {
    /// How `old` became `new`; `None` when they are equal.
    pub fn between(old: &impl Sequence<T>, new: &impl Sequence<T>) -> Option<Self> {
        Self::between_by(old, new, T::eq)
    }

    /// [`SeqDelta::between`] for a sequence whose entries `same` tells apart more
    /// cheaply than `==` does: `same(a, b)` must hold exactly when `a == b`. A window of
    /// entries that each carry a unique id and never change once pushed compares by id;
    /// the slide's search compares every kept entry, once per drop it tries, so the
    /// full comparison made a tick's delta cost more as the windows filled.
    pub fn between_by(
        old: &impl Sequence<T>,
        new: &impl Sequence<T>,
        same: impl Fn(&T, &T) -> bool,
    ) -> Option<Self> {
        let equal_from = |k: usize| {
            let kept = old.len() - k;
            kept <= new.len() && (0..kept).all(|i| same(old.at(k + i), new.at(i)))
        };
        if old.len() == new.len() && equal_from(0) {
            return None;
        }
        let whole = || Self::Whole((0..new.len()).map(|i| new.at(i).clone()).collect());
        // The smallest drop that leaves a prefix of `new`: a kept entry is kept.
        let Some(drop) = (0..old.len().min(SLIDE_TRIES)).find(|&k| equal_from(k)) else {
            return Some(whole());
        };
        let kept = old.len() - drop;
        Some(Self::Slide {
            drop,
            push: (kept..new.len()).map(|i| new.at(i).clone()).collect(),
        })
    }

    /// [`SeqDelta::between_by`] for a sequence whose entries carry keys that strictly
    /// ascend, and that changes only by entries leaving its front and joining its back
    /// (keys above every key it held): a reflection's evidence, keyed by memory id. Then
    /// the drop is where `new`'s first key stands in `old` (a binary search), and the
    /// kept entries are the same when the first and last of them are: a few entries
    /// read, not all of them. Walking every NPC's evidence twice (the world's and the
    /// saved one) was most of a checkpoint delta's cost once the windows had filled.
    /// The answer is [`SeqDelta::between`]'s (debug builds check it).
    pub fn between_ascending(
        old: &impl Sequence<T>,
        new: &impl Sequence<T>,
        key: impl Fn(&T) -> u64,
    ) -> Option<Self> {
        let answer = Self::ascending(old, new, &key);
        // Entries compared whole: also catches one changed in place.
        debug_assert!(
            answer == Self::between(old, new),
            "a sequence changed other than at its ends"
        );
        answer
    }

    fn ascending(
        old: &impl Sequence<T>,
        new: &impl Sequence<T>,
        key: &impl Fn(&T) -> u64,
    ) -> Option<Self> {
        let whole = || Self::Whole((0..new.len()).map(|i| new.at(i).clone()).collect());
        let (Some(last_old), Some(first_new)) = (
            old.len().checked_sub(1),
            (!new.is_empty()).then(|| key(new.at(0))),
        ) else {
            // Either is empty: unchanged when both are, else the new one whole (a slide
            // keeps at least one entry).
            return (old.len() != new.len()).then(whole);
        };
        // The first entry of `old` not below `new`'s first: where a slide starts.
        let (mut low, mut high) = (0, old.len());
        while low < high {
            let mid = low + (high - low) / 2;
            if key(old.at(mid)) < first_new {
                low = mid + 1;
            } else {
                high = mid;
            }
        }
        let drop = low;
        let kept = old.len() - drop;
        let slides = drop < old.len()
            && key(old.at(drop)) == first_new
            && kept <= new.len()
            && key(new.at(kept - 1)) == key(old.at(last_old));
        if !slides {
            return Some(whole());
        }
        if drop == 0 && kept == new.len() {
            return None;
        }
        if drop >= SLIDE_TRIES {
            // `between_by` looks no further for a slide.
            return Some(whole());
        }
        Some(Self::Slide {
            drop,
            push: (kept..new.len()).map(|i| new.at(i).clone()).collect(),
        })
    }

    /// Applies the change to `seq`, its entries moved in; a drop longer than the
    /// sequence is refused.
    pub fn apply(
        self,
        seq: &mut impl Sequence<T>,
        what: &'static str,
    ) -> Result<(), CheckpointError> {
        match self {
            Self::Slide { drop, push } => {
                if drop > seq.len() {
                    return Err(CheckpointError::Delta(format!(
                        "{what}: drops {drop} of {} entries",
                        seq.len()
                    )));
                }
                seq.slide(drop, push);
            }
            Self::Whole(with) => seq.replace(with),
        }
        Ok(())
    }
}

/// What changed in a [`KnownBy`]: pairs learned, pairs gone (none yet: the set only
/// grows, but a delta that could not say so would be wrong the day it shrinks).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SetDelta {
    /// Pairs that joined.
    #[serde(default, skip_serializing_if = "is_empty_set")]
    pub add: KnownBy,
    /// Pairs that left.
    #[serde(default, skip_serializing_if = "is_empty_set")]
    pub remove: KnownBy,
}

fn is_empty_set(s: &KnownBy) -> bool {
    s.0.is_empty()
}

impl SetDelta {
    /// How `old` became `new`, in one merge walk of the two sorted sets (they grow with
    /// the gossip: one pass, not a comparison and two differences); `None` if equal.
    pub fn between(old: &KnownBy, new: &KnownBy) -> Option<Self> {
        let (mut add, mut remove) = (Vec::new(), Vec::new());
        let (mut a, mut b) = (old.0.iter().peekable(), new.0.iter().peekable());
        loop {
            match (a.peek(), b.peek()) {
                (Some(&&x), Some(&&y)) => match x.cmp(&y) {
                    std::cmp::Ordering::Less => {
                        remove.push(x);
                        a.next();
                    }
                    std::cmp::Ordering::Greater => {
                        add.push(y);
                        b.next();
                    }
                    std::cmp::Ordering::Equal => {
                        a.next();
                        b.next();
                    }
                },
                (Some(&&x), None) => {
                    remove.push(x);
                    a.next();
                }
                (None, Some(&&y)) => {
                    add.push(y);
                    b.next();
                }
                (None, None) => break,
            }
        }
        // Sorted already, so the sets are built in bulk.
        (!add.is_empty() || !remove.is_empty()).then(|| Self {
            add: KnownBy(add.into_iter().collect::<BTreeSet<_>>()),
            remove: KnownBy(remove.into_iter().collect::<BTreeSet<_>>()),
        })
    }

    pub(crate) fn apply(self, set: &mut KnownBy) {
        for pair in &self.remove.0 {
            set.0.remove(pair);
        }
        set.0.extend(self.add.0);
    }
}

/// What changed in an NPC's reflection tally ([`SavedReflection`]): the tally and the
/// retry as they are now, the evidence as a slide (of memory ids, as a store saves it).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReflectionDelta {
    /// Importance accumulated since the last reflection.
    pub importance: u32,
    /// The evidence's change, if it changed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub evidence: Option<SeqDelta<EvidenceEntry>>,
    /// The retry, if it changed (`null`: none now).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "present"
    )]
    pub retry: Option<Option<ReflectionRetry>>,
}

/// Deserializes a present field, even `null`, as `Some`: a missing field stays `None`
/// (unchanged), a `null` one means "changed to none".
fn present<'de, D: Deserializer<'de>, T: Deserialize<'de>>(d: D) -> Result<Option<T>, D::Error> {
    T::deserialize(d).map(Some)
}

/// One NPC's changes; a part left out did not change.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct NpcDelta {
    /// The NPC's index (its id).
    pub npc: u32,
    /// Where it stands now.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub position: Option<Position>,
    /// Where it walks now (`null`: nowhere).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "present"
    )]
    pub target: Option<Target>,
    /// What it heard during the tick (whole: it is replaced every tick).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hearing: Option<Hearing>,
    /// Its window's slide (memory ids).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub short_term: Option<SeqDelta<WindowEntry>>,
    /// Pairs it learned (others now known to have heard something).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub known_by: Option<SetDelta>,
    /// Its tally toward the next reflection.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reflection: Option<ReflectionDelta>,
    /// The wake rules' memory of it, whole.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attention: Option<Attention>,
}

/// What a view knows of an NPC's [`KnownBy`] since the state a delta is taken against.
pub(crate) enum KnownByView<'a> {
    /// The whole set now (a saved state): compared with the old one.
    Whole(&'a KnownBy),
    /// The pairs it learned since, none of them in the old set (the world's journal,
    /// [`crate::resources::KnownByAdded`]): the delta without comparing sets.
    Added(KnownBy),
}

/// An NPC's state as a delta is taken from: the world's components, or a saved state.
pub(crate) struct NpcView<'a> {
    pub position: &'a Position,
    pub target: &'a Target,
    pub hearing: &'a Hearing,
    /// The window as a store saves it (ids).
    pub short_term: &'a Vec<WindowEntry>,
    /// How its `KnownBy` is known to have changed.
    pub known_by: KnownByView<'a>,
    /// The tally as a store saves it (evidence by id).
    pub reflection: &'a SavedReflection,
    pub attention: &'a Attention,
}

impl<'a> NpcView<'a> {
    /// A saved state as a view (every part compared).
    pub(crate) fn of(state: &'a NpcState) -> Self {
        Self {
            position: &state.position,
            target: &state.target,
            hearing: &state.hearing,
            short_term: &state.short_term,
            known_by: KnownByView::Whole(&state.known_by),
            reflection: &state.reflection,
            attention: &state.attention,
        }
    }
}

impl NpcDelta {
    /// How NPC `npc` went from `old` to `new`; `None` when nothing changed.
    pub(crate) fn between(npc: u32, old: &NpcState, new: &NpcView<'_>) -> Option<Self> {
        let changed = |same: bool| !same;
        // One pass over the evidence (the slide's search finds it unchanged, too). Entries
        // are pushed, popped and drained, never changed in place, and each names its own
        // memory: the same id is the same entry.
        let evidence = SeqDelta::between_ascending(
            &old.reflection.evidence,
            &new.reflection.evidence,
            |e: &EvidenceEntry| e.id().0,
        );
        let reflection = (evidence.is_some()
            || old.reflection.importance != new.reflection.importance
            || old.reflection.retry != new.reflection.retry)
            .then(|| ReflectionDelta {
                importance: new.reflection.importance,
                evidence,
                retry: (old.reflection.retry != new.reflection.retry)
                    .then_some(new.reflection.retry),
            });
        let delta = Self {
            npc,
            position: changed(old.position == *new.position).then_some(*new.position),
            target: changed(old.target == *new.target).then_some(*new.target),
            hearing: changed(old.hearing == *new.hearing).then(|| new.hearing.clone()),
            short_term: SeqDelta::between(&old.short_term, new.short_term),
            known_by: match &new.known_by {
                KnownByView::Whole(k) => SetDelta::between(&old.known_by, k),
                KnownByView::Added(add) => (!add.0.is_empty()).then(|| SetDelta {
                    add: add.clone(),
                    remove: KnownBy::default(),
                }),
            },
            reflection,
            attention: changed(old.attention == *new.attention).then(|| new.attention.clone()),
        };
        let unchanged = delta.position.is_none()
            && delta.target.is_none()
            && delta.hearing.is_none()
            && delta.short_term.is_none()
            && delta.known_by.is_none()
            && delta.reflection.is_none()
            && delta.attention.is_none();
        (!unchanged).then_some(delta)
    }

    fn apply(self, state: &mut NpcState) -> Result<(), CheckpointError> {
        if let Some(p) = self.position {
            state.position = p;
        }
        if let Some(t) = self.target {
            state.target = t;
        }
        if let Some(h) = self.hearing {
            state.hearing = h;
        }
        if let Some(s) = self.short_term {
            s.apply(&mut state.short_term, "a short-term window")?;
        }
        if let Some(k) = self.known_by {
            k.apply(&mut state.known_by);
        }
        if let Some(r) = self.reflection {
            state.reflection.importance = r.importance;
            if let Some(retry) = r.retry {
                state.reflection.retry = retry;
            }
            if let Some(e) = r.evidence {
                e.apply(&mut state.reflection.evidence, "a reflection's evidence")?;
            }
        }
        if let Some(a) = self.attention {
            state.attention = a;
        }
        Ok(())
    }
}

/// What changed for one tracked fact: knowers new or changed, knowers gone, the curve.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FactDelta {
    /// The fact's index in the book.
    pub fact: usize,
    /// Knowers that are new, or whose record changed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub knowers: Vec<(NpcId, Knower)>,
    /// Knowers no longer in the book.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub gone: Vec<NpcId>,
    /// The (tick, knowers) curve's new points.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub curve: Option<SeqDelta<(u64, u32)>>,
}

impl FactDelta {
    /// Each fact's changes from `old` to `new` (the same facts: a scenario's book).
    pub(crate) fn between(old: &FactBook, new: &FactBook) -> Vec<Self> {
        let (no_knowers, no_curve) = (Default::default(), Vec::new());
        let mut out = Vec::new();
        for (fact, (nk, nc)) in new.knowers.iter().zip(&new.curves).enumerate() {
            let ok = old.knowers.get(fact).unwrap_or(&no_knowers);
            let oc = old.curves.get(fact).unwrap_or(&no_curve);
            if ok == nk && oc == nc {
                continue;
            }
            out.push(Self {
                fact,
                knowers: nk
                    .iter()
                    .filter(|(npc, k)| ok.get(npc) != Some(k))
                    .map(|(&npc, &k)| (npc, k))
                    .collect(),
                gone: ok
                    .keys()
                    .filter(|npc| !nk.contains_key(npc))
                    .copied()
                    .collect(),
                curve: SeqDelta::between(oc, nc),
            });
        }
        out
    }

    fn apply(self, book: &mut FactBook) -> Result<(), CheckpointError> {
        let (Some(knowers), Some(curve)) = (
            book.knowers.get_mut(self.fact),
            book.curves.get_mut(self.fact),
        ) else {
            return Err(CheckpointError::Delta(format!(
                "names fact {}, and the book has {}",
                self.fact,
                book.specs.len()
            )));
        };
        for npc in &self.gone {
            knowers.remove(npc);
        }
        knowers.extend(self.knowers);
        if let Some(c) = self.curve {
            c.apply(curve, "a fact's curve")?;
        }
        Ok(())
    }
}

/// The world after a tick, as the changes since the checkpoint saved before it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CheckpointDelta {
    /// The tick that runs next.
    pub next_tick: u64,
    /// The `next_tick` of the checkpoint this applies to.
    pub prev: u64,
    /// The id the next memory gets.
    pub next_memory_id: u64,
    /// The rolling hash of the event log so far.
    pub digest: String,
    /// Facts whose knowers or curve changed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub facts: Vec<FactDelta>,
    /// NPCs whose state changed, in id order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub npcs: Vec<NpcDelta>,
}

impl Checkpoint {
    /// How this checkpoint differs from `base` (an earlier one of the same run), every
    /// part compared: what [`crate::Sim::save_delta`] computes from the world itself.
    pub fn delta_from(&self, base: &Checkpoint) -> CheckpointDelta {
        CheckpointDelta {
            next_tick: self.next_tick,
            prev: base.next_tick,
            next_memory_id: self.next_memory_id,
            digest: self.digest.clone(),
            facts: FactDelta::between(&base.facts, &self.facts),
            npcs: base
                .npcs
                .iter()
                .zip(&self.npcs)
                .enumerate()
                .filter_map(|(i, (old, new))| NpcDelta::between(i as u32, old, &NpcView::of(new)))
                .collect(),
        }
    }

    /// [`Checkpoint::apply`] for the state a run keeps as its last save
    /// ([`crate::Sim::save_delta`]'s base), which is what a store's whole checkpoint would
    /// hold: each NPC's `learned` becomes what the delta says it learned (nothing for the
    /// rest), not the set so far — a whole checkpoint written from it holds what was learned
    /// since the save before, as [`crate::Sim::save_whole`]'s does.
    pub(crate) fn learned_by_delta(
        &mut self,
        delta: CheckpointDelta,
    ) -> Result<(), CheckpointError> {
        debug_assert!(
            self.npcs.iter().all(|n| n.known_by.is_empty()),
            "a saved state holds no KnownBy whole"
        );
        // The delta's pairs land in the (empty) `known_by`; moved to `learned`, they
        // replace the last save's there, and an NPC that learned nothing is left none.
        self.apply(delta)?;
        for npc in &mut self.npcs {
            npc.learned = std::mem::take(&mut npc.known_by);
        }
        Ok(())
    }

    /// Applies `delta`, which must have been taken against this checkpoint (its `prev`
    /// is this one's `next_tick`), its parts moved in; a delta that does not fit is
    /// refused and leaves this checkpoint in an unspecified state.
    pub fn apply(&mut self, delta: CheckpointDelta) -> Result<(), CheckpointError> {
        if delta.prev != self.next_tick {
            return Err(CheckpointError::Delta(format!(
                "it follows the checkpoint before tick {}, not the one before tick {}",
                delta.prev, self.next_tick
            )));
        }
        for npc in delta.npcs {
            let count = self.npcs.len();
            let state = self.npcs.get_mut(npc.npc as usize).ok_or_else(|| {
                CheckpointError::Delta(format!("names NPC {} of {count}", npc.npc))
            })?;
            npc.apply(state)?;
        }
        for fact in delta.facts {
            fact.apply(&mut self.facts)?;
        }
        self.next_tick = delta.next_tick;
        self.next_memory_id = delta.next_memory_id;
        self.digest = delta.digest;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::components::Evidence;

    fn change(old: &[u32], new: &[u32]) -> Option<SeqDelta<u32>> {
        let delta = SeqDelta::between(&old.to_vec(), &new.to_vec());
        if let Some(d) = &delta {
            let mut v = old.to_vec();
            d.clone().apply(&mut v, "test").expect("applies");
            assert_eq!(v, new, "{old:?} -> {new:?} by {d:?}");
            let mut q: VecDeque<u32> = old.iter().copied().collect();
            d.clone().apply(&mut q, "test").expect("applies");
            assert!(q.iter().eq(new), "as a deque too");
        }
        delta
    }

    #[test]
    fn a_sequence_changes_by_its_slide_or_whole() {
        assert_eq!(change(&[1, 2, 3], &[1, 2, 3]), None);
        let slide = |drop, push: &[u32]| {
            Some(SeqDelta::Slide {
                drop,
                push: push.to_vec(),
            })
        };
        assert_eq!(change(&[1, 2, 3], &[2, 3, 4]), slide(1, &[4]));
        assert_eq!(change(&[1, 2, 3], &[3, 4, 5]), slide(2, &[4, 5]));
        assert_eq!(change(&[1, 2], &[1, 2, 3]), slide(0, &[3]));
        assert_eq!(change(&[1, 2, 3], &[3]), slide(2, &[]));
        assert_eq!(change(&[1, 2, 3], &[]), Some(SeqDelta::Whole(vec![])));
        assert_eq!(
            change(&[1, 2, 3], &[9, 8]),
            Some(SeqDelta::Whole(vec![9, 8]))
        );
        assert_eq!(change(&[], &[7]), Some(SeqDelta::Whole(vec![7])));
        // A repeated entry: the smallest drop that fits.
        assert_eq!(change(&[5, 5, 5], &[5, 5, 5, 5]), slide(0, &[5]));
        // The JSON: a slide is an object, a whole sequence an array, and each reads back
        // as what it was (an array is never taken for a slide).
        for (delta, json) in [
            (slide(1, &[4]).expect("d"), r#"{"drop":1,"push":[4]}"#),
            (slide(0, &[3]).expect("d"), r#"{"push":[3]}"#),
            (slide(2, &[]).expect("d"), r#"{"drop":2}"#),
            (SeqDelta::Whole(vec![3]), "[3]"),
            (SeqDelta::Whole(vec![3, 4]), "[3,4]"),
        ] {
            assert_eq!(serde_json::to_string(&delta).expect("json"), json);
            assert_eq!(
                serde_json::from_str::<SeqDelta<u32>>(json).expect("reads"),
                delta
            );
        }
        let mut short = vec![1];
        assert!(
            slide(2, &[])
                .expect("delta")
                .apply(&mut short, "test")
                .is_err()
        );
    }

    #[test]
    fn ascending_keys_find_the_slide_that_comparing_every_entry_finds() {
        // Every way a window of ascending ids changes at its ends: pushes of 0 to 40
        // (past the 32 drops a slide may have), drops of any size, drained whole,
        // emptied, from empty; each against the answer of comparing every entry.
        let mut cases = 0;
        for old_len in [0u64, 1, 2, 5, 31, 32, 33, 60] {
            let old: VecDeque<u64> = (100..100 + old_len).collect();
            for drop in 0..=old_len {
                for push in [0u64, 1, 3, 40] {
                    let new: VecDeque<u64> = old
                        .iter()
                        .skip(drop as usize)
                        .copied()
                        .chain(500..500 + push)
                        .collect();
                    assert_eq!(
                        SeqDelta::between_ascending(&old, &new, |&k| k),
                        SeqDelta::between(&old, &new),
                        "{old_len} entries, {drop} dropped, {push} pushed"
                    );
                    cases += 1;
                }
            }
        }
        assert!(cases > 500);
    }

    #[test]
    fn evidence_compared_by_id_slides_as_compared_whole() {
        // A window of 30 as `remember` keeps it: pushed at the back (one to three a
        // tick, some heard and naming facts), popped at the front past its cap, drained
        // by a reflection. Every tick's delta by id equals the one by `==`.
        let entry = |id: u64| Evidence {
            id: crate::MemoryId(id),
            source: id.is_multiple_of(3).then_some(NpcId(id as u32 % 7)),
            facts: if id.is_multiple_of(5) {
                vec![0, 2]
            } else {
                Vec::new()
            },
        };
        let by_id = |a: &Evidence, b: &Evidence| a.id == b.id;
        let mut old: VecDeque<Evidence> = VecDeque::new();
        let mut next = 1;
        let mut slides = 0;
        for tick in 0..200u64 {
            let mut new = old.clone();
            if tick % 37 == 36 {
                new.clear();
            }
            for _ in 0..1 + tick % 3 {
                new.push_back(entry(next));
                next += 1;
            }
            while new.len() > 30 {
                new.pop_front();
            }
            let full = SeqDelta::between(&old, &new);
            assert_eq!(SeqDelta::between_by(&old, &new, by_id), full, "tick {tick}");
            assert_eq!(
                SeqDelta::ascending(&old, &new, &|e: &Evidence| e.id.0),
                full,
                "tick {tick}, by ascending id"
            );
            slides += usize::from(matches!(full, Some(SeqDelta::Slide { drop: 1.., .. })));
            let mut applied = old.clone();
            full.expect("a tick changes the window")
                .apply(&mut applied, "test")
                .expect("applies");
            assert_eq!(applied, new);
            old = new;
        }
        assert!(slides > 100, "the window filled and slid: {slides} slides");
        // Unchanged is unchanged by id too.
        assert_eq!(SeqDelta::between_by(&old, &old.clone(), by_id), None);
    }

    #[test]
    fn a_target_changed_to_nowhere_is_not_a_target_unchanged() {
        let to_nowhere = NpcDelta {
            npc: 4,
            position: None,
            target: Some(Target(None)),
            hearing: None,
            short_term: None,
            known_by: None,
            reflection: None,
            attention: None,
        };
        let json = serde_json::to_string(&to_nowhere).expect("json");
        assert_eq!(json, r#"{"npc":4,"target":null}"#);
        assert_eq!(
            serde_json::from_str::<NpcDelta>(&json).expect("reads"),
            to_nowhere
        );
        let unchanged: NpcDelta = serde_json::from_str(r#"{"npc":4}"#).expect("reads");
        assert_eq!(unchanged.target, None);
    }

    #[test]
    fn known_by_changes_by_its_pairs() {
        let set =
            |pairs: &[(u64, u32)]| KnownBy(pairs.iter().map(|&(k, n)| (k, NpcId(n))).collect());
        let old = set(&[(1, 2), (1, 3), (9, 4)]);
        let new = set(&[(1, 2), (1, 3), (5, 1), (9, 5)]);
        let d = SetDelta::between(&old, &new).expect("changed");
        assert_eq!(d.add, set(&[(5, 1), (9, 5)]));
        assert_eq!(d.remove, set(&[(9, 4)]));
        let mut applied = old.clone();
        d.apply(&mut applied);
        assert_eq!(applied, new);
        assert_eq!(SetDelta::between(&new, &new), None);
    }
}
