//! Reading a scenario file (bounded in size) and checking it, problem by problem, into
//! a [`Scenario`]: the world, its places, NPCs, events and facts, and the helpers every
//! section's checks share.
//!
//! Over 600 lines because it is one pass over the whole file, section by section, that
//! collects every problem with its place rather than stopping at the first.

use super::*;

/// Reads and validates the scenario at `path`.
pub fn load(path: &Path) -> Result<(Scenario, Vec<u8>), ScenarioError> {
    let bytes = read(path)?;
    let scenario = parse(path, &bytes)?;
    Ok((scenario, bytes))
}

/// The bytes of the scenario file at `path` (at most [`FILE_BYTES_MAX`]).
pub fn read(path: &Path) -> Result<Vec<u8>, ScenarioError> {
    read_bounded(path).map_err(|source| ScenarioError::Read {
        path: path.display().to_string(),
        source,
    })
}

/// Reads at most [`FILE_BYTES_MAX`] bytes of `path`, refusing a longer file (or a device
/// that never ends) instead of reading it whole.
pub(super) fn read_bounded(path: &Path) -> std::io::Result<Vec<u8>> {
    use std::io::Read;
    let file = std::fs::File::open(path)?;
    if file.metadata()?.is_dir() {
        return Err(std::io::Error::other("it is a directory"));
    }
    let mut bytes = Vec::new();
    file.take(FILE_BYTES_MAX + 1).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > FILE_BYTES_MAX {
        return Err(std::io::Error::other(format!(
            "it is larger than {} MiB, the most a scenario may be",
            FILE_BYTES_MAX / (1024 * 1024)
        )));
    }
    Ok(bytes)
}

/// Validates scenario `bytes`; `path` is only used in messages.
pub fn parse(path: &Path, bytes: &[u8]) -> Result<Scenario, ScenarioError> {
    let text = match std::str::from_utf8(bytes) {
        Ok(text) => text.to_owned(),
        Err(e) => {
            let lossy = String::from_utf8_lossy(bytes).into_owned();
            // Everything before the first invalid byte is copied unchanged by the lossy
            // conversion, so the offset still points at the bad byte.
            let at = e.valid_up_to();
            let mut problems = Problems::new(path, lossy);
            problems.add(
                at..at + 1,
                "the file is not valid UTF-8",
                Some("save the scenario as UTF-8 text"),
            );
            return Err(problems.into_error());
        }
    };
    let mut problems = Problems::new(path, text.clone());
    let raw: RawScenario = match toml::from_str(&text) {
        Ok(raw) => raw,
        Err(e) => {
            let span = e.span().unwrap_or(0..0);
            problems.add(span, toml_message(e.message()), toml_help(e.message()));
            return Err(problems.into_error());
        }
    };
    let scenario = check(raw, &mut problems);
    match scenario {
        Some(mut s) if problems.is_empty() => {
            s.notes = problems.take_notes();
            Ok(s)
        }
        _ => Err(problems.into_error()),
    }
}

/// The TOML parser's message, said in the scenario's terms where it is not.
pub(super) fn toml_message(message: &str) -> String {
    let message = message.trim();
    if message == "wanted string or table" {
        // What the parser says of a number or list where a name (an enum) goes.
        "invalid type: expected a name in quotes".to_owned()
    } else {
        message.to_owned()
    }
}

pub(super) fn toml_help(message: &str) -> Option<&'static str> {
    if message.trim() == "wanted string or table" {
        return Some("e.g. provider = \"openai\"; the names each key takes are in README.md");
    }
    if message.contains("unknown field") {
        Some("remove the key or fix its spelling; see the scenario format in README.md")
    } else if message.contains("missing field") {
        Some("add the key; see the scenario format in README.md")
    } else if message.contains("unknown variant") {
        Some("use one of the values listed")
    } else {
        None
    }
}

pub(super) fn pos_on_map(
    problems: &mut Problems,
    at: &Spanned<[i32; 2]>,
    grid: Grid,
    what: &str,
) -> Pos {
    let pos = Pos::from(*at.get_ref());
    if !grid.contains(pos) {
        problems.add(
            at.span(),
            format!(
                "{what} at {pos} is off the map (x must be 0..{}, y 0..{})",
                grid.width.saturating_sub(1),
                grid.height.saturating_sub(1)
            ),
            Some("move it inside [world] width × height"),
        );
    }
    pos
}

pub(super) fn importance(problems: &mut Problems, value: &Spanned<i64>) -> u8 {
    let v = *value.get_ref();
    if !(1..=10).contains(&v) {
        problems.add(
            value.span(),
            format!("importance {v} is outside 1–10"),
            None,
        );
        return 1;
    }
    v as u8
}

