//! Retelling with drift: the heuristic brain's `retell_noise`.
//!
//! Gossip changes as it travels. With probability `retell_noise` a retelling changes
//! exactly one thing in the words it passes on:
//!
//! 1. **Drop a clause.** The words are cut at clause boundaries (`, `, `; `, ` and `,
//!    ` but `, `，`, `；`, `、`); when there are at least two clauses one is left out
//!    ("The mill caught fire and its roof fell in." → "Its roof fell in.").
//! 2. **Swap a word for a near one.** A small built-in table of near-synonyms, English and
//!    Chinese ([`NEAR_WORDS`]: fresh → new, market → bazaar, 新鲜 → 新, 市场 → 集市 …).
//! 3. **Replace a place or a number.** A place name of the scenario becomes another of its
//!    places; a number becomes another number the scenario mentions (in seed memories and
//!    event texts), or, when it mentions no other, one 1 or 2 away.
//!
//! The mutation is chosen among those that apply, then the spot, all by the seeded RNG
//! the caller passes; when none applies the words stay as they are. Everything is a pure
//! function of (RNG state, words, [`Vocabulary`]), so a noisy run replays and sweeps
//! exactly. With `retell_noise = 0` nothing is drawn at all ([`retold`] returns before
//! touching the RNG), so a run without noise is unchanged bit for bit.

use std::collections::BTreeSet;
use std::ops::Range;

use rand::{Rng, RngExt};

/// What of the scenario a retelling may swap in: its place names and the numbers it
/// mentions. Built once with the brain, not sent with every request.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Vocabulary {
    /// The scenario's place names, in scenario order.
    pub places: Vec<String>,
    /// The numbers the scenario's seed memories and events mention, ascending, each once.
    pub numbers: Vec<u64>,
}

impl Vocabulary {
    /// A vocabulary of `places` and the numbers written in `texts` (runs of ASCII digits).
    pub fn new<'a>(places: Vec<String>, texts: impl IntoIterator<Item = &'a str>) -> Self {
        let numbers: BTreeSet<u64> = texts
            .into_iter()
            .flat_map(|t| numbers_in(t).into_iter().map(|(_, n)| n))
            .collect();
        Self {
            places,
            numbers: numbers.into_iter().collect(),
        }
    }
}

/// Near-synonyms a retelling may swap in, `(word, near word)`. English words match whole
/// words, ignoring the case of the first letter (kept in the replacement); Chinese ones
/// match anywhere. Enough to bite on the shipped scenarios' gossip.
pub const NEAR_WORDS: &[(&str, &str)] = &[
    ("fresh", "new"),
    ("cheap", "inexpensive"),
    ("market", "bazaar"),
    ("nearby", "close by"),
    ("selling", "offering"),
    ("sells", "offers"),
    ("fish", "seafood"),
    ("festival", "fair"),
    ("begins", "starts"),
    ("mayor", "headman"),
    ("resign", "step down"),
    ("winter", "wintertime"),
    ("smuggler", "pirate"),
    ("boat", "ship"),
    ("seen", "spotted"),
    ("night", "dusk"),
    ("marry", "wed"),
    ("caught fire", "went up in flames"),
    ("roof", "rooftop"),
    ("fell in", "caved in"),
    ("cracked", "split"),
    ("needs", "wants"),
    ("beam", "timber"),
    ("river", "stream"),
    ("rising", "climbing"),
    ("fast", "quickly"),
    ("floods", "swamps"),
    ("breaks", "snaps"),
    ("stops", "ceases"),
    ("bridge", "crossing"),
    ("collapsed", "gave way"),
    ("tastes", "smacks"),
    ("iron", "rust"),
    ("old", "ancient"),
    ("big", "large"),
    ("small", "little"),
    ("新鲜", "新"),
    ("便宜", "实惠"),
    ("市场", "集市"),
    ("附近", "旁边"),
    ("卖", "出售"),
    ("节日", "节庆"),
    ("庆典", "盛会"),
    ("开始", "开启"),
    ("举办", "举行"),
    ("面包店", "面包房"),
];

/// Where a clause ends and the next begins.
const CLAUSE_BREAKS: &[&str] = &[", ", "; ", " and ", " but ", "，", "；", "、"];

/// Marks that end a sentence; kept at the end when a clause goes.
const SENTENCE_ENDS: &[char] = &['.', '!', '?', '。', '！', '？', '…'];

