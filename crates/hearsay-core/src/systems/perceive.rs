//! Perceive: scenario events fire, and every NPC observes its surroundings.

use std::collections::BTreeSet;

use bevy_ecs::prelude::{MessageReader, MessageWriter, Query, Res, ResMut};

use crate::components::{Hearing, KnownBy, Position, Reflection, ShortTerm, Target};
use crate::events::{ForgotLine, ScenarioEventLine, SimEvent};
use crate::ids::NpcId;
use crate::messages::EventWitnessed;
use crate::observation::{Observation, SeenNpc, SeenPlace, Witnessed};
use crate::resources::{
    ArchivedMemories, MemoryLedger, Observations, ReflectionsDeferred, ReflectionsDue, Roster,
    ScheduledEvents, SimClock, SimConfig, TickEvents, Wakes, WorldMap,
};
use crate::wake::{Attention, Intent, ThinkMode, Wake, WakeReason};

/// Marks where this tick's memories begin in the ledger. Runs first (Ingest).
pub fn open_tick(mut ledger: ResMut<MemoryLedger>) {
    ledger.first_of_tick = ledger.next_id;
}

/// Logs the memories archived at the start of this tick (a `forgot` line each, in id
/// order); the runtime put them in [`ArchivedMemories`] before the schedule ran.
pub fn log_forgotten(
    clock: Res<SimClock>,
    roster: Res<Roster>,
    mut archived: ResMut<ArchivedMemories>,
    mut log: ResMut<TickEvents>,
) {
    for (id, npc) in std::mem::take(&mut archived.0) {
        log.0.push(SimEvent::Forgot(ForgotLine {
            tick: clock.tick,
            npc: roster.name(npc).to_owned(),
            id,
        }));
    }
}

/// Lists the NPCs whose accumulated importance has reached the reflection threshold, by
/// id, with the memories they will reflect on, into [`ReflectionsDue`] — unless their
/// last reflection failed and its retry is not yet due (both `reflect_retry_ticks`
/// passed and another threshold accumulated): those go to [`ReflectionsDeferred`].
pub fn request_reflections(
    clock: Res<SimClock>,
    config: Res<SimConfig>,
    roster: Res<Roster>,
    states: Query<&Reflection>,
    mut due: ResMut<ReflectionsDue>,
    mut deferred: ResMut<ReflectionsDeferred>,
) {
    due.0.clear();
    deferred.0.clear();
    if config.reflect.threshold == 0 {
        return;
    }
    for (idx, &entity) in roster.entities.iter().enumerate() {
        let Ok(state) = states.get(entity) else {
            continue;
        };
        if state.importance < config.reflect.threshold || state.evidence.is_empty() {
            continue;
        }
        let npc = NpcId(idx as u32);
        if let Some(retry) = state.retry
            && (clock.tick < retry.tick || state.importance < retry.importance)
        {
            deferred.0.push(npc);
            continue;
        }
        due.0
            .push((npc, state.evidence.iter().map(|e| e.id).collect()));
    }
}

/// Decides who thinks this tick ([`Wakes`], by id) and keeps only their observations.
/// An `every_tick` NPC always thinks. An `on_change` NPC is woken when it heard speech,
/// someone new is within earshot, it witnesses an event, it arrived or cannot arrive,
/// it has no intention, its reflection is due, or it has been idle `max_idle_ticks`;
/// otherwise it continues (`continue_intentions` acts for it) and costs no recall and
/// no call. Runs after `request_reflections`, whose list is one of the reasons.
#[expect(
    clippy::too_many_arguments,
    reason = "a system's parameters are its declared data access"
)]
pub fn judge_wakes(
    clock: Res<SimClock>,
    config: Res<SimConfig>,
    map: Res<WorldMap>,
    roster: Res<Roster>,
    due: Res<ReflectionsDue>,
    mut npcs: Query<(&Position, &Target, &mut Attention)>,
    mut observations: ResMut<Observations>,
    mut wakes: ResMut<Wakes>,
) {
    wakes.0.clear();
    wakes.0.resize(roster.entities.len(), Wake::Always);
    let due: BTreeSet<NpcId> = due.0.iter().map(|(npc, _)| *npc).collect();
    for obs in &observations.0 {
        let ThinkMode::OnChange { max_idle_ticks } = config.mind(obs.npc).think else {
            continue;
        };
        let Some(Ok((pos, target, mut attention))) = roster
            .entities
            .get(obs.npc.index())
            .map(|&e| npcs.get_mut(e))
        else {
            continue;
        };
        let earshot: Vec<NpcId> = obs.audible().map(|s| s.id).collect();
        let mut reasons = Vec::new();
        if !obs.heard.is_empty() {
            reasons.push(WakeReason::Heard);
        }
        if earshot
            .iter()
            .any(|id| attention.earshot.binary_search(id).is_err())
        {
            reasons.push(WakeReason::Newcomer);
        }
        if !obs.witnessed.is_empty() {
            reasons.push(WakeReason::Witnessed);
        }
        match (attention.intent, target.0) {
            (Intent::Arrived, _) => reasons.push(WakeReason::Arrived),
            (Intent::Walk, Some(to)) => {
                let next = map.grid.clamp(pos.0.step_toward(to));
                if !map.grid.contains(to) || next == pos.0 {
                    reasons.push(WakeReason::Unreachable);
                }
            }
            (Intent::Stay, _) => {}
            (Intent::None | Intent::Walk, _) => reasons.push(WakeReason::NoIntention),
        }
        if due.contains(&obs.npc) {
            reasons.push(WakeReason::Reflection);
        }
        if attention
            .last_thought
            .is_some_and(|t| clock.tick.saturating_sub(t) >= max_idle_ticks)
        {
            reasons.push(WakeReason::Idle);
        }
        attention.earshot = earshot;
        wakes.0[obs.npc.index()] = if reasons.is_empty() {
            Wake::Continued
        } else {
            attention.last_thought = Some(clock.tick);
            Wake::Woken(reasons)
        };
    }
    observations
        .0
        .retain(|o| wakes.0.get(o.npc.index()).is_none_or(Wake::thinks));
}

