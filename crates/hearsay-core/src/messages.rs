//! Messages: what happened in the Act phase, read by the Remember phase.
//!
//! All are past-tense facts, written in `NpcId` order.

use bevy_ecs::message::Message;

use crate::grid::Pos;
use crate::ids::NpcId;

/// An NPC said something; `listeners` (by id) heard it: those within hearing radius, or
/// for a whisper the addressee alone.
#[derive(Message, Clone, Debug, PartialEq, Eq)]
pub struct NpcSpoke {
    /// The NPC that talked; it is never among its own `listeners`.
    pub speaker: NpcId,
    /// What was said (already capped in length).
    pub text: std::sync::Arc<str>,
    /// Who heard it, by id, speaker excluded.
    pub listeners: Vec<NpcId>,
    /// The addressee, always among `listeners`, if the words were addressed.
    pub to: Option<NpcId>,
    /// Whispered: `listeners` is the addressee alone.
    pub whisper: bool,
}

/// An NPC decided to move toward `target` and took one step.
#[derive(Message, Clone, Debug, PartialEq, Eq)]
pub struct NpcMoved {
    /// The NPC that took the step.
    pub npc: NpcId,
    /// Where it stood.
    pub from: Pos,
    /// Where it stands now.
    pub to: Pos,
    /// Where it is heading.
    pub target: Pos,
}

/// `listener` heard `speaker` say `text`.
#[derive(Message, Clone, Debug, PartialEq, Eq)]
pub struct SpeechHeard {
    /// The NPC that will remember the words, with `speaker` as their source.
    pub listener: NpcId,
    /// The NPC that talked.
    pub speaker: NpcId,
    /// The speech, as in [`NpcSpoke::text`].
    pub text: std::sync::Arc<str>,
    /// As in [`NpcSpoke::to`].
    pub to: Option<NpcId>,
    /// As in [`NpcSpoke::whisper`].
    pub whisper: bool,
}

/// `npc` witnessed a scenario event at `place`.
#[derive(Message, Clone, Debug, PartialEq, Eq)]
pub struct EventWitnessed {
    /// A witness: an NPC within sight radius of the place.
    pub npc: NpcId,
    /// Where it happened.
    pub place: String,
    /// The event's text as the scenario words it.
    pub text: String,
    /// How important the memory of it is.
    pub importance: u8,
}
