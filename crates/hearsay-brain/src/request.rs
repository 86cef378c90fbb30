//! What a brain is told: the NPC, what it perceives, what it recalls.

use hearsay_core::{Grid, Language, MemoryId, MemoryKind, NpcId, Observation, Pos};
use serde::{Deserialize, Serialize};

/// A recalled memory as a brain sees it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Recollection {
    /// Its id (cited on the tape).
    pub id: MemoryId,
    /// Seed, observation, conversation or reflection.
    pub kind: MemoryKind,
    /// The memory as stored, phrased in the scenario's language (shared with the store's
    /// copy).
    pub content: std::sync::Arc<str>,
    /// 1–10.
    pub importance: u8,
    /// The tick it was formed (0 for seed memories).
    pub tick: u64,
    /// Name of the NPC it was heard from.
    pub source: Option<hearsay_core::Name>,
    /// The first of the scenario's places its text names, as the memory carries it
    /// ([`hearsay_core::MemoryRecord::place`]).
    #[serde(skip)]
    pub place: hearsay_core::PlaceNamed,
}

/// A named place the NPC knows of.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct KnownPlace {
    /// The place's unique name from the scenario.
    pub name: String,
    /// The place's cell: what a `move` toward it targets.
    pub at: Pos,
}

/// Everything a brain may use to decide, for one NPC at one tick.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BrainRequest {
    /// The scenario's root seed (the heuristic brain derives its RNG stream from it).
    pub seed: u64,
    /// The language the NPC thinks and speaks in.
    pub language: Language,
    /// Who the NPC is (shared: the same text every tick).
    pub persona: std::sync::Arc<str>,
    /// The map's extent: targets must lie inside.
    pub grid: Grid,
    /// Every named place on the map (the NPC knows the town; one list, shared by every
    /// request of a run).
    pub places: std::sync::Arc<[KnownPlace]>,
    /// What it perceives now, including its short-term window.
    pub observation: Observation,
    /// What recall returned, best first.
    pub recalled: Vec<Recollection>,
}

/// The prefix of a request digest in the current form: the request encoded with postcard
/// 1 (serde's data model written compactly: varints, length-prefixed strings and
/// sequences, no field names) and hashed with XXH3-128, as 32 hex digits after it.
///
/// Why not the JSON the first tapes hashed: postcard's bytes are fewer than half of the
/// JSON's (no keys, no quoting, no escapes to look for), and XXH3 hashes an input of a
/// few hundred bytes many times faster than blake3, which cannot spread one 1 KiB chunk
/// over SIMD lanes. The digest is taken once per NPC per tick; what the change saved is
/// measured in `docs/BENCHMARKS.md` (fifteenth round). The digest is a check that
/// replay rebuilt what the run asked, not a seal against forgery (whoever can edit a tape
/// can edit its decisions), so a fast non-cryptographic 128-bit hash serves.
///
/// postcard writes nothing for a field serde skips (a `None` source, an unwhispered line),
/// so in principle two requests could encode alike; it would take a change that adds
/// bytes in one place and removes exactly as many in another, leaving every other byte
/// of the request where it was (a test checks that each part of a request, the skipped
/// fields included, moves the digest).
pub const DIGEST_PREFIX: &str = "v2:";

mod encode;

/// Digest of `value` in the current form (see [`DIGEST_PREFIX`]), encoded by postcard.
fn digest_of<T: Serialize>(value: &T) -> String {
    digest_of_encoded(|buffer| {
        *buffer = postcard::to_extend(value, std::mem::take(buffer)).unwrap_or_else(|_| {
            // The request types are plain structs, sequences of known length and unit
            // enums, all of which postcard encodes; were that to change, hash nothing
            // rather than fail a call (tests pin the digest of every request type).
            Vec::new()
        });
    })
}

/// The digest, in the current form, of the bytes `encode` writes into an empty buffer.
/// The buffer is one per thread, reused: the digest is taken once per NPC per tick.
/// Never inlined, so a profile finds every digest, encoding included, under its name
/// (`scripts/cpu_profile.py`'s stage "the request's digest").
#[inline(never)]
fn digest_of_encoded(encode: impl FnOnce(&mut Vec<u8>)) -> String {
    use std::cell::RefCell;
    thread_local! {
        static ENCODED: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
    }
    let hash = ENCODED.with_borrow_mut(|buffer| {
        buffer.clear();
        encode(buffer);
        twox_hash::XxHash3_128::oneshot(buffer)
    });
    // The 32 hex digits `{hash:032x}` writes, without the formatter's machinery (taken
    // once per NPC per tick, it was a sixth of the digest's time).
    let mut digits = [0u8; 32];
    let mut digest = String::with_capacity(DIGEST_PREFIX.len() + digits.len());
    digest.push_str(DIGEST_PREFIX);
    // 16 bytes always fill 32 digits: the one error (a slice of another length) cannot
    // happen here.
    if hex::encode_to_slice(hash.to_be_bytes(), &mut digits).is_ok() {
        digest.extend(digits.iter().map(|&d| char::from(d)));
    }
    digest
}

