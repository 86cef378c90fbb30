//! The offline embedder: feature hashing of words and character n-grams.
//!
//! Latin-script words count once each (minus a few stop words), and their character
//! trigrams let related forms ("fish", "fishmonger") overlap. Chinese, Japanese and Korean
//! text has no spaces, so its characters count as unigrams and bigrams. Every feature is
//! hashed (FNV-1a, stable on every platform) into one of [`VECTOR_DIMS`] signed buckets,
//! and the sum is L2-normalised. No model, no network, same vector for the same text
//! forever.

use crate::BoxFuture;
use crate::embed::{EmbedError, Embedder, Embedding, VECTOR_DIMS, normalise_entries};

/// The model name recorded with hashing vectors.
pub const HASHING_MODEL: &str = "hashing-v1";

const STOP_WORDS: &[&str] = &[
    "a", "an", "and", "are", "as", "at", "be", "but", "by", "for", "from", "had", "has", "have",
    "he", "her", "his", "i", "in", "is", "it", "its", "me", "my", "of", "on", "or", "she", "so",
    "that", "the", "their", "them", "they", "this", "to", "was", "we", "were", "will", "with",
    "you", "your",
];

const CJK_STOP_CHARS: &[char] = &[
    '的', '了', '是', '在', '我', '你', '他', '她', '它', '们', '这', '那', '和', '与', '就', '都',
    '也', '很', '说', '着', '有', '个', '一',
];

const WORD_WEIGHT: f32 = 1.0;
const NUMBER_WEIGHT: f32 = 0.25;
const TRIGRAM_WEIGHT: f32 = 0.5;
const CJK_UNIGRAM_WEIGHT: f32 = 0.7;
const CJK_BIGRAM_WEIGHT: f32 = 1.0;

/// Deterministic, offline embedder (see the module docs).
#[derive(Clone, Debug, Default)]
pub struct HashingEmbedder;

impl HashingEmbedder {
    /// The vector for one text.
    pub fn embed_one(&self, text: &str) -> Vec<f32> {
        let (mut idx, mut val) = features(text);
        normalise_entries(&mut idx, &mut val);
        Embedding::Sparse { idx, val }.to_dense()
    }

    /// The vector for one text as [`Embedding::fit`] fits [`HashingEmbedder::embed_one`]'s,
    /// without writing out its 1536 entries: the same sums in the same order, normalised
    /// twice over the same entries in index order, so the same bits.
    pub fn embed_fitted_one(&self, text: &str) -> Embedding {
        let (mut idx, mut val) = features(text);
        // `embed_one`'s normalisation, then `fit_dims`'.
        normalise_entries(&mut idx, &mut val);
        normalise_entries(&mut idx, &mut val);
        Embedding::of_entries(idx, val)
    }
}

/// The summed features of `text`: the buckets any feature fell into, ascending, and
/// each one's sum (added in the text's order, as a dense vector would add them).
fn features(text: &str) -> (Vec<u16>, Vec<f32>) {
    let v = buckets(text);
    let count: u32 = v.touched.iter().map(|w| w.count_ones()).sum();
    let (mut idx, mut val) = (
        Vec::with_capacity(count as usize),
        Vec::with_capacity(count as usize),
    );
    // The set bits, word by word and low to high: the touched buckets in ascending
    // order, each once, without sorting them.
    for (w, &word) in v.touched.iter().enumerate() {
        let mut bits = word;
        while bits != 0 {
            let b = w * 64 + bits.trailing_zeros() as usize;
            idx.push(b as u16);
            val.push(v.sums[b]);
            bits &= bits - 1;
        }
    }
    (idx, val)
}

/// Every feature of `text` hashed into its bucket.
fn buckets(text: &str) -> Buckets {
    let mut v = Buckets {
        sums: [0.0f32; VECTOR_DIMS],
        touched: [0u64; VECTOR_DIMS / 64],
    };
    // ASCII text (nearly every text of a run) lowercases byte by byte, with no copy;
    // other text is lowercased whole (`to_lowercase` looks at a Σ's neighbours).
    if text.is_ascii() {
        add_chars(
            &mut v,
            text.bytes().map(|b| char::from(b.to_ascii_lowercase())),
        );
    } else {
        add_chars(&mut v, text.to_lowercase().chars());
    }
    v
}

