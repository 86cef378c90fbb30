//! `hearsay sweep`: one scenario over many seeds (and `--set` edits), runs in parallel,
//! then how often each expectation was met, how long each fact took to reach half of the
//! NPCs — mean, spread and range over the seeds — and each fact's spread rate β (the SI
//! fit of [`crate::fit`]) as a mean with its 95 % interval over the seeds that have a
//! fit, as a table and `sweep.json`.
//!
//! Every run is a full run with its own directory (`<out>/seed-<N>`), so any of them can
//! be inspected, replayed or reported on afterwards. `sweep.json` and the table hold no
//! wall-clock value and no path outside the sweep: the same sweep gives the same bytes.
//! Where each run went and how long it took is `shards.json`'s.
//!
//! A sweep too big for one machine is split by a batch scheduler: `--shard I/N` runs the
//! I-th of N contiguous, equal shares of the seeds ([`Shard`]) and writes `shard.json`
//! (the same report over its own seeds, with its place in the whole). [`collect`] merges
//! the shards — from their directories, or from PostgreSQL when the shards recorded
//! themselves there (`--sweep NAME`, [`hearsay_memory::sweeps`]) — into exactly the
//! `sweep.json` an unsharded sweep writes; a missing, duplicated or foreign shard is an
//! error that names it, never a smaller table.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use serde::{Deserialize, Serialize};

use crate::RunError;
use crate::expect::Verdict;
use crate::run::{RunOptions, run};
use crate::rundir::DirKind;
use crate::scenario;

/// What `hearsay sweep` was asked to do.
#[derive(Clone, Debug, Default)]
pub struct SweepOptions {
    /// Path of the scenario TOML, run once per seed.
    pub scenario: PathBuf,
    /// The seeds, in order (all of them, also for a shard).
    pub seeds: Vec<u64>,
    /// `KEY=VALUE` edits applied to every run.
    pub sets: Vec<String>,
    /// Runs at once.
    pub jobs: usize,
    /// Where the runs go (default `runs/<name>-sweep`, or `runs/<name>-sweep-I-of-N` for
    /// a shard).
    pub out: Option<PathBuf>,
    /// Overrides the scenario's tick count.
    pub ticks: Option<u64>,
    /// Replace `out` if it holds an earlier sweep (and run a recorded shard again).
    pub force: bool,
    /// Skip the servers' preflight.
    pub no_preflight: bool,
    /// PostgreSQL URL, for `store = "postgres"`.
    pub database_url: Option<String>,
    /// Most PostgreSQL connections this process opens, shared out among the runs at once.
    pub pool_size: Option<u32>,
    /// Run only this share of the seeds.
    pub shard: Option<Shard>,
    /// Record the sweep in PostgreSQL under this name (`store = "postgres"` only).
    pub record_as: Option<String>,
    /// How to show progress (runs done of all).
    pub progress: crate::terminal::Progress,
}

/// The sweep file in the output directory.
pub use crate::rundir::{SHARD_FILE, SHARDS_FILE, SWEEP_FILE};

/// `A..B` (both included), `A..=B`, or `A,B,C`.
pub fn parse_seeds(spec: &str) -> Result<Vec<u64>, RunError> {
    let bad = |why: &str| {
        RunError::BadOption(format!(
            "--seeds {spec:?}: {why}; write a range like 1..20 (both ends included) or a list like 3,7,11"
        ))
    };
    let num = |s: &str| s.trim().parse::<u64>().map_err(|_| bad("not a number"));
    let seeds: Vec<u64> = if let Some((a, b)) = spec.split_once("..") {
        let (a, b) = (num(a)?, num(b.strip_prefix('=').unwrap_or(b))?);
        if b < a {
            return Err(bad("the range is empty"));
        }
        if b - a >= 100_000 {
            return Err(bad("more than 100000 seeds"));
        }
        (a..=b).collect()
    } else {
        spec.split(',').map(num).collect::<Result<_, _>>()?
    };
    let mut unique = seeds.clone();
    unique.sort_unstable();
    unique.dedup();
    if unique.len() != seeds.len() {
        return Err(bad("a seed is listed twice"));
    }
    if seeds.is_empty() {
        return Err(bad("no seeds"));
    }
    Ok(seeds)
}

/// One of N shares of a sweep's seeds: the I-th (1-based) of N contiguous blocks whose
/// sizes differ by at most one.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Shard {
    /// 1..=count.
    pub index: u32,
    /// How many shards the seeds are split into.
    pub count: u32,
}

/// The most shards a sweep may be split into.
pub const SHARDS_MAX: u32 = 10_000;

impl Shard {
    /// `I/N`, or `auto` (`auto/N`) for the scheduler's own index: Kubernetes' Indexed Job
    /// (`JOB_COMPLETION_INDEX`, 0-based; give N) or a Slurm job array
    /// (`SLURM_ARRAY_TASK_ID` counted from `SLURM_ARRAY_TASK_MIN`, N from
    /// `SLURM_ARRAY_TASK_COUNT` unless given). `env` reads the environment.
    pub fn parse(spec: &str, env: &dyn Fn(&str) -> Option<String>) -> Result<Shard, RunError> {
        let bad = |why: String| {
            RunError::BadOption(format!(
                "--shard {spec:?}: {why}; write I/N (the I-th of N shares, 1 <= I <= N) or auto"
            ))
        };
        let num = |what: &str, s: &str| {
            s.trim()
                .parse::<u32>()
                .map_err(|_| bad(format!("{what} {s:?} is not a number")))
        };
        let (first, count) = match spec.split_once('/') {
            Some((a, n)) => (a.trim(), Some(num("N", n)?)),
            None => (spec.trim(), None),
        };
        let shard = if first == "auto" {
            let var = |name: &str| env(name).filter(|v| !v.trim().is_empty());
            if let Some(index) = var("JOB_COMPLETION_INDEX") {
                let index = num("JOB_COMPLETION_INDEX", &index)?;
                let count = count.ok_or_else(|| {
                    bad("a Kubernetes Indexed Job does not say how many shards there are: give auto/N with N the Job's completions".into())
                })?;
                Shard {
                    index: index.saturating_add(1),
                    count,
                }
            } else if let Some(id) = var("SLURM_ARRAY_TASK_ID") {
                let id = num("SLURM_ARRAY_TASK_ID", &id)?;
                let min = var("SLURM_ARRAY_TASK_MIN")
                    .map(|m| num("SLURM_ARRAY_TASK_MIN", &m))
                    .transpose()?
                    .unwrap_or(0);
                let slurm_count = var("SLURM_ARRAY_TASK_COUNT")
                    .map(|c| num("SLURM_ARRAY_TASK_COUNT", &c))
                    .transpose()?;
                let count = match (count, slurm_count) {
                    (Some(n), Some(s)) if n != s => {
                        return Err(bad(format!("N is {n} but SLURM_ARRAY_TASK_COUNT is {s}")));
                    }
                    (Some(n), _) | (None, Some(n)) => n,
                    (None, None) => {
                        return Err(bad("SLURM_ARRAY_TASK_COUNT is not set: give auto/N".into()));
                    }
                };
                if id < min {
                    return Err(bad(format!(
                        "SLURM_ARRAY_TASK_ID {id} is below SLURM_ARRAY_TASK_MIN {min}"
                    )));
                }
                Shard {
                    index: id - min + 1,
                    count,
                }
            } else {
                return Err(bad(
                    "neither JOB_COMPLETION_INDEX (Kubernetes) nor SLURM_ARRAY_TASK_ID (Slurm) is set"
                        .into(),
                ));
            }
        } else {
            Shard {
                index: num("I", first)?,
                count: count.ok_or_else(|| bad("no N".into()))?,
            }
        };
        if shard.count == 0 || shard.count > SHARDS_MAX {
            return Err(bad(format!("N must be 1..={SHARDS_MAX}")));
        }
        if shard.index == 0 || shard.index > shard.count {
            return Err(bad(format!(
                "shard {} of {} does not exist (1..={})",
                shard.index, shard.count, shard.count
            )));
        }
        Ok(shard)
    }

