//! `hearsay sweep`: one scenario over many seeds (and `--set` edits), runs in parallel,
//! then how often each expectation was met, how long each fact took to reach half of the
//! NPCs — mean, spread and range over the seeds — and each fact's spread rate β (the SI
//! fit of [`crate::fit`]) as a mean with its 95 % interval over the seeds that have a
//! fit, as a table and `sweep.json`.
//!
//! Every run is a full run with its own directory (`<out>/seed-<N>`), so any of them can
//! be inspected, replayed or reported on afterwards. The table holds no wall-clock value:
//! the same sweep prints the same table.

use std::fmt::Write as _;
use std::path::PathBuf;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use serde::Serialize;

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
    /// The seeds, in order.
    pub seeds: Vec<u64>,
    /// `KEY=VALUE` edits applied to every run.
    pub sets: Vec<String>,
    /// Runs at once.
    pub jobs: usize,
    /// Where the runs go (default `runs/<name>-sweep`).
    pub out: Option<PathBuf>,
    /// Overrides the scenario's tick count.
    pub ticks: Option<u64>,
    /// Replace `out` if it holds an earlier sweep.
    pub force: bool,
    /// Skip the servers' preflight.
    pub no_preflight: bool,
    /// PostgreSQL URL, for `store = "postgres"`.
    pub database_url: Option<String>,
    /// How to show progress (runs done of all).
    pub progress: crate::terminal::Progress,
}

/// The sweep file in the output directory.
pub use crate::rundir::SWEEP_FILE;

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

/// One fact in one run.
#[derive(Clone, Debug, PartialEq, Serialize)]
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
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SweepRun {
    /// The root seed this run used in place of the scenario's.
    pub seed: u64,
    /// Where the run was written (`<out>/seed-<seed>`), even when it failed.
    pub run_dir: String,
    /// Each tracked fact's outcome, in scenario order; empty when the run failed.
    pub facts: Vec<RunFact>,
    /// Each expectation's verdict, in scenario order.
    pub expectations: Vec<Verdict>,
    /// Why the run failed, if it did.
    pub error: Option<String>,
    /// Its wall time, ms.
    pub wall_ms: f64,
}

/// An expectation over the seeds.
#[derive(Clone, Debug, PartialEq, Serialize)]
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
#[derive(Clone, Debug, PartialEq, Serialize)]
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
#[derive(Clone, Debug, PartialEq, Serialize)]
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

/// Wall-clock figures (not in the table).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SweepTiming {
    /// The whole sweep, ms.
    pub wall_ms: f64,
    /// Runs finished per minute.
    pub runs_per_minute: f64,
    /// Runs at once.
    pub jobs: usize,
}

/// `sweep.json`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SweepReport {
    /// The scenario's `name` (not its file path).
    pub scenario: String,
    /// The seeds, in order.
    pub seeds: Vec<u64>,
    /// The edits applied to every run.
    pub sets: Vec<String>,
    /// Ticks per run.
    pub ticks: u64,
    /// How many NPCs each run has.
    pub npcs: usize,
    /// Where the runs are.
    pub out: String,
    /// Each expectation over the seeds.
    pub expectations: Vec<ExpectStat>,
    /// Each fact's time to half of the NPCs.
    pub facts: Vec<FactStat>,
    /// Every run, in seed order.
    pub runs: Vec<SweepRun>,
    /// How long it took.
    pub timing: SweepTiming,
}

