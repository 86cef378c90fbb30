//! The offline brain: a deterministic gossip.
//!
//! In order of preference, each tick:
//! 1. **Gossip.** If someone can hear, say the most important recalled memory (importance
//!    at least [`HeuristicBrain::share_importance_min`]) that one of them has not heard
//!    yet — as far as this NPC knows — passing on the words, not the attribution. With
//!    chance [`HeuristicBrain::whisper`] it whispers them instead to a neighbour (within
//!    a whisper's reach) who has not heard them, if there is one.
//! 2. **Go where memories point.** Walk toward a place named in the most important
//!    recalled memory that names one; on arrival, linger a while or wander off.
//! 3. **Wander.** Keep walking to the current target, sometimes stay, else pick a random
//!    nearby cell.
//!
//! It acts on what recall returned and on its short-term window (its latest memories),
//! recalled memories first. Every random draw comes from the seeded stream for (seed,
//! NPC, tick), so the same request always gets the same decision.
//!
//! With [`HeuristicBrain::retell_noise`] above 0, a retelling may drift: one clause
//! dropped, one word swapped for a near one, or a place or number replaced by another of
//! the scenario's ([`crate::retell`]). Those draws come from a stream of their own
//! (`"retell"`), so noise never shifts the other draws, and with no noise it is never
//! made.
//!
//! When it reflects it needs no randomness at all: it groups its latest memories by what
//! they say and writes up to three insights, most supported first — "Several people told
//! me: …", "Bob told me: …", "I have been telling everyone: …", "The market keeps coming
//! up; I should go and see." — each citing the memories behind it.

use std::collections::{BTreeMap, BTreeSet};

use hearsay_core::components::gist_key;
use hearsay_core::{
    Decision, Insight, Language, MemoryId, MemoryKind, PlaceNamed, PlaceNames, Pos, rng,
};
use rand::RngExt;

use crate::request::{AskRequest, BrainRequest, KnownPlace, Recollection, ReflectRequest};
use crate::retell::{self, Vocabulary};
use crate::{AnswerReply, BoxFuture, Brain, BrainFailure, BrainReply, ReflectReply};

/// A memory the heuristic brain can act on: recalled, or in the short-term window.
struct Known<'a> {
    kind: MemoryKind,
    content: &'a str,
    importance: u8,
    source: Option<&'a str>,
    /// The first place its text names, if the memory carries it.
    place: PlaceNamed,
}

/// Recalled memories (best first), then the short-term window (newest first) minus what
/// recall already returned.
fn known(req: &BrainRequest) -> Vec<Known<'_>> {
    // A handful of ids (recall's k): looked through, not put in a set of their own.
    let recalled: &[Recollection] = &req.recalled;
    req.recalled
        .iter()
        .map(|r| Known {
            kind: r.kind,
            content: &r.content,
            importance: r.importance,
            source: r.source.as_deref(),
            place: r.place,
        })
        .chain(
            req.observation
                .recent
                .iter()
                .rev()
                .filter(|r| !recalled.iter().any(|m| m.id == r.id))
                .map(|r| Known {
                    kind: r.kind,
                    content: &r.content,
                    importance: r.importance,
                    source: r.source.as_deref(),
                    place: r.place,
                }),
        )
        .collect()
}

/// This thread's [`PlaceNames`] for the places of the request at hand, made again only
/// when they change (every request of a run has the scenario's): what a text is looked
/// through with when its memory does not carry the place it names
/// ([`hearsay_core::places`]), and what a reflection notices keeps coming up with.
struct PlaceMatcher {
    /// The names this thread last looked for.
    names: Vec<String>,
    places: PlaceNames,
    /// The lowering path's text, lowered.
    scratch: String,
}

impl PlaceMatcher {
    /// Runs `f` with this thread's matcher, made ready for `places`.
    fn with<R>(places: &[KnownPlace], f: impl FnOnce(&mut PlaceMatcher) -> R) -> R {
        thread_local! {
            static MATCHER: std::cell::RefCell<Option<PlaceMatcher>> =
                const { std::cell::RefCell::new(None) };
        }
        MATCHER.with_borrow_mut(|m| {
            let same = m.as_ref().is_some_and(|m| {
                m.names.len() == places.len()
                    && m.names.iter().zip(places).all(|(n, p)| *n == p.name)
            });
            if !same {
                *m = Some(PlaceMatcher {
                    names: places.iter().map(|p| p.name.clone()).collect(),
                    places: PlaceNames::new(places.iter().map(|p| p.name.as_str())),
                    scratch: String::new(),
                });
            }
            f(m.as_mut().expect("made ready above"))
        })
    }

    /// Calls `found` with the number (in the places it was made ready for) of every place
    /// `content` names, some perhaps more than once, in no particular order.
    fn named(&mut self, content: &str, found: impl FnMut(usize)) {
        self.places.named(content, &mut self.scratch, found);
    }
}

