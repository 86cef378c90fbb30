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
//! model than its current one ([`SpaceGuard::check_save`]).

use std::collections::BTreeMap;
use std::sync::RwLock;

use serde::{Deserialize, Serialize};

use crate::store::{EmbeddedRow, StoreError};

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

/// A store's current space, and the check every save goes through.
#[derive(Debug, Default)]
pub struct SpaceGuard(RwLock<Option<VectorSpace>>);

impl SpaceGuard {
    /// The current space, if one was chosen or established.
    pub fn get(&self) -> Option<VectorSpace> {
        self.0.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Makes `space` current.
    pub fn set(&self, space: VectorSpace) {
        *self.0.write().unwrap_or_else(|e| e.into_inner()) = Some(space);
    }

    /// Checks rows about to be saved as `model`'s. With no current space yet, `others`
    /// (called once) says whether the store holds vectors of another space; if it does
    /// the save is refused (the caller must [`crate::Store::use_space`] first), else the
    /// rows' space becomes current. A width other than the space's is refused too: the
    /// server now serves another model under the same name.
    pub async fn check_save<F>(
        &self,
        model: &str,
        rows: &[EmbeddedRow],
        others: F,
    ) -> Result<(), StoreError>
    where
        F: std::future::Future<Output = Result<Option<String>, StoreError>>,
    {
        let Some(first) = rows.first() else {
            return Ok(());
        };
        let mut space = match self.get() {
            Some(space) => space,
            None => {
                if let Some(other) = others.await? {
                    return Err(StoreError::Space(format!(
                        "the store holds vectors of {other}; vectors of {model} cannot join them \
                         (choose the store's vector space first, which sets the others aside)"
                    )));
                }
                VectorSpace::new(model, None)
            }
        };
        if space.model != model {
            return Err(StoreError::Space(format!(
                "the store's vectors are of {space}, not of {model}: recall would compare two \
                 models' vectors"
            )));
        }
        let dims = space.dims.unwrap_or(first.dims);
        if let Some(bad) = rows.iter().find(|r| r.dims != dims) {
            return Err(StoreError::Space(format!(
                "the embedder {model:?} answered with {} dimensions where its earlier vectors \
                 have {dims}: the server now serves another model under that name. Stop it, \
                 and fork or resume the run once the server is right (a changed model is \
                 re-embedded)",
                bad.dims
            )));
        }
        if space.dims.is_none() {
            space.dims = Some(dims);
            self.set(space);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hearsay_core::MemoryId;

    fn row(dims: usize) -> EmbeddedRow {
        EmbeddedRow {
            id: MemoryId(1),
            chunk: 0,
            vector: vec![0.0; crate::VECTOR_DIMS],
            dims,
        }
    }

    #[tokio::test]
    async fn a_save_of_another_model_or_width_is_refused() {
        let guard = SpaceGuard::default();
        let none = async { Ok(None) };
        guard
            .check_save("e5", &[row(384)], none)
            .await
            .expect("the first save sets the space");
        assert_eq!(guard.get(), Some(VectorSpace::new("e5", Some(384))));
        let refused = guard
            .check_save("hashing-v1", &[row(1536)], async { Ok(None) })
            .await;
        assert!(matches!(refused, Err(StoreError::Space(m)) if m.contains("not of hashing-v1")));
        let wider = guard
            .check_save("e5", &[row(384), row(768)], async { Ok(None) })
            .await;
        assert!(matches!(wider, Err(StoreError::Space(m)) if m.contains("768 dimensions")));

        let fresh = SpaceGuard::default();
        let mixed = fresh
            .check_save("e5", &[row(384)], async {
                Ok(Some("hashing-v1".to_owned()))
            })
            .await;
        assert!(matches!(mixed, Err(StoreError::Space(m)) if m.contains("hashing-v1")));
        assert_eq!(fresh.get(), None, "nothing was established");
    }

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