    /// This shard's seeds of `all`.
    pub fn seeds<'a>(&self, all: &'a [u64]) -> &'a [u64] {
        let (i, n, len) = (self.index as usize, self.count as usize, all.len());
        &all[(i - 1) * len / n..i * len / n]
    }

    fn label(&self) -> String {
        format!("{}/{}", self.index, self.count)
    }
}

/// One fact in one run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunFact {
    /// The tracked fact's name, as the scenario gives it.
    pub name: String,
    /// First tick half of the NPCs knew it.
    pub half_tick: Option<u64>,
    /// Share of the NPCs that knew it at the end.
    pub share: f64,
    /// The SI fit's spread rate β, ticks⁻¹; `None` when the run's curve has no fit.
    pub beta: Option<f64>,
}

/// One seed's run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SweepRun {
    /// The root seed this run used in place of the scenario's.
    pub seed: u64,
    /// The run's directory within the sweep's (or its shard's) directory: `seed-<seed>`,
    /// even when it failed.
    pub run_dir: String,
    /// Each tracked fact's outcome, in scenario order; empty when the run failed.
    pub facts: Vec<RunFact>,
    /// Each expectation's verdict, in scenario order.
    pub expectations: Vec<Verdict>,
    /// Why the run failed, if it did.
    pub error: Option<String>,
}

/// An expectation over the seeds.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ExpectStat {
    /// The expectation in words, e.g. `at least 50% of the NPCs know "fire" by the end`.
    pub expect: String,
    /// Seeds where it was met.
    pub met: usize,
    /// Seeds where it was not.
    pub unmet: usize,
    /// Seeds where it could not be checked.
    pub unchecked: usize,
    /// `met / runs`.
    pub share_met: f64,
}

/// A fact's time to half of the NPCs over the seeds that reached it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FactStat {
    /// The tracked fact's name, as the scenario gives it.
    pub name: String,
    /// Seeds where half of the NPCs came to know it.
    pub reached: usize,
    /// Mean half tick over the seeds that reached it; `None` when none did.
    pub mean: Option<f64>,
    /// Sample standard deviation.
    pub sd: Option<f64>,
    /// The earliest half tick among those seeds; `None` when none reached it.
    pub min: Option<u64>,
    /// The median half tick (mean of the middle two for an even count).
    pub median: Option<f64>,
    /// The latest half tick among those seeds; `None` when none reached it.
    pub max: Option<u64>,
    /// The spread rate β over the seeds whose curve has an SI fit.
    pub beta: BetaStat,
}

/// A fact's spread rate β over the seeds.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BetaStat {
    /// Seeds whose curve has a fit (the others are left out of the figures below).
    pub fitted: usize,
    /// Seeds whose curve has no fit (see [`crate::fit::fit_si`]).
    pub unfitted: usize,
    /// Mean β over the fitted seeds; `None` when none has a fit.
    pub mean: Option<f64>,
    /// The 95 % confidence interval of that mean (Student's t, `fitted − 1` degrees of
    /// freedom); `None` with fewer than two fitted seeds.
    pub lo: Option<f64>,
    /// Upper end of that interval.
    pub hi: Option<f64>,
}

impl BetaStat {
    /// β over the runs: `betas` has one entry per run that finished, `None` for no fit.
    pub fn of(betas: &[Option<f64>]) -> Self {
        let fitted: Vec<f64> = betas.iter().flatten().copied().collect();
        let interval = crate::fit::mean_interval(&fitted);
        Self {
            fitted: fitted.len(),
            unfitted: betas.len() - fitted.len(),
            mean: interval.map(|i| i.mean).or_else(|| fitted.first().copied()),
            lo: interval.map(|i| i.lo),
            hi: interval.map(|i| i.hi),
        }
    }
}

/// A shard's place in its sweep, in its `shard.json`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ShardOf {
    /// Which share of the seeds.
    #[serde(flatten)]
    pub shard: Shard,
    /// Its seeds (the report's `seeds` are the whole sweep's).
    pub seeds: Vec<u64>,
}

/// `sweep.json` (and a shard's `shard.json`): nothing in it depends on the clock, the
/// machine or where the sweep was written.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SweepReport {
    /// The scenario's `name` (not its file path).
    pub scenario: String,
    /// BLAKE3 of the scenario as every run ran it (`--set` and `--ticks` applied): what
    /// makes two shards parts of one sweep.
    pub digest: String,
    /// The seeds, in order (every seed of the sweep, also in a shard's report).
    pub seeds: Vec<u64>,
    /// The edits applied to every run.
    pub sets: Vec<String>,
    /// Ticks per run.
    pub ticks: u64,
    /// How many NPCs each run has.
    pub npcs: usize,
    /// In a shard's report, which share it ran; absent from a whole sweep's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shard: Option<ShardOf>,
    /// Each expectation over the runs of this report.
    pub expectations: Vec<ExpectStat>,
    /// Each fact's time to half of the NPCs over the runs of this report.
    pub facts: Vec<FactStat>,
    /// Every run, in seed order.
    pub runs: Vec<SweepRun>,
}