/// Every feature of the (lowercase) characters `chars` hashed into `v`.
fn add_chars(v: &mut Buckets, chars: impl Iterator<Item = char>) {
    let mut word = String::new();
    let mut cjk: Vec<char> = Vec::new();
    for c in chars.chain(std::iter::once(' ')) {
        if is_cjk(c) {
            flush_word(v, &mut word);
            cjk.push(c);
        } else if c.is_alphanumeric() {
            flush_cjk(v, &mut cjk);
            word.push(c);
        } else {
            flush_word(v, &mut word);
            flush_cjk(v, &mut cjk);
        }
    }
}

const _: () = assert!(
    VECTOR_DIMS.is_multiple_of(64),
    "one bit per bucket, whole words"
);

/// The signed buckets features are hashed into, and which of them were touched (one bit
/// per bucket).
struct Buckets {
    sums: [f32; VECTOR_DIMS],
    touched: [u64; VECTOR_DIMS / 64],
}

impl Embedder for HashingEmbedder {
    fn model(&self) -> &str {
        HASHING_MODEL
    }

    fn embed<'a>(
        &'a self,
        texts: &'a [String],
    ) -> BoxFuture<'a, Result<Vec<Vec<f32>>, EmbedError>> {
        Box::pin(async move { Ok(texts.iter().map(|t| self.embed_one(t)).collect()) })
    }

    fn embed_fitted<'a>(
        &'a self,
        texts: &'a [String],
    ) -> BoxFuture<'a, Result<Vec<(usize, Embedding)>, EmbedError>> {
        Box::pin(async move {
            Ok(texts
                .iter()
                .map(|t| (VECTOR_DIMS, self.embed_fitted_one(t)))
                .collect())
        })
    }
}

/// The longest of [`STOP_WORDS`]: longer words skip the list.
const STOP_WORD_MAX: usize = 5;

fn flush_word(v: &mut Buckets, word: &mut String) {
    if word.is_empty() {
        return;
    }
    // Bytes of a multi-byte character are never ASCII digits: the same test as by chars.
    if word.bytes().all(|b| b.is_ascii_digit()) {
        add(v, b"n", word.as_bytes(), NUMBER_WEIGHT);
    } else if word.len() > STOP_WORD_MAX || !STOP_WORDS.contains(&word.as_str()) {
        add(v, b"w", word.as_bytes(), WORD_WEIGHT);
        if word.is_ascii() {
            // The trigrams of "<word>" read off its bytes: the features below, without
            // collecting the characters (nearly every word of a run is ASCII).
            let bytes = word.as_bytes();
            let padded = |i: usize| match i {
                0 => b'<',
                i if i <= bytes.len() => bytes[i - 1],
                _ => b'>',
            };
            let n = bytes.len();
            if n + 2 > 4 {
                let weight = TRIGRAM_WEIGHT / (n as f32).sqrt();
                for i in 0..n {
                    add(v, b"t", &[padded(i), padded(i + 1), padded(i + 2)], weight);
                }
            }
        } else {
            let padded: Vec<char> = std::iter::once('<')
                .chain(word.chars())
                .chain(std::iter::once('>'))
                .collect();
            if padded.len() > 4 {
                let n = padded.len() - 2;
                let weight = TRIGRAM_WEIGHT / (n as f32).sqrt();
                let mut buf = [0u8; 12];
                for w in padded.windows(3) {
                    let mut len = 0;
                    for c in w {
                        len += c.encode_utf8(&mut buf[len..]).len();
                    }
                    add(v, b"t", &buf[..len], weight);
                }
            }
        }
    }
    word.clear();
}