/// The first place (in `places`' order) named in the first of `memories` (text, and the
/// place it carries) that names one: the place a memory sends the NPC to. A text that
/// names several places names the one first in `places`. A memory that carries what its
/// text names is taken at its word (the scenario's places, looked for when it was made:
/// in a debug build checked against its text); one that does not is looked through.
fn first_place_named<'p, 'c>(
    places: &'p [KnownPlace],
    memories: impl Iterator<Item = (&'c str, PlaceNamed)>,
) -> Option<&'p KnownPlace> {
    let mut memories = memories.peekable();
    memories.peek()?;
    PlaceMatcher::with(places, |m| {
        memories.find_map(|(content, place)| {
            let first = match place.known() {
                Some(first) => {
                    debug_assert_eq!(
                        first,
                        m.places.first_named(content, &mut m.scratch),
                        "the place carried by {content:?}"
                    );
                    first
                }
                None => m.places.first_named(content, &mut m.scratch),
            };
            first.and_then(|i| places.get(i))
        })
    })
}

/// The heuristic brain and its knobs.
#[derive(Clone, Debug, PartialEq)]
pub struct HeuristicBrain {
    /// Memories below this importance are not worth telling (moves are 4).
    pub share_importance_min: u8,
    /// Chance per tick of heading for a place a memory names (else wander).
    pub follow_place_p: f64,
    /// Chance per tick of staying once at such a place.
    pub linger_p: f64,
    /// Chance per tick of keeping on toward the current target while wandering.
    pub keep_target_p: f64,
    /// Chance per tick of staying put while wandering.
    pub stay_p: f64,
    /// How far a wander target may be, per axis.
    pub wander_radius: i32,
    /// Chance that a gossip is whispered to a neighbour who has not heard it (when one
    /// stands within a whisper's reach) rather than said to everyone in earshot. At 0
    /// (the default) no chance is drawn at all, so runs without whispers keep their bytes.
    pub whisper: f64,
    /// Chance (0..=1) that a retelling changes one thing (see [`crate::retell`]).
    pub retell_noise: f64,
    /// The scenario's places and numbers a drifting retelling may swap in.
    pub vocabulary: Vocabulary,
}

impl Default for HeuristicBrain {
    fn default() -> Self {
        Self {
            share_importance_min: 6,
            follow_place_p: 0.8,
            linger_p: 0.6,
            keep_target_p: 0.75,
            stay_p: 0.1,
            wander_radius: 5,
            whisper: 0.0,
            retell_noise: 0.0,
            vocabulary: Vocabulary::default(),
        }
    }
}

impl HeuristicBrain {
    /// The decision for `req` (pure: same request, same decision).
    pub fn decide_now(&self, req: &BrainRequest) -> Decision {
        let obs = &req.observation;
        let mut rng = rng::stream(req.seed, obs.npc, obs.tick, "heuristic");
        let mut ranked = known(req);
        // Stable sort: among equals, recall's own order (best first) decides.
        ranked.sort_by_key(|r| std::cmp::Reverse(r.importance));

        if obs.audible().next().is_some() {
            for r in ranked
                .iter()
                .filter(|r| r.importance >= self.share_importance_min)
            {
                let gist = if r.kind == MemoryKind::Reflection {
                    req.language.insight_gist(r.content).unwrap_or("")
                } else {
                    req.language.gist(r.content, r.source)
                }
                .trim();
                if gist.is_empty() {
                    continue;
                }
                // The words it would say (its own version, under noise), and who has
                // not heard those words yet.
                let speech = self.retell(req, gist);
                let key = gist_key(&speech);
                let unaware = |id| !obs.known_by.contains(&(key, id));
                if obs.audible().any(|a| unaware(a.id)) {
                    let neighbour = obs
                        .seen_npcs
                        .iter()
                        .find(|n| obs.at.within_whisper(n.at) && unaware(n.id));
                    if let Some(n) = neighbour
                        && self.whisper > 0.0
                        && rng.random_bool(self.whisper.min(1.0))
                    {
                        return Decision::Whisper { speech, to: n.id };
                    }
                    return Decision::Talk { speech, to: None };
                }
            }
        }

        let named = first_place_named(&req.places, ranked.iter().map(|r| (r.content, r.place)));
        if let Some(place) = named {
            if place.at == obs.at {
                if rng.random_bool(self.linger_p) {
                    return Decision::Stay;
                }
            } else if rng.random_bool(self.follow_place_p) {
                return Decision::Move { to: place.at };
            }
        }

        if let Some(target) = obs.target.filter(|&t| t != obs.at)
            && rng.random_bool(self.keep_target_p)
        {
            return Decision::Move { to: target };
        }
        if rng.random_bool(self.stay_p) {
            return Decision::Stay;
        }
        let r = self.wander_radius.max(1);
        let to = req.grid.clamp(Pos::new(
            obs.at.x + rng.random_range(-r..=r),
            obs.at.y + rng.random_range(-r..=r),
        ));
        if to == obs.at {
            Decision::Stay
        } else {
            Decision::Move { to }
        }
    }
}