impl SweepReport {
    /// Runs that failed.
    pub fn failures(&self) -> usize {
        self.runs.iter().filter(|r| r.error.is_some()).count()
    }
}

/// One run's wall-clock side, in `shards.json`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunTiming {
    /// Its seed.
    pub seed: u64,
    /// Where it was written (absolute, on the shard's machine).
    pub dir: String,
    /// Its wall time, ms.
    pub wall_ms: f64,
}

/// One shard's (or an unsharded sweep's) wall-clock side: where it ran, how long it took.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ShardTiming {
    /// Which share it ran (1/1 for an unsharded sweep).
    #[serde(flatten)]
    pub shard: Shard,
    /// Where its runs are: its directory (absolute, on its machine).
    pub dir: String,
    /// The host it ran on.
    pub host: String,
    /// Runs at once.
    pub jobs: usize,
    /// The whole shard, ms.
    pub wall_ms: f64,
    /// Its runs finished per minute.
    pub runs_per_minute: f64,
    /// Each run, in seed order.
    pub runs: Vec<RunTiming>,
}

/// `shards.json`: the wall-clock side of `sweep.json`, one entry per shard.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ShardsFile {
    /// In shard order.
    pub shards: Vec<ShardTiming>,
}

/// What a sweep (or a shard of one) did.
#[derive(Clone, Debug)]
pub struct SweepOutcome {
    /// `sweep.json`, or for a shard `shard.json`.
    pub report: SweepReport,
    /// Its wall-clock side.
    pub timing: ShardTiming,
    /// Its directory.
    pub out: PathBuf,
}

fn fact_stat(name: &str, halves: &[u64], betas: &[Option<f64>]) -> FactStat {
    let mut sorted = halves.to_vec();
    sorted.sort_unstable();
    let n = sorted.len();
    let mean = (n > 0).then(|| sorted.iter().sum::<u64>() as f64 / n as f64);
    let sd = mean.filter(|_| n > 1).map(|m| {
        (sorted.iter().map(|&t| (t as f64 - m).powi(2)).sum::<f64>() / (n - 1) as f64).sqrt()
    });
    let median = (n > 0).then(|| {
        if n % 2 == 1 {
            sorted[n / 2] as f64
        } else {
            (sorted[n / 2 - 1] + sorted[n / 2]) as f64 / 2.0
        }
    });
    FactStat {
        name: name.to_owned(),
        reached: n,
        mean,
        sd,
        min: sorted.first().copied(),
        median,
        max: sorted.last().copied(),
        beta: BetaStat::of(betas),
    }
}

/// What a report is about, before any run: everything of it but the runs and what is
/// computed from them.
struct Plan {
    scenario: String,
    digest: String,
    seeds: Vec<u64>,
    sets: Vec<String>,
    ticks: u64,
    npcs: usize,
    expects: Vec<String>,
    facts: Vec<String>,
}

impl Plan {
    fn of(report: &SweepReport) -> Plan {
        Plan {
            scenario: report.scenario.clone(),
            digest: report.digest.clone(),
            seeds: report.seeds.clone(),
            sets: report.sets.clone(),
            ticks: report.ticks,
            npcs: report.npcs,
            expects: report
                .expectations
                .iter()
                .map(|e| e.expect.clone())
                .collect(),
            facts: report.facts.iter().map(|f| f.name.clone()).collect(),
        }
    }

    /// The report over `runs` (in seed order): the one place the figures over the seeds
    /// are computed, for a sweep, a shard and a collected sweep alike.
    fn report(self, shard: Option<ShardOf>, runs: Vec<SweepRun>) -> SweepReport {
        let ok: Vec<&SweepRun> = runs.iter().filter(|r| r.error.is_none()).collect();
        let expectations = self
            .expects
            .iter()
            .enumerate()
            .map(|(i, e)| {
                let count = |v: Verdict| {
                    ok.iter()
                        .filter(|r| r.expectations.get(i) == Some(&v))
                        .count()
                };
                let met = count(Verdict::Met);
                ExpectStat {
                    expect: e.clone(),
                    met,
                    unmet: count(Verdict::Unmet),
                    unchecked: count(Verdict::Unchecked),
                    share_met: met as f64 / runs.len().max(1) as f64,
                }
            })
            .collect();
        let facts = self
            .facts
            .iter()
            .enumerate()
            .map(|(i, name)| {
                let halves: Vec<u64> = ok
                    .iter()
                    .filter_map(|r| r.facts.get(i).and_then(|f| f.half_tick))
                    .collect();
                let betas: Vec<Option<f64>> = ok
                    .iter()
                    .map(|r| r.facts.get(i).and_then(|f| f.beta))
                    .collect();
                fact_stat(name, &halves, &betas)
            })
            .collect();
        SweepReport {
            scenario: self.scenario,
            digest: self.digest,
            seeds: self.seeds,
            sets: self.sets,
            ticks: self.ticks,
            npcs: self.npcs,
            shard,
            expectations,
            facts,
            runs,
        }
    }
}

/// The name of the machine, for `shards.json` and the database's shard records.
fn host_name() -> String {
    let name = rustix::system::uname()
        .nodename()
        .to_string_lossy()
        .into_owned();
    let name: String = name.chars().filter(|c| !c.is_control()).take(255).collect();
    if name.is_empty() {
        "unknown".to_owned()
    } else {
        name
    }
}

/// `path` made absolute (without resolving links), for `shards.json`: a collected sweep
/// is read from elsewhere.
fn absolute(path: &Path) -> String {
    std::path::absolute(path)
        .unwrap_or_else(|_| path.to_owned())
        .display()
        .to_string()
}

fn encode<T: Serialize>(value: &T, path: &Path) -> Result<String, RunError> {
    Ok(
        serde_json::to_string_pretty(value).map_err(|e| RunError::RunDir {
            path: path.to_owned(),
            problem: format!("cannot encode it: {e}"),
        })? + "\n",
    )
}

