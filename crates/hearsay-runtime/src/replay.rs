//! `hearsay replay`: re-runs a recorded run offline from its tape — zero network calls,
//! no embedder, no brain — and checks every tick against the recorded event log.
//!
//! Decisions, recalls and insights come from `llm.jsonl`; everything else (perception,
//! movement, hearing, memories, forgetting, reflection triggers, facts, the rolling hash)
//! is recomputed: the kernel runs the ticks, and the same forgetting schedule the stores
//! keep ([`MetaTable`]) decides what is archived when. Each brain request (decision or
//! reflection) is rebuilt and its digest compared with the recorded one, so a change in
//! what an NPC perceived, recalled or reflected on is caught at the tick it happens.

use std::collections::BTreeMap;
use std::path::Path;

use hearsay_core::checkpoint;
use hearsay_core::resources::{
    ArchivedMemories, MemoryLedger, Observations, ReflectionsDue, SimConfig, TickLog,
};
use hearsay_core::{Decisions, MemoryId, MemoryRecord, SimAct, SimClock, SimPerceive, build_world};
use hearsay_memory::index::MetaTable;

use crate::RunError;
use crate::logs::{EventLog, RunManifest, Tape};
use crate::run::thought_from;
use crate::rundir::{EVENTS_FILE, LLM_FILE, MANIFEST_FILE, SCENARIO_FILE};
use crate::scenario;
use crate::think::RequestTemplate;

/// Where a replay first differed from the record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Divergence {
    /// The tick.
    pub tick: u64,
    /// What differed.
    pub what: String,
    /// The recorded lines around the difference.
    pub expected: Vec<String>,
    /// The replayed lines around the difference.
    pub replayed: Vec<String>,
    /// Set when the record itself is at fault: a tick at or before this one does not
    /// match the hash it closes with, so the log was edited after it was written.
    pub edited: Option<String>,
}

/// The result of a replay.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReplayReport {
    /// Ticks replayed (and identical, up to the divergence if any).
    pub ticks: u64,
    /// The first divergence, if any.
    pub divergence: Option<Divergence>,
}

