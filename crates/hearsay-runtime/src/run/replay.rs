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
use std::ops::ControlFlow;
use std::path::Path;

use hearsay_brain::BrainCall;
use hearsay_brain::tape::{Exchange, taped_without_request};
use hearsay_core::{Acted, MemoryId, MemoryRecord, NpcId, Perceived, Sim, Thought};
use hearsay_memory::index::MetaTable;

use crate::engine::{Stages, TickDriver};

use crate::RunError;
use crate::logs::{EventLog, RunManifest, Tape};
use crate::run::thought_from;
use crate::rundir::{EVENTS_FILE, LLM_FILE, MANIFEST_FILE, SCENARIO_FILE};
use crate::scenario;
use crate::think::RequestTemplate;

/// Where a replay first differed from the record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Divergence {
    /// The first tick whose replay differs; ticks before it matched.
    pub tick: u64,
    /// One line saying what differed, e.g. `event 3 of tick 7 differs`.
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
    /// The facts by meaning, decided again from the run directory with no model.
    pub spread: crate::spread::SpreadCheck,
}

/// Replays the run in `dir`.
pub fn replay(dir: &Path) -> Result<ReplayReport, RunError> {
    crate::rundir::require(dir, &[MANIFEST_FILE, SCENARIO_FILE, EVENTS_FILE, LLM_FILE])?;
    let manifest = RunManifest::read(dir)?;
    let scenario_path = dir.join(SCENARIO_FILE);
    let (mut latest, _) = scenario::load(&scenario_path)?;
    // A fork with --set ran its first ticks under earlier scenarios: each stage replays
    // under the one it ran with, switching where the fork did.
    latest.seed = manifest.seed_at(0);
    latest.ticks = manifest.ticks;
    let earlier = Stages::of_run(&manifest, &scenario_path)?;
    let (scenario, stages) = Stages::starting(earlier, latest, 0);
    let events = EventLog::read_unsealed(&dir.join(EVENTS_FILE))?;
    let names: Vec<String> = scenario.npcs.iter().map(|n| n.name.clone()).collect();
    // Every tick replays from the tape: every call kept, each parsed when its tick replays.
    let tape = Tape::read_range(&dir.join(LLM_FILE), 0..u64::MAX, &names, |_| {})?;
    let completed = events.index.completed();
    crate::logs::check_not_cut_short(dir, manifest.ticks, completed)?;
    let broken = events.index.broken_tick();
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

    let mut sim = Sim::new(scenario.world_setup());
    let mut replayer = Replayer {
        template: RequestTemplate::new(&scenario),
        memories: BTreeMap::new(),
        schedule: MetaTable::default(),
        reflect_max: scenario.memory.reflect.insights_max,
        scenario,
        stages,
        scenario_path,
        manifest: &manifest,
        tape,
        events: &events,
    };
    replayer
        .schedule
        .set_forgetting(replayer.scenario.memory.forgetting);
    for m in sim.take_memories() {
        replayer.schedule.add(&m);
        replayer.memories.insert(m.id, m);
    }
    match crate::engine::drive(&mut sim, 0, completed, &mut replayer) {
        Ok(_) => {}
        Err(Stop::Failed(e)) => return Err(e),
        Err(Stop::Diverged(mut d)) => {
            d.edited = edited_by(d.tick);
            return Ok(ReplayReport {
                ticks: d.tick,
                divergence: Some(d),
                spread: crate::spread::SpreadCheck::Unchecked("the ticks diverged".into()),
            });
        }
    }
    let spread = if completed == manifest.ticks {
        crate::spread::recheck(dir, &replayer.scenario)?
    } else {
        crate::spread::SpreadCheck::Unchecked("the run has not finished".into())
    };
    Ok(ReplayReport {
        ticks: completed,
        divergence: None,
        spread,
    })
}

/// Why a replay stopped before its last tick.
enum Stop {
    /// The replay could not go on (a stage that does not fit the run).
    Failed(RunError),
    /// The first tick that differs from the record.
    Diverged(Divergence),
}

/// Names for a message: `Bob, Carol` or `nobody`.
fn list(names: &[&str]) -> String {
    if names.is_empty() {
        "nobody".to_owned()
    } else {
        names.join(", ")
    }
}

