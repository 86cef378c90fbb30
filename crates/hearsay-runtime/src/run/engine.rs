//! The one engine loop: every tick of every run, resume, fork and replay goes through
//! [`drive`], in the same order — what fades, perceive, think, act, record.
//!
//! What differs between them is behind [`TickDriver`]: a run thinks with brains and
//! records into its store and logs; a replay thinks from the tape, keeps the forgetting
//! schedule the stores keep, and compares each tick with the log. A replay that drove
//! its own loop could agree with itself and not with the run; this one cannot.
//!
//! A fork with `--set` runs its ticks before the fork tick under the scenario they
//! first ran with and the rest under the edited one; [`Stages`] is where every driver
//! switches from one to the next, the same way.

use std::collections::BTreeMap;
use std::ops::ControlFlow;
use std::time::{Duration, Instant};

use hearsay_core::checkpoint::CheckpointError;
use hearsay_core::{Acted, MemoryId, NpcId, Perceived, Sim, Thought};
use hearsay_memory::Forgotten;

use crate::RunError;
use crate::logs::RunManifest;
use crate::scenario::{self, Scenario};

/// The scenarios a run's ticks ran under, oldest first, and where each stopped being in
/// force. A fork with `--set` keeps the scenario its source ran the fork tick with in
/// `run.json` (`earlier_scenarios`): the ticks before the fork tick ran under it, the
/// rest under the edited `scenario.toml`. A fork that starts from a checkpoint before
/// its fork tick (the source saved one every K ticks), a resume of it, and a replay all
/// run those ticks under the earlier scenario and switch at the fork tick — a fresh
/// world from the next scenario, this one's state carried over as a checkpoint — which
/// is what the fork did.
pub struct Stages {
    /// The first tick the scenario in force no longer is (`u64::MAX` for the last).
    until: u64,
    /// The scenarios after it, each with the first tick it is no longer in force.
    rest: std::vec::IntoIter<(u64, Scenario)>,
}

impl Stages {
    /// The earlier stages of the run `manifest` describes (each `(until_tick, scenario)`,
    /// oldest first): each earlier scenario parsed (a problem reported against `path`),
    /// with the run's first seed and its length.
    pub fn of_run(
        manifest: &RunManifest,
        path: &std::path::Path,
    ) -> Result<Vec<(u64, Scenario)>, RunError> {
        manifest
            .earlier_scenarios
            .iter()
            .map(|earlier| {
                let mut parsed = scenario::parse(path, earlier.text.as_bytes())?;
                parsed.seed = manifest.seed_at(0);
                parsed.ticks = manifest.ticks;
                Ok((earlier.until_tick, parsed))
            })
            .collect()
    }

    /// The `earlier` stages (as [`Stages::of_run`] gives them) and then `latest`, from
    /// tick `from` on: the scenario in force at `from`, and the switches after it.
    pub fn starting(
        earlier: Vec<(u64, Scenario)>,
        latest: Scenario,
        from: u64,
    ) -> (Scenario, Stages) {
        let mut ahead = earlier.into_iter().skip_while(|(until, _)| *until <= from);
        match ahead.next() {
            Some((until, first)) => {
                let rest: Vec<(u64, Scenario)> =
                    ahead.chain(std::iter::once((u64::MAX, latest))).collect();
                (
                    first,
                    Stages {
                        until,
                        rest: rest.into_iter(),
                    },
                )
            }
            None => (
                latest,
                Stages {
                    until: u64::MAX,
                    rest: Vec::new().into_iter(),
                },
            ),
        }
    }

    /// Before `tick`: the scenario that takes over at it, if one does, with `sim`
    /// carried over to its world.
    pub fn switch(
        &mut self,
        tick: u64,
        sim: &mut Sim,
    ) -> Result<Option<Scenario>, CheckpointError> {
        let mut next = None;
        while tick >= self.until {
            let Some((until, scenario)) = self.rest.next() else {
                break;
            };
            *sim = sim.carried_to(scenario.world_setup(), tick)?;
            self.until = until;
            next = Some(scenario);
        }
        Ok(next)
    }

    /// Whether `tick` runs under an earlier scenario than the run's last: a tick before
    /// a fork's tick, which the fork took from its source's tape.
    pub fn earlier(&self, tick: u64) -> bool {
        tick < self.until && self.rest.len() > 0
    }
}

/// How long the loop's own phases took in one tick.
#[derive(Clone, Copy, Debug, Default)]
pub struct PhaseTimes {
    /// Forgetting and `Sim::perceive`.
    pub perceive: Duration,
    /// The driver's `think` (barrier waits included).
    pub think: Duration,
    /// `Sim::act`.
    pub act: Duration,
    /// The whole process's CPU time (every thread's) over `perceive`: with the
    /// wall-clock time, how many cores the phase kept busy.
    pub perceive_cpu: Duration,
    /// The same over `think`.
    pub think_cpu: Duration,
    /// The same over `act`.
    pub act_cpu: Duration,
}

/// What a driver of the engine loop decides.
pub trait TickDriver {
    /// Why the loop stopped early (an error, a divergence).
    type Stop;

    /// Before tick `tick`: switch to the scenario in force, check resources. May replace
    /// the simulation (a replay's next stage).
    fn begin(&mut self, tick: u64, sim: &mut Sim) -> Result<(), Self::Stop>;

    /// The tick's seed.
    fn seed(&self, tick: u64) -> u64;

    /// The memories that fade at the start of `tick` (the forgetting schedule), in id
    /// order.
    fn forget_due(&mut self, tick: u64) -> Vec<Forgotten>;