/// Runs the sweep, or with `opts.shard` its share of the seeds.
pub fn sweep(opts: &SweepOptions) -> Result<SweepOutcome, RunError> {
    let started = Instant::now();
    // The scenario and the edits are checked once, before anything runs.
    if let Some(ticks) = opts.ticks
        && (ticks == 0 || ticks > scenario::TICKS_MAX)
    {
        return Err(RunError::BadOption(format!(
            "--ticks {ticks}: must be 1..={}",
            scenario::TICKS_MAX
        )));
    }
    let (checked, bytes) = crate::edit::load_edited(
        &opts.scenario,
        &crate::edit::overrides(&opts.sets, None, opts.ticks),
    )?;
    if opts.seeds.is_empty() {
        return Err(RunError::BadOption("--seeds: no seeds".into()));
    }
    let shard = opts.shard.unwrap_or(Shard { index: 1, count: 1 });
    if shard.count as usize > opts.seeds.len() {
        return Err(RunError::BadOption(format!(
            "--shard {}: {} seeds cannot be split into {} shards; use at most {} shards",
            shard.label(),
            opts.seeds.len(),
            shard.count,
            opts.seeds.len()
        )));
    }
    let seeds = shard.seeds(&opts.seeds).to_vec();
    let database_url = crate::run::database_url_for(&checked, &opts.database_url)?;
    if opts.record_as.is_some() && database_url.is_none() {
        return Err(RunError::BadOption(
            "--sweep NAME records the sweep in PostgreSQL, and this scenario's store is not \
             postgres: set store = \"postgres\" under [memory] (or --set memory.store=\"postgres\")"
                .into(),
        ));
    }
    let jobs = opts.jobs.clamp(1, seeds.len());
    let pool_share = match opts.pool_size {
        Some(pool) => Some(share_pool(pool, jobs)?),
        None => None,
    };
    // The servers' preflight once for every run of the sweep.
    if !opts.no_preflight {
        let report = crate::run::check(&RunOptions {
            scenario: opts.scenario.clone(),
            ticks: opts.ticks,
            sets: opts.sets.clone(),
            ..RunOptions::default()
        })?;
        crate::check::announce(&report);
    }
    let out = opts.out.clone().unwrap_or_else(|| {
        let dir = crate::rundir::default_sweep_dir(&checked.name);
        match opts.shard {
            None => dir,
            Some(s) => {
                let mut name = dir.into_os_string();
                name.push(format!("-{}-of-{}", s.index, s.count));
                PathBuf::from(name)
            }
        }
    });
    let target = crate::rundir::check_target(
        &out,
        DirKind::Sweep,
        opts.force,
        &crate::rundir::Protected {
            inputs: vec![opts.scenario.clone()],
            source: None,
        },
    )?;
    let digest = blake3::hash(&bytes).to_hex().to_string();
    let host = host_name();
    // Recorded in the database before the directory is claimed: a name of another
    // sweep, or a shard run before or running now, refuses the shard with nothing made.
    let record = match (&opts.record_as, &database_url) {
        (Some(name), Some(url)) => Some(Record::start(
            url,
            name,
            hearsay_memory::sweeps::SweepIdentity {
                scenario: checked.name.clone(),
                digest: digest.clone(),
                seeds: opts.seeds.clone(),
                shards: shard.count,
            },
            shard,
            &host,
            opts.force,
        )?),
        _ => None,
    };
    let lock = target.claim()?;

    let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
    let threads = (cores / jobs).max(1);
    let bar = crate::terminal::progress_bar(
        opts.progress,
        seeds.len() as u64,
        "{prefix} run {pos}/{len} [{bar:32}] {elapsed_precise} eta {eta}",
    );
    bar.set_prefix(match opts.shard {
        None => format!("sweep {}", checked.name),
        Some(s) => format!("sweep {} shard {}", checked.name, s.label()),
    });
    crate::terminal::announce_dir(opts.progress, &out);
    let next = AtomicUsize::new(0);
    let results: Mutex<Vec<Option<(SweepRun, RunTiming)>>> = Mutex::new(vec![None; seeds.len()]);
    std::thread::scope(|scope| {
        for _ in 0..jobs {
            scope.spawn(|| {
                loop {
                    let i = next.fetch_add(1, Ordering::SeqCst);
                    let Some(&seed) = seeds.get(i) else {
                        break;
                    };
                    let name = format!("seed-{seed}");
                    let dir = out.join(&name);
                    let run_started = Instant::now();
                    let outcome = run(&RunOptions {
                        scenario: opts.scenario.clone(),
                        seed: Some(seed),
                        ticks: opts.ticks,
                        out: Some(dir.clone()),
                        force: false,
                        progress: crate::terminal::Progress::Hidden,
                        database_url: opts.database_url.clone(),
                        pool_size: pool_share,
                        threads: Some(threads),
                        sets: opts.sets.clone(),
                        // Checked once for the sweep, above.
                        no_preflight: true,
                    });
                    let wall_ms = run_started.elapsed().as_secs_f64() * 1000.0;
                    let (facts, expectations, error) = match outcome {
                        Ok(o) => (
                            o.summary
                                .facts
                                .iter()
                                .map(|f| RunFact {
                                    name: f.name.clone(),
                                    half_tick: f.half_tick,
                                    share: f.share,
                                    beta: f.fit.map(|fit| fit.beta),
                                })
                                .collect(),
                            o.summary.expectations.iter().map(|j| j.verdict).collect(),
                            None,
                        ),
                        Err(e) => (Vec::new(), Vec::new(), Some(e.to_string())),
                    };
                    let record = SweepRun {
                        seed,
                        run_dir: name,
                        facts,
                        expectations,
                        error,
                    };
                    let timing = RunTiming {
                        seed,
                        dir: absolute(&dir),
                        wall_ms,
                    };
                    if let Ok(mut slots) = results.lock() {
                        slots[i] = Some((record, timing));
                    }
                    bar.inc(1);
                }
            });
        }
    });
    crate::terminal::finish_progress(&bar, opts.progress);
    let (runs, run_timings): (Vec<SweepRun>, Vec<RunTiming>) = results
        .into_inner()
        .unwrap_or_else(|e| e.into_inner())
        .into_iter()
        .flatten()
        .unzip();

    let plan = Plan {
        scenario: checked.name.clone(),
        digest,
        seeds: opts.seeds.clone(),
        sets: opts.sets.clone(),
        ticks: checked.ticks,
        npcs: checked.npcs.len(),
        expects: checked.expectations.iter().map(|e| e.describe()).collect(),
        facts: checked.facts.iter().map(|f| f.name.clone()).collect(),
    };
    let report = plan.report(
        opts.shard.map(|shard| ShardOf {
            shard,
            seeds: seeds.clone(),
        }),
        runs,
    );
    let wall_ms = started.elapsed().as_secs_f64() * 1000.0;
    let timing = ShardTiming {
        shard,
        dir: absolute(&out),
        host,
        jobs,
        wall_ms,
        runs_per_minute: seeds.len() as f64 * 60_000.0 / wall_ms.max(1e-9),
        runs: run_timings,
    };
    let file = if opts.shard.is_some() {
        SHARD_FILE
    } else {
        SWEEP_FILE
    };
    let report_json = encode(&report, &out.join(file))?;
    let timing_json = encode(
        &ShardsFile {
            shards: vec![timing.clone()],
        },
        &out.join(SHARDS_FILE),
    )?;
    crate::rundir::write_file(&out.join(SHARDS_FILE), timing_json.as_bytes())?;
    crate::rundir::write_file(&out.join(file), report_json.as_bytes())?;
    if let Some(record) = record {
        record.finish(&report_json, &encode(&timing, &out.join(SHARDS_FILE))?)?;
    }
    drop(lock);
    Ok(SweepOutcome {
        report,
        timing,
        out,
    })
}