/// Replays the run in `dir`.
pub fn replay(dir: &Path) -> Result<ReplayReport, RunError> {
    crate::rundir::require(dir, &[MANIFEST_FILE, SCENARIO_FILE, EVENTS_FILE, LLM_FILE])?;
    let manifest = RunManifest::read(dir)?;
    let scenario_path = dir.join(SCENARIO_FILE);
    let (latest, _) = scenario::load(&scenario_path)?;
    // A fork with --set ran its first ticks under earlier scenarios: each stage replays
    // under the one it ran with, switching where the fork did (a fresh world from the new
    // scenario, the state carried over as a checkpoint).
    let mut stages: Vec<(u64, crate::Scenario)> = Vec::new();
    for earlier in &manifest.earlier_scenarios {
        let parsed = scenario::parse(&scenario_path, earlier.text.as_bytes())?;
        stages.push((earlier.until_tick, parsed));
    }
    stages.push((u64::MAX, latest));
    for (_, s) in &mut stages {
        s.seed = manifest.seed_at(0);
        s.ticks = manifest.ticks;
    }
    let mut stages = stages.into_iter();
    let Some((mut until_tick, mut scenario)) = stages.next() else {
        unreachable!("the latest scenario is always a stage");
    };
    let events = EventLog::read_unsealed(&dir.join(EVENTS_FILE))?;
    let tape = Tape::read(&dir.join(LLM_FILE))?;
    let names: Vec<String> = scenario.npcs.iter().map(|n| n.name.clone()).collect();
    tape.check_cast(&dir.join(LLM_FILE), &names)?;
    let completed = events.ticks.len() as u64;
    crate::logs::check_not_cut_short(dir, manifest.ticks, completed)?;
    let broken = events.broken_tick();
    let edited_by = |tick: u64| {
        broken.filter(|b| *b <= tick).map(|b| {
            format!(
                "the record is at fault, not the engine: in {}, tick {b} does not match the \
                 hash it closes with, so the log was edited after it was written",
                dir.join(EVENTS_FILE).display()
            )
        })
    };
    if completed == 0 {
        return Err(RunError::Refused(format!(
            "{} has no completed tick to replay",
            dir.join(EVENTS_FILE).display()
        )));
    }

    let mut template = RequestTemplate::new(&scenario);
    let mut world = build_world(scenario.world_setup());
    let mut memories: BTreeMap<MemoryId, MemoryRecord> = BTreeMap::new();
    let mut schedule = MetaTable::default();
    schedule.set_forgetting(scenario.memory.forgetting);
    for m in std::mem::take(&mut world.resource_mut::<MemoryLedger>().pending) {
        schedule.add(&m);
        memories.insert(m.id, m);
    }

    for tick in 0..completed {
        while tick >= until_tick {
            let Some((until, next)) = stages.next() else {
                break;
            };
            let state = checkpoint::capture(&world, tick);
            world = build_world(next.world_setup());
            checkpoint::restore(&mut world, &state).map_err(|e| RunError::RunDir {
                path: scenario_path.clone(),
                problem: format!(
                    "the scenario in force from tick {tick} does not fit the run: {e}"
                ),
            })?;
            schedule.set_forgetting(next.memory.forgetting);
            template = RequestTemplate::new(&next);
            (until_tick, scenario) = (until, next);
        }
        let seed = manifest.seed_at(tick);
        world.resource_mut::<SimConfig>().seed = seed;
        world.resource_mut::<SimClock>().tick = tick;
        let archived = schedule.forget_due(tick);
        world.insert_resource(ArchivedMemories(
            archived.iter().map(|f| (f.id, f.npc)).collect(),
        ));
        world.run_schedule(SimPerceive);
        let observations = std::mem::take(&mut world.resource_mut::<Observations>().0);
        let due: BTreeMap<_, _> = std::mem::take(&mut world.resource_mut::<ReflectionsDue>().0)
            .into_iter()
            .collect();
        let diverged = |what: String| {
            Ok(ReplayReport {
                ticks: tick,
                divergence: Some(Divergence {
                    tick,
                    what,
                    expected: Vec::new(),
                    replayed: Vec::new(),
                    edited: edited_by(tick),
                }),
            })
        };
        let Some(calls) = tape.ticks.get(&tick) else {
            return diverged(format!("llm.jsonl has no brain call for tick {tick}"));
        };
        let mut thoughts = BTreeMap::new();
        for obs in observations {
            let name = template.names[obs.npc.index()].clone();
            let Some(call) = calls.get(&name) else {
                return diverged(format!(
                    "llm.jsonl has no brain call for {name} at tick {tick}"
                ));
            };
            let mut recalled = Vec::with_capacity(call.recalled.len());
            for id in &call.recalled {
                if schedule.get(*id).is_some_and(|m| m.forgotten.is_some()) {
                    return diverged(format!(
                        "{name} recalled memory {} at tick {tick}, which had been forgotten",
                        id.0
                    ));
                }
                match memories.get(id) {
                    Some(m) if m.npc == obs.npc => recalled.push(template.recollection(m.clone())),
                    _ => {
                        return diverged(format!(
                            "{name} recalled memory {} at tick {tick}, which is not one of its memories at that point",
                            id.0
                        ));
                    }
                }
            }
            let npc = obs.npc;
            let request = template.request(seed, obs, recalled);
            if request.digest() != call.request {
                return diverged(format!(
                    "what {name} perceived or recalled at tick {tick} differs from the recorded request \
                     (digest {} against {})",
                    request.digest(),
                    call.request
                ));
            }
            match (due.get(&npc), &call.reflection) {
                (None, None) => {}
                (Some(evidence), Some(reflection)) => {
                    let evidence = evidence
                        .iter()
                        .filter_map(|id| memories.get(id).cloned())
                        .collect();
                    let request = template.reflect_request(
                        seed,
                        npc,
                        tick,
                        evidence,
                        scenario.memory.reflect.insights_max,
                    );
                    if request.digest() != reflection.request {
                        return diverged(format!(
                            "what {name} reflected on at tick {tick} differs from the recorded reflection"
                        ));
                    }
                }
                (Some(_), None) => {
                    return diverged(format!(
                        "{name} was due to reflect at tick {tick}, but llm.jsonl records no reflection"
                    ));
                }
                (None, Some(_)) => {
                    return diverged(format!(
                        "llm.jsonl records a reflection by {name} at tick {tick}, when none was due"
                    ));
                }
            }
            thoughts.insert(npc, thought_from(call));
        }
        let mut touched: Vec<MemoryId> = thoughts
            .values()
            .flat_map(|t| t.recalled.iter().copied())
            .collect();
        touched.sort_unstable();
        touched.dedup();
        world.insert_resource(Decisions(thoughts));
        world.run_schedule(SimAct);
        let replayed = std::mem::take(&mut world.resource_mut::<TickLog>().lines);
        // What the store does after the tick: new memories scheduled, recalls counted.
        for m in std::mem::take(&mut world.resource_mut::<MemoryLedger>().pending) {
            schedule.add(&m);
            memories.insert(m.id, m);
        }
        for id in touched {
            schedule.touch(id, tick);
        }
        let expected = events.tick_lines(tick).unwrap_or_default();
        if replayed.as_slice() != expected {
            let at = replayed
                .iter()
                .zip(expected)
                .position(|(a, b)| a != b)
                .unwrap_or_else(|| replayed.len().min(expected.len()));
            let window =
                |lines: &[String]| lines.iter().skip(at).take(3).cloned().collect::<Vec<_>>();
            return Ok(ReplayReport {
                ticks: tick,
                divergence: Some(Divergence {
                    tick,
                    what: format!("event {} of tick {tick} differs", at + 1),
                    expected: window(expected),
                    replayed: window(&replayed),
                    edited: edited_by(tick),
                }),
            });
        }
    }
    Ok(ReplayReport {
        ticks: completed,
        divergence: None,
    })
}