/// The one change a retelling made.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Drift {
    /// A clause was left out.
    DropClause,
    /// A word became a near one.
    NearWord,
    /// A place became another place, or a number another number.
    Replace,
}

/// `words` as retold: with probability `noise` (0..=1) changed by [`drift`], else as they
/// are. Draws nothing from `rng` unless `noise > 0`.
pub fn retold<R: Rng + ?Sized>(words: &str, noise: f64, vocab: &Vocabulary, rng: &mut R) -> String {
    // Not above 0 (NaN included): nothing drawn.
    if noise.partial_cmp(&0.0) != Some(std::cmp::Ordering::Greater)
        || !rng.random_bool(noise.min(1.0))
    {
        return words.to_owned();
    }
    drift(words, vocab, rng).map_or_else(|| words.to_owned(), |(_, w)| w)
}

/// `words` with one change, chosen by `rng` among those that apply, and which; `None`
/// (and nothing drawn) when none applies.
pub fn drift<R: Rng + ?Sized>(
    words: &str,
    vocab: &Vocabulary,
    rng: &mut R,
) -> Option<(Drift, String)> {
    let clauses = clauses(words);
    let near = near_word_spots(words);
    let replace = replacement_spots(words, vocab);
    let mut kinds = Vec::new();
    if clauses.1.len() >= 2 {
        kinds.push(Drift::DropClause);
    }
    if !near.is_empty() {
        kinds.push(Drift::NearWord);
    }
    if !replace.is_empty() {
        kinds.push(Drift::Replace);
    }
    if kinds.is_empty() {
        return None;
    }
    let kind = kinds[pick(rng, kinds.len())];
    let out = match kind {
        Drift::DropClause => {
            let drop = pick(rng, clauses.1.len());
            without_clause(words, &clauses, drop)
        }
        Drift::NearWord => {
            let (at, with) = &near[pick(rng, near.len())];
            splice(words, at.clone(), with)
        }
        Drift::Replace => {
            let (at, choices) = &replace[pick(rng, replace.len())];
            splice(words, at.clone(), &choices[pick(rng, choices.len())])
        }
    };
    Some((kind, out))
}

/// An index below `n` (n ≥ 1); draws nothing when there is one choice.
fn pick<R: Rng + ?Sized>(rng: &mut R, n: usize) -> usize {
    if n <= 1 { 0 } else { rng.random_range(0..n) }
}

/// The words without their sentence end, split into clauses: (body end, clause ranges,
/// the break before each clause but the first).
type Clauses = (usize, Vec<Range<usize>>, Vec<Range<usize>>);

fn clauses(words: &str) -> Clauses {
    let body_end = words.trim_end_matches(SENTENCE_ENDS).len();
    let body = &words[..body_end];
    let mut parts = Vec::new();
    let mut breaks = Vec::new();
    let mut start = 0;
    let mut i = 0;
    while i < body.len() {
        if let Some(b) = CLAUSE_BREAKS.iter().find(|b| body[i..].starts_with(**b)) {
            if !body[start..i].trim().is_empty() {
                parts.push(start..i);
                breaks.push(i..i + b.len());
            }
            i += b.len();
            start = i;
            continue;
        }
        i += body[i..].chars().next().map_or(1, char::len_utf8);
    }
    if !body[start..].trim().is_empty() {
        parts.push(start..body.len());
    } else {
        breaks.pop();
    }
    // A break is kept before every clause but the first.
    (body_end, parts, breaks)
}

fn without_clause(words: &str, (body_end, parts, breaks): &Clauses, drop: usize) -> String {
    let mut out = String::new();
    for (i, part) in parts.iter().enumerate() {
        if i == drop {
            continue;
        }
        if !out.is_empty() {
            out.push_str(&words[breaks[i - 1].clone()]);
        }
        out.push_str(&words[part.clone()]);
    }
    let starts_upper = words.chars().next().is_some_and(char::is_uppercase);
    if starts_upper {
        out = with_first_case(&out, true);
    }
    out.push_str(&words[*body_end..]);
    out
}

/// Every spot a near word could go, in the order of [`NEAR_WORDS`] then position.
fn near_word_spots(words: &str) -> Vec<(Range<usize>, String)> {
    let mut spots = Vec::new();
    for (word, near) in NEAR_WORDS {
        for at in occurrences(words, word) {
            let upper = words[at.clone()]
                .chars()
                .next()
                .is_some_and(char::is_uppercase);
            spots.push((at, with_first_case(near, upper)));
        }
    }
    spots
}

