//! Seeded RNG streams. Every random draw in hearsay comes from a stream derived from
//! (root seed, NPC, tick, purpose), so adding an NPC or a draw never shifts another's.

use rand_chacha::ChaCha8Rng;
use rand_chacha::rand_core::SeedableRng;

use crate::ids::NpcId;

/// The blake3 `derive_key` context of every stream.
const CONTEXT: &str = "hearsay rng stream v1";

/// The RNG stream for `npc` at `tick`, for one `purpose` (e.g. `"brain"`).
pub fn stream(seed: u64, npc: NpcId, tick: u64, purpose: &str) -> ChaCha8Rng {
    use blake3::hazmat::HasherExt;
    // `derive_key` hashes its context string before the input, the same hash every time:
    // hashed once per process, which halves a stream's cost (the heuristic brain takes
    // one per NPC per tick). The same key, so the same streams as `new_derive_key`.
    static CONTEXT_KEY: std::sync::LazyLock<blake3::hazmat::ContextKey> =
        std::sync::LazyLock::new(|| blake3::hazmat::hash_derive_key_context(CONTEXT));
    let mut hasher = blake3::Hasher::new_from_context_key(&CONTEXT_KEY);
    hasher.update(&seed.to_le_bytes());
    hasher.update(&npc.0.to_le_bytes());
    hasher.update(&tick.to_le_bytes());
    hasher.update(purpose.as_bytes());
    ChaCha8Rng::from_seed(*hasher.finalize().as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::RngExt;

    fn draws(seed: u64, npc: u32, tick: u64) -> Vec<u32> {
        let mut rng = stream(seed, NpcId(npc), tick, "test");
        (0..8).map(|_| rng.random_range(0..1000)).collect()
    }

    #[test]
    fn streams_are_seeded_as_derive_key_seeds_them() {
        // What every stream was seeded with before the context key was kept.
        let mut hasher = blake3::Hasher::new_derive_key("hearsay rng stream v1");
        hasher.update(&5u64.to_le_bytes());
        hasher.update(&6u32.to_le_bytes());
        hasher.update(&7u64.to_le_bytes());
        hasher.update(b"heuristic");
        let mut before = ChaCha8Rng::from_seed(*hasher.finalize().as_bytes());
        let mut now = stream(5, NpcId(6), 7, "heuristic");
        for _ in 0..16 {
            assert_eq!(
                now.random_range(0..u64::MAX),
                before.random_range(0..u64::MAX)
            );
        }
    }

    #[test]
    fn streams_are_reproducible_and_independent() {
        assert_eq!(draws(1, 2, 3), draws(1, 2, 3));
        assert_ne!(draws(1, 2, 3), draws(2, 2, 3));
        assert_ne!(draws(1, 2, 3), draws(1, 3, 3));
        assert_ne!(draws(1, 2, 3), draws(1, 2, 4));
    }
}
