//! Forgetting: an Ebbinghaus curve in ticks, reset and strengthened by every recall.
//!
//! `retention = exp(-Δ / strength)`, where Δ is the ticks since the memory was last
//! recalled (or created) and
//! `strength = strength_per_importance · importance · (1 + recall_boost · recalls)`:
//! important memories last longer, and every recall both restarts the curve and makes it
//! flatter (MemoryBank's forgetting, in simulation time). When retention falls below
//! `threshold` the memory is archived: excluded from recall, kept in the store, never
//! deleted. Core memories never fade.
//!
//! Because a memory's retention only changes when it is recalled, the tick at which it
//! will fade is known in advance ([`Forgetting::fades_at`]); stores keep a schedule
//! ordered by that tick, so archiving a tick's worth of memories costs a few lookups —
//! never a scan of every memory. The arithmetic is plain IEEE operations ([`exp`],
//! [`ln`]), not the platform's libm, so every build archives the same memories at the
//! same tick.

use serde::{Deserialize, Serialize};

/// How memories fade.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Forgetting {
    /// Retention below which a memory is archived, in [0, 1); 0 never archives.
    pub threshold: f64,
    /// Ticks of strength per point of importance.
    pub strength_per_importance: f64,
    /// How much each recall adds to the strength, as a multiple of the first.
    pub recall_boost: f64,
}

impl Default for Forgetting {
    /// Retention 0.05 (three time constants): a move (importance 4) nobody recalls is
    /// archived 300 ticks after it was made, gossip (8) after 600; each recall restarts
    /// the curve and doubles, triples, … its length.
    fn default() -> Self {
        Self {
            threshold: 0.05,
            strength_per_importance: 25.0,
            recall_boost: 1.0,
        }
    }
}

impl Forgetting {
    /// Never forgets.
    pub const OFF: Forgetting = Forgetting {
        threshold: 0.0,
        strength_per_importance: 25.0,
        recall_boost: 1.0,
    };

    /// Whether anything can ever be archived.
    pub fn enabled(&self) -> bool {
        self.threshold > 0.0 && self.strength_per_importance > 0.0
    }

    /// The strength (time constant, in ticks) of a memory of `importance` recalled
    /// `recalls` times.
    pub fn strength(&self, importance: u8, recalls: u32) -> f64 {
        self.strength_per_importance
            * f64::from(importance.max(1))
            * (1.0 + self.recall_boost * f64::from(recalls))
    }

    /// Retention `age` ticks after the last recall.
    pub fn retention(&self, importance: u8, recalls: u32, age: u64) -> f64 {
        let strength = self.strength(importance, recalls);
        if strength <= 0.0 {
            return 0.0;
        }
        exp(-(age as f64) / strength)
    }

    /// The first tick at which a memory last recalled at `last_recalled` has retention
    /// below the threshold; `None` if it never fades (core, or forgetting off).
    pub fn fades_at(
        &self,
        importance: u8,
        recalls: u32,
        core: bool,
        last_recalled: u64,
    ) -> Option<u64> {
        if core {
            return None;
        }
        self.fade_age(importance, recalls)
            .map(|age| last_recalled.saturating_add(age))
    }

    /// Ticks from the last recall to the first tick with retention below the threshold
    /// (at least 1), for a memory that is not core; `None` if it never fades. Depends on
    /// nothing else, so callers that meet the same pair often keep the answer
    /// ([`FadeAges`]).
    pub fn fade_age(&self, importance: u8, recalls: u32) -> Option<u64> {
        if !self.enabled() {
            return None;
        }
        // exp(-Δ/S) < θ  ⇔  Δ > S·ln(1/θ); start there and settle the boundary with the
        // same `retention` everyone else computes, so the rule is exactly "< θ".
        let strength = self.strength(importance, recalls);
        let guess = strength * ln(1.0 / self.threshold);
        if !guess.is_finite() || guess >= 1e15 {
            return None;
        }
        let mut age = guess as u64;
        while age > 0 && self.retention(importance, recalls, age - 1) < self.threshold {
            age -= 1;
        }
        while self.retention(importance, recalls, age) >= self.threshold {
            age += 1;
        }
        Some(age.max(1))
    }
}

/// Recall counts below this are kept by [`FadeAges`] (a run of more ticks than this is
/// rare; its older memories' counts are computed each time).
const RECALLS_KEPT: usize = 1 << 16;

/// [`Forgetting::fade_age`] of one policy, computed once per (importance, recalls): a
/// tick of a big town touches tens of thousands of recalled memories, and each touch
/// needs the fading tick before and after (a search with `exp` in its loop). The pairs
/// met are few: importances 1–10 and recall counts up to the run's length.
#[derive(Clone, Debug, Default)]
pub struct FadeAges {
    policy: Option<Forgetting>,
    /// By importance, then recalls: `None` not computed yet, `Some(age)` computed.
    ages: Vec<Vec<Option<Option<u64>>>>,
}

impl FadeAges {
    /// For `policy`: nothing computed yet.
    pub fn new(policy: Forgetting) -> Self {
        Self {
            policy: Some(policy),
            ages: Vec::new(),
        }
    }

    /// The policy, if one was set.
    pub fn policy(&self) -> Option<Forgetting> {
        self.policy
    }

    /// The tick a memory fades at (`None`: never, or no policy): as
    /// [`Forgetting::fades_at`], from the table where it can.
    pub fn fades_at(
        &mut self,
        importance: u8,
        recalls: u32,
        core: bool,
        last_recalled: u64,
    ) -> Option<u64> {
        let policy = self.policy?;
        if core {
            return None;
        }
        let (i, r) = (usize::from(importance), recalls as usize);
        // A loaded run's counts come from its database: past the table's bound, compute.
        if r >= RECALLS_KEPT {
            return policy.fades_at(importance, recalls, core, last_recalled);
        }
        if self.ages.len() <= i {
            self.ages.resize_with(i + 1, Vec::new);
        }
        let row = &mut self.ages[i];
        if row.len() <= r {
            row.resize(r + 1, None);
        }
        let age = *row[r].get_or_insert_with(|| policy.fade_age(importance, recalls));
        age.map(|age| last_recalled.saturating_add(age))
    }
}

