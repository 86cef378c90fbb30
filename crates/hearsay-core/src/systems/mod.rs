//! The systems of one tick, by phase. Each is a small function named by what it does;
//! the order between them is fixed in [`crate::schedule`].

pub mod act;
pub mod perceive;
pub mod record;
pub mod remember;

pub use act::{continue_intentions, deliver_speech, log_actions, sanitize_decisions, speak, walk};
pub use perceive::{
    fire_scenario_events, judge_wakes, log_forgotten, observe, open_tick, request_reflections,
};
pub use record::seal_tick;
pub use remember::{
    accumulate_importance, log_memories, record_action_memories, record_heard_memories,
    record_reflections, record_witnessed_memories, track_facts, update_short_term,
};
