//! One vector space per run: recall compares a query only with vectors the same model
//! made, at the same width.
//!
//! Vectors of two embedding models are not comparable: a cosine between a hashing vector
//! and an e5 vector is a number, not a similarity. Every vector is stored with the model
//! (and the original width) that made it, and a store has one *current* space, chosen by
//! [`crate::Store::use_space`] before a run's first tick: vectors of any other model leave
//! the recall tables for a table of their own (kept, never deleted), their memories count
//! as not yet embedded, and the backfill worker embeds them again with the current
//! model. Vectors kept from an earlier space come back when a run returns to it, so a
//! fork back to the old model needs no work. A store refuses to save vectors of another
//! model than its current one (`SpaceGuard::check_save`, in [`crate::store`]).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// The vectors recall may compare: one model's, of one width.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct VectorSpace {
    /// The model, as the embedder names it ([`crate::Embedder::model`]).
    pub model: String,
    /// The width the model returns before vectors are fitted to [`crate::VECTOR_DIMS`],
    /// when known (a preflight's probe, or the `dimensions` asked for). Unknown, the
    /// store takes the width its vectors of this model already have, or the first one
    /// saved; a server that later answers with another width is refused.
    pub dims: Option<usize>,
}

impl VectorSpace {
    /// The space of `model` at `dims` (if known).
    pub fn new(model: impl Into<String>, dims: Option<usize>) -> Self {
        Self {
            model: model.into(),
            dims,
        }
    }

    /// Whether a vector of `model` with `dims` belongs here.
    pub fn holds(&self, model: &str, dims: usize) -> bool {
        self.model == model && self.dims.is_none_or(|d| d == dims)
    }
}

impl std::fmt::Display for VectorSpace {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.dims {
            Some(d) => write!(f, "{} ({d} dimensions)", self.model),
            None => write!(f, "{}", self.model),
        }
    }
}

/// What [`crate::Store::use_space`] did.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SpaceSwitch {
    /// The space now current, with its width when the store knows it.
    pub space: Option<VectorSpace>,
    /// Memories whose vectors were of another space, by model: their vectors were moved
    /// to the kept vectors, out of recall.
    pub retired: BTreeMap<String, u64>,
    /// Memories whose vectors of this space were kept from an earlier switch and came
    /// back to recall (no embedding needed).
    pub restored: u64,
    /// Memories that had vectors of another space and none of this one: the backfill
    /// worker embeds them again.
    pub reembed: u64,
    /// Memories without a vector of this space now (those to re-embed, and any never
    /// embedded yet).
    pub pending: u64,
    /// The highest id among `pending` (0 if none): once the backfill watermark reaches
    /// it, everything written before the switch is in the current space.
    pub pending_through: u64,
}

impl SpaceSwitch {
    /// Whether anything moved.
    pub fn changed(&self) -> bool {
        !self.retired.is_empty() || self.restored > 0
    }
}

/// Memories with vectors of one model in a store.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModelVectors {
    /// Memories whose vectors of this model recall uses (the current space's).
    pub in_use: u64,
    /// Memories whose vectors of this model are kept out of recall (another space's).
    pub kept: u64,
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn a_space_holds_its_model_at_its_width() {
        let known = VectorSpace::new("e5", Some(384));
        assert!(known.holds("e5", 384));
        assert!(!known.holds("e5", 768));
        assert!(!known.holds("hashing-v1", 384));
        assert!(VectorSpace::new("e5", None).holds("e5", 768));
        assert_eq!(known.to_string(), "e5 (384 dimensions)");
    }
}