/// Every place name and number that could change, with what it could become.
fn replacement_spots(words: &str, vocab: &Vocabulary) -> Vec<(Range<usize>, Vec<String>)> {
    let mut spots = Vec::new();
    for place in &vocab.places {
        let others: Vec<&String> = vocab.places.iter().filter(|p| *p != place).collect();
        if others.is_empty() {
            continue;
        }
        for at in occurrences(words, place) {
            let upper = words[at.clone()]
                .chars()
                .next()
                .is_some_and(char::is_uppercase);
            let choices = others.iter().map(|p| with_first_case(p, upper)).collect();
            spots.push((at, choices));
        }
    }
    for (at, n) in numbers_in(words) {
        let mentioned: Vec<String> = vocab
            .numbers
            .iter()
            .filter(|&&m| m != n)
            .map(u64::to_string)
            .collect();
        let choices = if mentioned.is_empty() {
            [-2i64, -1, 1, 2]
                .iter()
                .filter_map(|&d| n.checked_add_signed(d))
                .map(|m| m.to_string())
                .collect()
        } else {
            mentioned
        };
        spots.push((at, choices));
    }
    spots
}

/// Where `word` occurs in `text`: for ASCII words, whole words with the case of ASCII
/// letters ignored; for others (Chinese has no spaces), anywhere.
fn occurrences(text: &str, word: &str) -> Vec<Range<usize>> {
    if word.is_empty() {
        return Vec::new();
    }
    if !word.is_ascii() {
        return text
            .match_indices(word)
            .map(|(i, w)| i..i + w.len())
            .collect();
    }
    let is_word = |c: char| c.is_alphanumeric();
    let mut out = Vec::new();
    for (i, _) in text.char_indices() {
        let end = i + word.len();
        let Some(candidate) = text.get(i..end) else {
            continue;
        };
        if !candidate.eq_ignore_ascii_case(word) {
            continue;
        }
        let before = text[..i].chars().next_back().is_some_and(is_word);
        let after = text[end..].chars().next().is_some_and(is_word);
        if !before && !after {
            out.push(i..end);
        }
    }
    out
}

/// Each run of ASCII digits that reads as a `u64`, with where it is.
fn numbers_in(text: &str) -> Vec<(Range<usize>, u64)> {
    let bytes = text.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i].is_ascii_digit() {
            let start = i;
            while i < bytes.len() && bytes[i].is_ascii_digit() {
                i += 1;
            }
            if let Ok(n) = text[start..i].parse::<u64>() {
                out.push((start..i, n));
            }
        } else {
            i += 1;
        }
    }
    out
}

fn splice(text: &str, at: Range<usize>, with: &str) -> String {
    format!("{}{with}{}", &text[..at.start], &text[at.end..])
}