// ln 2 split in two (fdlibm's constants): `k·LN_2_HI` is exact for the `k` we meet.
const LN_2_HI: f64 = f64::from_bits(0x3fe6_2e42_fee0_0000);
const LN_2_LO: f64 = f64::from_bits(0x3dea_39ef_3579_3c76);

/// `2^k` for `k` in the normal range.
fn two_to(k: i64) -> f64 {
    f64::from_bits(((k + 1023) as u64) << 52)
}

/// `e^x` with plain IEEE arithmetic (Cody–Waite reduction, then a Taylor series): the
/// same bits on every platform, within a few ulps of the true value.
pub fn exp(x: f64) -> f64 {
    if x.is_nan() {
        return x;
    }
    if x < -745.0 {
        return 0.0;
    }
    if x > 709.0 {
        return f64::INFINITY;
    }
    let k = (x * std::f64::consts::LOG2_E).round();
    let r = (x - k * LN_2_HI) - k * LN_2_LO;
    let mut term = 1.0;
    let mut sum = 1.0;
    for i in 1..=18 {
        term *= r / f64::from(i);
        sum += term;
    }
    let k = k as i64;
    if k < -1022 {
        sum * two_to(k + 600) * two_to(-600)
    } else {
        sum * two_to(k)
    }
}

/// `ln x` for positive normal `x`, with plain IEEE arithmetic (`x = m·2^e`, then the
/// atanh series for `ln m`). `NaN` for `x <= 0`.
pub fn ln(x: f64) -> f64 {
    if x.is_nan() || x <= 0.0 {
        return f64::NAN;
    }
    if x.is_infinite() {
        return x;
    }
    let bits = x.to_bits();
    let mut e = ((bits >> 52) & 0x7ff) as i64 - 1023;
    let mut m = f64::from_bits((bits & 0x000f_ffff_ffff_ffff) | 0x3ff0_0000_0000_0000);
    if e == -1023 {
        // Subnormal: scale up first.
        return ln(x * two_to(54)) - 54.0 * std::f64::consts::LN_2;
    }
    if m > std::f64::consts::SQRT_2 {
        m /= 2.0;
        e += 1;
    }
    let s = (m - 1.0) / (m + 1.0);
    let s2 = s * s;
    let mut term = s;
    let mut sum = 0.0;
    let mut n = 1.0;
    for _ in 0..30 {
        sum += term / n;
        term *= s2;
        n += 2.0;
    }
    (e as f64) * LN_2_HI + ((e as f64) * LN_2_LO + 2.0 * sum)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kept_fading_ages_are_the_computed_ones() {
        let policy = Forgetting::default();
        let mut kept = FadeAges::new(policy);
        // Twice over, so the second pass reads what the first kept; the last count is
        // past what the table keeps.
        for _ in 0..2 {
            for importance in 0..=10u8 {
                for recalls in [0, 1, 2, 7, 300, RECALLS_KEPT as u32 + 5] {
                    for (core, last) in [(false, 0), (false, 123), (true, 5)] {
                        assert_eq!(
                            kept.fades_at(importance, recalls, core, last),
                            policy.fades_at(importance, recalls, core, last),
                            "importance {importance}, recalls {recalls}, core {core}"
                        );
                    }
                }
            }
        }
        assert_eq!(kept.fades_at(4, 0, false, 10), Some(10 + 300));
        assert_eq!(FadeAges::default().fades_at(4, 0, false, 10), None);
        assert_eq!(
            FadeAges::new(Forgetting::OFF).fades_at(4, 0, false, 10),
            None
        );
    }

    #[test]
    fn exp_and_ln_agree_with_the_platform_to_a_few_ulps() {
        for i in -2000..=2000 {
            let x = f64::from(i) / 37.0;
            let want = x.exp();
            assert!(((exp(x) - want) / want).abs() < 1e-15, "exp({x})");
            let y = (f64::from(i) / 97.0).exp();
            assert!((ln(y) - y.ln()).abs() < 1e-14, "ln({y})");
        }
        assert_eq!(exp(0.0), 1.0);
        assert_eq!(ln(1.0), 0.0);
        assert_eq!(exp(-1000.0), 0.0);
        assert!(ln(0.0).is_nan());
        assert!((ln(1e-310) - 1e-310f64.ln()).abs() < 1e-12);
    }

    #[test]
    fn important_and_recalled_memories_last_longer() {
        let f = Forgetting::default();
        let mv = f.fades_at(4, 0, false, 0).expect("fades");
        let gossip = f.fades_at(8, 0, false, 0).expect("fades");
        let recalled = f.fades_at(4, 1, false, 0).expect("fades");
        assert_eq!(mv, 300, "S=100, ln 20 = 2.996: first tick below 0.05");
        assert!(gossip > mv && recalled > mv);
        // The rule is exactly "retention below the threshold".
        assert!(f.retention(4, 0, mv) < f.threshold);
        assert!(f.retention(4, 0, mv - 1) >= f.threshold);
        // A recall restarts the curve from the recall.
        assert_eq!(f.fades_at(4, 0, false, 50), Some(mv + 50));
        assert_eq!(f.fades_at(4, 0, true, 0), None, "core never fades");
        assert_eq!(Forgetting::OFF.fades_at(4, 0, false, 0), None);
    }
}