pub(super) fn non_empty(problems: &mut Problems, s: &Spanned<String>, what: &str) -> String {
    let v = s.get_ref().trim().to_owned();
    if v.is_empty() {
        problems.add(s.span(), format!("{what} is empty"), None);
    }
    v
}

/// A name (of the scenario, an NPC, a place, a fact): not empty, one line of at most
/// [`NAME_CHARS_MAX`] characters, no control characters — names are printed in tables and
/// on terminals, where a newline or an escape would forge lines or drive the terminal.
pub(super) fn checked_name(problems: &mut Problems, s: &Spanned<String>, what: &str) -> String {
    let v = non_empty(problems, s, what);
    if v.chars().any(hearsay_core::is_control) {
        problems.add(
            s.span(),
            format!("{what} holds a control character ({})", shown_controls(&v)),
            Some("names are one line of visible text"),
        );
    } else if v.chars().count() > NAME_CHARS_MAX {
        problems.add(
            s.span(),
            format!(
                "{what} is {} characters long; at most {NAME_CHARS_MAX}",
                v.chars().count()
            ),
            None,
        );
    }
    v
}

/// The control characters of `text`, escaped, for a message.
pub(super) fn shown_controls(text: &str) -> String {
    let mut seen: Vec<String> = text
        .chars()
        .filter(|c| hearsay_core::is_control(*c))
        .map(|c| c.escape_unicode().to_string())
        .collect();
    seen.dedup();
    seen.truncate(3);
    seen.join(", ")
}

/// Refuses `text` longer than `max` characters, at `span`.
pub(super) fn bounded_text(
    problems: &mut Problems,
    span: std::ops::Range<usize>,
    text: &str,
    max: usize,
    what: &str,
) {
    let n = text.chars().count();
    if n > max {
        problems.add(
            span,
            format!("{what} is {n} characters long; at most {max}"),
            None,
        );
    }
}

/// Refuses a list longer than `max` entries, at `span`.
pub(super) fn bounded_count(
    problems: &mut Problems,
    span: std::ops::Range<usize>,
    n: usize,
    max: usize,
    what: &str,
) -> bool {
    if n > max {
        problems.add(span, format!("{n} {what}; at most {max}"), None);
        return false;
    }
    true
}

