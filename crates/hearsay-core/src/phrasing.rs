//! How memories and observations are worded, in English or Chinese.
//!
//! The wording is part of the simulation's output (it is hashed into the tick digest and
//! embedded for recall), so it lives in the kernel and changes only deliberately.

use serde::{Deserialize, Serialize};

use crate::grid::Pos;
use crate::observation::Observation;

/// To whom a speaker said something, as its own memory of it puts it.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Said<'a> {
    /// A plain talk: `I said to everyone: …`.
    ToEveryone,
    /// A talk addressed to this NPC (everyone in earshot heard it): `I said to Carol: …`.
    To(&'a str),
    /// A whisper to this NPC (nobody else heard it): `I whispered to Carol: …`.
    WhisperedTo(&'a str),
}

/// How a listener came to hear something, as its memory of it puts it.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Heard<'a> {
    /// A plain talk: `Bob said: …`.
    Said,
    /// A talk addressed to the listener: `Bob told me: …`.
    ToMe,
    /// A talk addressed to this other NPC, overheard: `Bob said to Carol: …`.
    ToOther(&'a str),
    /// A whisper to the listener: `Bob whispered to me: …`.
    WhisperedToMe,
}

impl<'a> Heard<'a> {
    /// How `listener` heard words addressed to `to` (`None`: to everyone), whispered or not.
    pub fn by(listener: &str, to: Option<&'a str>, whispered: bool) -> Self {
        match to {
            _ if whispered => Heard::WhisperedToMe,
            None => Heard::Said,
            Some(to) if to == listener => Heard::ToMe,
            Some(to) => Heard::ToOther(to),
        }
    }
}

/// The language memories are phrased in.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Language {
    /// English.
    #[default]
    En,
    /// Chinese (the pgvector memory design's own phrasing).
    Zh,
}

impl Language {
    /// The speaker's own memory of what it said.
    pub fn said_to_everyone(self, speech: &str) -> String {
        match self {
            Language::En => format!("I said to everyone: {speech}"),
            Language::Zh => format!("我对大家说：{speech}"),
        }
    }

    /// The speaker's own memory of what it said, to whom.
    pub fn said(self, to: Said<'_>, speech: &str) -> String {
        match (self, to) {
            (_, Said::ToEveryone) => self.said_to_everyone(speech),
            (Language::En, Said::To(to)) => format!("I said to {to}: {speech}"),
            (Language::Zh, Said::To(to)) => format!("我对{to}说：{speech}"),
            (Language::En, Said::WhisperedTo(to)) => format!("I whispered to {to}: {speech}"),
            (Language::Zh, Said::WhisperedTo(to)) => format!("我悄悄对{to}说：{speech}"),
        }
    }

    /// A listener's memory of what `speaker` said.
    pub fn heard(self, speaker: &str, speech: &str) -> String {
        match self {
            Language::En => format!("{speaker} said: {speech}"),
            Language::Zh => format!("{speaker}说：{speech}"),
        }
    }

    /// A listener's memory of what `speaker` said, and how it was said to it. Addressed
    /// talk to the listener is worded as [`told_me`](Self::told_me) is (`Bob told me: …`);
    /// the memory's kind (conversation, not reflection) tells the two apart.
    pub fn heard_as(self, speaker: &str, how: Heard<'_>, speech: &str) -> String {
        match (self, how) {
            (_, Heard::Said) => self.heard(speaker, speech),
            (_, Heard::ToMe) => self.told_me(speaker, speech),
            (Language::En, Heard::ToOther(to)) => format!("{speaker} said to {to}: {speech}"),
            (Language::Zh, Heard::ToOther(to)) => format!("{speaker}对{to}说：{speech}"),
            (Language::En, Heard::WhisperedToMe) => format!("{speaker} whispered to me: {speech}"),
            (Language::Zh, Heard::WhisperedToMe) => format!("{speaker}悄悄对我说：{speech}"),
        }
    }