/// Digest of `value` in the first form, which tapes written before [`DIGEST_PREFIX`]
/// hold: the first 32 hex digits of the blake3 hash of its JSON, no prefix. Replay still
/// checks those tapes with it. The JSON is streamed into the hasher through a buffer.
fn json_digest_of<T: Serialize>(value: &T) -> String {
    use std::io::Write;
    let mut hasher = blake3::Hasher::new();
    let streamed = {
        let mut buffered = std::io::BufWriter::with_capacity(8192, &mut hasher);
        serde_json::to_writer(&mut buffered, value).is_ok() && buffered.flush().is_ok()
    };
    if !streamed {
        // As the digest of the empty serialization, as it always was.
        hasher = blake3::Hasher::new();
    }
    hasher.finalize().to_hex()[..32].to_owned()
}

/// `value`'s digest in the form `recorded` is in: the current one when it carries
/// [`DIGEST_PREFIX`], else the first. A tape may hold both (a run resumed or forked by a
/// newer hearsay continues in the current form), so each line's own digest decides.
/// `current` is the value's digest in the current form (each request type takes it its
/// own way).
fn digest_like<T: Serialize>(
    value: &T,
    recorded: &str,
    current: impl FnOnce() -> String,
) -> String {
    if recorded.starts_with(DIGEST_PREFIX) {
        current()
    } else {
        json_digest_of(value)
    }
}

impl BrainRequest {
    /// A digest of the whole request, in the current form: equal requests, equal
    /// digests. What the tape records.
    ///
    /// The request is encoded by hand ([`encode`]), to the bytes postcard writes.
    pub fn digest(&self) -> String {
        digest_of_encoded(|buffer| encode::request(buffer, self))
    }

    /// This request's digest in the form of `recorded`, a digest read from a tape:
    /// equal to it when the request is the one recorded, whichever hearsay wrote it.
    pub fn digest_like(&self, recorded: &str) -> String {
        digest_like(self, recorded, || self.digest())
    }
}

/// Everything a brain may use to reflect: one NPC, at one tick, looking back over its
/// latest memories.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ReflectRequest {
    /// The scenario's root seed.
    pub seed: u64,
    /// The language the NPC thinks in.
    pub language: Language,
    /// The reflecting NPC's id (its index in the scenario's NPC list).
    pub npc: NpcId,
    /// The reflecting NPC's name.
    pub name: String,
    /// The scenario's free-text description of the NPC.
    pub persona: String,
    /// The tick it reflects at; its insights are dated with it.
    pub tick: u64,
    /// Every named place on the map.
    pub places: Vec<KnownPlace>,
    /// The memories it reflects on, oldest first.
    pub memories: Vec<Recollection>,
    /// At most this many insights are kept.
    pub insights_max: usize,
}

impl ReflectRequest {
    /// A digest of the whole request, in the current form.
    pub fn digest(&self) -> String {
        digest_of(self)
    }

    /// This request's digest in the form of `recorded` (see [`BrainRequest::digest_like`]).
    pub fn digest_like(&self, recorded: &str) -> String {
        digest_like(self, recorded, || self.digest())
    }
}