pub(super) fn check(raw: RawScenario, problems: &mut Problems) -> Option<Scenario> {
    let name = checked_name(problems, &raw.name, "the scenario name");
    let ticks = *raw.ticks.get_ref();
    if ticks == 0 {
        problems.add(
            raw.ticks.span(),
            "ticks = 0: the run would do nothing",
            Some("set ticks to 1 or more"),
        );
    } else if ticks > TICKS_MAX {
        problems.add(
            raw.ticks.span(),
            format!("ticks = {ticks} is more than {TICKS_MAX}"),
            None,
        );
    }

    let w = &raw.world;
    for (side, v) in [("width", &w.width), ("height", &w.height)] {
        let n = *v.get_ref();
        if n == 0 || n > MAP_SIDE_MAX {
            problems.add(
                v.span(),
                format!("world {side} {n} must be 1..={MAP_SIDE_MAX}"),
                None,
            );
        }
    }
    let grid = Grid {
        width: *w.width.get_ref(),
        height: *w.height.get_ref(),
    };
    let hearing_radius = in_range(
        problems,
        Some(&w.hearing_radius),
        0..=RADIUS_MAX,
        &format!("hearing_radius must be 0..={RADIUS_MAX} cells"),
        Some("twice the largest map side already reaches every cell"),
        0,
    );
    let sight_radius = match &w.sight_radius {
        Some(s) => in_range(
            problems,
            Some(s),
            0..=RADIUS_MAX,
            &format!("sight_radius must be 0..={RADIUS_MAX} cells"),
            Some("twice the largest map side already reaches every cell"),
            hearing_radius,
        ),
        None => hearing_radius.saturating_mul(2).min(RADIUS_MAX),
    };
    let max_listeners = in_range(
        problems,
        w.max_listeners.as_ref(),
        1..=MAX_LISTENERS_MAX,
        &format!("max_listeners must be 1..={MAX_LISTENERS_MAX}"),
        Some("the most NPCs one talk reaches, nearest first"),
        hearsay_core::MAX_LISTENERS_DEFAULT,
    );
    if let Some(s) = &w.sight_radius
        && *s.get_ref() < hearing_radius
    {
        problems.add(
            s.span(),
            format!(
                "sight_radius {} is smaller than hearing_radius {hearing_radius}",
                s.get_ref()
            ),
            Some("an NPC must see whoever it can hear"),
        );
    }

    let mut places = Vec::new();
    let mut place_names = BTreeMap::new();
    let n_places = raw.places.len();
    if !bounded_count(problems, 0..0, n_places, PLACES_MAX, "places") {
        return None;
    }
    for p in &raw.places {
        let pname = checked_name(problems, &p.name, "a place name");
        let at = pos_on_map(problems, &p.at, grid, &format!("place {pname:?}"));
        if place_names.insert(pname.clone(), places.len()).is_some() {
            problems.add(
                p.name.span(),
                format!("place {pname:?} is defined twice"),
                None,
            );
        }
        places.push(Place {
            name: pname.into(),
            at,
        });
    }

    let mut brains = BTreeMap::new();
    let default_brain = raw
        .brain
        .clone()
        .unwrap_or_else(|| Spanned::new(0..0, RawBrain::default()));
    brains.insert(
        DEFAULT_BRAIN.to_owned(),
        brain_spec(problems, &default_brain, "[brain]"),
    );
    for (bname, b) in &raw.brains {
        if bname.chars().any(hearsay_core::is_control) || bname.chars().count() > NAME_CHARS_MAX {
            problems.add(
                b.span(),
                format!(
                    "brain name {bname:?} must be one line of at most {NAME_CHARS_MAX} visible characters"
                ),
                None,
            );
        }
        if bname == DEFAULT_BRAIN {
            problems.add(
                b.span(),
                format!("brain name {DEFAULT_BRAIN:?} is reserved for [brain]"),
                Some("rename it"),
            );
        }
        brains.insert(
            bname.clone(),
            brain_spec(problems, b, &format!("[brains.{bname}]")),
        );
    }

    if raw.npcs.is_empty() {
        problems.add(
            0..0,
            "no NPCs: the scenario needs at least one [[npcs]] table",
            Some("add [[npcs]] with name, persona and at"),
        );
    }
    if !bounded_count(problems, 0..0, raw.npcs.len(), NPCS_MAX, "NPCs") {
        return None;
    }
    let mut npcs = Vec::new();
    let mut npc_names = BTreeSet::new();
    for n in &raw.npcs {
        let nname = checked_name(problems, &n.name, "an NPC name");
        bounded_text(
            problems,
            n.name.span(),
            &n.persona,
            TEXT_CHARS_MAX,
            &format!("the persona of {nname:?}"),
        );
        bounded_count(
            problems,
            n.name.span(),
            n.memories.len(),
            SEED_MEMORIES_MAX,
            &format!("seed memories for {nname:?}"),
        );
        if !nname.is_empty() && !npc_names.insert(nname.clone()) {
            problems.add(
                n.name.span(),
                format!("NPC name {nname:?} is used twice"),
                Some("NPC names must be unique"),
            );
        }
        let at = pos_on_map(problems, &n.at, grid, &format!("NPC {nname:?}"));
        let mut memories = Vec::new();
        for m in n.memories.iter().take(SEED_MEMORIES_MAX) {
            let content = non_empty(problems, &m.content, "a memory's content");
            bounded_text(
                problems,
                m.content.span(),
                &content,
                MEMORY_CHARS_MAX,
                "a memory's content",
            );
            memories.push(SeedMemory {
                content,
                importance: importance(problems, &m.importance),
                core: m.core.unwrap_or(true),
            });
        }
        let brain = match &n.brain {
            Some(b) => {
                if !brains.contains_key(b.get_ref()) {
                    let known: Vec<&str> = brains.keys().map(String::as_str).collect();
                    problems.add(
                        b.span(),
                        format!("unknown brain {:?}", b.get_ref()),
                        Some(&format!(
                            "define [brains.{}] or use one of: {}",
                            b.get_ref(),
                            known.join(", ")
                        )),
                    );
                }
                b.get_ref().clone()
            }
            None => DEFAULT_BRAIN.to_owned(),
        };
        npcs.push(NpcSpec {
            name: nname,
            persona: n.persona.trim().to_owned(),
            at,
            memories,
            brain,
        });
    }

    let mut events = Vec::new();
    if !bounded_count(problems, 0..0, raw.events.len(), EVENTS_MAX, "events") {
        return None;
    }
    for e in &raw.events {
        let tick = *e.tick.get_ref();
        // Not an error: `--ticks` (or `--set ticks=`) may shorten a run on purpose.
        if ticks > 0 && tick >= ticks {
            problems.note(
                e.tick.span().start,
                format_args!(
                    "note: the event at tick {tick} never fires: this run has ticks 0..{}",
                    ticks - 1
                ),
            );
        }
        let place = match place_names.get(e.place.get_ref().trim()) {
            Some(&idx) => idx,
            None => {
                let known: Vec<&str> = place_names.keys().map(String::as_str).collect();
                let hint = if known.is_empty() {
                    "define it in [[places]]".to_owned()
                } else {
                    format!("known places: {}", known.join(", "))
                };
                problems.add(
                    e.place.span(),
                    format!("unknown place {:?}", e.place.get_ref()),
                    Some(&hint),
                );
                0
            }
        };
        let text = non_empty(problems, &e.text, "an event's text");
        bounded_text(
            problems,
            e.text.span(),
            &text,
            TEXT_CHARS_MAX,
            "an event's text",
        );
        let importance = e
            .importance
            .as_ref()
            .map_or(hearsay_core::memory::WITNESS_IMPORTANCE, |i| {
                importance(problems, i)
            });
        events.push(ScheduledEvent {
            tick,
            place,
            text,
            importance,
        });
    }

    let mut facts = Vec::new();
    let mut fact_names = BTreeSet::new();
    if !bounded_count(problems, 0..0, raw.facts.len(), FACTS_MAX, "facts") {
        return None;
    }
    for f in &raw.facts {
        let fname = checked_name(problems, &f.name, "a fact name");
        if !fname.is_empty() && !fact_names.insert(fname.clone()) {
            problems.add(
                f.name.span(),
                format!("fact {fname:?} is defined twice"),
                None,
            );
        }
        let at = f.patterns.as_ref().map_or(f.name.span(), Spanned::span);
        let patterns: Vec<String> = f
            .patterns
            .as_ref()
            .map(|p| p.get_ref().iter().map(|p| p.trim().to_owned()).collect())
            .unwrap_or_default();
        bounded_count(
            problems,
            at.clone(),
            patterns.len(),
            PATTERNS_MAX,
            "match strings",
        );
        if let Some(long) = patterns
            .iter()
            .find(|p| p.chars().count() > PATTERN_CHARS_MAX)
        {
            bounded_text(
                problems,
                at.clone(),
                long,
                PATTERN_CHARS_MAX,
                "a match string",
            );
        }
        let meaning = fact_meaning(problems, f, &brains);
        if f.patterns.is_some() && (patterns.is_empty() || patterns.iter().any(String::is_empty)) {
            problems.add(
                at,
                "match needs at least one non-empty string",
                Some("match = [\"words that only this fact's memories contain\"]"),
            );
        } else if f.patterns.is_none() && f.statement.is_none() {
            problems.add(
                f.name.span(),
                format!("fact {fname:?} gives neither match nor statement"),
                Some(
                    "match = [\"words its memories contain\"], or statement = \"the fact in one \
                     sentence\" to match by meaning",
                ),
            );
        }
        let distorted_below = f
            .distorted_below
            .as_ref()
            .map(|v| similarity(problems, v, "distorted_below"));
        facts.push(FactSpec {
            name: fname,
            patterns,
            meaning,
            distorted_below,
        });
    }

    let memory = memory_spec(problems, &raw.memory);
    // The worst tick: every NPC talks to `max_listeners` others (each hears and remembers;
    // the speaker remembers saying it), witnesses an event and reflects.
    let n = npcs.len() as u64;
    let per_tick = n
        .saturating_mul(1 + u64::from(max_listeners).min(n.saturating_sub(1)))
        .saturating_add(n)
        .saturating_add(n.saturating_mul(memory.reflect.insights_max as u64));
    if per_tick > MEMORIES_PER_TICK_MAX {
        let at = w
            .max_listeners
            .as_ref()
            .map_or(w.hearing_radius.span(), Spanned::span);
        problems.add(
            at,
            format!(
                "one tick could add {per_tick} memories ({n} NPCs, each talk heard by up to \
                 {}); at most {MEMORIES_PER_TICK_MAX}",
                u64::from(max_listeners).min(n.saturating_sub(1))
            ),
            Some("lower [world] max_listeners (the most NPCs one talk reaches) or the number of NPCs"),
        );
    }
    let places_known: Vec<&str> = places.iter().map(|p| p.name.as_str()).collect();
    let npcs_known: Vec<&str> = npcs.iter().map(|n| n.name.as_str()).collect();
    let facts_known: Vec<&str> = facts.iter().map(|f| f.name.as_str()).collect();
    let names = Known {
        npcs: &npcs_known,
        places: &places_known,
        facts: &facts_known,
    };
    let expectations = raw
        .expect
        .iter()
        .filter_map(|e| expectation(problems, e, &names, ticks, grid))
        .collect();
    Some(Scenario {
        name,
        seed: raw.seed,
        ticks,
        language: raw.language,
        grid,
        hearing_radius,
        sight_radius,
        max_listeners,
        places,
        npcs,
        events,
        facts,
        brains,
        memory,
        checkpoint_every: raw.run.checkpoint_every.unwrap_or(CHECKPOINT_EVERY),
        expectations,
        notes: Vec::new(),
    })
}