/// The most connections each of `jobs` runs at once may open out of `pool` for the
/// process: a run needs at least [`RUN_CONNECTIONS_MIN`].
fn share_pool(pool: u32, jobs: usize) -> Result<u32, RunError> {
    let share = pool / jobs.max(1) as u32;
    if share < crate::run::RUN_CONNECTIONS_MIN {
        return Err(RunError::BadOption(format!(
            "--pool-size {pool}: {jobs} runs at once need at least {} connections each ({} in all); \
             raise --pool-size or lower --jobs",
            crate::run::RUN_CONNECTIONS_MIN,
            crate::run::RUN_CONNECTIONS_MIN as usize * jobs
        )));
    }
    Ok(share)
}

/// A shard recorded in PostgreSQL while it runs: its own runtime and connection.
struct Record {
    runtime: tokio::runtime::Runtime,
    hold: hearsay_memory::sweeps::ShardHold,
}

impl Record {
    fn start(
        url: &str,
        name: &str,
        identity: hearsay_memory::sweeps::SweepIdentity,
        shard: Shard,
        host: &str,
        again: bool,
    ) -> Result<Record, RunError> {
        use hearsay_memory::sweeps::ShardStart;
        check_sweep_name(name)?;
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| RunError::BadOption(format!("cannot start the async runtime: {e}")))?;
        let started = runtime.block_on(async {
            let pool = hearsay_memory::postgres::connect(url, &registry_options()).await?;
            hearsay_memory::sweeps::start_shard(&pool, name, &identity, shard.index, host, again)
                .await
        })?;
        let refuse = |why: String| Err(RunError::BadOption(format!("--sweep {name:?}: {why}")));
        match started {
            ShardStart::Started(hold) => Ok(Record { runtime, hold }),
            ShardStart::Foreign(theirs) => refuse(format!(
                "the database's sweep of that name is another sweep ({}: scenario {:?}, digest {}, {} seeds, {} shards); \
                 this one is scenario {:?}, digest {}, {} seeds, {} shards: pick another --sweep name",
                redacted(url),
                theirs.scenario,
                short(&theirs.digest),
                theirs.seeds.len(),
                theirs.shards,
                identity.scenario,
                short(&identity.digest),
                identity.seeds.len(),
                identity.shards
            )),
            ShardStart::Finished(at) => refuse(format!(
                "shard {} already finished (at {at}); pass --force to run it again",
                shard.label()
            )),
            ShardStart::Busy { host, started_at } => refuse(format!(
                "shard {} is being run by another process now (on {host}, since {started_at})",
                shard.label()
            )),
        }
    }

    fn finish(self, report: &str, timing: &str) -> Result<(), RunError> {
        let Record { runtime, hold } = self;
        Ok(runtime.block_on(hold.finish(report, timing))?)
    }
}

fn registry_options() -> hearsay_memory::PgOptions {
    hearsay_memory::PgOptions {
        max_connections: 1,
        ..hearsay_memory::PgOptions::default()
    }
}

fn redacted(url: &str) -> String {
    hearsay_memory::postgres::redact_url(url)
}

fn short(digest: &str) -> &str {
    digest.get(..12).unwrap_or(digest)
}

/// A sweep's name in the database: 1 to 200 printable characters.
fn check_sweep_name(name: &str) -> Result<(), RunError> {
    if name.is_empty() || name.chars().count() > 200 || name.chars().any(char::is_control) {
        return Err(RunError::BadOption(format!(
            "--sweep {name:?}: a sweep's name is 1 to 200 printable characters"
        )));
    }
    Ok(())
}

/// Where `hearsay sweep --collect` finds the shards.
#[derive(Clone, Debug)]
pub enum Shards {
    /// The shards' directories.
    Dirs(Vec<PathBuf>),
    /// The shards recorded in PostgreSQL under a sweep's name.
    Database {
        /// The server.
        url: String,
        /// The sweep's name (`--sweep`).
        name: String,
    },
}

/// What `hearsay sweep --collect` was asked to do.
#[derive(Clone, Debug)]
pub struct CollectOptions {
    /// Where the shards are.
    pub shards: Shards,
    /// Where `sweep.json` and `shards.json` go (default: `runs/<name>-sweep`).
    pub out: Option<PathBuf>,
    /// Replace `out` if it holds an earlier sweep.
    pub force: bool,
}

/// One shard as found: where, its report, its timing.
struct Found {
    source: String,
    report: SweepReport,
    timing: Option<ShardTiming>,
}

/// Merges the shards of one sweep into the `sweep.json` an unsharded sweep of the same
/// seeds writes (byte for byte), and writes it with `shards.json` (where each shard's
/// runs are) to `opts.out`.
pub fn collect(opts: &CollectOptions) -> Result<SweepOutcome, RunError> {
    let started = Instant::now();
    let (found, expected) = match &opts.shards {
        Shards::Dirs(dirs) => (read_shard_dirs(dirs)?, None),
        Shards::Database { url, name } => {
            let (found, count) = read_shard_records(url, name)?;
            (found, Some(count))
        }
    };
    let merged = merge(found, expected)?;
    let out = opts
        .out
        .clone()
        .unwrap_or_else(|| crate::rundir::default_sweep_dir(&merged.report.scenario));
    // The shards are inputs: `--out` may be none of them, nor above one.
    let inputs = match &opts.shards {
        Shards::Dirs(dirs) => dirs.clone(),
        Shards::Database { .. } => Vec::new(),
    };
    let lock = crate::rundir::check_target(
        &out,
        DirKind::Sweep,
        opts.force,
        &crate::rundir::Protected {
            inputs,
            source: None,
        },
    )?
    .claim()?;
    let report_json = encode(&merged.report, &out.join(SWEEP_FILE))?;
    let shards_json = encode(&merged.shards, &out.join(SHARDS_FILE))?;
    crate::rundir::write_file(&out.join(SHARDS_FILE), shards_json.as_bytes())?;
    crate::rundir::write_file(&out.join(SWEEP_FILE), report_json.as_bytes())?;
    drop(lock);
    let wall_ms = started.elapsed().as_secs_f64() * 1000.0;
    let jobs = merged.shards.shards.iter().map(|s| s.jobs).sum();
    let slowest = merged
        .shards
        .shards
        .iter()
        .map(|s| s.wall_ms)
        .fold(0.0, f64::max);
    Ok(SweepOutcome {
        timing: ShardTiming {
            shard: Shard { index: 1, count: 1 },
            dir: out.display().to_string(),
            host: host_name(),
            jobs,
            // The slowest shard's time is the sweep's: the shards ran side by side.
            wall_ms: slowest.max(wall_ms),
            runs_per_minute: merged.report.runs.len() as f64 * 60_000.0 / slowest.max(1e-9),
            runs: Vec::new(),
        },
        report: merged.report,
        out,
    })
}