/// `word` with its first letter upper-cased (`upper`) or as it is.
fn with_first_case(word: &str, upper: bool) -> String {
    let mut chars = word.chars();
    match chars.next() {
        Some(first) if upper => first.to_uppercase().chain(chars).collect(),
        _ => word.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand_chacha::ChaCha8Rng;

    fn vocab() -> Vocabulary {
        Vocabulary::new(
            vec!["market".into(), "tavern".into(), "docks".into()],
            ["The ferry leaves at 9.", "Meet in 3 days."],
        )
    }

    /// Every result `drift` can give `words`, over many seeds.
    fn outcomes(words: &str, vocab: &Vocabulary) -> BTreeSet<(String, String)> {
        (0..400)
            .filter_map(|s| drift(words, vocab, &mut ChaCha8Rng::seed_from_u64(s)))
            .map(|(k, w)| (format!("{k:?}"), w))
            .collect()
    }

    #[test]
    fn the_vocabulary_takes_the_numbers_the_scenario_mentions() {
        assert_eq!(vocab().numbers, vec![3, 9]);
        assert_eq!(vocab().places.len(), 3);
    }

    #[test]
    fn dropping_a_clause_keeps_the_rest_and_the_sentence_end() {
        let words = "The mill caught fire and its roof fell in.";
        let got: BTreeSet<String> = outcomes(words, &Vocabulary::default())
            .into_iter()
            .filter(|(k, _)| k == "DropClause")
            .map(|(_, w)| w)
            .collect();
        assert_eq!(
            got,
            BTreeSet::from([
                "The mill caught fire.".to_owned(),
                "Its roof fell in.".to_owned()
            ])
        );
        let zh = "附近的市场在卖鱼，很新鲜。";
        let got: BTreeSet<String> = outcomes(zh, &Vocabulary::default())
            .into_iter()
            .filter(|(k, _)| k == "DropClause")
            .map(|(_, w)| w)
            .collect();
        assert_eq!(
            got,
            BTreeSet::from(["附近的市场在卖鱼。".to_owned(), "很新鲜。".to_owned()])
        );
        assert_eq!(clauses("One clause only.").1.len(), 1);
    }

    #[test]
    fn a_near_word_replaces_a_whole_word_and_keeps_its_capital() {
        let got: BTreeSet<String> =
            outcomes("Fresh fish, fresher than ever", &Vocabulary::default())
                .into_iter()
                .filter(|(k, _)| k == "NearWord")
                .map(|(_, w)| w)
                .collect();
        // "fresher" is not "fresh": whole words only.
        assert_eq!(
            got,
            BTreeSet::from([
                "New fish, fresher than ever".to_owned(),
                "Fresh seafood, fresher than ever".to_owned()
            ])
        );
        let got: BTreeSet<String> = outcomes("新鲜的鱼", &Vocabulary::default())
            .into_iter()
            .map(|(_, w)| w)
            .collect();
        assert_eq!(got, BTreeSet::from(["新的鱼".to_owned()]));
    }

    #[test]
    fn places_become_other_places_and_numbers_other_numbers() {
        let v = vocab();
        let got: BTreeSet<String> = outcomes("Meet at the Docks at 9", &v)
            .into_iter()
            .filter(|(k, _)| k == "Replace")
            .map(|(_, w)| w)
            .collect();
        assert_eq!(
            got,
            BTreeSet::from([
                "Meet at the Market at 9".to_owned(),
                "Meet at the Tavern at 9".to_owned(),
                "Meet at the Docks at 3".to_owned(),
            ])
        );
        // A number the scenario does not otherwise mention moves by 1 or 2.
        let got: BTreeSet<String> = outcomes("0 boats", &Vocabulary::default())
            .into_iter()
            .filter(|(k, _)| k == "Replace")
            .map(|(_, w)| w)
            .collect();
        assert_eq!(
            got,
            BTreeSet::from(["1 boats".to_owned(), "2 boats".to_owned()])
        );
    }

    #[test]
    fn words_with_nothing_to_change_stay_and_draw_nothing() {
        let mut rng = ChaCha8Rng::seed_from_u64(7);
        let before = rng.clone();
        assert_eq!(drift("Hello there", &vocab(), &mut rng), None);
        assert_eq!(rng, before);
        assert_eq!(
            retold("Hello there", 1.0, &vocab(), &mut rng),
            "Hello there"
        );
    }

    #[test]
    fn no_noise_draws_nothing_and_changes_nothing() {
        let words = "The market nearby is selling fresh fish.";
        for noise in [0.0, -1.0, f64::NAN] {
            let mut rng = ChaCha8Rng::seed_from_u64(1);
            let before = rng.clone();
            assert_eq!(retold(words, noise, &vocab(), &mut rng), words);
            assert_eq!(rng, before, "the RNG is untouched at noise {noise}");
        }
    }

    #[test]
    fn retelling_is_deterministic_and_drifts() {
        let words = "A smuggler's boat was seen at the docks at night.";
        let v = vocab();
        let at =
            |seed: u64, noise: f64| retold(words, noise, &v, &mut ChaCha8Rng::seed_from_u64(seed));
        for seed in 0..50 {
            assert_eq!(at(seed, 0.5), at(seed, 0.5), "same seed, same words");
            assert_ne!(at(seed, 1.0), words, "at 1.0 every retelling drifts");
        }
        let distinct: BTreeSet<String> = (0..50).map(|s| at(s, 1.0)).collect();
        assert!(distinct.len() > 5, "different seeds differ: {distinct:?}");
        let kept = (0..400).filter(|&s| at(s, 0.3) == words).count();
        assert!((220..340).contains(&kept), "about 70% kept at 0.3: {kept}");
    }
}