impl HeuristicBrain {
    /// `gist` as this NPC retells it: as it is without noise (no stream is even made),
    /// else perhaps drifted, from the `"retell"` stream for (seed, NPC, the gist). Each
    /// NPC has one version of each thing it passes on — the same every time it tells
    /// it — so once its listeners have heard that version it stops retelling it, as it
    /// does without noise (a version drawn afresh each tick would be news to everyone
    /// every tick).
    fn retell(&self, req: &BrainRequest, gist: &str) -> String {
        // Not above 0 (NaN included): no noise, no stream.
        if self.retell_noise.partial_cmp(&0.0) != Some(std::cmp::Ordering::Greater) {
            return gist.to_owned();
        }
        let obs = &req.observation;
        let mut rng = rng::stream(req.seed, obs.npc, gist_key(gist), "retell");
        retell::retold(gist, self.retell_noise, &self.vocabulary, &mut rng)
    }
}

impl HeuristicBrain {
    /// The insights for `req` (pure: same memories, same insights).
    pub fn reflect_now(&self, req: &ReflectRequest) -> Vec<Insight> {
        let lang = req.language;
        struct Candidate {
            content: String,
            importance: u8,
            evidence: Vec<MemoryId>,
            weight: usize,
        }
        /// One gist heard: its text, who said it, the memories that hold it.
        type Heard = (String, BTreeSet<hearsay_core::Name>, Vec<MemoryId>);
        let mut heard: BTreeMap<u64, Heard> = BTreeMap::new();
        let mut told: BTreeMap<u64, (String, Vec<MemoryId>)> = BTreeMap::new();
        for m in &req.memories {
            if m.kind != MemoryKind::Conversation {
                continue;
            }
            let gist = lang.gist(&m.content, m.source.as_deref()).trim();
            if gist.is_empty() || gist == m.content.trim() {
                continue;
            }
            let key = gist_key(gist);
            match &m.source {
                Some(speaker) => {
                    let entry = heard
                        .entry(key)
                        .or_insert_with(|| (gist.to_owned(), BTreeSet::new(), Vec::new()));
                    entry.1.insert(speaker.clone());
                    entry.2.push(m.id);
                }
                None => {
                    let entry = told
                        .entry(key)
                        .or_insert_with(|| (gist.to_owned(), Vec::new()));
                    entry.1.push(m.id);
                }
            }
        }
        let mut candidates = Vec::new();
        for (gist, speakers, ids) in heard.into_values() {
            let several = speakers.len() >= 2;
            candidates.push(Candidate {
                content: if several {
                    lang.several_told_me(&gist)
                } else {
                    lang.told_me(speakers.first().map_or("", |s| &**s), &gist)
                },
                importance: if several { 8 } else { 7 },
                weight: ids.len() + speakers.len(),
                evidence: ids,
            });
        }
        for (gist, ids) in told.into_values().filter(|(_, ids)| ids.len() >= 2) {
            candidates.push(Candidate {
                content: lang.telling_everyone(&gist),
                importance: 6,
                weight: ids.len(),
                evidence: ids,
            });
        }
        // Each place's memories, in order: those whose text names it, each once.
        let mut naming: Vec<Vec<MemoryId>> = vec![Vec::new(); req.places.len()];
        // The last memory (its number plus one) each place was found in.
        let mut last = vec![0usize; req.places.len()];
        PlaceMatcher::with(&req.places, |matcher| {
            for (k, m) in req.memories.iter().enumerate() {
                matcher.named(&m.content, |i| {
                    if last[i] != k + 1 {
                        last[i] = k + 1;
                        naming[i].push(m.id);
                    }
                });
            }
        });
        for (place, ids) in req.places.iter().zip(naming) {
            if ids.len() >= 2 {
                candidates.push(Candidate {
                    content: lang.keeps_coming_up(&place.name),
                    importance: 6,
                    weight: ids.len(),
                    evidence: ids,
                });
            }
        }
        // Most supported first; ties by the oldest evidence.
        candidates.sort_by_key(|c| {
            (
                std::cmp::Reverse(c.weight),
                c.evidence.first().copied().unwrap_or(MemoryId(u64::MAX)),
            )
        });
        candidates
            .into_iter()
            .take(req.insights_max)
            .map(|c| Insight {
                content: c.content,
                importance: c.importance,
                evidence: c.evidence,
            })
            .collect()
    }
}