/// The most bytes of a `shard.json` or `shards.json` read.
const SHARD_FILE_MAX: u64 = 64 << 20;

fn read_bounded(path: &Path) -> Result<Option<String>, RunError> {
    use std::io::Read as _;
    let file = match std::fs::File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(source) => {
            return Err(RunError::Io {
                path: path.to_owned(),
                source,
            });
        }
    };
    let mut text = String::new();
    file.take(SHARD_FILE_MAX + 1)
        .read_to_string(&mut text)
        .map_err(|source| RunError::Io {
            path: path.to_owned(),
            source,
        })?;
    if text.len() as u64 > SHARD_FILE_MAX {
        return Err(RunError::RunDir {
            path: path.to_owned(),
            problem: format!(
                "longer than {SHARD_FILE_MAX} bytes; hearsay never writes one so long"
            ),
        });
    }
    Ok(Some(text))
}

fn read_shard_dirs(dirs: &[PathBuf]) -> Result<Vec<Found>, RunError> {
    if dirs.is_empty() {
        return Err(RunError::BadOption(
            "--collect: give the shards' directories (or --database-url URL --sweep NAME)".into(),
        ));
    }
    if dirs.len() > SHARDS_MAX as usize {
        return Err(RunError::BadOption(format!(
            "--collect: more than {SHARDS_MAX} directories"
        )));
    }
    let mut found = Vec::with_capacity(dirs.len());
    for dir in dirs {
        let path = dir.join(SHARD_FILE);
        let Some(text) = read_bounded(&path)? else {
            let problem = if dir.join(SWEEP_FILE).is_file() {
                "it is a whole sweep (sweep.json), not a shard of one (shard.json)".to_owned()
            } else if dir.is_dir() {
                "no shard.json: the shard has not finished (or this is not a shard's directory); run it (again) first".to_owned()
            } else {
                "no such directory".to_owned()
            };
            return Err(RunError::RunDir {
                path: dir.clone(),
                problem,
            });
        };
        let report: SweepReport = serde_json::from_str(&text).map_err(|e| RunError::RunDir {
            path: path.clone(),
            problem: format!("not a shard report hearsay wrote: {e}"),
        })?;
        let timing = read_bounded(&dir.join(SHARDS_FILE))?
            .and_then(|t| serde_json::from_str::<ShardsFile>(&t).ok())
            .and_then(|f| f.shards.into_iter().next());
        found.push(Found {
            source: dir.display().to_string(),
            report,
            timing,
        });
    }
    Ok(found)
}

fn read_shard_records(url: &str, name: &str) -> Result<(Vec<Found>, u32), RunError> {
    check_sweep_name(name)?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| RunError::BadOption(format!("cannot start the async runtime: {e}")))?;
    let records = runtime.block_on(async {
        let pool = hearsay_memory::postgres::connect(url, &registry_options()).await?;
        let records = hearsay_memory::sweeps::shard_records(&pool, name).await;
        pool.close().await;
        records
    })?;
    let Some((identity, records)) = records else {
        return Err(RunError::BadOption(format!(
            "--sweep {name:?}: {} holds no sweep of that name",
            redacted(url)
        )));
    };
    let mut found = Vec::new();
    let mut unfinished = Vec::new();
    for r in records {
        let source = format!(
            "shard {}/{} in {} (from {})",
            r.shard,
            identity.shards,
            redacted(url),
            r.host
        );
        let Some(text) = r.report else {
            unfinished.push(format!(
                "{}/{} (started on {} at {}, not finished)",
                r.shard, identity.shards, r.host, r.started_at
            ));
            continue;
        };
        let report: SweepReport = serde_json::from_str(&text).map_err(|e| {
            RunError::BadOption(format!(
                "--sweep {name:?}: {source}: not a shard report hearsay wrote: {e}"
            ))
        })?;
        let timing = r.timing.and_then(|t| serde_json::from_str(&t).ok());
        found.push(Found {
            source,
            report,
            timing,
        });
    }
    if !unfinished.is_empty() {
        return Err(RunError::BadOption(format!(
            "--sweep {name:?}: shard {} of {}; run it again (a shard that died leaves a resumable run per seed, and running the shard again starts its seeds afresh)",
            unfinished.join(", shard "),
            identity.shards
        )));
    }
    Ok((found, identity.shards))
}

/// A collected sweep: `sweep.json` and `shards.json`.
struct Merged {
    report: SweepReport,
    shards: ShardsFile,
}

