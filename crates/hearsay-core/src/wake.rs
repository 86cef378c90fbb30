//! Who thinks this tick. Under `think = "on_change"` an NPC asks its brain only when
//! something around it changed, and otherwise carries on with what it last intended —
//! walking on toward its target, or staying put — at the cost of neither an embedding, a
//! recall nor a model call.
//!
//! Why it is here, in the kernel: the reasons to wake come from world state only (what
//! was heard, who is within earshot, what was witnessed, where the NPC stands and walks,
//! its reflection tally, the tick it last thought), so a run, its replay, a resume and a
//! fork all wake the same NPCs at the same ticks. The runtime never decides who thinks.

use bevy_ecs::component::Component;
use serde::{Deserialize, Serialize};

use crate::ids::NpcId;

/// How often an NPC asks its brain.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ThinkMode {
    /// Every tick, whatever happened (the heuristic brain's default).
    #[default]
    EveryTick,
    /// Only when woken (see [`WakeReason`]); otherwise the NPC continues.
    OnChange {
        /// Woken anyway once this many ticks have passed since it last thought.
        max_idle_ticks: u64,
    },
}

/// The default of `max_idle_ticks`.
pub const MAX_IDLE_TICKS_DEFAULT: u64 = 8;

/// The default of `reflect_retry_ticks`.
pub const REFLECT_RETRY_TICKS_DEFAULT: u64 = 10;

/// How one NPC's brain is consulted: from its brain's settings in the scenario.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Mind {
    /// When it thinks.
    pub think: ThinkMode,
    /// After a failed reflection, the ticks before it may try again (and its tally must
    /// also have grown by another threshold).
    pub reflect_retry_ticks: u64,
}

impl Default for Mind {
    fn default() -> Self {
        Self {
            think: ThinkMode::EveryTick,
            reflect_retry_ticks: REFLECT_RETRY_TICKS_DEFAULT,
        }
    }
}

/// Why an NPC under `on_change` thinks this tick. Several can hold at once; they are
/// listed in this order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WakeReason {
    /// It heard speech during the last tick.
    Heard,
    /// An NPC is within earshot who was not the tick before.
    Newcomer,
    /// It witnesses a scenario event this tick.
    Witnessed,
    /// Its last step reached its target.
    Arrived,
    /// Its target cannot be reached: off the map, or the next step goes nowhere.
    Unreachable,
    /// It has no intention to carry on with: at the start, after talking, after a brain
    /// failure.
    NoIntention,
    /// Its reflection is due this tick.
    Reflection,
    /// `max_idle_ticks` have passed since it last thought.
    Idle,
}

impl WakeReason {
    /// Every reason, in the order they are listed.
    pub const ALL: [WakeReason; 8] = [
        WakeReason::Heard,
        WakeReason::Newcomer,
        WakeReason::Witnessed,
        WakeReason::Arrived,
        WakeReason::Unreachable,
        WakeReason::NoIntention,
        WakeReason::Reflection,
        WakeReason::Idle,
    ];

    /// As logs and summaries spell it.
    pub fn as_str(self) -> &'static str {
        match self {
            WakeReason::Heard => "heard",
            WakeReason::Newcomer => "newcomer",
            WakeReason::Witnessed => "witnessed",
            WakeReason::Arrived => "arrived",
            WakeReason::Unreachable => "unreachable",
            WakeReason::NoIntention => "no_intention",
            WakeReason::Reflection => "reflection",
            WakeReason::Idle => "idle",
        }
    }
}

/// Whether an NPC thinks this tick.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Wake {
    /// `every_tick`: it always thinks, and no reason is recorded.
    #[default]
    Always,
    /// `on_change`, woken for these reasons (never empty, in [`WakeReason::ALL`] order).
    Woken(Vec<WakeReason>),
    /// `on_change`, nothing changed: it carries on without thinking.
    Continued,
}

impl Wake {
    /// Whether the NPC asks its brain this tick.
    pub fn thinks(&self) -> bool {
        !matches!(self, Wake::Continued)
    }

    /// The reasons it was woken (empty for `Always` and `Continued`).
    pub fn reasons(&self) -> &[WakeReason] {
        match self {
            Wake::Woken(r) => r,
            _ => &[],
        }
    }
}

/// What an NPC under `on_change` carries on with when nothing wakes it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Intent {
    /// Nothing: it must think (at the start, after talking, after a brain failure).
    #[default]
    None,
    /// Walk on toward its [`crate::Target`].
    Walk,
    /// Stay where it is (it decided to).
    Stay,
    /// Its last step reached its target: it must think what next.
    Arrived,
}

/// What the wake rules remember of an NPC between ticks. Only NPCs under `on_change`
/// keep one; for the others it stays at its default (and checkpoints leave it out).
#[derive(Component, Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Attention {
    /// What it carries on with.
    #[serde(default, skip_serializing_if = "is_default")]
    pub intent: Intent,
    /// Who was within earshot at its last observation, by id: someone new wakes it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub earshot: Vec<NpcId>,
    /// The tick it last thought, if it has.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_thought: Option<u64>,
}

fn is_default<T: Default + PartialEq>(v: &T) -> bool {
    *v == T::default()
}

impl Attention {
    /// Whether nothing is kept (an `every_tick` NPC's): checkpoints leave it out.
    pub fn is_unused(&self) -> bool {
        *self == Attention::default()
    }
}