    /// The memory of deciding to move.
    pub fn decided_to_move(self, to: Pos) -> String {
        match self {
            Language::En => format!("I decided to move to ({}, {})", to.x, to.y),
            Language::Zh => format!("我决定移动到 ({}, {})", to.x, to.y),
        }
    }

    /// The memory of a scenario event seen at a place.
    pub fn witnessed(self, place: &str, text: &str) -> String {
        match self {
            Language::En => format!("I saw at the {place}: {text}"),
            Language::Zh => format!("我在{place}看到：{text}"),
        }
    }

    /// An insight: several people told the NPC the same thing.
    pub fn several_told_me(self, gist: &str) -> String {
        match self {
            Language::En => format!("Several people told me: {gist}"),
            Language::Zh => format!("好几个人都告诉我：{gist}"),
        }
    }

    /// An insight: one person told the NPC something worth keeping. Also how a listener
    /// remembers talk addressed to it ([`Heard::ToMe`]), as a conversation memory.
    pub fn told_me(self, who: &str, gist: &str) -> String {
        match self {
            Language::En => format!("{who} told me: {gist}"),
            Language::Zh => format!("{who}告诉我：{gist}"),
        }
    }

    /// An insight: the NPC has been passing something on.
    pub fn telling_everyone(self, gist: &str) -> String {
        match self {
            Language::En => format!("I have been telling everyone: {gist}"),
            Language::Zh => format!("我一直在告诉大家：{gist}"),
        }
    }

    /// An insight: a place keeps coming up in the NPC's memories.
    pub fn keeps_coming_up(self, place: &str) -> String {
        match self {
            Language::En => format!("The {place} keeps coming up; I should go and see."),
            Language::Zh => format!("{place}总被提起，我应该去看看。"),
        }
    }

    /// The words an insight phrased by [`several_told_me`](Self::several_told_me),
    /// [`told_me`](Self::told_me) or [`telling_everyone`](Self::telling_everyone) is
    /// about, if it is one of those.
    pub fn insight_gist(self, content: &str) -> Option<&str> {
        let (prefixes, infix): (&[&str], &str) = match self {
            Language::En => (
                &["Several people told me: ", "I have been telling everyone: "],
                " told me: ",
            ),
            Language::Zh => (&["好几个人都告诉我：", "我一直在告诉大家："], "告诉我："),
        };
        prefixes
            .iter()
            .find_map(|p| content.strip_prefix(p))
            .or_else(|| content.split_once(infix).map(|(_, rest)| rest))
    }

