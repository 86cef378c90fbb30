//! The event log: every line of `events.jsonl`.
//!
//! Events carry names (unique per scenario) rather than ids, so the log reads on its own.
//! They never carry wall-clock values: the log of a seeded run is byte-identical.

use serde::{Deserialize, Serialize};

use crate::grid::Pos;
use crate::ids::MemoryId;
use crate::line;
use crate::memory::MemoryKind;
use crate::wake::WakeReason;

fn is_false(b: &bool) -> bool {
    !*b
}

/// Defines [`SimEvent`] from one list of its kinds, and from the same list what its
/// reader needs: `kinds::Kind`, the values of `type` (each kind's name in snake case, as
/// the enum's own `rename_all` writes it), and `kinds::event`, which reads a kind's
/// struct. A new kind is added to the list once; a test round-trips every kind.
macro_rules! sim_event {
    ($($(#[$doc:meta])* $variant:ident($line:ident),)*) => {
        /// One line of `events.jsonl`: `type` names the variant, the variant's own fields
        /// follow it in the same object. Written by serde's derive; read by the
        /// hand-written reader below ([`SimEvent`]'s `Deserialize`), which relies on
        /// `type` coming first.
        #[derive(Clone, Debug, PartialEq, Eq, Serialize)]
        #[serde(tag = "type", rename_all = "snake_case")]
        pub enum SimEvent {
            $($(#[$doc])* $variant($line),)*
        }

        mod kinds {
            use serde::Deserialize;

            use super::*;

            /// The value of `type`.
            #[derive(Deserialize)]
            #[serde(rename_all = "snake_case")]
            pub(super) enum Kind {
                $($variant),*
            }

            /// The event of kind `kind` whose other fields `rest` holds.
            pub(super) fn event<'de, D: serde::Deserializer<'de>>(
                kind: Kind,
                rest: D,
            ) -> Result<SimEvent, D::Error> {
                match kind {
                    $(Kind::$variant => $line::deserialize(rest).map(SimEvent::$variant)),*
                }
            }
        }
    };
}

sim_event! {
    /// An NPC enters the world (before tick 0's actions).
    Spawn(SpawnLine),
    /// A scenario event fires.
    ScenarioEvent(ScenarioEventLine),
    /// An NPC talked — to everyone in earshot, to one of them (`to`), or in a whisper
    /// (`whisper`: `listeners` is the addressee alone). One line type for all three, so
    /// every reader of who heard what from whom reads them alike.
    Talk(TalkLine),
    /// An NPC took a step toward its target.
    Move(MoveLine),
    /// An NPC stayed where it was.
    Stay(StayLine),
    /// A memory was written (text first; its embedding comes later).
    Memory(MemoryLine),
    /// A memory faded below the forgetting threshold and was archived: kept, never
    /// recalled again.
    Forgot(ForgotLine),
    /// An NPC reflected on its recent memories (its insights follow as `memory` lines
    /// of kind `reflection`).
    Reflected(ReflectedLine),
    /// An NPC came to know a tracked fact.
    Learned(LearnedLine),
    /// Closes a tick with the rolling hash of every line so far.
    Tick(TickLine),
}

impl SimEvent {
    /// The event as its line of `events.jsonl`, without the newline: the bytes serde's
    /// derive writes for it.
    ///
    /// Why `move` and `memory` lines have a writer of their own: they are nearly all of a
    /// tick's lines (one step and one memory per NPC), written on the tick thread, and
    /// serde writes an internally tagged enum through a map, key by key (in a profile of
    /// the 10,000-NPC town, sealing a tick was mostly that). The writer spells the same
    /// object field by field with [`crate::line`]'s pieces: strings escaped as serde_json
    /// escapes them, kinds by their names, numbers through `itoa` (as serde_json writes
    /// them). A line with a field
    /// that is usually absent (a failed recall, wake reasons, a reflection's evidence)
    /// goes through serde like every other kind; a test compares both writers' bytes.
    pub fn to_line(&self) -> String {
        let mut out = Vec::with_capacity(160);
        match self {
            Self::Move(m) if !m.recall_failed && m.wake.is_empty() && !m.continued => {
                write_move(&mut out, m);
            }
            Self::Memory(m) if m.evidence.is_empty() => write_memory(&mut out, m),
            other => line::json(&mut out, other),
        }
        // Both writers write UTF-8 only (the strings come from `str`s).
        String::from_utf8(out).unwrap_or_default()
    }
}

/// A line's start, as every kind's begins: `{"type":"<kind>","tick":<tick>,"npc":<npc>`.
fn write_head(out: &mut Vec<u8>, kind: &str, tick: u64, npc: &str) {
    out.extend_from_slice(br#"{"type":""#);
    out.extend_from_slice(kind.as_bytes());
    out.extend_from_slice(br#"","tick":"#);
    line::int(out, tick);
    out.extend_from_slice(br#","npc":"#);
    line::string(out, npc);
}

/// A `move` line without its optional fields, in `MoveLine`'s field order.
fn write_move(out: &mut Vec<u8>, m: &MoveLine) {
    write_head(out, "move", m.tick, &m.npc);
    out.extend_from_slice(br#","from":"#);
    line::pos(out, m.from);
    out.extend_from_slice(br#","to":"#);
    line::pos(out, m.to);
    out.extend_from_slice(br#","target":"#);
    line::pos(out, m.target);
    out.extend_from_slice(br#","recalled":"#);
    line::ids(out, &m.recalled);
    out.push(b'}');
}

/// A `memory` line without evidence, in `MemoryLine`'s field order.
fn write_memory(out: &mut Vec<u8>, m: &MemoryLine) {
    write_head(out, "memory", m.tick, &m.npc);
    out.extend_from_slice(br#","id":"#);
    line::int(out, m.id.0);
    out.extend_from_slice(br#","kind":"#);
    line::string(out, m.kind.as_str());
    out.extend_from_slice(br#","importance":"#);
    line::int(out, m.importance);
    out.extend_from_slice(br#","content":"#);
    line::string(out, &m.content);
    if let Some(from) = &m.from {
        out.extend_from_slice(br#","from":"#);
        line::string(out, from.as_str());
    }
    out.push(b'}');
}

/// The fields of a [`SimEvent::Spawn`] line.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SpawnLine {
    /// Always 0: every NPC spawns before the first tick runs.
    pub tick: u64,
    /// The NPC's unique scenario name, by which every later line refers to it.
    pub npc: String,
    /// The cell it starts on, as the scenario's `at` gives it.
    pub at: Pos,
}

/// The fields of a [`SimEvent::ScenarioEvent`] line.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScenarioEventLine {
    /// The tick the scenario schedules it for.
    pub tick: u64,
    /// The scenario place it happens at; NPCs within sight radius of it witness it.
    pub place: String,
    /// The event's text as the scenario words it (witnesses' memories wrap it).
    pub text: String,
    /// Who sees it, by id order.
    pub witnesses: Vec<String>,
}

/// The fields of a [`SimEvent::Talk`] line.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TalkLine {
    /// The tick it spoke; its listeners' `memory` lines carry the same tick.
    pub tick: u64,
    /// The speaker's name.
    pub npc: String,
    /// The speech after sanitising: one line, trimmed and capped in length.
    pub text: String,
    /// Names of those who heard it, in id order: within hearing radius (at most
    /// `max_listeners`), or the addressee alone for a whisper.
    pub listeners: Vec<String>,
    /// The name of the NPC it was addressed to, always among `listeners`; absent for
    /// talk to everyone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to: Option<String>,
    /// Whispered to `to`: nobody else heard it.
    #[serde(default, skip_serializing_if = "is_false")]
    pub whisper: bool,
    /// Memories recalled for the decision.
    pub recalled: Vec<MemoryId>,
    /// Recall failed this tick.
    #[serde(default, skip_serializing_if = "is_false")]
    pub recall_failed: bool,
    /// Under `on_change`: why it thought this tick.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub wake: Vec<WakeReason>,
}

/// The fields of a [`SimEvent::Move`] line.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MoveLine {
    /// The tick of the step: one step a tick, so a long walk spans many `move` lines.
    pub tick: u64,
    /// The mover's name.
    pub npc: String,
    /// The cell it stood on before the step.
    pub from: Pos,
    /// The cell it stands on after this one step.
    pub to: Pos,
    /// Where it is heading (clamped to the map); equals `to` once it has arrived.
    pub target: Pos,
    /// Memories recalled for the decision.
    pub recalled: Vec<MemoryId>,
    /// Recall failed this tick.
    #[serde(default, skip_serializing_if = "is_false")]
    pub recall_failed: bool,
    /// Under `on_change`: why it thought this tick.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub wake: Vec<WakeReason>,
    /// Under `on_change`: it did not think, but walked on toward its target.
    #[serde(default, skip_serializing_if = "is_false")]
    pub continued: bool,
}

/// The fields of a [`SimEvent::Stay`] line.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StayLine {
    /// The tick it stayed (staying writes no memory).
    pub tick: u64,
    /// The name of the NPC that stayed.
    pub npc: String,
    /// The cell it stays on.
    pub at: Pos,
    /// Memories recalled for the decision.
    pub recalled: Vec<MemoryId>,
    /// Recall failed this tick.
    #[serde(default, skip_serializing_if = "is_false")]
    pub recall_failed: bool,
    /// The brain failed and `stay` is the fallback.
    #[serde(default, skip_serializing_if = "is_false")]
    pub brain_failed: bool,
    /// Under `on_change`: why it thought this tick.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub wake: Vec<WakeReason>,
    /// Under `on_change`: it did not think, but stayed as it had decided to.
    #[serde(default, skip_serializing_if = "is_false")]
    pub continued: bool,
}

/// The fields of a [`SimEvent::Memory`] line.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemoryLine {
    /// The tick it was formed (the memory's own `tick`).
    pub tick: u64,
    /// The name of the NPC that remembers it.
    pub npc: String,
    /// Dense from 1 in creation order across all NPCs; later lines cite it.
    pub id: MemoryId,
    /// Seed, observation, conversation or reflection.
    pub kind: MemoryKind,
    /// 1–10.
    pub importance: u8,
    /// The memory in the scenario's language, as recall and prompts show it.
    pub content: std::sync::Arc<str>,
    /// The speaker it was heard from, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<String>,
    /// For a reflection: the memories it was drawn from.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub evidence: Vec<MemoryId>,
}

/// The fields of a [`SimEvent::Forgot`] line.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ForgotLine {
    /// The tick at whose start it was archived.
    pub tick: u64,
    /// The name of the NPC that owned the memory.
    pub npc: String,
    /// The id its `memory` line gave it.
    pub id: MemoryId,
}

/// The fields of a [`SimEvent::Reflected`] line.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReflectedLine {
    /// The tick it reflected; its insights' `memory` lines carry the same tick.
    pub tick: u64,
    /// The name of the NPC that reflected.
    pub npc: String,
    /// How many insights it drew.
    pub insights: usize,
    /// The importance that had accumulated since its last reflection.
    pub importance: u32,
    /// The reflection failed: the NPC keeps what it accumulated and tries again after
    /// `reflect_retry_ticks` and another threshold.
    #[serde(default, skip_serializing_if = "is_false")]
    pub failed: bool,
}

/// The fields of a [`SimEvent::Learned`] line.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LearnedLine {
    /// The tick of the memory that taught it.
    pub tick: u64,
    /// The fact's name.
    pub fact: String,
    /// The name of the NPC that now knows it.
    pub npc: String,
    /// From whose words (`null` for seed memories and things seen).
    pub from: Option<String>,
    /// The memory that holds it.
    pub memory: MemoryId,
    /// When learned through a reflection: the evidence memory that taught it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub via: Option<MemoryId>,
}

/// The fields of a [`SimEvent::Tick`] line.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TickLine {
    /// The tick this line closes.
    pub tick: u64,
    /// Rolling blake3 hash, hex.
    pub hash: String,
}

impl SimEvent {
    /// The tick the event belongs to.
    pub fn tick(&self) -> u64 {
        match self {
            SimEvent::Spawn(SpawnLine { tick, .. })
            | SimEvent::ScenarioEvent(ScenarioEventLine { tick, .. })
            | SimEvent::Talk(TalkLine { tick, .. })
            | SimEvent::Move(MoveLine { tick, .. })
            | SimEvent::Stay(StayLine { tick, .. })
            | SimEvent::Memory(MemoryLine { tick, .. })
            | SimEvent::Learned(LearnedLine { tick, .. })
            | SimEvent::Forgot(ForgotLine { tick, .. })
            | SimEvent::Reflected(ReflectedLine { tick, .. })
            | SimEvent::Tick(TickLine { tick, .. }) => *tick,
        }
    }
}

/// Reading a line.
///
/// serde's derived reader for an internally tagged enum cannot know where the tag sits, so
/// it first copies every field of the object into an intermediate tree of its own, then
/// builds the variant from that tree: two passes and an allocation per string and list.
/// Re-reading a 10,000-NPC run's log for its report spent over half of its time there.
/// hearsay writes `type` first (serde's derive always does), so this reader takes the
/// first key; when it is `type`, the variant's own fields are read straight from the rest
/// of the object. A line whose `type` comes later (written by hand or by another tool) is
/// gathered into a JSON object first and read from that: the same answer, the old cost.
mod read {
    use serde::Deserialize;
    use serde::de::{self, Deserializer, MapAccess, Visitor};

    use super::kinds::{Kind, event};
    use super::*;

    /// An object's first key: `type`, or any other (kept, for the slow path).
    enum FirstKey {
        Type,
        Other(String),
    }

    impl<'de> Deserialize<'de> for FirstKey {
        fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
            struct KeyVisitor;
            impl Visitor<'_> for KeyVisitor {
                type Value = FirstKey;
                fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                    f.write_str("a field name")
                }
                fn visit_str<E: de::Error>(self, key: &str) -> Result<FirstKey, E> {
                    Ok(if key == "type" {
                        FirstKey::Type
                    } else {
                        FirstKey::Other(key.to_owned())
                    })
                }
            }
            deserializer.deserialize_identifier(KeyVisitor)
        }
    }

    struct LineVisitor;

    impl<'de> Visitor<'de> for LineVisitor {
        type Value = SimEvent;

        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("an event: an object with a `type`")
        }

        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<SimEvent, A::Error> {
            let first = match map.next_key::<FirstKey>()? {
                Some(FirstKey::Type) => {
                    let kind = map.next_value::<Kind>()?;
                    return event(kind, de::value::MapAccessDeserializer::new(map));
                }
                Some(FirstKey::Other(key)) => key,
                None => return Err(de::Error::missing_field("type")),
            };
            let mut object = serde_json::Map::new();
            object.insert(first, map.next_value()?);
            while let Some((key, value)) = map.next_entry::<String, serde_json::Value>()? {
                object.insert(key, value);
            }
            let kind = object
                .remove("type")
                .ok_or_else(|| de::Error::missing_field("type"))?;
            let kind = Kind::deserialize(kind).map_err(de::Error::custom)?;
            event(kind, serde_json::Value::Object(object)).map_err(de::Error::custom)
        }
    }

    impl<'de> Deserialize<'de> for SimEvent {
        fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
            deserializer.deserialize_map(LineVisitor)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One event of every kind, with every optional field set on some of them and left out
    /// on others.
    fn every_kind() -> Vec<SimEvent> {
        let pos = |x, y| Pos { x, y };
        vec![
            SimEvent::Spawn(SpawnLine {
                tick: 0,
                npc: "Ann".into(),
                at: pos(1, 2),
            }),
            SimEvent::ScenarioEvent(ScenarioEventLine {
                tick: 3,
                place: "market".into(),
                text: "A cart \"tips\" over".into(),
                witnesses: vec!["Ann".into(), "Bo".into()],
            }),
            SimEvent::Talk(TalkLine {
                tick: 4,
                npc: "Ann".into(),
                text: "The fish is fresh".into(),
                listeners: vec!["Bo".into()],
                to: Some("Bo".into()),
                whisper: true,
                recalled: vec![MemoryId(3), MemoryId(9)],
                recall_failed: true,
                wake: vec![WakeReason::Heard, WakeReason::Idle],
            }),
            SimEvent::Talk(TalkLine {
                tick: 4,
                npc: "Bo".into(),
                text: "Hello".into(),
                listeners: vec![],
                to: None,
                whisper: false,
                recalled: vec![],
                recall_failed: false,
                wake: vec![],
            }),
            SimEvent::Move(MoveLine {
                tick: 5,
                npc: "Bo".into(),
                from: pos(0, 0),
                to: pos(0, 1),
                target: pos(0, 9),
                recalled: vec![MemoryId(1)],
                recall_failed: false,
                wake: vec![],
                continued: true,
            }),
            SimEvent::Stay(StayLine {
                tick: 6,
                npc: "Cy".into(),
                at: pos(2, 2),
                recalled: vec![],
                recall_failed: false,
                brain_failed: true,
                wake: vec![WakeReason::NoIntention],
                continued: false,
            }),
            SimEvent::Memory(MemoryLine {
                tick: 6,
                npc: "Cy".into(),
                id: MemoryId(12),
                kind: MemoryKind::Reflection,
                importance: 7,
                content: "Ann trusts Bo".into(),
                from: Some("Ann".into()),
                evidence: vec![MemoryId(3), MemoryId(4)],
            }),
            SimEvent::Forgot(ForgotLine {
                tick: 7,
                npc: "Cy".into(),
                id: MemoryId(2),
            }),
            SimEvent::Reflected(ReflectedLine {
                tick: 8,
                npc: "Ann".into(),
                insights: 2,
                importance: 41,
                failed: true,
            }),
            SimEvent::Learned(LearnedLine {
                tick: 8,
                fact: "fish".into(),
                npc: "Bo".into(),
                from: None,
                memory: MemoryId(12),
                via: Some(MemoryId(3)),
            }),
            SimEvent::Tick(TickLine {
                tick: 8,
                hash: "00ff".into(),
            }),
        ]
    }

    #[test]
    fn every_kind_reads_back_as_written_with_its_type_first() {
        let events = every_kind();
        // Every kind is here: the match is exhaustive, so a new kind must be added to it
        // (and then to `every_kind`, or this fails).
        let kind = |e: &SimEvent| match e {
            SimEvent::Spawn(_) => 0,
            SimEvent::ScenarioEvent(_) => 1,
            SimEvent::Talk(_) => 2,
            SimEvent::Move(_) => 3,
            SimEvent::Stay(_) => 4,
            SimEvent::Memory(_) => 5,
            SimEvent::Forgot(_) => 6,
            SimEvent::Reflected(_) => 7,
            SimEvent::Learned(_) => 8,
            SimEvent::Tick(_) => 9,
        };
        let kinds: std::collections::BTreeSet<usize> = events.iter().map(kind).collect();
        assert_eq!(kinds, (0..10).collect());
        for event in events {
            let line = serde_json::to_string(&event).expect("encodes");
            assert!(line.starts_with(r#"{"type":""#), "{line}");
            let read: SimEvent = serde_json::from_str(&line).expect("reads");
            assert_eq!(read, event, "{line}");
        }
    }

    #[test]
    fn every_line_is_the_bytes_serde_writes() {
        // Every kind as written above, then many `move` and `memory` lines (the kinds with
        // a writer of their own): names and texts with quotes, backslashes, control
        // characters and non-ASCII; cells at the ends of i32; ids at the ends of u64; the
        // usually absent fields now set, now not.
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move || {
            state = state
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            state >> 11
        };
        let pieces = [
            "N7",
            "a \"quoted\" word",
            "back\\slash",
            "tab\tnew\nline",
            "\u{1}\u{1f}\u{7f}",
            "café",
            "鱼市场",
            "😀",
            "",
            "</script>",
        ];
        let text = |next: &mut dyn FnMut() -> u64| -> String {
            (0..next() % 4)
                .map(|_| pieces[(next() % pieces.len() as u64) as usize])
                .collect::<Vec<_>>()
                .join(" ")
        };
        let ends = [0, 1, -1, i32::MAX, i32::MIN, 17, -400];
        let cell = |next: &mut dyn FnMut() -> u64| Pos {
            x: ends[(next() % ends.len() as u64) as usize],
            y: ends[(next() % ends.len() as u64) as usize],
        };
        let big = [0, 1, 9, 10, 99, 100, u64::MAX, u64::MAX / 3];
        let mut events = every_kind();
        for round in 0..2_000 {
            let tick = big[(next() % big.len() as u64) as usize];
            let ids: Vec<MemoryId> = (0..next() % 6)
                .map(|_| MemoryId(big[(next() % big.len() as u64) as usize]))
                .collect();
            events.push(if round % 2 == 0 {
                SimEvent::Move(MoveLine {
                    tick,
                    npc: text(&mut next),
                    from: cell(&mut next),
                    to: cell(&mut next),
                    target: cell(&mut next),
                    recalled: ids,
                    recall_failed: next() % 5 == 0,
                    wake: if next() % 5 == 0 {
                        vec![WakeReason::Heard, WakeReason::Arrived]
                    } else {
                        Vec::new()
                    },
                    continued: next() % 5 == 0,
                })
            } else {
                SimEvent::Memory(MemoryLine {
                    tick,
                    npc: text(&mut next),
                    id: MemoryId(big[(next() % big.len() as u64) as usize]),
                    kind: [
                        MemoryKind::Observation,
                        MemoryKind::Conversation,
                        MemoryKind::Reflection,
                        MemoryKind::Seed,
                    ][(next() % 4) as usize],
                    importance: (next() % 256) as u8,
                    content: text(&mut next).into(),
                    from: (next() % 2 == 0).then(|| text(&mut next)),
                    evidence: if next() % 4 == 0 { ids } else { Vec::new() },
                })
            });
        }
        for event in events {
            let serde = serde_json::to_string(&event).expect("encodes");
            assert_eq!(event.to_line(), serde);
        }
    }

    #[test]
    fn a_line_whose_type_comes_later_reads_the_same() {
        for event in every_kind() {
            let value = serde_json::to_value(&event).expect("encodes");
            let serde_json::Value::Object(fields) = value else {
                panic!("an event is an object");
            };
            // `type` last.
            let mut keys: Vec<&String> = fields.keys().filter(|k| *k != "type").collect();
            keys.extend(fields.keys().filter(|k| *k == "type"));
            let entries: Vec<String> = keys
                .iter()
                .map(|k| format!("{}:{}", serde_json::Value::from(k.as_str()), fields[*k]))
                .collect();
            let line = format!("{{{}}}", entries.join(","));
            assert!(
                line.ends_with(&format!(r#""type":{}}}"#, fields["type"])),
                "{line}"
            );
            assert!(!line.starts_with(r#"{"type""#), "{line}");
            let read: SimEvent = serde_json::from_str(&line).expect("reads");
            assert_eq!(read, event, "{line}");
        }
    }

    #[test]
    fn the_lines_bytes_are_the_format_s() {
        // What serde's derive of the enum with struct variants wrote before the variants
        // had types of their own: the log's bytes did not change with them.
        let talk = &every_kind()[2];
        assert_eq!(
            serde_json::to_string(talk).expect("encodes"),
            r#"{"type":"talk","tick":4,"npc":"Ann","text":"The fish is fresh","listeners":["Bo"],"to":"Bo","whisper":true,"recalled":[3,9],"recall_failed":true,"wake":["heard","idle"]}"#
        );
        let quiet = &every_kind()[3];
        assert_eq!(
            serde_json::to_string(quiet).expect("encodes"),
            r#"{"type":"talk","tick":4,"npc":"Bo","text":"Hello","listeners":[],"recalled":[]}"#
        );
    }

    #[test]
    fn lines_that_are_not_events_are_refused_with_the_reason() {
        let refused = |line: &str| {
            serde_json::from_str::<SimEvent>(line)
                .expect_err(line)
                .to_string()
        };
        assert!(refused(r#"{"type":"dance","tick":1}"#).contains("unknown variant `dance`"));
        assert!(refused(r#"{"tick":1,"type":"dance"}"#).contains("unknown variant `dance`"));
        assert!(refused(r#"{"tick":1,"npc":"Ann"}"#).contains("missing field `type`"));
        assert!(refused("{}").contains("missing field `type`"));
        assert!(refused(r#"{"type":"stay","tick":1}"#).contains("missing field `npc`"));
        assert!(refused(r#"{"npc":"Ann","type":"stay","tick":1}"#).contains("missing field `at`"));
        assert!(refused(r#"{"type":"tick","tick":"one","hash":""}"#).contains("invalid type"));
        assert!(refused(r#"["tick",1,""]"#).contains("expected an event"));
    }
}