/// The names an `[[expect]]` may refer to.
pub(super) struct Known<'a> {
    pub(super) npcs: &'a [&'a str],
    pub(super) places: &'a [&'a str],
    pub(super) facts: &'a [&'a str],
}

pub(super) fn one_of(
    problems: &mut Problems,
    value: &Spanned<String>,
    known: &[&str],
    what: &str,
    table: &str,
) -> String {
    let v = value.get_ref().trim();
    if !known.contains(&v) {
        let shown: Vec<&str> = known.iter().take(12).copied().collect();
        let hint = if known.is_empty() {
            format!("define it in {table}")
        } else {
            format!(
                "known {what}s: {}{}",
                shown.join(", "),
                if known.len() > shown.len() {
                    ", …"
                } else {
                    ""
                }
            )
        };
        problems.add(value.span(), format!("unknown {what} {v:?}"), Some(&hint));
    }
    v.to_owned()
}

/// A cosine threshold: above 0 and at most 1.
fn similarity(problems: &mut Problems, value: &Spanned<f64>, key: &str) -> f64 {
    let v = *value.get_ref();
    if !(v > 0.0 && v <= 1.0) {
        problems.add(
            value.span(),
            format!("{key} is a cosine similarity, above 0 and at most 1, not {v}"),
            Some("e.g. 0.8: a memory must mean nearly what the statement says"),
        );
    }
    v
}

