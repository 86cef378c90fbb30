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
    // One set of buckets per thread, used again: only the touched ones are read, and
    // they are zeroed as they are, so no text pays for clearing (or moving) all 1536.
    thread_local! {
        static BUCKETS: std::cell::RefCell<Buckets> = const {
            std::cell::RefCell::new(Buckets {
                sums: [0.0f32; VECTOR_DIMS],
                touched: [0u64; VECTOR_DIMS / 64],
            })
        };
    }
    BUCKETS.with_borrow_mut(|v| {
        fill(v, text);
        let count: u32 = v.touched.iter().map(|w| w.count_ones()).sum();
        let (mut idx, mut val) = (
            Vec::with_capacity(count as usize),
            Vec::with_capacity(count as usize),
        );
        // The set bits, word by word and low to high: the touched buckets in ascending
        // order, each once, without sorting them.
        for (w, word) in v.touched.iter_mut().enumerate() {
            let mut bits = std::mem::take(word);
            while bits != 0 {
                let b = w * 64 + bits.trailing_zeros() as usize;
                idx.push(b as u16);
                val.push(std::mem::take(&mut v.sums[b]));
                bits &= bits - 1;
            }
        }
        (idx, val)
    })
}

/// Every feature of `text` hashed into `v` (all zero before).
fn fill(v: &mut Buckets, text: &str) {
    if text.is_ascii() {
        // In ASCII text a word is a run of ASCII letters and digits, and lowercases byte
        // by byte: the words are read off the text's bytes, copied only when they have
        // a capital (nearly every text of a run is ASCII; names have one), onto the
        // stack when short.
        let mut short = [0u8; 32];
        let mut long = Vec::new();
        for word in text.split(|c: char| !c.is_ascii_alphanumeric()) {
            if word.bytes().any(|b| b.is_ascii_uppercase()) {
                let lower = match short.get_mut(..word.len()) {
                    Some(lower) => {
                        lower.copy_from_slice(word.as_bytes());
                        lower
                    }
                    None => {
                        long.clear();
                        long.extend_from_slice(word.as_bytes());
                        long.as_mut_slice()
                    }
                };
                lower.make_ascii_lowercase();
                add_word(v, lower);
            } else {
                add_word(v, word.as_bytes());
            }
        }
    } else {
        // `to_lowercase` looks at a Σ's neighbours: other text is lowercased whole.
        add_chars(v, text.to_lowercase().chars());
    }
}