fn diverged(tick: u64, what: String) -> Stop {
    Stop::Diverged(Divergence {
        tick,
        what,
        expected: Vec::new(),
        replayed: Vec::new(),
        edited: None,
    })
}

/// The digest `exchange` (the call's, or its reflection's) records, `None` for the
/// heuristic brain's call, which is taped without one (`tape::taped_without_request`).
/// Any other call without one is a tape that was cut or edited: a divergence, named.
fn recorded_digest<'c>(
    call: &BrainCall,
    exchange: &'c Exchange,
    name: &str,
    tick: u64,
) -> Result<Option<&'c str>, Stop> {
    match exchange.request.as_deref() {
        Some(recorded) => Ok(Some(recorded)),
        None if taped_without_request(&call.provider) => Ok(None),
        None => Err(diverged(
            tick,
            format!(
                "llm.jsonl records no request digest for {name}'s call at tick {tick}, which only \
                 the heuristic brain's calls leave out (provider {:?})",
                call.provider.as_str()
            ),
        )),
    }
}

/// The engine loop's driver for a replay: decisions from the tape (each request rebuilt
/// and its digest checked, where the tape records one), the stores' forgetting schedule,
/// each tick's lines compared with the log.
struct Replayer<'a> {
    template: RequestTemplate,
    /// Every memory so far, by id (what recall and reflection may name).
    memories: BTreeMap<MemoryId, MemoryRecord>,
    /// The forgetting schedule every store keeps.
    schedule: MetaTable,
    reflect_max: usize,
    /// The scenario in force; `stages` says when the next takes over.
    scenario: crate::Scenario,
    stages: Stages,
    scenario_path: std::path::PathBuf,
    manifest: &'a RunManifest,
    tape: Tape,
    events: &'a EventLog,
}

