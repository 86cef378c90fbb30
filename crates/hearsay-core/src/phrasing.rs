//! How memories and observations are worded, in English or Chinese.
//!
//! The wording is part of the simulation's output (it is hashed into the tick digest and
//! embedded for recall), so it lives in the kernel and changes only deliberately.

use serde::{Deserialize, Serialize};

use crate::grid::Pos;
use crate::observation::Observation;

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

    /// A listener's memory of what `speaker` said.
    pub fn heard(self, speaker: &str, speech: &str) -> String {
        match self {
            Language::En => format!("{speaker} said: {speech}"),
            Language::Zh => format!("{speaker}说：{speech}"),
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

    /// An insight: one person told the NPC something worth keeping.
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
    /// [`said_to_everyone`](Self::said_to_everyone) or [`heard`](Self::heard) put in front.
    /// `speaker` is the memory's source, if it was heard from someone.
    pub fn gist<'a>(self, content: &'a str, speaker: Option<&str>) -> &'a str {
        let own = match self {
            Language::En => "I said to everyone: ",
            Language::Zh => "我对大家说：",
        };
        if let Some(rest) = content.strip_prefix(own) {
            return rest;
        }
        if let Some(speaker) = speaker {
            let sep = match self {
                Language::En => " said: ",
                Language::Zh => "说：",
            };
            if let Some(rest) = content
                .strip_prefix(speaker)
                .and_then(|rest| rest.strip_prefix(sep))
            {
                return rest;
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
                    out.push_str(&format!(" I heard {} say: \"{}\".", h.speaker_name, h.text));
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
                    out.push_str(&format!("我听到{}说：“{}”。", h.speaker_name, h.text));
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
        let mut parts: Vec<String> = Vec::new();
        parts.extend(obs.seen_npcs.iter().map(|s| s.name.clone()));
        parts.extend(obs.seen_places.iter().map(|p| p.name.clone()));
        parts.extend(
            obs.heard
                .iter()
                .map(|h| self.heard(&h.speaker_name, &h.text)),
        );
        parts.extend(obs.witnessed.iter().map(|w| w.text.clone()));
        let sep = match self {
            Language::En => ". ",
            Language::Zh => "。",
        };
        parts.join(sep)
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
}