fn flush_cjk(v: &mut Buckets, run: &mut Vec<char>) {
    let mut buf = [0u8; 8];
    for &c in run.iter() {
        if !CJK_STOP_CHARS.contains(&c) {
            add(
                v,
                b"u",
                c.encode_utf8(&mut buf).as_bytes(),
                CJK_UNIGRAM_WEIGHT,
            );
        }
    }
    // Bigrams approximate words; one with a function character in it is mostly noise.
    for pair in run
        .windows(2)
        .filter(|p| !CJK_STOP_CHARS.contains(&p[0]) && !CJK_STOP_CHARS.contains(&p[1]))
    {
        let a = pair[0].encode_utf8(&mut buf[..4]).len();
        let b = pair[1].encode_utf8(&mut buf[a..]).len();
        add(v, b"b", &buf[..a + b], CJK_BIGRAM_WEIGHT);
    }
    run.clear();
}

fn add(v: &mut Buckets, tag: &[u8], feature: &[u8], weight: f32) {
    let h = fnv1a(tag, feature);
    let bucket = (h % VECTOR_DIMS as u64) as usize;
    let sign = if h >> 63 == 0 { 1.0 } else { -1.0 };
    v.sums[bucket] += sign * weight;
    v.touched[bucket / 64] |= 1 << (bucket % 64);
}

fn fnv1a(tag: &[u8], feature: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let mut eat = |b: u8| {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    };
    // The tag, a zero byte, the feature.
    tag.iter().for_each(|&b| eat(b));
    eat(0);
    feature.iter().for_each(|&b| eat(b));
    // Final avalanche so the low bits used for the bucket depend on every byte.
    h ^= h >> 33;
    h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^= h >> 33;
    h
}

