//! `[memory]` and its tables — scoring, forgetting, reflection, chunking, the embedder —
//! checked into a [`MemorySpec`].

use super::*;

/// `[memory.embedder]`, validated: (spec, batch size, cache entries, concurrency).
type EmbedderSettings = (EmbedderSpec, usize, usize, usize);

pub(super) fn embedder_spec(
    problems: &mut Problems,
    spanned: Option<&Spanned<RawEmbedder>>,
) -> EmbedderSettings {
    let default = Spanned::new(0..0, RawEmbedder::default());
    let spanned = spanned.unwrap_or(&default);
    let e = spanned.get_ref();
    let provider = e
        .provider
        .as_ref()
        .map_or(EmbedderProvider::Hashing, |p| *p.get_ref());
    let remote = RemoteFields {
        base_url: &e.base_url,
        model: &e.model,
        api_key_env: &e.api_key_env,
        timeout_ms: &e.timeout_ms,
        max_retries: &e.max_retries,
        retry_base_ms: &e.retry_base_ms,
        requests_per_minute: &e.requests_per_minute,
        max_response_bytes: &e.max_response_bytes,
    };
    let batch_default = if provider == EmbedderProvider::Openai {
        64
    } else {
        256
    };
    let batch_size = in_range(
        problems,
        e.batch_size.as_ref(),
        1..=BATCH_MAX,
        &format!("batch_size must be 1..={BATCH_MAX}"),
        Some("texts per embedding request"),
        batch_default,
    ) as usize;
    let spec = match provider {
        EmbedderProvider::Hashing => {
            let mut set = remote.set();
            if let Some(d) = &e.dimensions {
                set.push(("dimensions", d.span()));
            }
            refuse_remote_fields(problems, set, "[memory.embedder]");
            EmbedderSpec::Hashing
        }
        EmbedderProvider::Openai => {
            let at = e.provider.as_ref().map_or(spanned.span(), Spanned::span);
            EmbedderSpec::Openai {
                remote: remote_spec(
                    problems,
                    &remote,
                    at,
                    "[memory.embedder]",
                    (batch_size as u64)
                        .saturating_mul(EMBED_RESPONSE_BYTES_PER_TEXT)
                        .clamp(BRAIN_RESPONSE_BYTES_DEFAULT, *RESPONSE_BYTES.end()),
                ),
                dimensions: e.dimensions.as_ref().map(|d| {
                    in_range(
                        problems,
                        Some(d),
                        1..=DIMENSIONS_MAX,
                        &format!("dimensions must be 1..={DIMENSIONS_MAX}"),
                        Some("vectors are stored with that many dimensions; leave it out for the model's own"),
                        DIMENSIONS_MAX,
                    )
                }),
            }
        }
    };
    let cache_entries = in_range(
        problems,
        e.cache_entries.as_ref(),
        0..=CACHE_ENTRIES_MAX,
        &format!("cache_entries must be 0..={CACHE_ENTRIES_MAX}"),
        Some("vectors kept in memory; each costs its dimensions × 4 bytes"),
        100_000,
    ) as usize;
    // The hashing embedder is CPU work: one batch at a time leaves the cores to ticks.
    let concurrency = in_range(
        problems,
        e.max_concurrency.as_ref(),
        1..=CONCURRENCY_MAX,
        &format!("max_concurrency must be 1..={CONCURRENCY_MAX}"),
        None,
        if provider == EmbedderProvider::Openai {
            4
        } else {
            1
        },
    ) as usize;
    (spec, batch_size, cache_entries, concurrency)
}

pub(super) fn forget_spec(problems: &mut Problems, f: Option<&raw::RawForget>) -> Forgetting {
    let mut forgetting = Forgetting::default();
    let Some(f) = f else {
        return forgetting;
    };
    if let Some(t) = &f.threshold {
        let v = *t.get_ref();
        if !(0.0..1.0).contains(&v) {
            problems.add(
                t.span(),
                "threshold must be in [0, 1): the retention below which a memory is archived",
                Some("0 turns forgetting off"),
            );
        } else {
            forgetting.threshold = v;
        }
    }
    if let Some(st) = &f.strength {
        let v = *st.get_ref();
        if !(v.is_finite() && v > 0.0 && v <= 1e9) {
            problems.add(
                st.span(),
                "strength must be a number of ticks > 0 (per point of importance)",
                None,
            );
        } else {
            forgetting.strength_per_importance = v;
        }
    }
    if let Some(b) = &f.recall_boost {
        let v = *b.get_ref();
        if !(v.is_finite() && (0.0..=1e6).contains(&v)) {
            problems.add(b.span(), "recall_boost must be a finite number ≥ 0", None);
        } else {
            forgetting.recall_boost = v;
        }
    }
    forgetting
}

