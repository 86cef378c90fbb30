//! A decision's request as postcard 1 encodes it, written by hand.
//!
//! Why: the request digest ([`super::DIGEST_PREFIX`]) is taken once per NPC per tick, and
//! nearly all of its time was postcard walking the request through serde — a call per
//! field, a `memmove` for every varint and name of a few bytes — not the hash (in a
//! profile of the 10,000-NPC town, `docs/BENCHMARKS.md`, the thirty-third round). The
//! bytes are postcard's, so the digests, and every tape written before, stay as they
//! are: a test compares this writer with postcard over thousands of random requests,
//! and the digests pinned in `request.rs` hold.
//!
//! postcard's format, as the request's types meet it: integers as LEB128 varints (a
//! `u8` as its one byte, an `i32` zigzagged first), a string or a sequence as its length
//! then its items, an `Option` as 0, or 1 and the value, a `bool` as 0 or 1, a unit
//! variant as its index, a struct or a tuple as its fields in order with nothing
//! between; a field serde skips writes nothing.

use hearsay_core::{Language, MemoryKind, Observation, Pos};

use super::{BrainRequest, Recollection};

/// `request`'s postcard bytes, appended to `out`.
pub(super) fn request(out: &mut Vec<u8>, request: &BrainRequest) {
    varint(out, request.seed);
    varint(
        out,
        match request.language {
            Language::En => 0,
            Language::Zh => 1,
        },
    );
    text(out, &request.persona);
    varint(out, u64::from(request.grid.width));
    varint(out, u64::from(request.grid.height));
    len(out, request.places.len());
    for place in request.places.iter() {
        text(out, &place.name);
        pos(out, place.at);
    }
    observation(out, &request.observation);
    len(out, request.recalled.len());
    for memory in &request.recalled {
        recollection(out, memory);
    }
}

fn observation(out: &mut Vec<u8>, o: &Observation) {
    varint(out, u64::from(o.npc.0));
    text(out, &o.name);
    varint(out, o.tick);
    pos(out, o.at);
    match o.target {
        None => out.push(0),
        Some(target) => {
            out.push(1);
            pos(out, target);
        }
    }
    len(out, o.seen_npcs.len());
    for seen in &o.seen_npcs {
        varint(out, u64::from(seen.id.0));
        text(out, &seen.name);
        pos(out, seen.at);
        out.push(u8::from(seen.audible));
    }
    len(out, o.seen_places.len());
    for place in &o.seen_places {
        text(out, &place.name);
        pos(out, place.at);
    }
    len(out, o.heard.len());
    for heard in &o.heard {
        varint(out, u64::from(heard.speaker.0));
        text(out, &heard.speaker_name);
        text(out, &heard.text);
        // Both skipped by serde when absent (`None`, `false`).
        if let Some(to) = &heard.to {
            out.push(1);
            text(out, to);
        }
        if heard.whispered {
            out.push(1);
        }
    }
    len(out, o.witnessed.len());
    for seen in &o.witnessed {
        text(out, &seen.place);
        text(out, &seen.text);
    }
    len(out, o.recent.len());
    for m in o.recent.iter() {
        varint(out, m.id.0);
        kind(out, m.kind);
        text(out, &m.content);
        out.push(m.importance);
        varint(out, m.tick);
        // Skipped by serde when `None`.
        if let Some(source) = &m.source {
            out.push(1);
            text(out, source);
        }
    }
    len(out, o.known_by.len());
    for &(key, npc) in &o.known_by {
        varint(out, key);
        varint(out, u64::from(npc.0));
    }
}

fn recollection(out: &mut Vec<u8>, m: &Recollection) {
    varint(out, m.id.0);
    kind(out, m.kind);
    text(out, &m.content);
    out.push(m.importance);
    varint(out, m.tick);
    // Not skipped: `None` is written.
    match &m.source {
        None => out.push(0),
        Some(source) => {
            out.push(1);
            text(out, source);
        }
    }
}

/// A unit variant: its index in the enum.
fn kind(out: &mut Vec<u8>, kind: MemoryKind) {
    varint(
        out,
        match kind {
            MemoryKind::Observation => 0,
            MemoryKind::Conversation => 1,
            MemoryKind::Reflection => 2,
            MemoryKind::Seed => 3,
        },
    );
}

/// `[x, y]`, as `Pos`'s `into = "[i32; 2]"` hands it to serde: a tuple of two `i32`s.
fn pos(out: &mut Vec<u8>, p: Pos) {
    zigzag(out, p.x);
    zigzag(out, p.y);
}

fn zigzag(out: &mut Vec<u8>, n: i32) {
    varint(out, u64::from(((n << 1) ^ (n >> 31)) as u32));
}

fn len(out: &mut Vec<u8>, n: usize) {
    varint(out, n as u64);
}

/// LEB128: seven bits a byte, low first, the high bit set on all but the last.
fn varint(out: &mut Vec<u8>, mut n: u64) {
    while n >= 0x80 {
        out.push((n as u8) | 0x80);
        n >>= 7;
    }
    out.push(n as u8);
}

/// The longest string [`text`] pushes byte by byte: names like the town's, which a
/// copy routine's call would cost more than.
const PUSHED_AT_MOST: usize = 16;