impl HeuristicBrain {
    /// The answer to `req` (pure): what it recalls that bears on the question (cosine
    /// relevance above zero), best first — the same words heard from several people
    /// said once, with who said them — up to three things, each with where it came
    /// from; if nothing bears on it, it says it does not know.
    pub fn answer_now(&self, req: &AskRequest) -> String {
        let lang = req.language;
        // Relevant memories grouped by what they say, in recall order.
        let mut groups: Vec<(u64, Vec<&Recollection>)> = Vec::new();
        for (m, relevance) in &req.recalled {
            if *relevance <= 0.0 {
                continue;
            }
            let key = gist_key(Self::gist_of(lang, m));
            let full = groups.len() >= 3;
            match groups.iter_mut().find(|(k, _)| *k == key) {
                Some((_, members)) => members.push(m),
                None if !full => groups.push((key, vec![m])),
                None => {}
            }
        }
        if groups.is_empty() {
            return match lang {
                Language::En => "I don't know anything about that.".to_owned(),
                Language::Zh => "这件事我一点也不知道。".to_owned(),
            };
        }
        let mut parts = Vec::new();
        for (i, (_, members)) in groups.iter().enumerate() {
            let m = members[0];
            let gist = Self::gist_of(lang, m).trim_end_matches(['.', '。']);
            let mut whence = Self::whence(lang, m);
            let mut others: Vec<&str> = Vec::new();
            for o in &members[1..] {
                if let Some(who) = o.source.as_deref()
                    && Some(who) != m.source.as_deref()
                    && !others.contains(&who)
                {
                    others.push(who);
                }
            }
            if !others.is_empty() {
                whence.push_str(&match lang {
                    Language::En => format!("; {} said so too", and_list(&others)),
                    Language::Zh => format!("；{}也这么说", others.join("、")),
                });
            }
            parts.push(match (lang, i) {
                (Language::En, 0) => format!("From what I remember: {gist} ({whence})."),
                (Language::En, _) => format!("I also remember: {gist} ({whence})."),
                (Language::Zh, 0) => format!("据我所知：{gist}（{whence}）。"),
                (Language::Zh, _) => format!("我还记得：{gist}（{whence}）。"),
            });
        }
        parts.join(match lang {
            Language::En => " ",
            Language::Zh => "",
        })
    }

    /// The words a memory passes on.
    fn gist_of(lang: Language, m: &Recollection) -> &str {
        match m.kind {
            MemoryKind::Reflection => lang.insight_gist(&m.content).unwrap_or(&m.content),
            _ => lang.gist(&m.content, m.source.as_deref()),
        }
        .trim()
    }

    /// Where a memory came from, in the NPC's words.
    fn whence(lang: Language, m: &Recollection) -> String {
        let own_words = m.source.is_none() && lang.gist(&m.content, None) != &*m.content;
        match (lang, m.kind, m.source.as_deref()) {
            (Language::En, MemoryKind::Seed, _) => "I have known it all along".to_owned(),
            (Language::En, _, Some(who)) => format!("{who} told me, at tick {}", m.tick),
            (Language::En, MemoryKind::Reflection, None) => {
                format!("I worked that out at tick {}", m.tick)
            }
            (Language::En, MemoryKind::Conversation, None) if own_words => {
                format!("I told people so at tick {}", m.tick)
            }
            (Language::En, _, None) => format!("since tick {}", m.tick),
            (Language::Zh, MemoryKind::Seed, _) => "我一直都知道".to_owned(),
            (Language::Zh, _, Some(who)) => format!("{who}在第{}回合告诉我的", m.tick),
            (Language::Zh, MemoryKind::Reflection, None) => {
                format!("我在第{}回合想明白的", m.tick)
            }
            (Language::Zh, MemoryKind::Conversation, None) if own_words => {
                format!("我在第{}回合跟大家说过", m.tick)
            }
            (Language::Zh, _, None) => format!("从第{}回合起", m.tick),
        }
    }
}

/// "A", "A and B", "A, B and C".
fn and_list(names: &[&str]) -> String {
    match names {
        [] => String::new(),
        [one] => (*one).to_owned(),
        [rest @ .., last] => format!("{} and {last}", rest.join(", ")),
    }
}

impl HeuristicBrain {
    /// The reply to `request`, however it was asked for. No response text: the decision
    /// is the response, and the tape, which writes no response for this brain, gives it
    /// back as the decision's JSON when read. (It was serialized here once per NPC per
    /// tick, for the tape to serialize the decision again only to see that the two matched
    /// and drop it.)
    fn reply(&self, request: &BrainRequest) -> BrainReply {
        BrainReply::plain(self.decide_now(request), String::new())
    }
}

impl Brain for HeuristicBrain {
    fn provider(&self) -> &str {
        "heuristic"
    }