    /// The decisions of `tick`, one per NPC that thought.
    fn think(
        &mut self,
        tick: u64,
        seed: u64,
        perceived: Perceived,
    ) -> Result<BTreeMap<NpcId, Thought>, Self::Stop>;

    /// What the tick did: its lines and new memories, the memories recalled in it (sorted,
    /// each once) and those archived at its start. `Break` ends the loop after this tick.
    /// `sim` is mutable for saving it (a save marks where the next delta starts).
    fn record(
        &mut self,
        tick: u64,
        acted: Acted,
        recalled: Vec<MemoryId>,
        archived: Vec<Forgotten>,
        sim: &mut Sim,
        times: PhaseTimes,
    ) -> Result<ControlFlow<()>, Self::Stop>;
}

/// Runs ticks `from..to` of `sim` under `driver`. Returns the tick that would run next
/// if the driver stopped the loop early (`Break`), else `None`.
pub fn drive<D: TickDriver>(
    sim: &mut Sim,
    from: u64,
    to: u64,
    driver: &mut D,
) -> Result<Option<u64>, D::Stop> {
    for tick in from..to {
        let _span = tracing::debug_span!("tick", tick).entered();
        driver.begin(tick, sim)?;
        let t0 = Instant::now();
        let c0 = crate::summary::process_cpu();
        let seed = driver.seed(tick);
        // What faded by now leaves recall before this tick recalls anything.
        let archived = driver.forget_due(tick);
        let perceived = sim.perceive(tick, seed, archived.iter().map(|f| (f.id, f.npc)).collect());
        let t1 = Instant::now();
        let c1 = crate::summary::process_cpu();
        let thoughts = driver.think(tick, seed, perceived)?;
        let t2 = Instant::now();
        let c2 = crate::summary::process_cpu();
        let mut recalled: Vec<MemoryId> = thoughts
            .values()
            .flat_map(|t| t.recalled.iter().copied())
            .collect();
        recalled.sort_unstable();
        recalled.dedup();
        let acted = sim.act(thoughts);
        let times = PhaseTimes {
            perceive: t1 - t0,
            think: t2 - t1,
            act: t2.elapsed(),
            perceive_cpu: c1.saturating_sub(c0),
            think_cpu: c2.saturating_sub(c1),
            act_cpu: crate::summary::process_cpu().saturating_sub(c2),
        };
        let flow = driver.record(tick, acted, recalled, archived, sim, times)?;
        if flow.is_break() && tick + 1 < to {
            return Ok(Some(tick + 1));
        }
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A town of two whose scenarios differ in their hearing radius alone.
    fn heard_within(radius: u32) -> Scenario {
        let text = format!(
            "name = \"stages\"\nseed = 1\nticks = 20\n\n[world]\nwidth = 8\nheight = 8\n\
             hearing_radius = {radius}\n\n[[npcs]]\nname = \"Ann\"\nat = [1, 1]\n\n\
             [[npcs]]\nname = \"Bo\"\nat = [2, 2]\n"
        );
        scenario::parse(std::path::Path::new("stages.toml"), text.as_bytes()).expect("valid")
    }

    /// Two earlier stages, in force before ticks 5 and 9 (the run's own scenario, the
    /// third, after them).
    fn stages() -> Vec<(u64, Scenario)> {
        vec![(5, heard_within(1)), (9, heard_within(2))]
    }

    fn radius(switched: Result<Option<Scenario>, CheckpointError>) -> Option<u32> {
        switched.expect("the state fits").map(|s| s.hearing_radius)
    }

    #[test]
    fn each_stage_takes_over_at_the_tick_the_one_before_ends() {
        let (first, mut stages) = Stages::starting(stages(), heard_within(3), 0);
        assert_eq!(first.hearing_radius, 1);
        let mut sim = Sim::new(first.world_setup());
        for tick in 0..5 {
            assert!(stages.earlier(tick));
            assert_eq!(radius(stages.switch(tick, &mut sim)), None, "tick {tick}");
        }
        assert_eq!(radius(stages.switch(5, &mut sim)), Some(2));
        assert!(stages.earlier(8));
        assert_eq!(radius(stages.switch(8, &mut sim)), None);
        assert_eq!(radius(stages.switch(9, &mut sim)), Some(3));
        assert!(!stages.earlier(9) && !stages.earlier(1_000));
        assert_eq!(radius(stages.switch(10, &mut sim)), None);
    }

    #[test]
    fn a_start_past_a_stage_skips_it_and_a_jump_lands_on_the_last_one_reached() {
        // A resume from a checkpoint at tick 5 starts under the second stage.
        let (first, stages_from_5) = Stages::starting(stages(), heard_within(3), 5);
        assert_eq!(first.hearing_radius, 2);
        assert!(stages_from_5.earlier(8) && !stages_from_5.earlier(9));
        // From the fork tick on, only the run's own scenario.
        let (first, stages_from_9) = Stages::starting(stages(), heard_within(3), 9);
        assert_eq!(first.hearing_radius, 3);
        assert!(!stages_from_9.earlier(9));
        // A run without earlier stages is never under one.
        let (first, none) = Stages::starting(Vec::new(), heard_within(3), 0);
        assert_eq!(first.hearing_radius, 3);
        assert!(!none.earlier(0));
        // Switching at a tick past two ends carries the world to the last of them.
        let (first, mut stages) = Stages::starting(stages(), heard_within(3), 0);
        let mut sim = Sim::new(first.world_setup());
        assert_eq!(radius(stages.switch(12, &mut sim)), Some(3));
    }
}
