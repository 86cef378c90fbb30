//! Spread curves fitted: the logistic SI model over a fact's knowers curve, and the mean
//! with its 95 % interval over many runs (for `hearsay sweep`).
//!
//! **The model.** In a susceptible–infected (SI) population of `N` NPCs where everyone
//! meets everyone at random, the knowers `I` of a fact grow as
//! `dI/dt = β · I · (N − I) / N`, so `I(t) = N / (1 + exp(−β (t − t₀)))`: slow while few
//! know it, fastest at `t₀` (half of the NPCs), slow again near everyone. **β** is the
//! spread rate in ticks⁻¹: early on the knowers multiply by `e^β` per tick (β = 0.1 means
//! about 10 % more knowers each tick; the climb from 10 % to 90 % of the town takes
//! `2 ln 9 / β ≈ 4.4 / β` ticks). `t₀` is the tick the curve crosses `N / 2`.
//!
//! **The fit.** The step curve (`(tick, knowers)` at each change) is expanded to one
//! sample per tick, from the tick the first NPC knew the fact to the run's last tick —
//! so a fact that starts with an event at tick 100 is fitted from tick 100, and a long
//! plateau at the end weighs as much as it lasted. β and t₀ are found by nonlinear
//! least squares (Levenberg–Marquardt on these two parameters, at most
//! [`MAX_ITERATIONS`] steps), started from the log-odds line: for samples with
//! `0 < I < N`, `ln(I / (N − I)) = β t − β t₀` is a straight line in t, whose slope and
//! intercept give β and t₀ directly. The standard error of β is `√(σ² (JᵀJ)⁻¹)ββ` with
//! `σ² = RSS / (n − 2)`; `R² = 1 − RSS / TSS`.
//!
//! **No fit** ([`fit_si`] returns `None`) when the numbers cannot mean anything: the
//! curve takes fewer than 3 distinct values, never grows, starts with everyone knowing,
//! or the solver does not settle within its iterations (or ends at β ≤ 0). A fact that
//! plateaus well below `N` gets a fit, but a poor one: its R² says so.
//!
//! Pure functions: no I/O, no randomness; the same curve gives the same bits.

use serde::{Deserialize, Serialize};

/// The logistic SI fit of one fact's spread in one run.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct SpreadFit {
    /// Spread rate, ticks⁻¹ (see the module docs).
    pub beta: f64,
    /// Standard error of `beta`.
    pub beta_se: f64,
    /// The tick the fitted curve crosses half of the NPCs.
    pub t0: f64,
    /// Share of the variance of the knowers the fitted curve explains.
    pub r2: f64,
    /// Ticks fitted (one sample each).
    pub samples: usize,
}

/// The most Levenberg–Marquardt steps [`fit_si`] takes before giving up.
pub const MAX_ITERATIONS: usize = 200;

/// The logistic `N / (1 + exp(−β (t − t₀)))`, without overflow for any argument.
pub fn logistic(n: f64, beta: f64, t0: f64, t: f64) -> f64 {
    let z = beta * (t - t0);
    if z >= 0.0 {
        n / (1.0 + (-z).exp())
    } else {
        let e = z.exp();
        n * e / (1.0 + e)
    }
}