/// A fact's `statement`, `similarity`, `candidate` and `judge`, checked together.
fn fact_meaning(
    problems: &mut Problems,
    f: &RawFact,
    brains: &BTreeMap<String, BrainSpec>,
) -> Option<Meaning> {
    let Some(statement) = &f.statement else {
        for (key, span) in [
            ("similarity", f.similarity.as_ref().map(Spanned::span)),
            ("candidate", f.candidate.as_ref().map(Spanned::span)),
            ("judge", f.judge.as_ref().map(Spanned::span)),
        ] {
            if let Some(span) = span {
                problems.add(
                    span,
                    format!("{key} needs a statement: it compares memories with it"),
                    Some("add statement = \"the fact in one sentence\", or remove the key"),
                );
            }
        }
        return None;
    };
    let text = non_empty(problems, statement, "a fact's statement");
    bounded_text(
        problems,
        statement.span(),
        &text,
        TEXT_CHARS_MAX,
        "a fact's statement",
    );
    let threshold = f.similarity.as_ref().map_or(SIMILARITY_DEFAULT, |v| {
        similarity(problems, v, "similarity")
    });
    let candidate = f
        .candidate
        .as_ref()
        .map(|v| (v, similarity(problems, v, "candidate")));
    if let Some((at, c)) = candidate
        && c >= threshold
    {
        problems.add(
            at.span(),
            format!("candidate {c} is not below similarity {threshold}"),
            Some("candidates are the memories between candidate and similarity"),
        );
    }
    let judge = f.judge.as_ref().map(|j| {
        let known: Vec<&str> = brains.keys().map(String::as_str).collect();
        one_of(problems, j, &known, "brain", "[brains.NAME]")
    });
    match (&candidate, &f.judge) {
        (Some((at, _)), None) => problems.add(
            at.span(),
            "candidate needs a judge: the brain that answers for the memories below similarity",
            Some("add judge = \"default\" (the [brain]) or a [brains.NAME]"),
        ),
        (None, Some(j)) => problems.add(
            j.span(),
            "judge needs candidate: the cosine from which memories are put to it",
            Some("add candidate = 0.6 (below similarity)"),
        ),
        _ => {}
    }
    Some(Meaning {
        statement: text,
        similarity: threshold,
        candidate: candidate.map(|(_, c)| c),
        judge,
    })
}

pub(super) fn share(problems: &mut Problems, value: &Spanned<f64>) -> f64 {
    let v = *value.get_ref();
    if !(0.0..=1.0).contains(&v) {
        problems.add(
            value.span(),
            format!("a share is a fraction of the NPCs, from 0 to 1, not {v}"),
            Some("e.g. 0.5 for half of them"),
        );
    }
    v
}