/// A question put to an NPC (`hearsay ask`): who it is, what it recalls for the question,
/// its latest memories — all as they were at one tick of a finished run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AskRequest {
    /// The scenario's root seed.
    pub seed: u64,
    /// The language the NPC speaks.
    pub language: Language,
    /// The asked NPC's id (its index in the scenario's NPC list).
    pub npc: NpcId,
    /// The asked NPC's name.
    pub name: String,
    /// The scenario's free-text description of the NPC.
    pub persona: String,
    /// The tick it is asked at.
    pub tick: u64,
    /// Every named place on the map.
    pub places: Vec<KnownPlace>,
    /// The user's question, trimmed; also the recall query.
    pub question: String,
    /// What recall returns for the question, best first, with each one's cosine
    /// relevance to it.
    pub recalled: Vec<(Recollection, f32)>,
    /// Its latest memories, oldest first (the short-term window).
    pub recent: Vec<Recollection>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use hearsay_core::{HeardLine, RecentMemory, SeenNpc};
    use std::sync::Arc;

    /// A request with every optional part present once and absent once.
    fn request() -> BrainRequest {
        let recent = |id: u64, source: Option<&str>| RecentMemory {
            id: MemoryId(id),
            kind: MemoryKind::Conversation,
            content: format!("memory {id}: the mayor will resign").into(),
            importance: 8,
            tick: id,
            source: source.map(Into::into),
            place: Default::default(),
        };
        BrainRequest {
            seed: 42,
            language: Language::En,
            persona: "a curious fishmonger".into(),
            grid: Grid {
                width: 40,
                height: 30,
            },
            places: vec![KnownPlace {
                name: "market".into(),
                at: Pos::new(3, 4),
            }]
            .into(),
            observation: Observation {
                npc: NpcId(1),
                name: "Ann".into(),
                tick: 7,
                at: Pos::new(2, 2),
                target: Some(Pos::new(3, 4)),
                seen_npcs: vec![SeenNpc {
                    id: NpcId(2),
                    name: "Bob".into(),
                    at: Pos::new(2, 3),
                    audible: true,
                }],
                seen_places: vec![],
                heard: vec![HeardLine {
                    speaker: NpcId(2),
                    speaker_name: "Bob".into(),
                    text: "did you hear?".into(),
                    to: Some("Ann".into()),
                    whispered: true,
                }],
                witnessed: vec![],
                recent: vec![recent(3, None), recent(5, Some("Bob"))].into(),
                known_by: vec![(9, NpcId(2))],
            },
            recalled: vec![Recollection {
                id: MemoryId(3),
                kind: MemoryKind::Seed,
                content: "the mayor owes money".into(),
                importance: 5,
                tick: 0,
                source: None,
                place: Default::default(),
            }],
        }
    }

    fn reflect_request() -> ReflectRequest {
        let base = request();
        ReflectRequest {
            seed: 42,
            language: Language::Zh,
            npc: NpcId(1),
            name: "Ann".into(),
            persona: base.persona.to_string(),
            tick: 9,
            places: base.places.to_vec(),
            memories: base.recalled,
            insights_max: 2,
        }
    }

    /// The first form, as hearsay computed it before the current one existed (at
    /// eadc6ec, for these very requests): tapes written then must still replay.
    #[test]
    fn the_first_form_is_the_one_older_tapes_hold() {
        let old = "204280f8c6ac0c85d966bdd69895eee5";
        assert_eq!(json_digest_of(&request()), old);
        assert_eq!(request().digest_like(old), old);
        let old_reflection = "db53db96bda71ae75227df916946d1c9";
        assert_eq!(
            reflect_request().digest_like(old_reflection),
            old_reflection
        );
        // A first-form digest of another request does not match.
        let mut other = request();
        other.seed += 1;
        assert_ne!(other.digest_like(old), old);
    }

    /// The current form, pinned: a postcard or XXH3 release that encoded or hashed these
    /// requests differently would stop every tape written before it from replaying.
    #[test]
    fn the_current_form_is_pinned() {
        let now = "v2:019c878d9aceb98bdb749b3fcef9dc7c";
        assert_eq!(request().digest(), now);
        assert_eq!(request().digest_like(now), now);
        assert_eq!(
            reflect_request().digest(),
            "v2:6bb6d5bf9fedb865056045ff1c240621"
        );
        // Any recorded digest with the prefix is compared in the current form.
        assert_eq!(request().digest_like("v2:not-a-digest"), now);
    }

    /// Each part of a request, the fields serde skips when empty included, moves the
    /// digest, and no two of these requests share one.
    #[test]
    fn every_part_of_a_request_moves_its_digest() {
        type Edit = fn(&mut BrainRequest);
        let edits: [Edit; 17] = [
            |r| r.seed = 43,
            |r| r.language = Language::Zh,
            |r| r.persona = format!("{}!", r.persona).into(),
            |r| r.grid.width = 41,
            |r| {
                let mut places = r.places.to_vec();
                places[0].at = Pos::new(4, 3);
                r.places = places.into();
            },
            |r| r.places = Vec::new().into(),
            |r| r.observation.tick = 8,
            |r| r.observation.target = None,
            |r| r.observation.seen_npcs[0].audible = false,
            |r| r.observation.heard[0].to = None,
            |r| r.observation.heard[0].whispered = false,
            |r| Arc::make_mut(&mut r.observation.recent)[0].source = Some("Bob".into()),
            |r| Arc::make_mut(&mut r.observation.recent)[1].source = None,
            |r| Arc::make_mut(&mut r.observation.recent).swap(0, 1),
            |r| r.observation.known_by[0].0 = 10,
            |r| r.recalled[0].importance = 6,
            |r| r.recalled[0].source = Some("Bob".into()),
        ];
        let mut seen = std::collections::BTreeSet::from([request().digest()]);
        for (i, edit) in edits.iter().enumerate() {
            let mut r = request();
            edit(&mut r);
            assert!(
                seen.insert(r.digest()),
                "edit {i} left the digest as another's"
            );
        }
    }
}