/// The shards' reports, checked to be every shard of one sweep, once each, merged.
fn merge(mut found: Vec<Found>, expected: Option<u32>) -> Result<Merged, RunError> {
    // An unsharded sweep recorded in PostgreSQL (`--sweep NAME` without `--shard`) is
    // its own one shard.
    if expected == Some(1) {
        for f in &mut found {
            if f.report.shard.is_none() {
                f.report.shard = Some(ShardOf {
                    shard: Shard { index: 1, count: 1 },
                    seeds: f.report.seeds.clone(),
                });
            }
        }
    }
    let Some(first) = found.first() else {
        return Err(RunError::BadOption("--collect: no shards found".into()));
    };
    let Some(first_shard) = first.report.shard.clone() else {
        return Err(RunError::BadOption(format!(
            "--collect: {} is a whole sweep, not a shard of one",
            first.source
        )));
    };
    let count = expected.unwrap_or(first_shard.shard.count);
    let whole = (
        first.report.digest.clone(),
        first.report.seeds.clone(),
        first.report.sets.clone(),
        first.report.ticks,
        count,
    );
    let describe = |f: &Found| {
        format!(
            "{} (scenario {:?}, digest {}, {} seeds, {} shards)",
            f.source,
            f.report.scenario,
            short(&f.report.digest),
            f.report.seeds.len(),
            f.report.shard.as_ref().map_or(1, |s| s.shard.count)
        )
    };
    let mut problems = Vec::new();
    let mut by_index: std::collections::BTreeMap<u32, usize> = std::collections::BTreeMap::new();
    for (i, f) in found.iter().enumerate() {
        let Some(of) = &f.report.shard else {
            problems.push(format!("{} is a whole sweep, not a shard of one", f.source));
            continue;
        };
        let this = (
            f.report.digest.clone(),
            f.report.seeds.clone(),
            f.report.sets.clone(),
            f.report.ticks,
            of.shard.count,
        );
        if this != whole {
            problems.push(format!(
                "foreign shard: {} is not of the sweep of {}",
                describe(f),
                describe(&found[0])
            ));
            continue;
        }
        let seeds: Vec<u64> = f.report.runs.iter().map(|r| r.seed).collect();
        if of.seeds != of.shard.seeds(&whole.1) || seeds != of.seeds {
            problems.push(format!(
                "{}: shard {} does not hold its share of the seeds (it should be {}); it was not written by this version of hearsay or was edited",
                f.source,
                of.shard.label(),
                seeds_label(of.shard.seeds(&whole.1))
            ));
            continue;
        }
        if let Some(&j) = by_index.get(&of.shard.index) {
            problems.push(format!(
                "duplicated shard {}: {} and {}",
                of.shard.label(),
                found[j].source,
                f.source
            ));
            continue;
        }
        by_index.insert(of.shard.index, i);
    }
    for index in 1..=count {
        if !by_index.contains_key(&index) {
            let shard = Shard { index, count };
            problems.push(format!(
                "missing shard {} (seeds {})",
                shard.label(),
                seeds_label(shard.seeds(&whole.1))
            ));
        }
    }
    if !problems.is_empty() {
        return Err(RunError::BadOption(format!(
            "--collect: these shards do not make one whole sweep:\n  - {}",
            problems.join("\n  - ")
        )));
    }
    let plan = Plan::of(&found[0].report);
    let mut found: Vec<Option<Found>> = found.into_iter().map(Some).collect();
    let mut runs = Vec::with_capacity(whole.1.len());
    let mut shards = Vec::with_capacity(count as usize);
    for i in by_index.into_values() {
        let Some(f) = found[i].take() else { continue };
        runs.extend(f.report.runs);
        shards.extend(f.timing);
    }
    Ok(Merged {
        report: plan.report(None, runs),
        shards: ShardsFile { shards },
    })
}

fn seeds_label(seeds: &[u64]) -> String {
    let contiguous = seeds.windows(2).all(|w| w[1] == w[0] + 1);
    match (seeds.first(), seeds.last()) {
        (Some(a), Some(b)) if contiguous && seeds.len() > 2 => format!("{a}..={b}"),
        _ => seeds
            .iter()
            .map(u64::to_string)
            .collect::<Vec<_>>()
            .join(","),
    }
}

fn opt(v: Option<f64>, decimals: usize) -> String {
    v.map_or("-".to_owned(), |v| format!("{v:.decimals$}"))
}

/// The sweep as a table (no wall-clock values: the same sweep, the same table).
pub fn table(report: &SweepReport) -> String {
    let mut out = String::new();
    let n = report.runs.len();
    let _ = writeln!(
        out,
        "sweep {}: {} seeds ({}), {} ticks, {} NPCs",
        report.scenario,
        n,
        seeds_label(&report.seeds),
        report.ticks,
        report.npcs
    );
    if !report.sets.is_empty() {
        let _ = writeln!(out, "set: {}", report.sets.join(" "));
    }
    let failed = report.failures();
    if failed > 0 {
        let _ = writeln!(out, "FAILED: {failed} of {n} runs (see below)");
    }
    if !report.expectations.is_empty() {
        let width = report
            .expectations
            .iter()
            .map(|e| e.expect.chars().count())
            .max()
            .unwrap_or(0)
            .max(11);
        let _ = writeln!(out, "\n{:<width$}  met", "expectation");
        for e in &report.expectations {
            let extra = if e.unchecked > 0 {
                format!(", {} not checked", e.unchecked)
            } else {
                String::new()
            };
            let _ = writeln!(
                out,
                "{:<width$}  {}/{n} ({:.0}%){extra}",
                e.expect,
                e.met,
                e.share_met * 100.0
            );
        }
    }
    if !report.facts.is_empty() {
        let width = report
            .facts
            .iter()
            .map(|f| f.name.chars().count())
            .max()
            .unwrap_or(0)
            .max(28);
        let _ = writeln!(
            out,
            "\n{:<width$}  {:>8}  {:>8}  {:>7}  {:>5}  {:>7}  {:>5}",
            "time to half of the NPCs", "reached", "mean", "sd", "min", "median", "max"
        );
        for f in &report.facts {
            let _ = writeln!(
                out,
                "{:<width$}  {:>8}  {:>8}  {:>7}  {:>5}  {:>7}  {:>5}",
                f.name,
                format!("{}/{n}", f.reached),
                opt(f.mean, 1),
                opt(f.sd, 1),
                f.min.map_or("-".into(), |v| v.to_string()),
                opt(f.median, 1),
                f.max.map_or("-".into(), |v| v.to_string()),
            );
        }
        let _ = writeln!(
            out,
            "\n{:<width$}  {:>8}  {:>8}  {:>21}",
            "spread rate β (SI fit)", "fitted", "mean", "95% interval"
        );
        for f in &report.facts {
            let b = &f.beta;
            let interval = match (b.lo, b.hi) {
                (Some(lo), Some(hi)) => format!("[{lo:.4}, {hi:.4}]"),
                _ => "-".to_owned(),
            };
            let _ = writeln!(
                out,
                "{:<width$}  {:>8}  {:>8}  {:>21}",
                f.name,
                format!("{}/{}", b.fitted, b.fitted + b.unfitted),
                opt(b.mean, 4),
                interval
            );
        }
        let unfitted: usize = report.facts.iter().map(|f| f.beta.unfitted).sum();
        if unfitted > 0 {
            let _ = writeln!(
                out,
                "(runs without a fit are left out of β: {unfitted} fact-runs, where {})",
                crate::fit::NO_FIT_WHY
            );
        }
    }
    let _ = write!(out, "\n{:>8}", "seed");
    for f in &report.facts {
        let _ = write!(out, "  {:>12}", format!("{} ½", shorten(&f.name, 10)));
    }
    if !report.expectations.is_empty() {
        let _ = write!(out, "  expectations");
    }
    let _ = writeln!(out);
    for r in &report.runs {
        let _ = write!(out, "{:>8}", r.seed);
        if let Some(e) = &r.error {
            let _ = writeln!(out, "  failed: {e}");
            continue;
        }
        for f in &r.facts {
            let _ = write!(
                out,
                "  {:>12}",
                f.half_tick.map_or("never".to_owned(), |t| t.to_string())
            );
        }
        if !report.expectations.is_empty() {
            let met = r
                .expectations
                .iter()
                .filter(|v| **v == Verdict::Met)
                .count();
            let _ = write!(out, "  {met}/{}", r.expectations.len());
        }
        let _ = writeln!(out);
    }
    out
}