impl SweepReport {
    /// Runs that failed.
    pub fn failures(&self) -> usize {
        self.runs.iter().filter(|r| r.error.is_some()).count()
    }
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

/// Runs the sweep.
pub fn sweep(opts: &SweepOptions) -> Result<SweepReport, RunError> {
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
    let (checked, _) = crate::edit::load_edited(
        &opts.scenario,
        &crate::edit::overrides(&opts.sets, None, opts.ticks),
    )?;
    if opts.seeds.is_empty() {
        return Err(RunError::BadOption("--seeds: no seeds".into()));
    }
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
    let out = opts
        .out
        .clone()
        .unwrap_or_else(|| crate::rundir::default_sweep_dir(&checked.name));
    let _lock = crate::rundir::check_target(
        &out,
        DirKind::Sweep,
        opts.force,
        &crate::rundir::Protected {
            inputs: vec![opts.scenario.clone()],
            source: None,
        },
    )?
    .claim()?;

    let jobs = opts.jobs.clamp(1, opts.seeds.len());
    let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
    let threads = (cores / jobs).max(1);
    let bar = crate::terminal::progress_bar(
        opts.progress,
        opts.seeds.len() as u64,
        "{prefix} run {pos}/{len} [{bar:32}] {elapsed_precise} eta {eta}",
    );
    bar.set_prefix(format!("sweep {}", checked.name));
    crate::terminal::announce_dir(opts.progress, &out);
    let next = AtomicUsize::new(0);
    let results: Mutex<Vec<Option<SweepRun>>> = Mutex::new(vec![None; opts.seeds.len()]);
    std::thread::scope(|scope| {
        for _ in 0..jobs {
            scope.spawn(|| {
                loop {
                    let i = next.fetch_add(1, Ordering::SeqCst);
                    let Some(&seed) = opts.seeds.get(i) else {
                        break;
                    };
                    let dir = out.join(format!("seed-{seed}"));
                    let run_started = Instant::now();
                    let outcome = run(&RunOptions {
                        scenario: opts.scenario.clone(),
                        seed: Some(seed),
                        ticks: opts.ticks,
                        out: Some(dir.clone()),
                        force: false,
                        progress: crate::terminal::Progress::Hidden,
                        database_url: opts.database_url.clone(),
                        threads: Some(threads),
                        sets: opts.sets.clone(),
                        // Checked once for the sweep, below.
                        no_preflight: true,
                    });
                    let wall_ms = run_started.elapsed().as_secs_f64() * 1000.0;
                    let record = match outcome {
                        Ok(o) => SweepRun {
                            seed,
                            run_dir: dir.display().to_string(),
                            facts: o
                                .summary
                                .facts
                                .iter()
                                .map(|f| RunFact {
                                    name: f.name.clone(),
                                    half_tick: f.half_tick,
                                    share: f.share,
                                    beta: f.fit.map(|fit| fit.beta),
                                })
                                .collect(),
                            expectations: o
                                .summary
                                .expectations
                                .iter()
                                .map(|j| j.verdict)
                                .collect(),
                            error: None,
                            wall_ms,
                        },
                        Err(e) => SweepRun {
                            seed,
                            run_dir: dir.display().to_string(),
                            facts: Vec::new(),
                            expectations: Vec::new(),
                            error: Some(e.to_string()),
                            wall_ms,
                        },
                    };
                    if let Ok(mut slots) = results.lock() {
                        slots[i] = Some(record);
                    }
                    bar.inc(1);
                }
            });
        }
    });
    crate::terminal::finish_progress(&bar, opts.progress);
    let runs: Vec<SweepRun> = results
        .into_inner()
        .unwrap_or_else(|e| e.into_inner())
        .into_iter()
        .flatten()
        .collect();

    let ok: Vec<&SweepRun> = runs.iter().filter(|r| r.error.is_none()).collect();
    let expectations = checked
        .expectations
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
                expect: e.describe(),
                met,
                unmet: count(Verdict::Unmet),
                unchecked: count(Verdict::Unchecked),
                share_met: met as f64 / runs.len().max(1) as f64,
            }
        })
        .collect();
    let facts = checked
        .facts
        .iter()
        .enumerate()
        .map(|(i, f)| {
            let halves: Vec<u64> = ok
                .iter()
                .filter_map(|r| r.facts.get(i).and_then(|f| f.half_tick))
                .collect();
            let betas: Vec<Option<f64>> = ok
                .iter()
                .map(|r| r.facts.get(i).and_then(|f| f.beta))
                .collect();
            fact_stat(&f.name, &halves, &betas)
        })
        .collect();
    let wall_ms = started.elapsed().as_secs_f64() * 1000.0;
    let report = SweepReport {
        scenario: checked.name.clone(),
        seeds: opts.seeds.clone(),
        sets: opts.sets.clone(),
        ticks: checked.ticks,
        npcs: checked.npcs.len(),
        out: out.display().to_string(),
        expectations,
        facts,
        runs,
        timing: SweepTiming {
            wall_ms,
            runs_per_minute: opts.seeds.len() as f64 * 60_000.0 / wall_ms.max(1e-9),
            jobs,
        },
    };
    let path = out.join(SWEEP_FILE);
    let json = serde_json::to_string_pretty(&report).map_err(|e| RunError::RunDir {
        path: path.clone(),
        problem: format!("cannot encode the sweep: {e}"),
    })? + "\n";
    crate::rundir::write_file(&path, json.as_bytes())?;
    Ok(report)
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