pub(super) fn reflect_spec(
    problems: &mut Problems,
    r: Option<&raw::RawReflect>,
) -> ReflectSettings {
    let mut reflect = ReflectSettings::default();
    let Some(r) = r else {
        return reflect;
    };
    if let Some(t) = &r.threshold {
        reflect.threshold = *t.get_ref();
    }
    if let Some(e) = &r.evidence {
        let v = *e.get_ref();
        if v == 0 || v > 500 {
            problems.add(e.span(), "evidence must be 1..=500 memories", None);
        } else {
            reflect.evidence = v as usize;
        }
    }
    if let Some(i) = &r.insights {
        let v = *i.get_ref();
        if v == 0 || v > 10 {
            problems.add(i.span(), "insights must be 1..=10", None);
        } else {
            reflect.insights_max = v as usize;
        }
    }
    reflect
}

pub(super) fn chunking_spec(problems: &mut Problems, m: &raw::RawMemory) -> Chunking {
    let mut chunking = Chunking::default();
    if let Some(c) = &m.chunk_chars {
        let v = *c.get_ref();
        if !(16..=100_000).contains(&v) {
            problems.add(c.span(), "chunk_chars must be 16..=100000 characters", None);
        } else {
            chunking.chars = v as usize;
        }
    }
    if let Some(o) = &m.chunk_overlap {
        let v = *o.get_ref() as usize;
        if v >= chunking.chars / 2 {
            problems.add(
                o.span(),
                format!(
                    "chunk_overlap must be less than half of chunk_chars ({})",
                    chunking.chars
                ),
                None,
            );
        } else {
            chunking.overlap = v;
        }
    } else {
        chunking.overlap = chunking.overlap.min(chunking.chars / 8);
    }
    chunking
}

pub(super) fn memory_spec(problems: &mut Problems, m: &raw::RawMemory) -> MemorySpec {
    let recall_k = match &m.recall_k {
        Some(k) if *k.get_ref() == 0 || *k.get_ref() > RECALL_K_MAX => {
            problems.add(
                k.span(),
                format!("recall_k must be 1..={RECALL_K_MAX}"),
                None,
            );
            5
        }
        Some(k) => *k.get_ref() as usize,
        None => 5,
    };
    let mut scoring = Scoring::default();
    if let Some(s) = &m.scoring {
        for (field, value, target) in [
            ("w_rel", &s.w_rel, &mut scoring.w_rel),
            ("w_rec", &s.w_rec, &mut scoring.w_rec),
            ("w_imp", &s.w_imp, &mut scoring.w_imp),
        ] {
            if let Some(v) = value {
                if !v.get_ref().is_finite() || *v.get_ref() < 0.0 {
                    problems.add(
                        v.span(),
                        format!("{field} must be a finite number ≥ 0"),
                        None,
                    );
                } else {
                    *target = *v.get_ref();
                }
            }
        }
        if let Some(c) = &s.candidates {
            let v = *c.get_ref();
            if v == 0 || v > 10_000 {
                problems.add(c.span(), "candidates must be 1..=10000", None);
            } else {
                scoring.candidates = v as usize;
            }
        }
        if let Some(d) = &s.decay {
            let v = *d.get_ref();
            if !(v > 0.0 && v <= 1.0) {
                problems.add(
                    d.span(),
                    "decay must be in (0, 1]: the recency multiplier per tick",
                    None,
                );
            } else {
                scoring.decay = v;
            }
        }
    }
    let forgetting = forget_spec(problems, m.forget.as_ref());
    let reflect = reflect_spec(problems, m.reflect.as_ref());
    let chunking = chunking_spec(problems, m);
    let (embedder, batch_size, cache_entries, embed_concurrency) =
        embedder_spec(problems, m.embedder.as_ref());
    let short_term = in_range(
        problems,
        m.short_term.as_ref(),
        0..=SHORT_TERM_MAX,
        &format!("short_term must be 0..={SHORT_TERM_MAX} memories"),
        Some("they all go into every prompt"),
        5,
    ) as usize;
    let visibility = m.visibility.unwrap_or(match embedder {
        EmbedderSpec::Hashing => Visibility::Barrier,
        EmbedderSpec::Openai { .. } => Visibility::Eventual,
    });
    MemorySpec {
        store: m.store,
        recall_k,
        visibility,
        scoring,
        embedder,
        batch_size,
        cache_entries,
        embed_concurrency,
        short_term,
        forgetting,
        reflect,
        chunking,
        barrier_timeout_ms: in_range(
            problems,
            m.barrier_timeout_ms.as_ref(),
            1..=u64::MAX,
            "barrier_timeout_ms must be at least 1",
            Some("it bounds a wait; leave it out for the default"),
            120_000,
        ),
        drain_timeout_ms: in_range(
            problems,
            m.drain_timeout_ms.as_ref(),
            1..=u64::MAX,
            "drain_timeout_ms must be at least 1",
            Some("it bounds a wait; leave it out for the default"),
            60_000,
        ),
    }
}

/// A key's value if it is in `range`; otherwise `message` at the value and `default`
/// (so checking goes on), and `default` when the key is left out.
pub(super) fn in_range<T: Copy + PartialOrd>(
    problems: &mut Problems,
    value: Option<&Spanned<T>>,
    range: std::ops::RangeInclusive<T>,
    message: &str,
    help: Option<&str>,
    default: T,
) -> T {
    match value {
        Some(v) if !range.contains(v.get_ref()) => {
            problems.add(v.span(), message, help);
            default
        }
        Some(v) => *v.get_ref(),
        None => default,
    }
}