fn shorten(name: &str, max: usize) -> String {
    if name.chars().count() <= max {
        name.to_owned()
    } else {
        let mut s: String = name.chars().take(max - 1).collect();
        s.push('…');
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pool_is_shared_out_among_the_runs_at_once() {
        // What each run's pool may open, and what its PostgreSQL options then say.
        for (pool, jobs, share) in [(4, 2, 2), (16, 3, 5), (2, 1, 2)] {
            let got = share_pool(pool, jobs).expect("a share");
            assert_eq!(got, share, "--pool-size {pool} over {jobs} runs");
            let options = crate::run::open::pg_options(Some(got)).expect("options");
            assert_eq!(options.max_connections, share);
        }
        for (pool, jobs) in [(3, 2), (1, 1), (7, 4)] {
            let err = share_pool(pool, jobs).expect_err("too few").to_string();
            assert!(err.contains("--pool-size"), "{err}");
        }
    }

    #[test]
    fn seeds_are_ranges_with_both_ends_or_lists() {
        assert_eq!(parse_seeds("1..5").expect("ok"), vec![1, 2, 3, 4, 5]);
        assert_eq!(parse_seeds("3..=4").expect("ok"), vec![3, 4]);
        assert_eq!(parse_seeds("7,3,11").expect("ok"), vec![7, 3, 11]);
        for bad in ["5..1", "a..3", "1,1", "", "1..200000"] {
            let err = parse_seeds(bad).expect_err(bad).to_string();
            assert!(err.contains("--seeds"), "{err}");
        }
        assert_eq!(seeds_label(&[1, 2, 3, 4]), "1..=4");
        assert_eq!(seeds_label(&[7, 3]), "7,3");
    }

    #[test]
    fn shards_are_contiguous_near_equal_shares_read_from_the_scheduler() {
        let none = |_: &str| None;
        let all: Vec<u64> = (1..=10).collect();
        let parts: Vec<Vec<u64>> = (1..=3)
            .map(|i| {
                Shard::parse(&format!("{i}/3"), &none)
                    .expect("ok")
                    .seeds(&all)
                    .to_vec()
            })
            .collect();
        assert_eq!(parts, vec![vec![1, 2, 3], vec![4, 5, 6], vec![7, 8, 9, 10]]);
        assert_eq!(parts.concat(), all, "every seed once, in order");
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |k: &str| {
                pairs
                    .iter()
                    .find(|(n, _)| *n == k)
                    .map(|(_, v)| (*v).to_owned())
            }
        };
        let k8s = env(&[("JOB_COMPLETION_INDEX", "2")]);
        assert_eq!(
            Shard::parse("auto/4", &k8s).expect("ok"),
            Shard { index: 3, count: 4 },
            "Kubernetes' index is 0-based"
        );
        let err = Shard::parse("auto", &k8s)
            .expect_err("no count")
            .to_string();
        assert!(err.contains("auto/N"), "{err}");
        let slurm = env(&[
            ("SLURM_ARRAY_TASK_ID", "12"),
            ("SLURM_ARRAY_TASK_MIN", "10"),
            ("SLURM_ARRAY_TASK_COUNT", "5"),
        ]);
        assert_eq!(
            Shard::parse("auto", &slurm).expect("ok"),
            Shard { index: 3, count: 5 },
            "Slurm's ids counted from the array's first"
        );
        let err = Shard::parse("auto/4", &slurm)
            .expect_err("mismatch")
            .to_string();
        assert!(err.contains("SLURM_ARRAY_TASK_COUNT is 5"), "{err}");
        for bad in ["0/3", "4/3", "1/0", "x/3", "3", "auto", "1/10001"] {
            let err = Shard::parse(bad, &none).expect_err(bad).to_string();
            assert!(err.contains("--shard"), "{bad}: {err}");
        }
    }

    #[test]
    fn times_to_half_are_summarised_over_the_seeds_that_got_there() {
        let s = fact_stat("f", &[10, 4, 7], &[]);
        assert_eq!((s.reached, s.min, s.max), (3, Some(4), Some(10)));
        assert_eq!(s.mean, Some(7.0));
        assert_eq!(s.median, Some(7.0));
        assert_eq!(s.sd, Some(3.0));
        let none = fact_stat("g", &[], &[]);
        assert_eq!((none.reached, none.mean, none.sd), (0, None, None));
        assert_eq!(fact_stat("h", &[5], &[]).sd, None, "one seed has no spread");
    }

    #[test]
    fn beta_is_a_mean_with_an_interval_over_the_fitted_seeds() {
        let b = BetaStat::of(&[Some(0.1), None, Some(0.2), Some(0.3)]);
        assert_eq!((b.fitted, b.unfitted), (3, 1));
        let mean = b.mean.expect("mean");
        assert!((mean - 0.2).abs() < 1e-12);
        // sd 0.1 over 3 seeds, t(2) = 4.303.
        let half = 4.303 * 0.1 / 3f64.sqrt();
        assert!((b.lo.expect("lo") - (0.2 - half)).abs() < 1e-9);
        assert!((b.hi.expect("hi") - (0.2 + half)).abs() < 1e-9);
        let one = BetaStat::of(&[None, Some(0.5)]);
        assert_eq!((one.mean, one.lo, one.hi), (Some(0.5), None, None));
        let none = BetaStat::of(&[None, None]);
        assert_eq!((none.fitted, none.unfitted, none.mean), (0, 2, None));
    }
}
