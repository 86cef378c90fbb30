//! What the view shows at one tick, built by applying the run's frames in order: where
//! everyone stands, who knows each fact (and since when, from whom), each fact's spread
//! curve, and the latest lines of speech and news.

use std::collections::VecDeque;

use hearsay_core::Pos;
use hearsay_runtime::story::{Cast, Frame};

/// Lines kept in the log.
pub const LOG_LINES_MAX: usize = 500;

/// What a log line is about (it decides the colour).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LogKind {
    /// An NPC spoke.
    Speech,
    /// A scenario event fired.
    Happening,
    /// An NPC learned a tracked fact.
    Learned(usize),
    /// An NPC reflected.
    Reflection,
}

/// One line of the log.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LogLine {
    /// The tick whose frame produced the line.
    pub tick: u64,
    /// What the line is about; it picks the colour.
    pub kind: LogKind,
    /// The line as shown, already worded (names, quotes, who heard or saw).
    pub text: String,
}

/// How an NPC knows a fact.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Known {
    /// The tick it learned the fact.
    pub tick: u64,
    /// The teller, as an index into [`Cast::npcs`]; `None` for seed memories and things seen.
    pub from: Option<usize>,
}

/// The state of the run after the frames applied so far.
#[derive(Clone, Debug)]
pub struct Board {
    /// The last tick applied.
    pub tick: Option<u64>,
    /// Where each NPC stands (`None` until it spawns).
    pub positions: Vec<Option<Pos>>,
    /// Per fact, per NPC.
    pub known: Vec<Vec<Option<Known>>>,
    /// Per fact, (tick, knowers) at every change.
    pub curves: Vec<Vec<(u64, u32)>>,
    /// Per NPC, what it last said, and when.
    pub last_said: Vec<Option<(u64, String)>>,
    /// The latest [`LOG_LINES_MAX`] lines, newest last.
    pub log: VecDeque<LogLine>,
    /// Speeches so far.
    pub speeches: u64,
    /// Per NPC, under `think = "on_change"`: whether it thought at the last tick applied.
    pub minds: Vec<Mind>,
    /// NPC-ticks that thought and that continued so far (`on_change` NPCs only).
    pub thought_continued: (u64, u64),
    last_thought: Vec<Option<u64>>,
}

/// What an NPC did with its brain at the last tick shown.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum Mind {
    /// Nothing said (an `every_tick` NPC thinks every tick).
    #[default]
    Unknown,
    /// It thought, for these reasons.
    Thought(Vec<hearsay_core::WakeReason>),
    /// It carried on without thinking; it last thought at that tick, if seen.
    Continued(Option<u64>),
}

fn listing(cast: &Cast, who: &[usize], max: usize) -> String {
    let mut names: Vec<&str> = who
        .iter()
        .take(max)
        .map(|&i| cast.npcs[i].as_str())
        .collect();
    if who.len() > max {
        names.push("…");
    }
    names.join(", ")
}

impl Board {
    /// The board before tick 0.
    pub fn new(cast: &Cast) -> Self {
        let n = cast.npcs.len();
        Self {
            tick: None,
            positions: vec![None; n],
            known: vec![vec![None; n]; cast.facts.len()],
            curves: vec![Vec::new(); cast.facts.len()],
            last_said: vec![None; n],
            log: VecDeque::new(),
            speeches: 0,
            minds: vec![Mind::Unknown; n],
            thought_continued: (0, 0),
            last_thought: vec![None; n],
        }
    }

    fn push(&mut self, tick: u64, kind: LogKind, text: String) {
        self.log.push_back(LogLine { tick, kind, text });
        while self.log.len() > LOG_LINES_MAX {
            self.log.pop_front();
        }
    }

    /// Applies one tick.
    pub fn apply(&mut self, cast: &Cast, frame: &Frame) {
        let t = frame.tick;
        for &(npc, at) in &frame.spawns {
            self.positions[npc] = Some(at);
        }
        for h in &frame.happenings {
            self.push(
                t,
                LogKind::Happening,
                format!(
                    "★ at the {}: {} ({} saw it)",
                    h.place,
                    h.text,
                    h.witnesses.len()
                ),
            );
        }
        for s in &frame.speeches {
            self.speeches += 1;
            self.last_said[s.npc] = Some((t, s.text.clone()));
            let heard = if s.listeners.is_empty() {
                "nobody heard".to_owned()
            } else {
                format!("→ {}", listing(cast, &s.listeners, 4))
            };
            let speaker = &cast.npcs[s.npc];
            let said = match s.to {
                Some(to) if s.whisper => format!("{speaker} whispers to {}", cast.npcs[to]),
                Some(to) => format!("{speaker} to {} {heard}", cast.npcs[to]),
                None => format!("{speaker} {heard}"),
            };
            self.push(t, LogKind::Speech, format!("{said}: “{}”", s.text));
        }
        for step in &frame.steps {
            self.positions[step.npc] = Some(step.to);
        }
        for (npc, why) in &frame.woken {
            self.minds[*npc] = Mind::Thought(why.clone());
            self.last_thought[*npc] = Some(t);
            self.thought_continued.0 += 1;
        }
        for &npc in &frame.continued {
            self.minds[npc] = Mind::Continued(self.last_thought[npc]);
            self.thought_continued.1 += 1;
        }
        for l in &frame.learnings {
            self.known[l.fact][l.npc] = Some(Known {
                tick: t,
                from: l.from,
            });
            let count = self.known[l.fact].iter().filter(|k| k.is_some()).count() as u32;
            let curve = &mut self.curves[l.fact];
            match curve.last_mut() {
                Some((tick, n)) if *tick == t => *n = count,
                _ => curve.push((t, count)),
            }
            let how = match l.from {
                Some(by) => format!("from {}", cast.npcs[by]),
                None => "first-hand".to_owned(),
            };
            self.push(
                t,
                LogKind::Learned(l.fact),
                format!(
                    "{} learned “{}” {how}",
                    cast.npcs[l.npc], cast.facts[l.fact]
                ),
            );
        }
        for &(npc, insights) in &frame.reflections {
            self.push(
                t,
                LogKind::Reflection,
                format!("{} reflected: {insights} insights", cast.npcs[npc]),
            );
        }
        self.tick = Some(t);
    }