    fn reflect<'a>(
        &'a self,
        request: &'a ReflectRequest,
    ) -> BoxFuture<'a, Result<ReflectReply, BrainFailure>> {
        Box::pin(async move { Ok(ReflectReply::of_insights(self.reflect_now(request))) })
    }

    fn answer<'a>(
        &'a self,
        request: &'a AskRequest,
    ) -> BoxFuture<'a, Result<AnswerReply, BrainFailure>> {
        Box::pin(async move {
            let text = self.answer_now(request);
            Ok(AnswerReply::plain(text.clone(), text))
        })
    }

    fn judge<'a>(
        &'a self,
        request: &'a crate::JudgeRequest,
    ) -> BoxFuture<'a, Result<crate::JudgeReply, BrainFailure>> {
        let yes = crate::judge::judge_by_words(request);
        let raw = if yes { "yes" } else { "no" };
        Box::pin(async move { Ok(crate::Reply::plain(yes, raw.to_owned())) })
    }

    fn decide<'a>(
        &'a self,
        request: &'a BrainRequest,
    ) -> BoxFuture<'a, Result<BrainReply, BrainFailure>> {
        Box::pin(async move { Ok(self.reply(request)) })
    }

    fn decide_here(&self, request: &BrainRequest) -> Option<Result<BrainReply, BrainFailure>> {
        Some(Ok(self.reply(request)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::request::{KnownPlace, Recollection};
    use hearsay_core::{Grid, Language, MemoryId, MemoryKind, NpcId, Observation, SeenNpc};

    fn request(audible: bool, recalled: Vec<Recollection>) -> BrainRequest {
        BrainRequest {
            seed: 42,
            language: Language::En,
            persona: "A baker.".into(),
            grid: Grid {
                width: 24,
                height: 16,
            },
            places: vec![KnownPlace {
                name: "market".into(),
                at: Pos::new(15, 8),
            }]
            .into(),
            observation: Observation {
                npc: NpcId(1),
                name: "Alice".into(),
                tick: 5,
                at: Pos::new(12, 8),
                target: None,
                seen_npcs: vec![SeenNpc {
                    id: NpcId(2),
                    name: "Carol".into(),
                    at: Pos::new(13, 8),
                    audible,
                }],
                seen_places: vec![],
                heard: vec![],
                witnessed: vec![],
                recent: Default::default(),
                known_by: vec![],
            },
            recalled,
        }
    }

    fn memory(id: u64, content: &str, importance: u8, source: Option<&str>) -> Recollection {
        Recollection {
            id: MemoryId(id),
            kind: MemoryKind::Conversation,
            content: content.into(),
            importance,
            tick: 1,
            source: source.map(Into::into),
            place: Default::default(),
        }
    }

    #[test]
    fn gossips_the_most_important_untold_memory_without_attribution() {
        let req = request(
            true,
            vec![
                memory(1, "I decided to move to (3, 4)", 4, None),
                memory(
                    2,
                    "Bob said: The market nearby is selling fresh fish.",
                    8,
                    Some("Bob"),
                ),
            ],
        );
        assert_eq!(
            HeuristicBrain::default().decide_now(&req),
            Decision::Talk {
                speech: "The market nearby is selling fresh fish.".into(),
                to: None
            }
        );
    }

    #[test]
    fn a_share_of_gossip_is_whispered_to_a_neighbour_who_has_not_heard_it() {
        let gossip = "The market nearby is selling fresh fish.";
        let heard = memory(2, &format!("Bob whispered to me: {gossip}"), 8, Some("Bob"));
        let decide = |p: f64, tick: u64| {
            let mut req = request(true, vec![heard.clone()]);
            req.observation.tick = tick;
            HeuristicBrain {
                whisper: p,
                ..HeuristicBrain::default()
            }
            .decide_now(&req)
        };
        let whispered = Decision::Whisper {
            speech: gossip.into(),
            to: NpcId(2),
        };
        let said = Decision::Talk {
            speech: gossip.into(),
            to: None,
        };
        let share = |p: f64| (0..400).filter(|&t| decide(p, t) == whispered).count();
        assert_eq!(share(0.0), 0);
        assert_eq!(share(1.0), 400);
        let half = share(0.5);
        assert!((150..=250).contains(&half), "{half} of 400");
        assert_eq!(share(0.5), half, "the same seed, the same whispers");
        for t in 0..400 {
            assert!([&whispered, &said].contains(&&decide(0.5, t)));
        }
        // Nobody within a whisper's reach (Carol two cells off): said aloud.
        let mut req = request(true, vec![heard.clone()]);
        req.observation.seen_npcs[0].at = Pos::new(14, 8);
        let brain = HeuristicBrain {
            whisper: 1.0,
            ..HeuristicBrain::default()
        };
        assert_eq!(brain.decide_now(&req), said);
    }

    #[test]
    fn does_not_retell_what_the_listener_knows_and_walks_to_the_place_instead() {
        let mut req = request(
            true,
            vec![memory(
                2,
                "Bob said: The market nearby is selling fresh fish.",
                8,
                Some("Bob"),
            )],
        );
        let key = gist_key("The market nearby is selling fresh fish.");
        req.observation.known_by = vec![(key, NpcId(2))];
        let brain = HeuristicBrain {
            follow_place_p: 1.0,
            ..HeuristicBrain::default()
        };
        assert_eq!(
            brain.decide_now(&req),
            Decision::Move {
                to: Pos::new(15, 8)
            }
        );
    }

    #[test]
    fn a_noisy_retelling_drifts_by_the_seed_and_no_noise_says_the_words() {
        let words = "The market nearby is selling fresh fish.";
        let req = request(
            true,
            vec![memory(2, &format!("Bob said: {words}"), 8, Some("Bob"))],
        );
        let said = |brain: &HeuristicBrain, req: &BrainRequest| match brain.decide_now(req) {
            Decision::Talk { speech, .. } => speech,
            other => panic!("expected a talk, got {other:?}"),
        };
        assert_eq!(said(&HeuristicBrain::default(), &req), words);
        let noisy = HeuristicBrain {
            retell_noise: 1.0,
            vocabulary: Vocabulary::new(vec!["market".into(), "bakery".into()], std::iter::empty()),
            ..HeuristicBrain::default()
        };
        // One NPC's version of one thing is the same every tick it tells it (so its
        // listeners, once they heard it, are not told again); NPCs differ.
        let mut versions = BTreeSet::new();
        for tick in 0..30 {
            let mut r = req.clone();
            r.observation.tick = tick;
            let speech = said(&noisy, &r);
            assert_ne!(speech, words, "at 1.0 every retelling drifts");
            versions.insert(speech);
        }
        assert_eq!(versions.len(), 1, "one version per NPC: {versions:?}");
        let by_npc: BTreeSet<String> = (0..12)
            .map(|n| {
                let mut r = req.clone();
                r.observation.npc = NpcId(n);
                said(&noisy, &r)
            })
            .collect();
        assert!(by_npc.len() > 3, "NPCs draw differently: {by_npc:?}");
        let mut other_seed = req.clone();
        other_seed.seed += 1;
        let by_seed: BTreeSet<String> = (0..10)
            .map(|s| {
                let mut r = req.clone();
                r.seed = s;
                said(&noisy, &r)
            })
            .collect();
        assert!(by_seed.len() > 1, "seeds draw differently: {by_seed:?}");
        // Noise leaves the rest of the decision alone: the same choice to talk.
        let quiet = HeuristicBrain {
            retell_noise: 0.0,
            ..noisy.clone()
        };
        assert_eq!(said(&quiet, &other_seed), words);
    }

    #[test]
    fn the_place_named_is_the_first_one_in_the_first_memory_naming_one() {
        let place = |name: &str, x| KnownPlace {
            name: name.into(),
            at: Pos::new(x, 0),
        };
        let places = [
            place("Old Mill", 1),
            place("Market", 2),
            place("Café Noir", 3),
        ];
        let named = |contents: &[&str]| {
            first_place_named(&places, contents.iter().map(|c| (*c, PlaceNamed::UNKNOWN)))
                .map(|p| p.at.x)
        };
        assert_eq!(named(&[]), None);
        assert_eq!(named(&["nothing here", "or here"]), None);
        // Case does not matter, in ASCII or not.
        assert_eq!(named(&["meet at the MARKET"]), Some(2));
        assert_eq!(named(&["CAFÉ NOIR tonight"]), Some(3));
        assert_eq!(named(&["Zoë saw the café noir"]), Some(3));
        // Several named: the scenario's order decides, not the text's.
        assert_eq!(named(&["the market, then the old mill"]), Some(1));
        // The first memory that names one decides.
        assert_eq!(named(&["rain", "the market", "the old mill"]), Some(2));
        // Again, on a thread whose buffers hold the last call's text.
        assert_eq!(named(&["old mil"]), None);
    }

    /// Towns whose names overlap, differ in case, or are not ASCII, and texts made of
    /// their names in every case, their parts and other words: what the look for places
    /// is checked on against its definition.
    fn towns_and_texts() -> (Vec<Vec<KnownPlace>>, Vec<String>) {
        let place = |name: &str, x| KnownPlace {
            name: name.into(),
            at: Pos::new(x, 0),
        };
        let towns = vec![
            vec![place("mill", 1), place("Old Mill", 2), place("market", 3)],
            vec![place("Old Mill", 1), place("mill", 2), place("Docks", 3)],
            // The same names at other cells: the answer is the cell of this call's place.
            vec![place("Old Mill", 7), place("mill", 8), place("Docks", 9)],
            // A name that is not ASCII: the lowering path for every text.
            vec![place("Café Noir", 1), place("mill", 2)],
            // A name whose lowercase is ASCII though it is not (the Kelvin sign).
            vec![place("\u{212A}iosk", 1), place("mill", 2)],
        ];
        let words = [
            "the", "OLD", "old", "Mill", "MILL", "mil", "l", "market", "MARKET", "marke", "docks",
            "DoCkS", "café", "CAFÉ", "noir", "kiosk", "KIOSK", "zoë", "(3, 4)",
        ];
        let mut state = 7u64;
        let mut next = |n: usize| {
            state = state
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            (state >> 33) as usize % n
        };
        let mut texts: Vec<String> = Vec::new();
        for _ in 0..400 {
            let n = 1 + next(4);
            let glue = [" ", "", ", "][next(3)];
            texts.push(
                (0..n)
                    .map(|_| words[next(words.len())])
                    .collect::<Vec<_>>()
                    .join(glue),
            );
        }
        (towns, texts)
    }

    /// Whether `text` names `place`, by the definition: both lowered, one in the other.
    fn names(text: &str, place: &KnownPlace) -> bool {
        text.to_lowercase().contains(&place.name.to_lowercase())
    }

    /// The look by automaton (ASCII names and text) finds what lowering every text and
    /// name and looking for each name in turn finds: the definition, checked on texts
    /// made of the names in every case, their parts, and overlapping ones.
    #[test]
    fn the_automaton_finds_what_lowering_and_looking_name_by_name_finds() {
        let (towns, texts) = towns_and_texts();
        let definition = |places: &[KnownPlace], contents: &[&str]| {
            contents
                .iter()
                .find_map(|c| places.iter().find(|p| names(c, p)).map(|p| p.at.x))
        };
        let mut found = 0;
        for round in 0..3 {
            for (t, places) in towns.iter().enumerate() {
                for chunk in texts.chunks(3 + round) {
                    let contents: Vec<&str> = chunk.iter().map(String::as_str).collect();
                    let got = first_place_named(
                        places,
                        contents.iter().map(|c| (*c, PlaceNamed::UNKNOWN)),
                    )
                    .map(|p| p.at.x);
                    assert_eq!(got, definition(places, &contents), "town {t}: {contents:?}");
                    // Carried as a memory made in that town carries it: the same place.
                    let town = PlaceNames::new(places.iter().map(|p| p.name.as_str()));
                    let carried = first_place_named(
                        places,
                        contents.iter().map(|c| (*c, town.place_named(c))),
                    )
                    .map(|p| p.at.x);
                    assert_eq!(carried, got, "town {t}, carried: {contents:?}");
                    found += usize::from(got.is_some());
                }
            }
        }
        assert!(found > 200, "texts that name a place: {found}");
    }

    /// A reflection's "keeps coming up" cites, for each place, every memory whose text
    /// names it by the definition, in order, once each — and none when fewer than two do.
    #[test]
    fn a_place_that_keeps_coming_up_cites_every_memory_naming_it() {
        let (towns, texts) = towns_and_texts();
        let brain = HeuristicBrain::default();
        let mut cited = 0;
        for (t, places) in towns.iter().enumerate() {
            for chunk in texts.chunks(7) {
                let memories: Vec<Recollection> = chunk
                    .iter()
                    .enumerate()
                    .map(|(i, text)| {
                        let mut m = memory(i as u64 + 1, text, 4, None);
                        m.kind = MemoryKind::Observation;
                        m
                    })
                    .collect();
                let req = ReflectRequest {
                    seed: 1,
                    language: Language::En,
                    npc: NpcId(0),
                    name: "Alice".into(),
                    persona: String::new(),
                    tick: 9,
                    places: places.clone(),
                    memories: memories.clone(),
                    insights_max: places.len(),
                };
                let mut want: Vec<(String, Vec<MemoryId>)> = places
                    .iter()
                    .map(|p| {
                        let ids: Vec<MemoryId> = memories
                            .iter()
                            .filter(|m| names(&m.content, p))
                            .map(|m| m.id)
                            .collect();
                        (Language::En.keeps_coming_up(&p.name), ids)
                    })
                    .filter(|(_, ids)| ids.len() >= 2)
                    .collect();
                want.sort_by_key(|(_, ids)| (std::cmp::Reverse(ids.len()), ids[0]));
                let got: Vec<(String, Vec<MemoryId>)> = brain
                    .reflect_now(&req)
                    .into_iter()
                    .map(|i| (i.content, i.evidence))
                    .collect();
                assert_eq!(got, want, "town {t}: {chunk:?}");
                cited += got.len();
            }
        }
        assert!(cited > 50, "places that kept coming up: {cited}");
    }

    #[test]
    fn trivia_is_not_gossip() {
        let req = request(
            true,
            vec![memory(1, "I decided to move to (3, 4)", 4, None)],
        );
        assert!(!matches!(
            HeuristicBrain::default().decide_now(&req),
            Decision::Talk { .. }
        ));
    }

    #[test]
    fn decisions_are_reproducible_and_stay_on_the_map() {
        let brain = HeuristicBrain::default();
        let mut seen = std::collections::BTreeSet::new();
        for tick in 0..200 {
            let mut req = request(false, vec![]);
            req.observation.tick = tick;
            req.observation.at = Pos::new(0, 15);
            let d = brain.decide_now(&req);
            assert_eq!(d, brain.decide_now(&req));
            if let Decision::Move { to } = d {
                assert!(req.grid.contains(to));
            }
            seen.insert(format!("{d:?}"));
        }
        assert!(seen.len() > 10, "wandering varies: {seen:?}");
    }

    #[test]
    fn the_short_term_window_is_acted_on_even_when_recall_returns_nothing() {
        let mut req = request(true, vec![]);
        req.observation.recent = vec![hearsay_core::RecentMemory {
            id: MemoryId(9),
            kind: MemoryKind::Conversation,
            content: "Bob said: The bakery burned down.".into(),
            importance: 8,
            tick: 4,
            source: Some("Bob".into()),
            place: Default::default(),
        }]
        .into();
        assert_eq!(
            HeuristicBrain::default().decide_now(&req),
            Decision::Talk {
                speech: "The bakery burned down.".into(),
                to: None
            }
        );
    }

    #[test]
    fn reflections_group_what_was_heard_and_cite_it() {
        let m = |id: u64, content: &str, source: Option<&str>| Recollection {
            id: MemoryId(id),
            kind: MemoryKind::Conversation,
            content: content.into(),
            importance: 8,
            tick: id,
            source: source.map(Into::into),
            place: Default::default(),
        };
        let mut moved = m(5, "I decided to move to (15, 8)", None);
        moved.kind = MemoryKind::Observation;
        let mut req = ReflectRequest {
            seed: 1,
            language: Language::En,
            npc: NpcId(1),
            name: "Alice".into(),
            persona: "A baker.".into(),
            tick: 30,
            places: vec![KnownPlace {
                name: "market".into(),
                at: Pos::new(15, 8),
            }],
            memories: vec![
                m(1, "Bob said: The market sells fresh fish.", Some("Bob")),
                m(2, "Carol said: The market sells fresh fish!", Some("Carol")),
                m(3, "Dan said: The well is dry.", Some("Dan")),
                m(4, "I said to everyone: The well is dry.", None),
                moved,
            ],
            insights_max: 3,
        };
        let brain = HeuristicBrain::default();
        let insights = brain.reflect_now(&req);
        assert_eq!(insights, brain.reflect_now(&req), "deterministic");
        let got: Vec<(&str, Vec<u64>)> = insights
            .iter()
            .map(|i| (i.content.as_str(), i.evidence.iter().map(|e| e.0).collect()))
            .collect();
        assert_eq!(
            got,
            vec![
                (
                    "Several people told me: The market sells fresh fish.",
                    vec![1, 2]
                ),
                (
                    "The market keeps coming up; I should go and see.",
                    vec![1, 2]
                ),
                ("Dan told me: The well is dry.", vec![3]),
            ]
        );
        assert_eq!(insights[0].importance, 8);
        req.insights_max = 1;
        assert_eq!(brain.reflect_now(&req).len(), 1);
        req.memories.clear();
        assert!(brain.reflect_now(&req).is_empty());
    }

    #[test]
    fn answers_say_what_it_recalls_and_where_from_or_that_it_does_not_know() {
        let ask = |recalled: Vec<(Recollection, f32)>, language| AskRequest {
            seed: 1,
            language,
            npc: NpcId(0),
            name: "Alice".into(),
            persona: String::new(),
            tick: 50,
            places: Vec::new(),
            question: "Where is the fish?".into(),
            recalled,
            recent: Vec::new(),
        };
        let brain = HeuristicBrain::default();
        let heard = memory(4, "Bob said: The market sells fresh fish.", 8, Some("Bob"));
        let unrelated = memory(5, "I decided to move to (1, 2)", 4, None);
        let answer = brain.answer_now(&ask(
            vec![(heard.clone(), 0.4), (unrelated.clone(), 0.0)],
            Language::En,
        ));
        assert_eq!(
            answer,
            format!(
                "From what I remember: The market sells fresh fish (Bob told me, at tick {}).",
                heard.tick
            )
        );
        assert_eq!(
            brain.answer_now(&ask(vec![(unrelated, 0.0)], Language::En)),
            "I don't know anything about that."
        );
        assert_eq!(
            brain.answer_now(&ask(Vec::new(), Language::Zh)),
            "这件事我一点也不知道。"
        );
    }
}
