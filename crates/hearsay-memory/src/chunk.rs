//! Chunking: a memory too long for one embedding is split into overlapping chunks, each
//! embedded on its own; recall scores the memory by its best chunk.
//!
//! Chunks are cut only between grapheme clusters (UAX #29), so a cut never lands inside a
//! UTF-8 sequence, a Chinese character, an emoji, or an emoji made of several code
//! points (👩‍👩‍👧, 🇨🇳, 👍🏽). Lengths count characters (Unicode scalar values). Where it
//! can, a chunk ends just after whitespace or punctuation in the last quarter of its
//! window, so words and sentences stay whole. The split is a pure function of the text
//! and the settings: every process and backend cuts the same chunks.

use std::ops::Range;

use serde::{Deserialize, Serialize};
use unicode_segmentation::UnicodeSegmentation;

/// How long texts are split.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Chunking {
    /// Longest chunk, in characters; texts no longer than this are one chunk.
    pub chars: usize,
    /// Characters each chunk repeats from the end of the one before (less than half of
    /// `chars`).
    pub overlap: usize,
}

impl Default for Chunking {
    /// 400 characters with 50 of overlap: a heard sentence, a seed memory or a
    /// reflection of a few lines is one chunk; a long story is several.
    fn default() -> Self {
        Self {
            chars: 400,
            overlap: 50,
        }
    }
}

/// Where a grapheme cluster starts, in bytes and in characters.
#[derive(Clone, Copy)]
struct Boundary {
    byte: usize,
    chars: usize,
}

fn is_break_after(grapheme: &str) -> bool {
    grapheme.chars().all(|c| {
        c.is_whitespace()
            || matches!(
                c,
                '.' | ',' | ';' | ':' | '!' | '?' | '。' | '，' | '；' | '：' | '！' | '？' | '、'
            )
    })
}

impl Chunking {
    /// The byte ranges of `text`'s chunks, in order. One range covering the whole text
    /// when it is short enough (or empty).
    pub fn split(&self, text: &str) -> Vec<Range<usize>> {
        let chars = self.chars.max(1);
        let overlap = self.overlap.min(chars.saturating_sub(1) / 2);
        if text.chars().count() <= chars {
            return std::iter::once(0..text.len()).collect();
        }
        // Boundaries before every grapheme, plus one at the end.
        let mut bounds = Vec::new();
        let mut count = 0;
        let mut breaks = Vec::new();
        for (byte, g) in text.grapheme_indices(true) {
            bounds.push(Boundary { byte, chars: count });
            breaks.push(is_break_after(g));
            count += g.chars().count();
        }
        bounds.push(Boundary {
            byte: text.len(),
            chars: count,
        });
        let last = bounds.len() - 1;

        let mut ranges = Vec::new();
        let mut start = 0;
        loop {
            // The furthest end within `chars` characters (at least one grapheme).
            let mut end = start + 1;
            while end < last && bounds[end + 1].chars - bounds[start].chars <= chars {
                end += 1;
            }
            if end == last {
                ranges.push(bounds[start].byte..text.len());
                return ranges;
            }
            // Prefer ending after whitespace or punctuation in the window's last quarter.
            let floor = bounds[start].chars + chars - chars / 4;
            if let Some(b) = (start + 1..=end)
                .rev()
                .take_while(|&b| bounds[b].chars >= floor)
                .find(|&b| breaks[b - 1])
            {
                end = b;
            }
            ranges.push(bounds[start].byte..bounds[end].byte);
            // The next chunk starts `overlap` characters back, at a grapheme boundary,
            // and always moves forward.
            let mut next = end;
            while next > start + 1 && bounds[end].chars - bounds[next - 1].chars <= overlap {
                next -= 1;
            }
            start = next;
        }
    }

    /// The chunks of `text` as string slices.
    pub fn chunks<'t>(&self, text: &'t str) -> Vec<&'t str> {
        self.split(text).into_iter().map(|r| &text[r]).collect()
    }
}

