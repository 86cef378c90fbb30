//! Will the run fit? Before anything is written, hearsay bounds what a run can cost in
//! disk and memory and holds it against what the machine has; while it runs, it stops
//! cleanly (resumable, like a full disk) before memory runs out.
//!
//! Some of a run's cost is certain: every NPC-tick writes a brain-call line and an event
//! line. The rest depends on what the NPCs do — a talk adds a memory to every listener —
//! and is bounded by the worst case (everyone talks to `max_listeners` others every
//! tick). A run whose *certain* cost does not fit is refused; one whose worst case does
//! not fit is started with a warning, and the memory guard ([`MemoryGuard`]) stops it
//! between two ticks, with everything committed, if memory does run low. Refusing on the
//! worst case would refuse ordinary runs: it is many times what a run uses
//! (`tests/bounds.rs` prints both for shipped scenarios).

use std::path::Path;

use crate::RunError;
use crate::scenario::{EmbedderSpec, Scenario};

/// Bytes every NPC-tick writes to the compressed logs at the least: an NPC that thinks
/// puts its request's 128-bit digest on the tape (16 bytes no compressor makes smaller),
/// one that continues its name in the tick's note, which compresses to a few bytes
/// (`tests/bounds.rs` checks the bound against real runs).
pub const DISK_PER_NPC_TICK_MIN: u64 = 4;
/// Bytes an NPC-tick writes to the logs at the most we expect (a remote brain's tape line
/// keeps a capped response): an allowance for the warning, not a measurement.
pub const DISK_PER_NPC_TICK_MAX: u64 = 4 * 1024;
/// Bytes one memory costs in the store and its share of checkpoints, plus its vector when
/// it is dense: an allowance for the warning, not a measurement.
pub const DISK_PER_MEMORY: u64 = 2 * 1024;
/// Memory one memory costs while a run holds it (metadata, the recall index): an
/// allowance for the warning and the guard's reserve, not a measurement.
pub const RAM_PER_MEMORY: u64 = 3 * 1024;
/// A dense vector (a remote embedder's, fitted to 1,536 dimensions of `f32`).
pub const DENSE_VECTOR_BYTES: u64 = 1536 * 4;
/// What the guard keeps free: the run stops when less memory than this is available.
pub const MEMORY_RESERVE_MIN: u64 = 256 * 1024 * 1024;
/// A larger reserve for this machine, in MiB (a shared machine may want more kept free).
pub const MEMORY_RESERVE_ENV: &str = "HEARSAY_MEMORY_RESERVE_MB";

/// What a run (from `from_tick` to its end) can cost.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Estimate {
    /// NPC-ticks to run.
    pub npc_ticks: u64,
    /// The most memories it can make (every NPC talks to `max_listeners` others, sees an
    /// event and reflects, every tick) plus the seeds.
    pub memories_max: u64,
    /// The most memories one tick can make.
    pub memories_per_tick_max: u64,
    /// The listeners one talk reaches at most (`[world] max_listeners`, or every other
    /// NPC when there are fewer): what the worst case assumes of every NPC's every tick.
    pub listeners: u64,
    /// Bytes it writes for certain.
    pub disk_min: u64,
    /// Bytes it could write at the most.
    pub disk_max: u64,
    /// Memory it could need at the most.
    pub ram_max: u64,
}

/// The bounds for `scenario` from `from_tick` on.
pub fn estimate(scenario: &Scenario, from_tick: u64) -> Estimate {
    let n = scenario.npcs.len() as u64;
    let ticks = scenario.ticks.saturating_sub(from_tick);
    let listeners = u64::from(scenario.max_listeners).min(n.saturating_sub(1));
    let memories_per_tick_max = n
        .saturating_mul(1 + listeners)
        .saturating_add(n)
        .saturating_add(n.saturating_mul(scenario.memory.reflect.insights_max as u64));
    let seeds: u64 = scenario.npcs.iter().map(|n| n.memories.len() as u64).sum();
    let memories_max = memories_per_tick_max
        .saturating_mul(ticks)
        .saturating_add(seeds);
    let dense = match scenario.memory.embedder {
        EmbedderSpec::Hashing => 0,
        EmbedderSpec::Openai { .. } => DENSE_VECTOR_BYTES,
    };
    let npc_ticks = n.saturating_mul(ticks);
    Estimate {
        npc_ticks,
        memories_max,
        memories_per_tick_max,
        listeners,
        disk_min: npc_ticks.saturating_mul(DISK_PER_NPC_TICK_MIN),
        disk_max: npc_ticks
            .saturating_mul(DISK_PER_NPC_TICK_MAX)
            .saturating_add(memories_max.saturating_mul(DISK_PER_MEMORY + dense)),
        ram_max: memories_max.saturating_mul(RAM_PER_MEMORY + dense),
    }
}

/// `bytes` for people: `1.2 GB`.
pub fn human(bytes: u64) -> String {
    const UNITS: [&str; 6] = ["B", "KB", "MB", "GB", "TB", "PB"];
    let mut value = bytes as f64;
    let mut unit = 0;
    while value >= 1000.0 && unit + 1 < UNITS.len() {
        value /= 1000.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{bytes} B")
    } else {
        format!("{value:.1} {}", UNITS[unit])
    }
}