/// Fires this tick's scenario events: every NPC within sight radius of the event's place
/// witnesses it. Writes [`EventWitnessed`] (in NPC-id order) and a `scenario_event` log line.
pub fn fire_scenario_events(
    clock: Res<SimClock>,
    events: Res<ScheduledEvents>,
    map: Res<WorldMap>,
    roster: Res<Roster>,
    positions: Query<&Position>,
    mut witnessed: MessageWriter<EventWitnessed>,
    mut log: ResMut<TickEvents>,
) {
    for event in events.0.iter().filter(|e| e.tick == clock.tick) {
        let place = &map.places[event.place];
        let mut witnesses = Vec::new();
        for (idx, &entity) in roster.entities.iter().enumerate() {
            let Ok(pos) = positions.get(entity) else {
                continue;
            };
            if pos.0.within(place.at, map.sight_radius) {
                witnesses.push(NpcId(idx as u32));
            }
        }
        for &npc in &witnesses {
            witnessed.write(EventWitnessed {
                npc,
                place: place.name.to_string(),
                text: event.text.clone(),
                importance: event.importance,
            });
        }
        log.0.push(SimEvent::ScenarioEvent(ScenarioEventLine {
            tick: clock.tick,
            place: place.name.to_string(),
            text: event.text.clone(),
            witnesses: roster.names_of(&witnesses),
        }));
    }
}

/// Builds every NPC's [`Observation`] for this tick into [`Observations`], by id: its
/// position and target, the NPCs and places within sight radius (and which NPCs are within
/// hearing radius), what it heard last tick, the events it witnesses now, its short-term
/// window, and which audible NPCs it believes already know what.
pub fn observe(
    clock: Res<SimClock>,
    map: Res<WorldMap>,
    roster: Res<Roster>,
    npcs: Query<(&Position, &Target, &Hearing, &ShortTerm, &KnownBy)>,
    mut witnessed: MessageReader<EventWitnessed>,
    mut observations: ResMut<Observations>,
) {
    let positions: Vec<_> = roster
        .entities
        .iter()
        .map(|&e| npcs.get(e).map(|(p, ..)| p.0).ok())
        .collect();
    let near = crate::grid::Neighbours::new(positions, map.sight_radius);
    let mut seen_events: Vec<Vec<Witnessed>> = vec![Vec::new(); roster.entities.len()];
    for w in witnessed.read() {
        if let Some(list) = seen_events.get_mut(w.npc.index()) {
            list.push(Witnessed {
                place: w.place.clone(),
                text: w.text.clone(),
            });
        }
    }

    // One NPC's observation: reads the world, writes nothing but its own events list.
    let build = |idx: usize, events: &mut Vec<Witnessed>| -> Option<Observation> {
        let (pos, target, hearing, short_term, known_by) = npcs.get(roster.entities[idx]).ok()?;
        let id = NpcId(idx as u32);
        let at = pos.0;
        let mut seen_npcs = Vec::new();
        for other_idx in near.within(at, map.sight_radius) {
            let Some(other_at) = near.at(other_idx) else {
                continue;
            };
            if other_idx == idx {
                continue;
            }
            let other_id = NpcId(other_idx as u32);
            seen_npcs.push(SeenNpc {
                id: other_id,
                name: roster.shared_name(other_id),
                at: other_at,
                audible: at.within(other_at, map.hearing_radius),
            });
        }
        let audible: BTreeSet<NpcId> = seen_npcs
            .iter()
            .filter(|s| s.audible)
            .map(|s| s.id)
            .collect();
        // What it believes the NPCs in earshot know (nothing to look for with no one in
        // earshot: most NPCs of a big town, most ticks).
        let known_by = known_by.about(&audible);
        let seen_places = map
            .places
            .iter()
            .filter(|p| at.within(p.at, map.sight_radius))
            .map(|p| SeenPlace {
                name: p.name.clone(),
                at: p.at,
            })
            .collect();
        Some(Observation {
            npc: id,
            name: roster.shared_name(id),
            tick: clock.tick,
            at,
            target: target.0,
            seen_npcs,
            seen_places,
            heard: hearing.0.clone(),
            witnessed: std::mem::take(events),
            recent: short_term.0.clone(),
            known_by,
        })
    };
    // A big town's NPCs in consecutive runs of ids, one thread each, joined in id order:
    // the same observations in the same order however many threads built them.
    let n = roster.entities.len();
    let threads = if n >= OBSERVE_IN_PARALLEL_FROM {
        observe_threads()
    } else {
        1
    };
    observations.0 = in_order_on_threads(&mut seen_events, threads, build);
}

