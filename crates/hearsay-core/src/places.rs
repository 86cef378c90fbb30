//! Which of the scenario's places a text names: what sends an NPC of the offline brain
//! somewhere, and what its reflection notices keeps coming up.
//!
//! A name is looked for lowercased, anywhere in the lowercased text (so "mill" is named in
//! "the old Mill" and in "Millbrook"). Every NPC of a town looks through the texts of its
//! recalled memories and its short-term window every tick, and nearly none of them names
//! a place. ASCII text (nearly all of a run's) is looked through once for every name at
//! the same time, by an Aho–Corasick automaton that ignores ASCII case; other text, or
//! names that are not all ASCII, are lowered as `to_lowercase` does (which ASCII lowering
//! equals) and looked for name by name.
//!
//! A memory's text never changes, so the first place it names is worked out once, when
//! the memory is made ([`crate::MemoryLedger::record`], while its text was just written
//! and is still in the cache), and carried with the memory as a [`PlaceNamed`]. At 10,000
//! NPCs looking through each text anew, every tick it was recalled or in a window, was
//! most of the offline brain's decision (docs/BENCHMARKS.md, the fortieth round).

/// The places of a scenario, in its order, made ready to be looked for in texts.
#[derive(Clone, Debug, Default)]
pub struct PlaceNames {
    /// `None` when some name is not ASCII or is empty: only the lowering path handles
    /// those.
    automaton: Option<aho_corasick::AhoCorasick>,
    /// The lowering path's names, lowered end to end, and where each one ends.
    lowered: String,
    ends: Vec<usize>,
}

impl PlaceNames {
    /// The places named `names`, in that order.
    pub fn new<'a>(names: impl IntoIterator<Item = &'a str>) -> Self {
        let names: Vec<&str> = names.into_iter().collect();
        let automaton = names
            .iter()
            .all(|n| n.is_ascii() && !n.is_empty())
            .then(|| {
                aho_corasick::AhoCorasick::builder()
                    .ascii_case_insensitive(true)
                    .build(&names)
                    .ok()
            })
            .flatten();
        let mut lowered = String::new();
        let mut ends = Vec::with_capacity(names.len());
        for name in &names {
            lower_into(&mut lowered, name);
            ends.push(lowered.len());
        }
        Self {
            automaton,
            lowered,
            ends,
        }
    }

    /// How many places there are.
    pub fn len(&self) -> usize {
        self.ends.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }

    /// Calls `found` with the number (in the places' order) of every place `content`
    /// names, some perhaps more than once, in no particular order. `scratch` holds the
    /// lowered text when the lowering path needs one.
    pub fn named(&self, content: &str, scratch: &mut String, mut found: impl FnMut(usize)) {
        if let Some(automaton) = self.automaton.as_ref().filter(|_| content.is_ascii()) {
            // Most texts name nothing: one look settles it. Else every place named,
            // overlapping ones included.
            if automaton.is_match(content) {
                for m in automaton.find_overlapping_iter(content) {
                    found(m.pattern().as_usize());
                }
            }
            return;
        }
        scratch.clear();
        lower_into(scratch, content);
        let mut start = 0;
        for (i, &end) in self.ends.iter().enumerate() {
            if scratch.contains(&self.lowered[start..end]) {
                found(i);
            }
            start = end;
        }
    }

    /// The first place (in the places' order) that `content` names, if any.
    pub fn first_named(&self, content: &str, scratch: &mut String) -> Option<usize> {
        let mut first: Option<usize> = None;
        self.named(content, scratch, |i| {
            first = Some(first.map_or(i, |f| f.min(i)));
        });
        first
    }

    /// What a memory made with `content` carries ([`PlaceNamed`]).
    pub fn place_named(&self, content: &str) -> PlaceNamed {
        if self.len() > PlaceNamed::PLACES_MAX {
            return PlaceNamed::UNKNOWN;
        }
        match self.first_named(content, &mut String::new()) {
            Some(i) => PlaceNamed::place(i),
            None => PlaceNamed::NOTHING,
        }
    }
}

/// `text` lowercased onto the end of `out`, as `to_lowercase` would.
fn lower_into(out: &mut String, text: &str) {
    if text.is_ascii() {
        let from = out.len();
        out.push_str(text);
        out[from..].make_ascii_lowercase();
    } else {
        out.push_str(&text.to_lowercase());
    }
}

/// The first of the scenario's places (in its order) that a memory's text names, worked
/// out when the memory was made ([`PlaceNames::place_named`]), or not known: a memory
/// read back from a store or a checkpoint, or made where the places were not at hand, is
/// looked through again by whoever needs to know. One byte, in the padding of the
/// records that carry it.
///
/// It is a cache of what the text says, not part of what the memory is: it is never
/// written to a file, and any two compare equal, so a memory read back equals the memory
/// written.
#[derive(Clone, Copy, Debug, Default)]
pub struct PlaceNamed(u8);

impl PlaceNamed {
    /// Not worked out: look at the text.
    pub const UNKNOWN: Self = Self(0);
    /// The text names none of the places.
    pub const NOTHING: Self = Self(1);
    /// The most places a town may have for their names to be carried (beyond, every
    /// memory's is [`PlaceNamed::UNKNOWN`]).
    pub const PLACES_MAX: usize = u8::MAX as usize - 2;

    /// The text names place `i` first (in the places' order).
    fn place(i: usize) -> Self {
        match u8::try_from(i + 2) {
            Ok(b) if i <= Self::PLACES_MAX => Self(b),
            _ => Self::UNKNOWN,
        }
    }

    /// `None` when not worked out; else the first place the text names, if any.
    pub fn known(self) -> Option<Option<usize>> {
        match self.0 {
            0 => None,
            1 => Some(None),
            b => Some(Some(usize::from(b) - 2)),
        }
    }
}

impl PartialEq for PlaceNamed {
    /// Always: see the type's docs.
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl Eq for PlaceNamed {}

#[cfg(test)]
mod tests {
    use super::*;

    /// What a memory carries is what looking at its text finds, in ASCII or not, for
    /// overlapping names too; a town with too many places carries nothing.
    #[test]
    fn a_memory_carries_the_first_place_its_text_names() {
        let town = PlaceNames::new(["mill", "Old Mill", "market", "Café Noir"]);
        let first = |text: &str| town.place_named(text).known();
        assert_eq!(first("rain again"), Some(None));
        assert_eq!(
            first("the OLD MILL at dusk"),
            Some(Some(0)),
            "mill comes first"
        );
        assert_eq!(first("the Market"), Some(Some(2)));
        assert_eq!(first("café noir tonight"), Some(Some(3)));
        assert_eq!(
            first("Zoë at the MARKET"),
            Some(Some(2)),
            "not ASCII: lowered"
        );
        assert_eq!(PlaceNamed::default().known(), None);
        let names: Vec<String> = (0..=PlaceNamed::PLACES_MAX)
            .map(|i| format!("p{i}x"))
            .collect();
        let crowded = PlaceNames::new(names.iter().map(String::as_str));
        assert_eq!(crowded.place_named("p3x").known(), None);
        let names = &names[..PlaceNamed::PLACES_MAX];
        let full = PlaceNames::new(names.iter().map(String::as_str));
        assert_eq!(
            full.place_named(&format!("at p{}x", PlaceNamed::PLACES_MAX - 1))
                .known(),
            Some(Some(PlaceNamed::PLACES_MAX - 1))
        );
    }
}