/// Han ideographs, kana and hangul: scripts written without spaces between words.
fn is_cjk(c: char) -> bool {
    matches!(c as u32,
        0x3040..=0x30FF      // hiragana, katakana
        | 0x3400..=0x4DBF    // CJK extension A
        | 0x4E00..=0x9FFF    // CJK unified ideographs
        | 0xAC00..=0xD7AF    // hangul syllables
        | 0xF900..=0xFAFF    // CJK compatibility ideographs
        | 0x20000..=0x2FA1F) // CJK extensions B–F, compatibility supplement
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::embed::dot;

    fn cos(a: &str, b: &str) -> f32 {
        let e = HashingEmbedder;
        dot(&e.embed_one(a), &e.embed_one(b))
    }

    /// The bits of a few texts' vectors (ASCII and not, stop words, numbers, words of
    /// every length), hashed: pinned to what the embedder gave before its ASCII path, so
    /// stored vectors and recalls stay valid.
    #[test]
    fn vectors_keep_their_bits() {
        let e = HashingEmbedder;
        let texts = [
            "The market nearby is selling fresh fish.",
            "N534. N713. N1853. N3247. N9293",
            "I heard: \"The mayor is going to resign before winter.\" Their 42 boats, at 7.",
            "a an and it is ox oxen fishmonger ÉCOLE Straße naïve café",
            "鱼市场今天很热闹，我们在这里。 Ёлка",
            "",
        ];
        let mut h = 0xcbf2_9ce4_8422_2325u64;
        for t in texts {
            for x in e.embed_one(t) {
                h = (h ^ u64::from(x.to_bits())).wrapping_mul(0x0000_0100_0000_01b3);
            }
        }
        assert_eq!(h, 10_480_047_337_509_464_254);
        assert!(STOP_WORDS.iter().all(|w| w.len() <= STOP_WORD_MAX));
    }

    #[test]
    fn vectors_are_unit_length_and_stable() {
        let e = HashingEmbedder;
        let v = e.embed_one("The market nearby is selling fresh fish.");
        assert_eq!(v.len(), VECTOR_DIMS);
        assert!((dot(&v, &v) - 1.0).abs() < 1e-5);
        assert_eq!(v, e.embed_one("The market nearby is selling fresh fish."));
        assert!(e.embed_one("").iter().all(|x| *x == 0.0));
        assert!(e.embed_one("...!?").iter().all(|x| *x == 0.0));
    }

    /// Every `similar` sentence scores above 0.5 against `base`, every `unrelated` one
    /// below 0.15.
    fn assert_separates(base: &str, similar: &[&str], unrelated: &[&str]) {
        let worst_similar = similar
            .iter()
            .map(|s| cos(base, s))
            .fold(f32::MAX, f32::min);
        let best_unrelated = unrelated
            .iter()
            .map(|s| cos(base, s))
            .fold(f32::MIN, f32::max);
        assert!(
            worst_similar > 0.5,
            "similar sentences score {worst_similar}"
        );
        assert!(
            best_unrelated < 0.15,
            "unrelated sentences score {best_unrelated}"
        );
    }

    #[test]
    fn similar_english_sentences_score_clearly_above_unrelated_ones() {
        assert_separates(
            "The market nearby is selling fresh fish.",
            &[
                "Bob said: the market is selling fresh fish today",
                "Fresh fish is sold at the market",
                "I heard the fishmonger at the market has fresh fish",
            ],
            &[
                "The blacksmith forged a new sword for the knight.",
                "I decided to move to (3, 4)",
                "A festival begins in the town square tonight.",
            ],
        );
    }

    #[test]
    fn similar_chinese_sentences_score_clearly_above_unrelated_ones() {
        assert_separates(
            "附近的市场在卖新鲜的鱼。",
            &[
                "小明说：市场上在卖新鲜的鱼",
                "新鲜的鱼在市场有卖",
                "我听说市场里有新鲜的鱼",
            ],
            &[
                "铁匠为骑士打造了一把剑。",
                "我决定移动到 (3, 4)",
                "今晚广场上开始举办节日庆典。",
            ],
        );
    }

    /// The vector as it was computed before the sparse path: every bucket written out,
    /// normalised over all 1536 entries.
    fn dense_reference(text: &str) -> Vec<f32> {
        let mut v = buckets(text).sums.to_vec();
        crate::embed::normalise(&mut v);
        v
    }

    #[test]
    fn the_sparse_path_has_the_bits_of_the_dense_one() {
        let e = HashingEmbedder;
        let mut texts: Vec<String> = [
            "",
            "...!?",
            "The market nearby is selling fresh fish.",
            "I decided to move to (298, 153)",
            "Bob said: the mayor is going to resign before winter",
            "附近的市场在卖新鲜的鱼。",
            "Bob说：fresh fish在市场",
            "a a a a the the the",
        ]
        .iter()
        .map(|t| (*t).to_owned())
        .collect();
        // Long texts too (more buckets than the sparse form keeps), and many ordinary ones.
        texts.push("fishmonger market harbour ".repeat(80));
        texts.extend((0..500).map(|i| {
            format!(
                "N{i} said to N{}: I saw {} boats at ({i}, {}) near the mill",
                i * 7,
                i % 13,
                i % 31
            )
        }));
        for text in &texts {
            let reference = dense_reference(text);
            let dense = e.embed_one(text);
            assert!(
                dense
                    .iter()
                    .zip(&reference)
                    .all(|(a, b)| a.to_bits() == b.to_bits()),
                "embed_one differs for {text:?}"
            );
            let fitted = Embedding::fit(reference);
            assert_eq!(
                e.embed_fitted_one(text),
                fitted,
                "fitted differs for {text:?}"
            );
            let bits = |v: Vec<f32>| v.into_iter().map(f32::to_bits).collect::<Vec<_>>();
            assert_eq!(
                bits(e.embed_fitted_one(text).to_dense()),
                bits(fitted.to_dense())
            );
        }
    }

    #[test]
    fn mixed_scripts_and_odd_unicode_do_not_panic() {
        let e = HashingEmbedder;
        for text in [
            "Bob说：fresh fish在市场",
            "🐟🐟🐟",
            "İstanbul ǅ ﬁ",
            "a\u{0301}\u{0301}",
            "\u{10FFFF}\0",
        ] {
            let v = e.embed_one(text);
            assert_eq!(v.len(), VECTOR_DIMS);
        }
    }
}
