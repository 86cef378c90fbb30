//! JSON lines written field by field: the pieces the hand-written writers of
//! `events.jsonl` ([`SimEvent::to_line`](crate::SimEvent::to_line)) and of `llm.jsonl`
//! (the tape's `BrainCall::into_line`) share.
//!
//! Why by hand: those lines are nearly all of a run's output, one or two per NPC per
//! tick, and serde writes a struct's keys through the string escaper and an internally
//! tagged enum through a map, key by key. Each writer spells its object's keys as
//! literals and writes the values through these, which write what serde_json writes:
//! strings as serde_json escapes them, integers through `itoa` (as serde_json writes
//! them), anything else through serde_json itself. Each writer's tests compare its bytes
//! with serde's.

use serde::Serialize;

use crate::grid::Pos;
use crate::ids::MemoryId;

/// `value` as serde_json writes it. Every value these writers hand over serialises
/// (string keys only), so writing into memory cannot fail.
pub fn json<T: Serialize + ?Sized>(out: &mut Vec<u8>, value: &T) {
    serde_json::to_writer(out, value).expect("line values serialise: they have only string keys");
}

/// A string, as serde_json writes it: quoted, with `"`, `\\` and the control
/// characters below U+0020 escaped and everything else as it is.
///
/// Nearly every string of a line (names, digests, memories, recall queries) has none
/// of those, and then its bytes are copied whole between quotes; serde_json looks each
/// byte up in its escape table and writes the runs between escapes one call at a time,
/// which was most of a tape line's time in the 10,000-NPC town. A string with any goes
/// through serde_json.
pub fn string(out: &mut Vec<u8>, s: &str) {
    if s.bytes().all(|b| b >= 0x20 && b != b'"' && b != b'\\') {
        out.reserve(s.len() + 2);
        out.push(b'"');
        out.extend_from_slice(s.as_bytes());
        out.push(b'"');
    } else {
        json(out, s);
    }
}

/// An integer, as serde_json writes it.
pub fn int(out: &mut Vec<u8>, n: impl itoa::Integer) {
    out.extend_from_slice(itoa::Buffer::new().format(n).as_bytes());
}

/// `[x,y]`, as `Pos`'s `into = "[i32; 2]"` writes it.
pub fn pos(out: &mut Vec<u8>, p: Pos) {
    out.push(b'[');
    int(out, p.x);
    out.push(b',');
    int(out, p.y);
    out.push(b']');
}

/// A JSON array of `items` (a slice, a `Vec`, a `VecDeque`), each written by `each`.
pub fn array<'a, T: 'a>(
    out: &mut Vec<u8>,
    items: impl IntoIterator<Item = &'a T>,
    mut each: impl FnMut(&mut Vec<u8>, &T),
) {
    out.push(b'[');
    for (i, item) in items.into_iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        each(out, item);
    }
    out.push(b']');
}

/// Memory ids as a JSON array of numbers.
pub fn ids(out: &mut Vec<u8>, ids: &[MemoryId]) {
    array(out, ids, |out, id| int(out, id.0));
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every ASCII character alone, inside a word and doubled, and some beyond ASCII:
    /// the bytes serde_json writes.
    #[test]
    fn strings_are_escaped_as_serde_json_escapes_them() {
        let mut texts: Vec<String> = (0u8..=0x7f)
            .map(char::from)
            .chain(['é', '鱼', '😀', '\u{2028}', '\u{fffd}'])
            .flat_map(|c| [format!("{c}"), format!("a{c}b"), format!("{c}{c}")])
            .collect();
        texts.push(String::new());
        texts.push("N42 said: the mayor resigned".into());
        for text in texts {
            let mut out = Vec::new();
            string(&mut out, &text);
            assert_eq!(
                String::from_utf8(out).expect("UTF-8"),
                serde_json::to_string(&text).expect("encodes"),
                "{text:?}"
            );
        }
    }
}
