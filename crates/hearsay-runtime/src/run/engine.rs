//! The one engine loop: every tick of every run, resume, fork and replay goes through
//! [`drive`], in the same order — what fades, perceive, think, act, record.
//!
//! What differs between them is behind [`TickDriver`]: a run thinks with brains and
//! records into its store and logs; a replay thinks from the tape, keeps the forgetting
//! schedule the stores keep, and compares each tick with the log. A replay that drove
//! its own loop could agree with itself and not with the run; this one cannot.

use std::collections::BTreeMap;
use std::ops::ControlFlow;
use std::time::{Duration, Instant};

use hearsay_core::{Acted, MemoryId, NpcId, Perceived, Sim, Thought};
use hearsay_memory::Forgotten;

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
