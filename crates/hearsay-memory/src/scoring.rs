//! How recall ranks an NPC's memories: relevance + recency + importance.
//!
//! `score = w_rel · cosine + w_rec · decay^(ticks since last recalled) + w_imp · importance/10`
//!
//! Importance is divided by 10 rather than min-max scaled: with only a few fixed values
//! (4, 8, …), min-max scaling would turn it into an on/off signal. Recency decays per
//! *tick* and is refreshed by every recall, so what an NPC keeps thinking about stays
//! near the top while what it never recalls sinks.

use serde::{Deserialize, Serialize};

/// Weights and decay of the recall score.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Scoring {
    /// Weight of cosine similarity to the query.
    pub w_rel: f64,
    /// Weight of recency.
    pub w_rec: f64,
    /// Weight of importance / 10.
    pub w_imp: f64,
    /// Recency multiplier per tick since last recalled, in (0, 1].
    pub decay: f64,
}

impl Default for Scoring {
    /// Generative Agents' defaults: equal weights, decay 0.995 (per tick here).
    fn default() -> Self {
        Self {
            w_rel: 1.0,
            w_rec: 1.0,
            w_imp: 1.0,
            decay: 0.995,
        }
    }
}

impl Scoring {
    /// Pure similarity: what exact cosine search would rank.
    pub const COSINE: Scoring = Scoring {
        w_rel: 1.0,
        w_rec: 0.0,
        w_imp: 0.0,
        decay: 1.0,
    };

    /// The score of a memory with cosine `cos`, `importance`, last recalled `age` ticks ago.
    pub fn score(&self, cos: f32, importance: u8, age: u64) -> f64 {
        self.w_rel * f64::from(cos)
            + self.w_rec * pow(self.decay, age)
            + self.w_imp * f64::from(importance) / 10.0
    }
}

/// `base^exp` by repeated squaring: plain IEEE multiplications, so every platform and
/// build computes the same bits (unlike `powf`, which defers to the platform's libm).
pub fn pow(base: f64, mut exp: u64) -> f64 {
    let mut result = 1.0;
    let mut b = base;
    while exp > 0 {
        if exp & 1 == 1 {
            result *= b;
        }
        b *= b;
        exp >>= 1;
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pow_matches_the_definition() {
        assert_eq!(pow(0.5, 0), 1.0);
        assert_eq!(pow(0.5, 3), 0.125);
        assert!((pow(0.995, 100) - 0.995f64.powi(100)).abs() < 1e-12);
    }

    #[test]
    fn important_memories_outlast_recent_trivia() {
        let s = Scoring::default();
        // Gossip heard 50 ticks ago vs. a move decided this tick, both unrelated to the query.
        assert!(s.score(0.0, 8, 50) > s.score(0.0, 4, 0));
        // Relevance still dominates when it is strong.
        assert!(s.score(0.9, 4, 0) > s.score(0.0, 8, 0));
        assert_eq!(Scoring::COSINE.score(0.25, 10, 99), 0.25);
    }
}