/// `build(index, item)` of every item, on `threads` threads at once, each taking a run of
/// consecutive items: the results in the items' order, whatever the number of threads
/// (one builds on the calling thread).
fn in_order_on_threads<E: Send, T: Send>(
    items: &mut [E],
    threads: usize,
    build: impl Fn(usize, &mut E) -> Option<T> + Sync,
) -> Vec<T> {
    let build_run = |first: usize, run: &mut [E]| -> Vec<T> {
        run.iter_mut()
            .enumerate()
            .filter_map(|(i, e)| build(first + i, e))
            .collect()
    };
    if threads <= 1 {
        return build_run(0, items);
    }
    let run = items.len().div_ceil(threads).max(1);
    std::thread::scope(|scope| {
        let handles: Vec<_> = items
            .chunks_mut(run)
            .enumerate()
            .map(|(k, part)| {
                let build_run = &build_run;
                // Named, so that a profile tells Perceive's threads from the tick thread
                // (`scripts/cpu_profile.py`); as `scope.spawn` does, a thread the system
                // cannot start is a panic.
                std::thread::Builder::new()
                    .name("hearsay-observe".into())
                    .spawn_scoped(scope, move || build_run(k * run, part))
                    .unwrap_or_else(|e| panic!("cannot start an observing thread: {e}"))
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| {
                h.join()
                    .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
            })
            .collect()
    })
}

/// Towns of at least this many NPCs observe on several threads (below it a thread's
/// start costs more than it saves): at 10,000 NPCs building the observations was nearly
/// all of the Perceive phase, about a tenth of the tick, and Think's workers, which wait
/// for it, had nothing else to do but the backfill.
const OBSERVE_IN_PARALLEL_FROM: usize = 2_048;

/// At most this many threads observe.
const OBSERVE_THREADS_MAX: usize = 4;

/// The threads a big town observes on: the cores this process may use (at most
/// [`OBSERVE_THREADS_MAX`]), asked once per process — the query reads the scheduler's
/// affinity and the cgroup's quota, not something to repeat every tick. What the number
/// is never reaches the output (see [`in_order_on_threads`]).
fn observe_threads() -> usize {
    static THREADS: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *THREADS.get_or_init(|| {
        std::thread::available_parallelism().map_or(1, |t| t.get().min(OBSERVE_THREADS_MAX))
    })
}

#[cfg(test)]
mod tests {
    use super::in_order_on_threads;

    #[test]
    fn observations_built_on_threads_come_back_in_order() {
        // Items whose result depends on the index and the item, some left out, the item
        // taken (as observe takes each NPC's witnessed events).
        let items = || (0..1001u32).map(|i| vec![i * 3]).collect::<Vec<_>>();
        let build =
            |idx: usize, item: &mut Vec<u32>| (idx % 7 != 3).then(|| (idx, std::mem::take(item)));
        let mut one = items();
        let expected = in_order_on_threads(&mut one, 1, build);
        assert_eq!(expected.len(), 1001 - 143);
        assert!(
            one.iter()
                .enumerate()
                .all(|(i, v)| v.is_empty() == (i % 7 != 3))
        );
        for threads in [2, 3, 4, 2000] {
            let mut many = items();
            assert_eq!(
                in_order_on_threads(&mut many, threads, build),
                expected,
                "{threads}"
            );
            assert_eq!(many, one, "{threads}");
        }
    }
}