/// Refuses a run whose certain cost does not fit on the disk holding `out`; warns (a
/// notice) when its worst case does not fit on disk or in memory.
pub fn check(scenario: &Scenario, out: &Path, from_tick: u64) -> Result<(), RunError> {
    let e = estimate(scenario, from_tick);
    let disk = disk_available(out);
    if let Some(free) = disk
        && e.disk_min > free
    {
        return Err(RunError::TooBig(format!(
            "this run writes at least {} ({} NPC-ticks, each {DISK_PER_NPC_TICK_MIN} bytes or \
             more of compressed logs), and the disk holding {} has {} free",
            human(e.disk_min),
            e.npc_ticks,
            out.display(),
            human(free)
        )));
    }
    if let Some(free) = disk
        && e.disk_max > free
    {
        crate::notice::say(&format!(
            "warning: at worst (every NPC talking to {} others every tick, a bound rather than an \
             estimate) this run writes {} ({} memories) and the disk has {} free; a full disk \
             stops it cleanly (`hearsay resume` finishes it once there is room)",
            e.listeners,
            human(e.disk_max),
            e.memories_max,
            human(free)
        ));
    }
    if let Some(free) = memory_available()
        && e.ram_max > free
    {
        crate::notice::say(&format!(
            "warning: at worst (every NPC talking to {} others every tick, a bound rather than an \
             estimate) this run holds {} memories (~{} of memory) and {} is available; it stops \
             cleanly, resumable, if memory does run low (lower [world] max_listeners, the NPCs \
             or the ticks to bound it)",
            e.listeners,
            e.memories_max,
            human(e.ram_max),
            human(free)
        ));
    }
    Ok(())
}

/// Free bytes (for an unprivileged user) on the file system holding `path`, or its
/// nearest existing ancestor.
pub fn disk_available(path: &Path) -> Option<u64> {
    let absolute = std::path::absolute(path).ok()?;
    let existing = absolute.ancestors().find(|p| p.exists())?;
    let stat = rustix::fs::statvfs(existing).ok()?;
    Some(stat.f_bavail.saturating_mul(stat.f_frsize))
}

/// Memory available to new allocations without swapping (`MemAvailable` of
/// `/proc/meminfo`), where the system says.
pub fn memory_available() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = text.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: u64 = line
        .trim_start_matches("MemAvailable:")
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()?;
    Some(kib.saturating_mul(1024))
}

/// Stops a run between two ticks before memory runs out: it asks whether the worst the
/// next ticks can add still fits with a reserve to spare. It reads the system's figure
/// only as often as needed: with plenty free, not again until the worst ticks could
/// have used up the margin (at most every 64 ticks).
#[derive(Clone, Copy, Debug)]
pub struct MemoryGuard {
    /// Memory that must stay available at the start of a tick.
    pub reserve: u64,
    /// The most one tick can take.
    per_tick: u64,
    /// The next tick to look at.
    next_check: u64,
}

impl MemoryGuard {
    /// The guard for `scenario`: a reserve of twice the worst tick, at least
    /// [`MEMORY_RESERVE_MIN`] and at least what [`MEMORY_RESERVE_ENV`] asks for.
    pub fn new(scenario: &Scenario) -> MemoryGuard {
        let asked = std::env::var(MEMORY_RESERVE_ENV)
            .ok()
            .and_then(|v| v.trim().parse::<u64>().ok())
            .map_or(0, |mib| mib.saturating_mul(1024 * 1024));
        let e = estimate(scenario, 0);
        let per_memory = RAM_PER_MEMORY
            + match scenario.memory.embedder {
                EmbedderSpec::Hashing => 0,
                EmbedderSpec::Openai { .. } => DENSE_VECTOR_BYTES,
            };
        let per_tick = e.memories_per_tick_max.saturating_mul(per_memory).max(1);
        MemoryGuard {
            reserve: per_tick
                .saturating_mul(2)
                .max(MEMORY_RESERVE_MIN)
                .max(asked),
            per_tick,
            next_check: 0,
        }
    }

    /// `Some(available)` when tick `tick` must not start.
    pub fn low(&mut self, tick: u64) -> Option<u64> {
        if tick < self.next_check {
            return None;
        }
        let free = memory_available()?;
        if free < self.reserve {
            return Some(free);
        }
        let margin_ticks = (free - self.reserve) / self.per_tick;
        self.next_check = tick + margin_ticks.clamp(1, 64);
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounds_grow_with_crowds_and_are_capped_by_max_listeners() {
        let text = |n: usize, listeners: u32| {
            let mut s = format!(
                "name = \"x\"\nticks = 100\n[world]\nwidth = 3\nheight = 3\nhearing_radius = 5\nmax_listeners = {listeners}\n"
            );
            for i in 0..n {
                s.push_str(&format!("[[npcs]]\nname = \"N{i}\"\nat = [1, 1]\n"));
            }
            crate::scenario::parse(Path::new("x.toml"), s.as_bytes()).expect("valid")
        };
        let small = estimate(&text(10, 100), 0);
        // 10 NPCs, each heard by the other 9: 10 × (1 + 9) + 10 witnesses + 30 insights.
        assert_eq!(small.memories_per_tick_max, 10 * 10 + 10 + 30);
        assert_eq!(small.npc_ticks, 1000);
        assert_eq!(small.disk_min, 1000 * DISK_PER_NPC_TICK_MIN);
        let crowd = estimate(&text(1000, 100), 0);
        let capped = estimate(&text(1000, 10), 0);
        assert_eq!(crowd.memories_per_tick_max, 1000 * 101 + 1000 + 3000);
        assert!(capped.memories_max * 6 < crowd.memories_max);
        assert_eq!(
            estimate(&text(10, 100), 50).npc_ticks,
            500,
            "from a tick on"
        );
        assert_eq!(human(1_234_567), "1.2 MB");
        assert_eq!(human(999), "999 B");
    }

    #[test]
    fn the_machine_is_read() {
        assert!(disk_available(Path::new("surely/not/here/yet")).is_some_and(|b| b > 0));
        if cfg!(target_os = "linux") {
            assert!(memory_available().is_some_and(|b| b > 0));
        }
    }
}