/// The SI fit of `curve` (`(tick, knowers)` at each change, ticks ascending) for a
/// population of `population` NPCs over a run whose last tick is `last_tick`; `None`
/// when no fit means anything (see the module docs).
pub fn fit_si(curve: &[(u64, u32)], population: u32, last_tick: u64) -> Option<SpreadFit> {
    let n = f64::from(population);
    let samples = expand(curve, last_tick)?;
    let ys: Vec<f64> = samples.iter().map(|&(_, y)| y).collect();
    let mut distinct: Vec<u64> = ys.iter().map(|y| y.to_bits()).collect();
    distinct.sort_unstable();
    distinct.dedup();
    let first = *ys.first()?;
    let grows = ys.iter().any(|&y| y > first);
    if population == 0 || distinct.len() < 3 || !grows || first >= n {
        return None;
    }
    let (mut beta, mut t0) = start(&samples, n)?;
    let rss_at = |beta: f64, t0: f64| -> f64 {
        samples
            .iter()
            .map(|&(t, y)| (y - logistic(n, beta, t0, t)).powi(2))
            .sum()
    };
    let mut rss = rss_at(beta, t0);
    let mut lambda = 1e-3;
    let mut converged = false;
    for _ in 0..MAX_ITERATIONS {
        let (a, g) = normal_equations(&samples, n, beta, t0);
        // Damped step: (JᵀJ + λ diag(JᵀJ)) δ = Jᵀr, λ shrinking on success.
        let mut stepped = false;
        while lambda < 1e12 {
            let damped = [
                [a[0][0] * (1.0 + lambda), a[0][1]],
                [a[1][0], a[1][1] * (1.0 + lambda)],
            ];
            let Some(delta) = solve(damped, g) else {
                lambda *= 10.0;
                continue;
            };
            let (b2, t2) = (beta + delta[0], t0 + delta[1]);
            let rss2 = rss_at(b2, t2);
            if rss2.is_finite() && rss2 <= rss {
                let settled = delta[0].abs() <= 1e-10 * (beta.abs() + 1e-10)
                    && delta[1].abs() <= 1e-8 * (t0.abs() + 1.0);
                let flat = rss - rss2 <= 1e-14 * rss.max(1e-300);
                beta = b2;
                t0 = t2;
                rss = rss2;
                lambda = (lambda / 10.0).max(1e-12);
                stepped = true;
                converged = settled || flat;
                break;
            }
            lambda *= 10.0;
        }
        // No step improves on the current point: it is the minimum, to rounding.
        if !stepped || converged {
            converged = true;
            break;
        }
    }
    if !converged || beta.is_nan() || beta <= 0.0 || !beta.is_finite() || !t0.is_finite() {
        return None;
    }
    let m = samples.len() as f64;
    let mean = ys.iter().sum::<f64>() / m;
    let tss: f64 = ys.iter().map(|y| (y - mean).powi(2)).sum();
    let (a, _) = normal_equations(&samples, n, beta, t0);
    let det = a[0][0] * a[1][1] - a[0][1] * a[1][0];
    let sigma2 = rss / (m - 2.0);
    let beta_se = (sigma2 * a[1][1] / det).sqrt();
    Some(SpreadFit {
        beta,
        beta_se: if beta_se.is_finite() {
            beta_se
        } else {
            f64::INFINITY
        },
        t0,
        r2: 1.0 - rss / tss,
        samples: samples.len(),
    })
}

/// What a fit says, in one line for the end-of-run table and the report:
/// `SI fit: β = 0.118 ± 0.002 per tick, half-way at tick 61.3, R² 0.991 (240 ticks)`, or
/// why there is none.
pub fn describe(fit: Option<&SpreadFit>) -> String {
    match fit {
        Some(f) => format!(
            "SI fit: β = {:.4} ± {:.4} per tick, half-way at tick {:.1}, R² {:.3} ({} ticks)",
            f.beta, f.beta_se, f.t0, f.r2, f.samples
        ),
        None => format!("SI fit: none ({NO_FIT_WHY})"),
    }
}

/// Why a fact has no fit, in words.
pub const NO_FIT_WHY: &str = "the knowers took fewer than 3 distinct counts, never grew, \
     were everyone from the start, or the fit did not settle";

/// One `(tick, knowers)` per tick from the first knower to `last_tick` (at least the
/// curve's last change); `None` for an empty curve.
fn expand(curve: &[(u64, u32)], last_tick: u64) -> Option<Vec<(f64, f64)>> {
    let &(from, _) = curve.first()?;
    let to = last_tick.max(curve.last().map_or(from, |&(t, _)| t));
    let mut out = Vec::with_capacity((to - from + 1) as usize);
    let mut next = 0;
    let mut count = 0u32;
    for t in from..=to {
        while next < curve.len() && curve[next].0 <= t {
            count = curve[next].1;
            next += 1;
        }
        out.push((t as f64, f64::from(count)));
    }
    Some(out)
}

/// The starting point: the log-odds line through the samples with `0 < I < N`, or, when
/// it has no rising slope, t₀ at the first sample at or past half and β from the rise
/// over the samples.
fn start(samples: &[(f64, f64)], n: f64) -> Option<(f64, f64)> {
    let inner: Vec<(f64, f64)> = samples
        .iter()
        .filter(|&&(_, y)| y > 0.0 && y < n)
        .map(|&(t, y)| (t, (y / (n - y)).ln()))
        .collect();
    if let Some((slope, intercept)) = line(&inner)
        && slope > 0.0
        && slope.is_finite()
    {
        return Some((slope, -intercept / slope));
    }
    let (t_first, _) = *samples.first()?;
    let (t_last, _) = *samples.last()?;
    let top = samples.iter().map(|&(_, y)| y).fold(0.0, f64::max);
    let t0 = samples
        .iter()
        .find(|&&(_, y)| y >= top / 2.0)
        .map_or((t_first + t_last) / 2.0, |&(t, _)| t);
    Some((4.0 / (t_last - t_first).max(1.0), t0))
}