fn text(out: &mut Vec<u8>, s: &str) {
    len(out, s.len());
    if s.len() <= PUSHED_AT_MOST {
        for &b in s.as_bytes() {
            out.push(b);
        }
    } else {
        out.extend_from_slice(s.as_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::request::KnownPlace;
    use hearsay_core::{
        Grid, HeardLine, MemoryId, NpcId, RecentMemory, SeenNpc, SeenPlace, Witnessed,
    };
    use rand::{RngExt, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    /// Text of up to `max` characters, sometimes past the length pushed byte by byte,
    /// sometimes beyond ASCII (postcard counts bytes).
    fn text_of(rng: &mut ChaCha8Rng, max: usize) -> String {
        let len = rng.random_range(0..=max);
        (0..len)
            .map(|_| match rng.random_range(0..20) {
                0 => 'é',
                1 => '鱼',
                2 => '😀',
                n => char::from(b'a' + n as u8),
            })
            .collect()
    }

    /// Numbers at the varints' byte boundaries and the types' ends.
    fn number(rng: &mut ChaCha8Rng) -> u64 {
        const ENDS: [u64; 10] = [
            0,
            1,
            127,
            128,
            16_383,
            16_384,
            300,
            u32::MAX as u64,
            u64::MAX - 1,
            u64::MAX,
        ];
        ENDS[rng.random_range(0..ENDS.len())]
    }

    fn cell(rng: &mut ChaCha8Rng) -> Pos {
        const ENDS: [i32; 9] = [0, 1, -1, 63, -64, 64, -65, i32::MAX, i32::MIN];
        Pos::new(ENDS[rng.random_range(0..9)], ENDS[rng.random_range(0..9)])
    }

    fn id(rng: &mut ChaCha8Rng) -> NpcId {
        NpcId(number(rng) as u32)
    }

    fn kind_of(rng: &mut ChaCha8Rng) -> MemoryKind {
        [
            MemoryKind::Observation,
            MemoryKind::Conversation,
            MemoryKind::Reflection,
            MemoryKind::Seed,
        ][rng.random_range(0..4)]
    }

    fn memory(rng: &mut ChaCha8Rng) -> RecentMemory {
        RecentMemory {
            id: MemoryId(number(rng)),
            kind: kind_of(rng),
            content: text_of(rng, 60).into(),
            importance: number(rng) as u8,
            tick: number(rng),
            source: rng.random::<bool>().then(|| text_of(rng, 20).into()),
            place: Default::default(),
        }
    }

    fn random_request(rng: &mut ChaCha8Rng) -> BrainRequest {
        let some = |rng: &mut ChaCha8Rng| rng.random_range(0..4);
        BrainRequest {
            seed: number(rng),
            language: if rng.random() {
                Language::En
            } else {
                Language::Zh
            },
            persona: text_of(rng, 40).into(),
            grid: Grid {
                width: number(rng) as u32,
                height: number(rng) as u32,
            },
            places: (0..some(rng))
                .map(|_| KnownPlace {
                    name: text_of(rng, 20),
                    at: cell(rng),
                })
                .collect::<Vec<_>>()
                .into(),
            observation: Observation {
                npc: id(rng),
                name: text_of(rng, 20).into(),
                tick: number(rng),
                at: cell(rng),
                target: rng.random::<bool>().then(|| cell(rng)),
                seen_npcs: (0..some(rng))
                    .map(|_| SeenNpc {
                        id: id(rng),
                        name: text_of(rng, 20).into(),
                        at: cell(rng),
                        audible: rng.random(),
                    })
                    .collect(),
                seen_places: (0..some(rng))
                    .map(|_| SeenPlace {
                        name: text_of(rng, 20).into(),
                        at: cell(rng),
                    })
                    .collect(),
                heard: (0..some(rng))
                    .map(|_| HeardLine {
                        speaker: id(rng),
                        speaker_name: text_of(rng, 20).into(),
                        text: text_of(rng, 60).into(),
                        to: rng.random::<bool>().then(|| text_of(rng, 20).into()),
                        whispered: rng.random(),
                    })
                    .collect(),
                witnessed: (0..some(rng))
                    .map(|_| Witnessed {
                        place: text_of(rng, 20),
                        text: text_of(rng, 60),
                    })
                    .collect(),
                recent: std::sync::Arc::new((0..some(rng)).map(|_| memory(rng)).collect()),
                known_by: (0..some(rng)).map(|_| (number(rng), id(rng))).collect(),
            },
            recalled: (0..some(rng))
                .map(|_| {
                    // A recalled memory has a recent one's fields (its `source` always
                    // written).
                    let RecentMemory {
                        id,
                        kind,
                        content,
                        importance,
                        tick,
                        source,
                        place,
                    } = memory(rng);
                    Recollection {
                        id,
                        kind,
                        content,
                        importance,
                        tick,
                        source,
                        place,
                    }
                })
                .collect(),
        }
    }

    /// Every field in every form it takes (absent and present, empty and long, numbers
    /// at the varints' boundaries): the bytes postcard writes.
    #[test]
    fn requests_are_encoded_as_postcard_encodes_them() {
        let mut rng = ChaCha8Rng::seed_from_u64(33);
        for _ in 0..5_000 {
            let request = random_request(&mut rng);
            let mut by_hand = Vec::new();
            super::request(&mut by_hand, &request);
            let by_postcard = postcard::to_extend(&request, Vec::new()).expect("encodes");
            assert_eq!(by_hand, by_postcard, "{request:#?}");
        }
    }
}
