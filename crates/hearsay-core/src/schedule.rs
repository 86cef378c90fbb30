//! The two tick schedules and their phases.
//!
//! A tick is `SimPerceive`, then the runtime's async Think phase, then `SimAct`. Both
//! schedules run single-threaded with ambiguity detection set to `Error`: every pair of
//! systems that touch the same data is explicitly ordered, so the order never depends on
//! the executor.

use bevy_ecs::message::{MessageRegistry, message_update_system};
use bevy_ecs::prelude::{IntoScheduleConfigs, Schedule, SystemSet, World};
use bevy_ecs::schedule::{LogLevel, ScheduleBuildSettings, ScheduleLabel, SingleThreadedExecutor};

use crate::messages::{EventWitnessed, NpcMoved, NpcSpoke, SpeechHeard};
use crate::systems::*;

/// The first half of a tick: ingest and perceive. Ends with [`crate::Observations`] filled.
#[derive(ScheduleLabel, Clone, Debug, PartialEq, Eq, Hash)]
pub struct SimPerceive;

/// The second half of a tick: act, remember, record. Starts from [`crate::Decisions`].
#[derive(ScheduleLabel, Clone, Debug, PartialEq, Eq, Hash)]
pub struct SimAct;

/// The phases of a tick, in order. Think is not here: it runs between the two schedules.
#[derive(SystemSet, Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TickSystems {
    /// Message buffers turn over; the ledger marks the tick's start.
    Ingest,
    /// Scenario events fire; NPCs observe.
    Perceive,
    /// Decisions take effect: speech, movement, hearing.
    Act,
    /// Actions and speech become memories; facts are tracked.
    Remember,
    /// The tick is serialised and hashed.
    Record,
}

fn settings() -> ScheduleBuildSettings {
    ScheduleBuildSettings {
        ambiguity_detection: LogLevel::Error,
        ..ScheduleBuildSettings::default()
    }
}

/// The `SimPerceive` schedule.
pub fn perceive_schedule() -> Schedule {
    let mut schedule = Schedule::new(SimPerceive);
    schedule.set_executor(SingleThreadedExecutor::new());
    schedule.set_build_settings(settings());
    schedule.configure_sets((TickSystems::Ingest, TickSystems::Perceive).chain());
    schedule.add_systems(
        (message_update_system, open_tick)
            .chain()
            .in_set(TickSystems::Ingest),
    );
    schedule.add_systems(
        (
            log_forgotten,
            fire_scenario_events,
            observe,
            request_reflections,
            judge_wakes,
        )
            .chain()
            .in_set(TickSystems::Perceive),
    );
    schedule
}

/// The `SimAct` schedule.
pub fn act_schedule() -> Schedule {
    let mut schedule = Schedule::new(SimAct);
    schedule.set_executor(SingleThreadedExecutor::new());
    schedule.set_build_settings(settings());
    schedule.configure_sets((TickSystems::Act, TickSystems::Remember, TickSystems::Record).chain());
    schedule.add_systems(
        (
            continue_intentions,
            sanitize_decisions,
            speak,
            walk,
            deliver_speech,
            log_actions,
        )
            .chain()
            .in_set(TickSystems::Act),
    );
    schedule.add_systems(
        (
            record_witnessed_memories,
            record_action_memories,
            record_heard_memories,
            record_reflections,
            log_memories,
            update_short_term,
            accumulate_importance,
            track_facts,
        )
            .chain()
            .in_set(TickSystems::Remember),
    );
    schedule.add_systems(seal_tick.in_set(TickSystems::Record));
    schedule
}

/// Registers the messages and adds both schedules to `world`.
pub fn build_schedules(world: &mut World) {
    MessageRegistry::register_message::<EventWitnessed>(world);
    MessageRegistry::register_message::<NpcSpoke>(world);
    MessageRegistry::register_message::<NpcMoved>(world);
    MessageRegistry::register_message::<SpeechHeard>(world);
    world.add_schedule(perceive_schedule());
    world.add_schedule(act_schedule());
}