/// Least-squares line `y = slope x + intercept`; `None` with fewer than two distinct x.
fn line(points: &[(f64, f64)]) -> Option<(f64, f64)> {
    let m = points.len() as f64;
    if points.len() < 2 {
        return None;
    }
    let mx = points.iter().map(|p| p.0).sum::<f64>() / m;
    let my = points.iter().map(|p| p.1).sum::<f64>() / m;
    let sxx: f64 = points.iter().map(|p| (p.0 - mx).powi(2)).sum();
    let sxy: f64 = points.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum();
    if sxx <= 0.0 {
        return None;
    }
    let slope = sxy / sxx;
    Some((slope, my - slope * mx))
}

/// `JᵀJ` and `Jᵀr` at (β, t₀), with `J` the derivatives of the model by (β, t₀) and `r`
/// the residuals. With `f` the model: ∂f/∂β = f (1 − f/N)(t − t₀), ∂f/∂t₀ = −β f (1 − f/N).
fn normal_equations(
    samples: &[(f64, f64)],
    n: f64,
    beta: f64,
    t0: f64,
) -> ([[f64; 2]; 2], [f64; 2]) {
    let mut a = [[0.0; 2]; 2];
    let mut g = [0.0; 2];
    for &(t, y) in samples {
        let f = logistic(n, beta, t0, t);
        let s = f * (1.0 - f / n);
        let j = [s * (t - t0), -beta * s];
        let r = y - f;
        for i in 0..2 {
            g[i] += j[i] * r;
            for k in 0..2 {
                a[i][k] += j[i] * j[k];
            }
        }
    }
    (a, g)
}

/// Solves the 2 × 2 system `a x = b`; `None` when it is singular.
fn solve(a: [[f64; 2]; 2], b: [f64; 2]) -> Option<[f64; 2]> {
    let det = a[0][0] * a[1][1] - a[0][1] * a[1][0];
    let scale = (a[0][0] * a[1][1]).abs().max(1e-300);
    if !det.is_finite() || det.abs() <= 1e-15 * scale {
        return None;
    }
    Some([
        (b[0] * a[1][1] - a[0][1] * b[1]) / det,
        (a[0][0] * b[1] - a[1][0] * b[0]) / det,
    ])
}

/// A mean over runs and its 95 % confidence interval.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct MeanInterval {
    /// The mean.
    pub mean: f64,
    /// Lower end of the 95 % interval of the mean.
    pub lo: f64,
    /// Upper end.
    pub hi: f64,
}

/// The mean of `values` with its 95 % confidence interval, `mean ± t · sd / √n` with
/// `t` Student's 97.5 % quantile for `n − 1` degrees of freedom ([`t_975`]); `None` for
/// fewer than two values (one run has no spread to speak of).
pub fn mean_interval(values: &[f64]) -> Option<MeanInterval> {
    if values.len() < 2 {
        return None;
    }
    let n = values.len() as f64;
    let mean = values.iter().sum::<f64>() / n;
    let sd = (values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1.0)).sqrt();
    let half = t_975(values.len() - 1) * sd / n.sqrt();
    Some(MeanInterval {
        mean,
        lo: mean - half,
        hi: mean + half,
    })
}