impl TickDriver for Replayer<'_> {
    type Stop = Stop;

    fn begin(&mut self, tick: u64, sim: &mut Sim) -> Result<(), Stop> {
        let next = self.stages.switch(tick, sim).map_err(|e| {
            Stop::Failed(RunError::RunDir {
                path: self.scenario_path.clone(),
                problem: format!(
                    "the scenario in force from tick {tick} does not fit the run: {e}"
                ),
            })
        })?;
        if let Some(next) = next {
            self.schedule.set_forgetting(next.memory.forgetting);
            self.template = RequestTemplate::new(&next);
            self.reflect_max = next.memory.reflect.insights_max;
            self.scenario = next;
        }
        Ok(())
    }

    fn seed(&self, tick: u64) -> u64 {
        self.manifest.seed_at(tick)
    }

    fn forget_due(&mut self, tick: u64) -> Vec<hearsay_memory::Forgotten> {
        self.schedule.forget_due(tick)
    }

    fn think(
        &mut self,
        tick: u64,
        seed: u64,
        perceived: Perceived,
    ) -> Result<BTreeMap<NpcId, Thought>, Stop> {
        let due: BTreeMap<_, _> = perceived.reflections_due.into_iter().collect();
        // Who continued is the kernel's to say; the tape must agree.
        let continued: Vec<&str> = perceived
            .wakes
            .iter()
            .enumerate()
            .filter(|(_, w)| !w.thinks())
            .map(|(i, _)| &*self.template.names[i])
            .collect();
        let noted = self.tape.continued(tick);
        let same = noted.len() == continued.len()
            && noted.iter().collect::<std::collections::BTreeSet<_>>()
                == continued.iter().collect();
        if !same {
            return Err(diverged(
                tick,
                format!(
                    "at tick {tick} {} continued without thinking, but llm.jsonl notes {}",
                    list(&continued),
                    list(&noted)
                ),
            ));
        }
        // Taken out of the tape as it is replayed: a tick's calls parsed now, and let go.
        let calls = match self.tape.take_calls(tick).map_err(Stop::Failed)? {
            Some(calls) => calls,
            None if perceived.observations.is_empty() => BTreeMap::new(),
            None => {
                return Err(diverged(
                    tick,
                    format!("llm.jsonl has no brain call for tick {tick}"),
                ));
            }
        };
        let mut thoughts = BTreeMap::new();
        for obs in perceived.observations {
            let name = self.template.names[obs.npc.index()].to_string();
            let Some(call) = calls.get(&name) else {
                return Err(diverged(
                    tick,
                    format!("llm.jsonl has no brain call for {name} at tick {tick}"),
                ));
            };
            let mut recalled = Vec::with_capacity(call.recalled.len());
            for id in &call.recalled {
                if self
                    .schedule
                    .get(*id)
                    .is_some_and(|m| m.forgotten.is_some())
                {
                    return Err(diverged(
                        tick,
                        format!(
                            "{name} recalled memory {} at tick {tick}, which had been forgotten",
                            id.0
                        ),
                    ));
                }
                match self.memories.get(id) {
                    Some(m) if m.npc == obs.npc => {
                        recalled.push(self.template.recollection(m.clone()))
                    }
                    _ => {
                        return Err(diverged(
                            tick,
                            format!(
                                "{name} recalled memory {} at tick {tick}, which is not one of its memories at that point",
                                id.0
                            ),
                        ));
                    }
                }
            }
            let npc = obs.npc;
            // The heuristic brain's call has none: its decision comes from the tape, and
            // the tick's rolling hash checks what the world made of it.
            if let Some(recorded) = recorded_digest(call, &call.exchange, &name, tick)? {
                let request = self.template.request(seed, obs, recalled);
                let rebuilt = request.digest_like(recorded);
                if rebuilt != recorded {
                    return Err(diverged(
                        tick,
                        format!(
                            "what {name} perceived or recalled at tick {tick} differs from the recorded request \
                             (digest {rebuilt} against {recorded})"
                        ),
                    ));
                }
            }
            match (due.get(&npc), &call.reflection) {
                (None, None) => {}
                (Some(evidence), Some(reflection)) => {
                    let evidence = evidence
                        .iter()
                        .filter_map(|id| self.memories.get(id).cloned())
                        .collect();
                    let request =
                        self.template
                            .reflect_request(seed, npc, tick, evidence, self.reflect_max);
                    let recorded = recorded_digest(call, &reflection.exchange, &name, tick)?;
                    if recorded.is_some_and(|recorded| request.digest_like(recorded) != recorded) {
                        return Err(diverged(
                            tick,
                            format!(
                                "what {name} reflected on at tick {tick} differs from the recorded reflection"
                            ),
                        ));
                    }
                }
                (Some(_), None) => {
                    return Err(diverged(
                        tick,
                        format!(
                            "{name} was due to reflect at tick {tick}, but llm.jsonl records no reflection"
                        ),
                    ));
                }
                (None, Some(_)) => {
                    return Err(diverged(
                        tick,
                        format!(
                            "llm.jsonl records a reflection by {name} at tick {tick}, when none was due"
                        ),
                    ));
                }
            }
            thoughts.insert(npc, thought_from(call));
        }
        Ok(thoughts)
    }

    fn record(
        &mut self,
        tick: u64,
        acted: Acted,
        recalled: Vec<MemoryId>,
        _archived: Vec<hearsay_memory::Forgotten>,
        _sim: &mut Sim,
        _times: crate::engine::PhaseTimes,
    ) -> Result<ControlFlow<()>, Stop> {
        // What the store does after the tick: new memories scheduled, recalls counted.
        for m in acted.memories {
            self.schedule.add(&m);
            self.memories.insert(m.id, m);
        }
        for id in recalled {
            self.schedule.touch(id, tick);
        }
        let replayed = acted.log.lines;
        let expected = self.events.tick_lines(tick).unwrap_or_default();
        if !replayed.iter().map(String::as_str).eq(expected.iter()) {
            let at = replayed
                .iter()
                .zip(expected.iter())
                .position(|(a, b)| a != b)
                .unwrap_or_else(|| replayed.len().min(expected.len()));
            let window = |lines: &mut dyn Iterator<Item = &str>| {
                lines
                    .skip(at)
                    .take(3)
                    .map(str::to_owned)
                    .collect::<Vec<_>>()
            };
            return Err(Stop::Diverged(Divergence {
                tick,
                what: format!("event {} of tick {tick} differs", at + 1),
                expected: window(&mut expected.iter()),
                replayed: window(&mut replayed.iter().map(String::as_str)),
                edited: None,
            }));
        }
        Ok(ControlFlow::Continue(()))
    }
}
