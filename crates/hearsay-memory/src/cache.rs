//! An embedding cache: identical text (for the same model) is embedded once per run.
//!
//! Gossip repeats itself — the same sentence is said, heard and remembered by many NPCs —
//! and so do observations. Keyed by a hash of (model, text); least recently used entries
//! go first once the cache is full.

use std::num::NonZeroUsize;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use lru::LruCache;

use crate::BoxFuture;
use crate::embed::{EmbedError, Embedder};

/// Wraps an embedder with an LRU cache.
pub struct CachedEmbedder {
    inner: Arc<dyn Embedder>,
    cache: Mutex<LruCache<[u8; 32], Arc<Vec<f32>>>>,
    hits: AtomicU64,
    misses: AtomicU64,
}

impl CachedEmbedder {
    /// Caches up to `capacity` vectors from `inner`.
    pub fn new(inner: Arc<dyn Embedder>, capacity: usize) -> Self {
        let capacity = NonZeroUsize::new(capacity).unwrap_or(NonZeroUsize::MIN);
        Self {
            inner,
            cache: Mutex::new(LruCache::new(capacity)),
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
        }
    }

    /// (texts served from the cache, texts sent to the embedder).
    pub fn counts(&self) -> (u64, u64) {
        (
            self.hits.load(Ordering::Relaxed),
            self.misses.load(Ordering::Relaxed),
        )
    }

    fn key(&self, text: &str) -> [u8; 32] {
        let mut hasher = blake3::Hasher::new();
        hasher.update(self.inner.model().as_bytes());
        hasher.update(&[0]);
        hasher.update(text.as_bytes());
        *hasher.finalize().as_bytes()
    }

    fn cache(&self) -> std::sync::MutexGuard<'_, LruCache<[u8; 32], Arc<Vec<f32>>>> {
        self.cache.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Embedder for CachedEmbedder {
    fn model(&self) -> &str {
        self.inner.model()
    }

    fn embed<'a>(
        &'a self,
        texts: &'a [String],
    ) -> BoxFuture<'a, Result<Vec<Vec<f32>>, EmbedError>> {
        Box::pin(async move {
            let keys: Vec<[u8; 32]> = texts.iter().map(|t| self.key(t)).collect();
            let mut found: Vec<Option<Arc<Vec<f32>>>> = {
                let mut cache = self.cache();
                keys.iter().map(|k| cache.get(k).cloned()).collect()
            };
            // Each distinct missing text once, in first-seen order.
            let mut missing: Vec<usize> = Vec::new();
            for (i, f) in found.iter().enumerate() {
                if f.is_none() && !missing.iter().any(|&j| keys[j] == keys[i]) {
                    missing.push(i);
                }
            }
            self.hits
                .fetch_add((texts.len() - missing.len()) as u64, Ordering::Relaxed);
            self.misses
                .fetch_add(missing.len() as u64, Ordering::Relaxed);
            if !missing.is_empty() {
                let batch: Vec<String> = missing.iter().map(|&i| texts[i].clone()).collect();
                let vectors = self.inner.embed(&batch).await?;
                if vectors.len() != batch.len() {
                    return Err(EmbedError::Malformed(format!(
                        "{} vectors for {} texts",
                        vectors.len(),
                        batch.len()
                    )));
                }
                let mut cache = self.cache();
                for (&i, v) in missing.iter().zip(vectors) {
                    let v = Arc::new(v);
                    cache.put(keys[i], v.clone());
                    for (j, slot) in found.iter_mut().enumerate() {
                        if slot.is_none() && keys[j] == keys[i] {
                            *slot = Some(v.clone());
                        }
                    }
                }
            }
            Ok(found
                .into_iter()
                .map(|v| v.map(|v| (*v).clone()).unwrap_or_default())
                .collect())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hashing::HashingEmbedder;
    use std::sync::atomic::AtomicUsize;

    struct Counting(AtomicUsize);
    impl Embedder for Counting {
        fn model(&self) -> &str {
            "counting"
        }
        fn embed<'a>(
            &'a self,
            texts: &'a [String],
        ) -> BoxFuture<'a, Result<Vec<Vec<f32>>, EmbedError>> {
            self.0.fetch_add(texts.len(), Ordering::SeqCst);
            Box::pin(
                async move { Ok(texts.iter().map(|t| HashingEmbedder.embed_one(t)).collect()) },
            )
        }
    }

    #[tokio::test]
    async fn identical_text_is_embedded_once() {
        let inner = Arc::new(Counting(AtomicUsize::new(0)));
        let cached = CachedEmbedder::new(inner.clone(), 100);
        let texts: Vec<String> = ["a fish", "a bird", "a fish", "a fish"]
            .map(String::from)
            .to_vec();
        let first = cached.embed(&texts).await.expect("embed");
        assert_eq!(inner.0.load(Ordering::SeqCst), 2, "two distinct texts");
        assert_eq!(first[0], first[2]);
        assert_eq!(first[0], HashingEmbedder.embed_one("a fish"));
        let again = cached.embed(&texts[..2]).await.expect("embed");
        assert_eq!(inner.0.load(Ordering::SeqCst), 2, "all cached");
        assert_eq!(again, first[..2].to_vec());
        assert_eq!(cached.counts(), (4, 2));
    }

    struct Named(&'static str);
    impl Embedder for Named {
        fn model(&self) -> &str {
            self.0
        }
        fn embed<'a>(
            &'a self,
            texts: &'a [String],
        ) -> BoxFuture<'a, Result<Vec<Vec<f32>>, EmbedError>> {
            Box::pin(
                async move { Ok(texts.iter().map(|t| HashingEmbedder.embed_one(t)).collect()) },
            )
        }
    }

    #[test]
    fn the_key_names_the_model() {
        // The same text embedded by two models is two entries: a vector is never served
        // for a model that did not make it.
        let a = CachedEmbedder::new(Arc::new(Named("model-a")), 10);
        let b = CachedEmbedder::new(Arc::new(Named("model-b")), 10);
        assert_ne!(a.key("the mill burned"), b.key("the mill burned"));
        assert_eq!(a.key("the mill burned"), a.key("the mill burned"));
        // No separator trick joins two (model, text) pairs into one key.
        let ab = CachedEmbedder::new(Arc::new(Named("model-a ")), 10);
        assert_ne!(a.key(" x"), ab.key("x"));
    }

    #[tokio::test]
    async fn the_least_recently_used_entry_goes_first() {
        let inner = Arc::new(Counting(AtomicUsize::new(0)));
        let cached = CachedEmbedder::new(inner.clone(), 2);
        for t in ["a", "b", "a", "c", "a", "b"] {
            cached.embed(&[t.to_owned()]).await.expect("embed");
        }
        // a, b, (a hit), c evicts b, (a hit), b evicts c.
        assert_eq!(inner.0.load(Ordering::SeqCst), 4);
    }
}