/// Student's t 97.5 % quantile (two-sided 95 %) for `df` degrees of freedom: the usual
/// table for 1..=30, then the normal 1.96 (off by under 2 % from 31 on).
pub fn t_975(df: usize) -> f64 {
    const TABLE: [f64; 30] = [
        12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160,
        2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056,
        2.052, 2.048, 2.045, 2.042,
    ];
    match df {
        0 => f64::INFINITY,
        1..=30 => TABLE[df - 1],
        _ => 1.96,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{RngExt, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    /// The step curve of integer counts `counts[t]` (t from 0).
    fn steps(counts: &[u32]) -> Vec<(u64, u32)> {
        let mut curve = Vec::new();
        let mut last = 0;
        for (t, &c) in counts.iter().enumerate() {
            if c != last {
                curve.push((t as u64, c));
                last = c;
            }
        }
        curve
    }

    fn clean(beta: f64, t0: f64, n: u32, ticks: u64) -> Vec<u32> {
        (0..ticks)
            .map(|t| logistic(f64::from(n), beta, t0, t as f64).round() as u32)
            .collect()
    }

    /// A stochastic SI town: each tick every one of `n` meets one other at random and,
    /// if exactly one of them knows, the other learns it with probability `p` — so
    /// β ≈ 2p (each pair (knower, not) meets from either side; for small `p`, where
    /// whole ticks barely differ from continuous time).
    fn simulated(n: usize, p: f64, ticks: u64, seed: u64) -> Vec<u32> {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let mut knows = vec![false; n];
        knows[0] = true;
        let mut out = Vec::new();
        for _ in 0..ticks {
            out.push(knows.iter().filter(|&&k| k).count() as u32);
            let before = knows.clone();
            for a in 0..n {
                let b = rng.random_range(0..n - 1);
                let b = if b >= a { b + 1 } else { b };
                if before[a] != before[b] && rng.random_bool(p) {
                    knows[a] = true;
                    knows[b] = true;
                }
            }
        }
        out
    }

    #[test]
    fn the_fit_recovers_beta_on_clean_logistic_curves() {
        for (beta, t0) in [(0.05, 120.0), (0.1, 60.0), (0.2, 40.0), (0.5, 25.0)] {
            let curve = steps(&clean(beta, t0, 200, 300));
            let fit = fit_si(&curve, 200, 299).expect("a clean curve fits");
            assert!(
                (fit.beta - beta).abs() <= 0.1 * beta,
                "beta {beta}: fitted {fit:?}"
            );
            assert!((fit.t0 - t0).abs() <= 2.0, "t0 {t0}: {fit:?}");
            assert!(fit.r2 > 0.95, "{fit:?}");
            assert!(fit.beta_se > 0.0 && fit.beta_se < 0.1 * beta, "{fit:?}");
            assert_eq!(fit.samples as u64, 300 - curve[0].0);
            assert_eq!(fit, fit_si(&curve, 200, 299).expect("again"), "same bits");
        }
    }

    #[test]
    fn the_fit_recovers_beta_on_a_stochastic_si_town() {
        for (p, seed) in [(0.025, 1), (0.05, 2), (0.1, 3)] {
            let counts = simulated(200, p, 300, seed);
            let fit = fit_si(&steps(&counts), 200, 299).expect("the town fits");
            let beta = 2.0 * p;
            assert!(
                (fit.beta - beta).abs() <= 0.1 * beta,
                "p {p}: beta {beta}, fitted {fit:?}"
            );
            assert!(fit.r2 > 0.95, "{fit:?}");
            let lo = fit.beta - 4.0 * fit.beta_se;
            assert!(lo > 0.0, "the standard error is small beside beta: {fit:?}");
        }
    }

    #[test]
    fn noisy_data_fits_worse_than_clean_data() {
        let beta = 0.1;
        let clean_fit = fit_si(&steps(&clean(beta, 60.0, 200, 200)), 200, 199).expect("fits");
        // A curve that stalls at a third of the town for a long while, then jumps.
        let mut counts = clean(beta, 60.0, 200, 200);
        for c in counts.iter_mut().skip(50).take(80) {
            *c = (*c).min(66);
        }
        let stalled = fit_si(&steps(&counts), 200, 199).expect("fits");
        assert!(stalled.r2 < clean_fit.r2, "{stalled:?} vs {clean_fit:?}");
        assert!(
            stalled.beta_se > clean_fit.beta_se,
            "{stalled:?} vs {clean_fit:?}"
        );
    }

    #[test]
    fn meaningless_curves_get_no_fit() {
        assert_eq!(fit_si(&[], 200, 100), None, "nobody ever knew");
        assert_eq!(fit_si(&[(0, 5)], 200, 100), None, "never grows");
        assert_eq!(
            fit_si(&[(0, 5), (10, 9)], 200, 100),
            None,
            "two values only"
        );
        assert_eq!(fit_si(&[(0, 200)], 200, 100), None, "everyone knew at once");
        assert_eq!(fit_si(&[(0, 1), (3, 2), (5, 3)], 0, 10), None, "no NPCs");
        // Three values are enough to fit.
        assert!(fit_si(&[(0, 1), (5, 100), (10, 199)], 200, 20).is_some());
    }

    #[test]
    fn the_samples_run_from_the_first_knower_to_the_last_tick() {
        let got = expand(&[(3, 1), (5, 4)], 7).expect("samples");
        let ys: Vec<(f64, f64)> = vec![(3.0, 1.0), (4.0, 1.0), (5.0, 4.0), (6.0, 4.0), (7.0, 4.0)];
        assert_eq!(got, ys);
        assert_eq!(expand(&[(3, 1), (9, 4)], 5).expect("samples").len(), 7);
    }

    #[test]
    fn intervals_use_student_t_and_need_two_runs() {
        assert_eq!(mean_interval(&[1.0]), None);
        let i = mean_interval(&[1.0, 2.0, 3.0]).expect("three runs");
        // sd 1, n 3, t(2) 4.303: half width 4.303 / √3.
        let half = 4.303 / 3f64.sqrt();
        assert!((i.mean - 2.0).abs() < 1e-12);
        assert!((i.lo - (2.0 - half)).abs() < 1e-12 && (i.hi - (2.0 + half)).abs() < 1e-12);
        assert_eq!(t_975(1), 12.706);
        assert_eq!(t_975(30), 2.042);
        assert_eq!(t_975(31), 1.96);
        assert!(
            (1..40).all(|df| t_975(df) >= t_975(df + 1)),
            "falls with df"
        );
    }
}