    /// The words a memory passes on when retold: `content` without the attribution that
    /// [`said`](Self::said), [`heard`](Self::heard) or [`heard_as`](Self::heard_as) put in
    /// front. `speaker` is the memory's source, if it was heard from someone; without one,
    /// only the speaker's own attributions (`I said to …: `, `I whispered to …: `) are
    /// stripped. An addressee's name ends at the first `: ` (`说：` in Chinese), so a name
    /// holding one leaves its tail in the gist.
    pub fn gist<'a>(self, content: &'a str, speaker: Option<&str>) -> &'a str {
        let (own, addressed_end, heard, addressed): (&[&str], &str, &[&str], &str) = match self {
            Language::En => (
                &["I said to ", "I whispered to "],
                ": ",
                &[" said: ", " told me: ", " whispered to me: "],
                " said to ",
            ),
            Language::Zh => (
                &["我对", "我悄悄对"],
                "说：",
                &["说：", "告诉我：", "悄悄对我说："],
                "对",
            ),
        };
        let after_name = |rest: &'a str| rest.split_once(addressed_end).map(|(_, said)| said);
        if let Some(rest) = own
            .iter()
            .find_map(|p| content.strip_prefix(p).and_then(after_name))
        {
            return rest;
        }
        if let Some(rest) = speaker.and_then(|s| content.strip_prefix(s)) {
            if let Some(said) = heard.iter().find_map(|sep| rest.strip_prefix(sep)) {
                return said;
            }
            if let Some(said) = rest.strip_prefix(addressed).and_then(after_name) {
                return said;
            }
        }
        content
    }

    /// The full description of what an NPC perceives this tick, for prompts and logs.
    pub fn describe(self, obs: &Observation) -> String {
        let mut out = String::new();
        match self {
            Language::En => {
                out.push_str(&format!("Tick {}. I am at {}.", obs.tick, obs.at));
                if obs.seen_npcs.is_empty() {
                    out.push_str(" I see nobody.");
                } else {
                    let seen: Vec<String> = obs
                        .seen_npcs
                        .iter()
                        .map(|s| format!("{} at {}", s.name, s.at))
                        .collect();
                    out.push_str(&format!(" I see {}.", seen.join(", ")));
                }
                if !obs.seen_places.is_empty() {
                    let seen: Vec<String> = obs
                        .seen_places
                        .iter()
                        .map(|p| format!("the {} at {}", p.name, p.at))
                        .collect();
                    out.push_str(&format!(" Places in sight: {}.", seen.join(", ")));
                }
                for h in &obs.heard {
                    let (who, text) = (&h.speaker_name, &h.text);
                    out.push_str(&match h.how(&obs.name) {
                        Heard::Said => format!(" I heard {who} say: \"{text}\"."),
                        Heard::ToMe => format!(" {who} told me: \"{text}\"."),
                        Heard::ToOther(to) => format!(" I heard {who} say to {to}: \"{text}\"."),
                        Heard::WhisperedToMe => format!(" {who} whispered to me: \"{text}\"."),
                    });
                }
                for w in &obs.witnessed {
                    out.push_str(&format!(" At the {} I see: {}", w.place, w.text));
                }
            }
            Language::Zh => {
                out.push_str(&format!("第{}回合。我在 {}。", obs.tick, obs.at));
                if obs.seen_npcs.is_empty() {
                    out.push_str("我谁也没看到。");
                } else {
                    let seen: Vec<String> = obs
                        .seen_npcs
                        .iter()
                        .map(|s| format!("{} {}", s.name, s.at))
                        .collect();
                    out.push_str(&format!("我看到{}。", seen.join("、")));
                }
                if !obs.seen_places.is_empty() {
                    let seen: Vec<String> = obs
                        .seen_places
                        .iter()
                        .map(|p| format!("{} {}", p.name, p.at))
                        .collect();
                    out.push_str(&format!("附近的地方：{}。", seen.join("、")));
                }
                for h in &obs.heard {
                    let (who, text) = (&h.speaker_name, &h.text);
                    out.push_str(&match h.how(&obs.name) {
                        Heard::Said => format!("我听到{who}说：“{text}”。"),
                        Heard::ToMe => format!("{who}告诉我：“{text}”。"),
                        Heard::ToOther(to) => format!("我听到{who}对{to}说：“{text}”。"),
                        Heard::WhisperedToMe => format!("{who}悄悄对我说：“{text}”。"),
                    });
                }
                for w in &obs.witnessed {
                    out.push_str(&format!("我在{}看到：{}", w.place, w.text));
                }
            }
        }
        out
    }

    /// What an NPC's recall searches for this tick: the salient parts of its observation
    /// (who and what it sees, what it hears and witnesses), without coordinates, which
    /// would only make every position-bearing memory look alike.
    pub fn recall_query(self, obs: &Observation) -> String {
        let sep = match self {
            Language::En => ". ",
            Language::Zh => "。",
        };
        // Written into one string (every NPC's query, every tick): the parts joined by
        // `sep`, without a copy of each part first, into room enough for all of them
        // (grown as it filled, the string's reallocations were over half of the query's
        // making at 10,000 NPCs: docs/BENCHMARKS.md, the fortieth round). A heard line's
        // phrasing adds a few words to its speaker's name and speech.
        let parts =
            obs.seen_npcs.len() + obs.seen_places.len() + obs.heard.len() + obs.witnessed.len();
        let room = parts * sep.len()
            + obs.seen_npcs.iter().map(|s| s.name.len()).sum::<usize>()
            + obs.seen_places.iter().map(|p| p.name.len()).sum::<usize>()
            + obs
                .heard
                .iter()
                .map(|h| {
                    h.speaker_name.len() + h.text.len() + h.to.as_ref().map_or(0, |t| t.len()) + 24
                })
                .sum::<usize>()
            + obs.witnessed.iter().map(|w| w.text.len()).sum::<usize>();
        let mut query = String::with_capacity(room);
        let mut first = true;
        let mut push = |part: &str| {
            if !first {
                query.push_str(sep);
            }
            first = false;
            query.push_str(part);
        };
        for s in &obs.seen_npcs {
            push(&s.name);
        }
        for p in &obs.seen_places {
            push(&p.name);
        }
        for h in &obs.heard {
            push(&self.heard_as(&h.speaker_name, h.how(&obs.name), &h.text));
        }
        for w in &obs.witnessed {
            push(&w.text);
        }
        query
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn phrasing_follows_the_design() {
        let en = Language::En;
        assert_eq!(en.said_to_everyone("hi"), "I said to everyone: hi");
        assert_eq!(en.heard("Bob", "hi"), "Bob said: hi");
        assert_eq!(
            en.decided_to_move(Pos::new(3, 4)),
            "I decided to move to (3, 4)"
        );
        let zh = Language::Zh;
        assert_eq!(zh.said_to_everyone("你好"), "我对大家说：你好");
        assert_eq!(zh.decided_to_move(Pos::new(3, 4)), "我决定移动到 (3, 4)");
        assert_eq!(zh.heard("小明", "你好"), "小明说：你好");
    }

    #[test]
    fn the_recall_query_joins_what_is_perceived() {
        use crate::ids::NpcId;
        use crate::observation::{HeardLine, SeenNpc, SeenPlace, Witnessed};
        let obs = Observation {
            npc: NpcId(1),
            name: "Alice".into(),
            tick: 3,
            at: Pos::new(0, 0),
            target: None,
            seen_npcs: vec![SeenNpc {
                id: NpcId(0),
                name: "Bob".into(),
                at: Pos::new(1, 0),
                audible: true,
            }],
            seen_places: vec![SeenPlace {
                name: "market".into(),
                at: Pos::new(2, 0),
            }],
            heard: vec![HeardLine {
                speaker: NpcId(0),
                speaker_name: "Bob".into(),
                text: "fresh fish".into(),
                to: Some("Alice".into()),
                whispered: false,
            }],
            // An empty part still gets its separators, as a join gives them.
            witnessed: vec![
                Witnessed {
                    place: "market".into(),
                    text: String::new(),
                },
                Witnessed {
                    place: "market".into(),
                    text: "A boat came in.".into(),
                },
            ],
            recent: Default::default(),
            known_by: Vec::new(),
        };
        assert_eq!(
            Language::En.recall_query(&obs),
            "Bob. market. Bob told me: fresh fish. . A boat came in."
        );
        assert_eq!(
            Language::Zh.recall_query(&obs),
            "Bob。market。Bob告诉我：fresh fish。。A boat came in."
        );
        let mut alone = obs;
        alone.seen_npcs.clear();
        alone.seen_places.clear();
        alone.heard.clear();
        alone.witnessed.truncate(1);
        assert_eq!(Language::En.recall_query(&alone), "");
        alone.witnessed.clear();
        assert_eq!(Language::En.recall_query(&alone), "");
    }

    #[test]
    fn insights_are_phrased_and_read_back() {
        for lang in [Language::En, Language::Zh] {
            let gist = "fresh fish";
            assert_eq!(lang.insight_gist(&lang.several_told_me(gist)), Some(gist));
            assert_eq!(lang.insight_gist(&lang.told_me("Bob", gist)), Some(gist));
            assert_eq!(lang.insight_gist(&lang.telling_everyone(gist)), Some(gist));
            assert_eq!(lang.insight_gist(&lang.keeps_coming_up("market")), None);
        }
    }

    #[test]
    fn gist_strips_only_the_attribution() {
        let en = Language::En;
        assert_eq!(
            en.gist("I said to everyone: fresh fish", None),
            "fresh fish"
        );
        assert_eq!(en.gist("Bob said: fresh fish", Some("Bob")), "fresh fish");
        assert_eq!(
            en.gist("Bob said: fresh fish", Some("Alice")),
            "Bob said: fresh fish"
        );
        assert_eq!(
            en.gist("The market sells fish.", None),
            "The market sells fish."
        );
        let zh = Language::Zh;
        assert_eq!(zh.gist("小明说：市场有鱼", Some("小明")), "市场有鱼");
        assert_eq!(zh.gist("我对大家说：市场有鱼", None), "市场有鱼");
    }

    #[test]
    fn addressed_talk_and_whispers_are_phrased_and_retold_without_attribution() {
        let en = Language::En;
        let zh = Language::Zh;
        let said = [
            (en.said(Said::To("Carol"), "x"), "I said to Carol: x"),
            (
                en.said(Said::WhisperedTo("Carol"), "x"),
                "I whispered to Carol: x",
            ),
            (zh.said(Said::To("小红"), "x"), "我对小红说：x"),
            (zh.said(Said::WhisperedTo("小红"), "x"), "我悄悄对小红说：x"),
        ];
        for (content, expected) in &said {
            assert_eq!(content, expected);
            let lang = if content.is_ascii() { en } else { zh };
            assert_eq!(lang.gist(content, None), "x", "{content}");
        }
        let heard = [
            (en.heard_as("Bob", Heard::ToMe, "x"), "Bob told me: x"),
            (
                en.heard_as("Bob", Heard::ToOther("Carol"), "x"),
                "Bob said to Carol: x",
            ),
            (
                en.heard_as("Bob", Heard::WhisperedToMe, "x"),
                "Bob whispered to me: x",
            ),
            (en.heard_as("Bob", Heard::Said, "x"), "Bob said: x"),
            (zh.heard_as("小明", Heard::ToMe, "x"), "小明告诉我：x"),
            (
                zh.heard_as("小明", Heard::ToOther("小红"), "x"),
                "小明对小红说：x",
            ),
            (
                zh.heard_as("小明", Heard::WhisperedToMe, "x"),
                "小明悄悄对我说：x",
            ),
            (zh.heard_as("小明", Heard::Said, "x"), "小明说：x"),
        ];
        for (content, expected) in &heard {
            assert_eq!(content, expected);
            let (lang, speaker) = if content.is_ascii() {
                (en, "Bob")
            } else {
                (zh, "小明")
            };
            assert_eq!(lang.gist(content, Some(speaker)), "x", "{content}");
            // Attributed to someone else, the words keep their attribution.
            assert_eq!(lang.gist(content, Some("Zed")), content.as_str());
        }
        // Speech holding the separator keeps it: only the first one ends the name.
        assert_eq!(en.gist("Bob said to Carol: a: b", Some("Bob")), "a: b");
        assert_eq!(Heard::by("Carol", Some("Carol"), false), Heard::ToMe);
        assert_eq!(
            Heard::by("Dave", Some("Carol"), false),
            Heard::ToOther("Carol")
        );
        assert_eq!(
            Heard::by("Carol", Some("Carol"), true),
            Heard::WhisperedToMe
        );
        assert_eq!(Heard::by("Carol", None, false), Heard::Said);
    }
}