    /// How many NPCs know fact `f`.
    pub fn knowers(&self, f: usize) -> usize {
        self.known
            .get(f)
            .map_or(0, |k| k.iter().filter(|k| k.is_some()).count())
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use hearsay_runtime::scenario;

    pub(crate) fn cast() -> Cast {
        let text = r#"
name = "t"
ticks = 10
[world]
width = 8
height = 5
hearing_radius = 2
[[places]]
name = "market"
at = [6, 2]
[[npcs]]
name = "Bob"
at = [1, 1]
[[npcs]]
name = "Alice"
at = [2, 1]
[[facts]]
name = "fish"
match = ["fish"]
"#;
        let s = scenario::parse(std::path::Path::new("t.toml"), text.as_bytes()).expect("valid");
        Cast::new(&s)
    }

    pub(crate) fn frames(cast: &Cast) -> Vec<Frame> {
        let ticks = [
            vec![
                r#"{"type":"spawn","tick":0,"npc":"Bob","at":[1,1]}"#,
                r#"{"type":"spawn","tick":0,"npc":"Alice","at":[2,1]}"#,
                r#"{"type":"memory","tick":0,"npc":"Bob","id":1,"kind":"seed","importance":8,"content":"fish"}"#,
                r#"{"type":"learned","tick":0,"fact":"fish","npc":"Bob","from":null,"memory":1}"#,
                r#"{"type":"move","tick":0,"npc":"Alice","from":[2,1],"to":[3,1],"target":[6,2],"recalled":[]}"#,
                r#"{"type":"tick","tick":0,"hash":"0"}"#,
            ],
            vec![
                r#"{"type":"talk","tick":1,"npc":"Bob","text":"The market sells fish.","listeners":["Alice"],"recalled":[1]}"#,
                r#"{"type":"memory","tick":1,"npc":"Alice","id":2,"kind":"conversation","importance":8,"content":"Bob said: The market sells fish.","from":"Bob"}"#,
                r#"{"type":"learned","tick":1,"fact":"fish","npc":"Alice","from":"Bob","memory":2}"#,
                r#"{"type":"tick","tick":1,"hash":"1"}"#,
            ],
        ];
        ticks
            .iter()
            .map(|lines| {
                let lines: Vec<String> = lines.iter().map(|s| (*s).to_owned()).collect();
                Frame::parse(&lines, cast).expect("frame")
            })
            .collect()
    }

    #[test]
    fn frames_move_npcs_spread_facts_and_fill_the_log() {
        let cast = cast();
        let mut board = Board::new(&cast);
        for f in frames(&cast) {
            board.apply(&cast, &f);
        }
        assert_eq!(board.tick, Some(1));
        assert_eq!(
            board.positions,
            vec![Some(Pos::new(1, 1)), Some(Pos::new(3, 1))]
        );
        assert_eq!(board.knowers(0), 2);
        assert_eq!(board.curves[0], vec![(0, 1), (1, 2)]);
        assert_eq!(
            board.known[0][1],
            Some(Known {
                tick: 1,
                from: Some(0)
            })
        );
        let texts: Vec<&str> = board.log.iter().map(|l| l.text.as_str()).collect();
        assert_eq!(
            texts,
            vec![
                "Bob learned “fish” first-hand",
                "Bob → Alice: “The market sells fish.”",
                "Alice learned “fish” from Bob"
            ]
        );
    }

    #[test]
    fn the_log_says_who_was_addressed_and_what_was_whispered() {
        let cast = cast();
        let lines: Vec<String> = [
            r#"{"type":"talk","tick":0,"npc":"Bob","text":"Fish.","listeners":["Alice"],"to":"Alice","recalled":[]}"#,
            r#"{"type":"talk","tick":0,"npc":"Alice","text":"Psst.","listeners":["Bob"],"to":"Bob","whisper":true,"recalled":[]}"#,
            r#"{"type":"tick","tick":0,"hash":"0"}"#,
        ]
        .iter()
        .map(|s| (*s).to_owned())
        .collect();
        let frame = Frame::parse(&lines, &cast).expect("frame");
        let mut board = Board::new(&cast);
        board.apply(&cast, &frame);
        let texts: Vec<&str> = board.log.iter().map(|l| l.text.as_str()).collect();
        assert_eq!(
            texts,
            vec![
                "Bob to Alice → Alice: “Fish.”",
                "Alice whispers to Bob: “Psst.”"
            ]
        );
        // A whisper to nobody is not a line hearsay writes.
        let bad = [lines[1].replace(r#""to":"Bob","#, ""), lines[2].clone()];
        assert!(Frame::parse(&bad, &cast).is_err());
    }
}