/// Puts chunks back together: each chunk's part beyond the previous one's end.
pub fn reassemble(text_len: usize, chunks: &[(Range<usize>, &str)]) -> Option<String> {
    let mut out = String::with_capacity(text_len);
    let mut covered = 0;
    for (range, chunk) in chunks {
        if range.start > covered || range.end < covered {
            return None;
        }
        out.push_str(chunk.get(covered - range.start..)?);
        covered = range.end;
    }
    (covered == text_len).then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn roundtrip(c: &Chunking, text: &str) -> Vec<Range<usize>> {
        let ranges = c.split(text);
        let pieces: Vec<(Range<usize>, &str)> = ranges
            .iter()
            .map(|r| (r.clone(), &text[r.clone()]))
            .collect();
        assert_eq!(
            reassemble(text.len(), &pieces).as_deref(),
            Some(text),
            "{ranges:?}"
        );
        let graphemes: Vec<usize> = text
            .grapheme_indices(true)
            .map(|(i, _)| i)
            .chain([text.len()])
            .collect();
        for r in &ranges {
            assert!(graphemes.contains(&r.start), "cut inside a grapheme: {r:?}");
            assert!(graphemes.contains(&r.end), "cut inside a grapheme: {r:?}");
            let n = text[r.clone()].chars().count();
            let single = text[r.clone()].graphemes(true).count() == 1;
            assert!(n <= c.chars || single, "chunk of {n} chars: {r:?}");
        }
        for pair in ranges.windows(2) {
            assert!(pair[1].start > pair[0].start, "no progress: {ranges:?}");
            assert!(pair[1].start <= pair[0].end, "gap: {ranges:?}");
        }
        ranges
    }

    #[test]
    fn short_texts_are_one_chunk() {
        let c = Chunking::default();
        assert_eq!(c.split(""), vec![0..0]);
        assert_eq!(c.split("Bob said: fresh fish."), vec![0..21]);
    }

    #[test]
    fn long_english_overlaps_and_breaks_at_words() {
        let c = Chunking {
            chars: 40,
            overlap: 8,
        };
        let text = "The market nearby is selling fresh fish. Alice heard it from Bob, \
                    who heard it from the fishmonger, who swears it came in this morning.";
        let ranges = roundtrip(&c, text);
        assert!(ranges.len() >= 3, "{ranges:?}");
        for r in &ranges[..ranges.len() - 1] {
            let chunk = &text[r.clone()];
            assert!(
                chunk.ends_with(' ') || chunk.ends_with(',') || chunk.ends_with('.'),
                "{chunk:?}"
            );
        }
        for pair in ranges.windows(2) {
            assert!(pair[1].start < pair[0].end, "chunks overlap: {ranges:?}");
        }
    }

    #[test]
    fn chinese_and_emoji_round_trip_exactly() {
        let text = "市场上新到了一批鲜鱼，渔夫说是今天早上刚打上来的。🐟🐟🐟 大家都去看看吧！\
                    👩‍👩‍👧‍👦 一家人也来了，🇨🇳 国旗挂在门口，👍🏽 点赞。面包房的爱丽丝听鲍勃说的，\
                    鲍勃又是听鱼贩说的。🎉🎊 节日在市场开始了！";
        for chars in [1, 2, 3, 5, 7, 10, 16, 33] {
            for overlap in [0, 1, 2, 4, 12] {
                roundtrip(&Chunking { chars, overlap }, text);
            }
        }
        let c = Chunking {
            chars: 12,
            overlap: 3,
        };
        let chunks = c.chunks(text);
        assert!(
            chunks.iter().any(|s| s.contains("👩‍👩‍👧‍👦")),
            "the family stays whole"
        );
        assert!(
            chunks.iter().any(|s| s.contains("🇨🇳")),
            "the flag stays whole"
        );
        assert!(
            chunks.iter().any(|s| s.contains("👍🏽")),
            "the skin tone stays on"
        );
    }

    #[test]
    fn a_grapheme_longer_than_a_chunk_is_a_chunk_of_its_own() {
        let family = "👩‍👩‍👧‍👦"; // 7 code points, one grapheme
        let text = format!("ab{family}cd");
        let ranges = roundtrip(
            &Chunking {
                chars: 3,
                overlap: 1,
            },
            &text,
        );
        assert!(
            ranges.iter().any(|r| &text[r.clone()] == family),
            "{ranges:?}"
        );
    }
}