/// Every feature of the (lowercase) characters `chars` hashed into `v`.
fn add_chars(v: &mut Buckets, chars: impl Iterator<Item = char>) {
    let mut word = String::new();
    let mut cjk: Vec<char> = Vec::new();
    for c in chars.chain(std::iter::once(' ')) {
        if is_cjk(c) {
            add_word(v, word.as_bytes());
            word.clear();
            cjk.push(c);
        } else if c.is_alphanumeric() {
            flush_cjk(v, &mut cjk);
            word.push(c);
        } else {
            add_word(v, word.as_bytes());
            word.clear();
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

    fn embeds_now(&self) -> bool {
        true
    }

    fn embed_fitted_now(&self, text: &str) -> Option<Embedding> {
        Some(self.embed_fitted_one(text))
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

/// A word of at most 8 bytes, none of them zero, as one number (its bytes little-end
/// first): distinct words, distinct keys.
const fn word_key(word: &[u8]) -> u64 {
    let mut key = 0u64;
    let mut i = 0;
    while i < word.len() {
        key |= (word[i] as u64) << (8 * i);
        i += 1;
    }
    key
}

/// [`STOP_WORDS`] as keys, ascending: a word is looked up in a few comparisons of
/// numbers rather than against every stop word's text.
const STOP_KEYS: [u64; STOP_WORDS.len()] = {
    let mut keys = [0u64; STOP_WORDS.len()];
    let mut i = 0;
    while i < keys.len() {
        keys[i] = word_key(STOP_WORDS[i].as_bytes());
        // Insertion sort, at compile time.
        let mut j = i;
        while j > 0 && keys[j - 1] > keys[j] {
            let t = keys[j];
            keys[j] = keys[j - 1];
            keys[j - 1] = t;
            j -= 1;
        }
        i += 1;
    }
    keys
};

fn is_stop_word(word: &[u8]) -> bool {
    word.len() <= STOP_WORD_MAX && STOP_KEYS.binary_search(&word_key(word)).is_ok()
}

/// The features of one lowercase word (its bytes; none if empty).
fn add_word(v: &mut Buckets, word: &[u8]) {
    if word.is_empty() {
        return;
    }
    // Bytes of a multi-byte character are never ASCII digits: the same test as by chars.
    if word.iter().all(|b| b.is_ascii_digit()) {
        add(v, NUMBER, word, NUMBER_WEIGHT);
    } else if !is_stop_word(word) {
        add(v, WORD, word, WORD_WEIGHT);
        if word.is_ascii() {
            // The trigrams of "<word>" read off its bytes: the features below, without
            // collecting the characters (nearly every word of a run is ASCII).
            let padded = |i: usize| match i {
                0 => b'<',
                i if i <= word.len() => word[i - 1],
                _ => b'>',
            };
            let n = word.len();
            if n + 2 > 4 {
                let weight = TRIGRAM_WEIGHT / (n as f32).sqrt();
                for i in 0..n {
                    add(
                        v,
                        TRIGRAM,
                        &[padded(i), padded(i + 1), padded(i + 2)],
                        weight,
                    );
                }
            }
        } else {
            let chars = std::str::from_utf8(word).unwrap_or_default().chars();
            let padded: Vec<char> = std::iter::once('<')
                .chain(chars)
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
                    add(v, TRIGRAM, &buf[..len], weight);
                }
            }
        }
    }
}

fn flush_cjk(v: &mut Buckets, run: &mut Vec<char>) {
    let mut buf = [0u8; 8];
    for &c in run.iter() {
        if !CJK_STOP_CHARS.contains(&c) {
            add(
                v,
                UNIGRAM,
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
        add(v, BIGRAM, &buf[..a + b], CJK_BIGRAM_WEIGHT);
    }
    run.clear();
}

fn add(v: &mut Buckets, tag: u64, feature: &[u8], weight: f32) {
    let h = fnv1a(tag, feature);
    let bucket = (h % VECTOR_DIMS as u64) as usize;
    let sign = if h >> 63 == 0 { 1.0 } else { -1.0 };
    v.sums[bucket] += sign * weight;
    v.touched[bucket / 64] |= 1 << (bucket % 64);
}

const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
const FNV_PRIME: u64 = 0x0000_0100_0000_01b3;

/// FNV-1a's state after `bytes`, from `h`.
const fn fnv_eat(mut h: u64, bytes: &[u8]) -> u64 {
    let mut i = 0;
    while i < bytes.len() {
        h ^= bytes[i] as u64;
        h = h.wrapping_mul(FNV_PRIME);
        i += 1;
    }
    h
}

/// The state after a feature kind's tag and the zero byte that ends it: where hashing
/// a feature of that kind starts (computed once, not per feature).
const fn tag(tag: &[u8]) -> u64 {
    fnv_eat(fnv_eat(FNV_OFFSET, tag), &[0])
}

const WORD: u64 = tag(b"w");
const NUMBER: u64 = tag(b"n");
const TRIGRAM: u64 = tag(b"t");
const UNIGRAM: u64 = tag(b"u");
const BIGRAM: u64 = tag(b"b");

/// FNV-1a of the tag (given by its state, [`tag`]), a zero byte and the feature.
fn fnv1a(tag: u64, feature: &[u8]) -> u64 {
    let mut h = fnv_eat(tag, feature);
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
        // A capitalised word is lowered on the stack up to 32 bytes, in a buffer beyond:
        // both give the vector of the word written in lowercase.
        for word in [
            "Abcdefghijklmnopqrstuvwxyz012345",
            "Abcdefghijklmnopqrstuvwxyz0123456",
        ] {
            let text = format!("N534 {word} N9");
            assert_eq!(
                e.embed_one(&text),
                e.embed_one(&text.to_ascii_lowercase()),
                "{word}"
            );
        }
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
        let mut v = Buckets {
            sums: [0.0f32; VECTOR_DIMS],
            touched: [0u64; VECTOR_DIMS / 64],
        };
        fill(&mut v, text);
        let mut v = v.sums.to_vec();
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

    /// ASCII text read word by word off its bytes hashes to the buckets the general
    /// path (lowercase it all, then read it by characters) gives, bit for bit.
    #[test]
    fn the_ascii_path_fills_the_buckets_of_the_general_one() {
        let mut texts: Vec<String> = [
            "The market nearby is selling fresh fish.",
            "N534. N713. N1648. N1853. N713 said: The mayor is going to resign.",
            "THE A An AND 42 007 x9 9x ab-cd e_f g.h (12, 34) fishmongers' HARBOUR",
            "  leading and trailing  ",
            "",
            "!!",
            "Supercalifragilisticexpialidocious antidisestablishmentarianism",
        ]
        .iter()
        .map(|t| (*t).to_owned())
        .collect();
        texts.extend((0..300).map(|i| {
            format!(
                "N{i} told N{}: I SAW {} Boats At ({i}, {}) WITH Their nets",
                i * 3,
                i % 17,
                i % 29
            )
        }));
        let empty = || Buckets {
            sums: [0.0f32; VECTOR_DIMS],
            touched: [0u64; VECTOR_DIMS / 64],
        };
        for text in &texts {
            assert!(text.is_ascii());
            let (mut fast, mut general) = (empty(), empty());
            fill(&mut fast, text);
            add_chars(&mut general, text.to_lowercase().chars());
            assert_eq!(fast.touched, general.touched, "{text:?}");
            assert!(
                fast.sums
                    .iter()
                    .zip(&general.sums)
                    .all(|(a, b)| a.to_bits() == b.to_bits()),
                "{text:?}"
            );
        }
    }

    #[test]
    fn stop_words_are_found_by_key_and_nothing_else_is() {
        for w in STOP_WORDS {
            assert!(is_stop_word(w.as_bytes()), "{w}");
        }
        for w in ["", "the2", "thee", "th", "n534", "aa", "yours", "é", "fish"] {
            assert!(!is_stop_word(w.as_bytes()), "{w}");
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
