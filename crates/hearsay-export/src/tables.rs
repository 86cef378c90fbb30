//! The tables and their rows: each spec says what a row is and where it comes from, and
//! its builder reads exactly that from the run (the event log, the tape, the store,
//! `summary.json`). Names are NPC names as every file of the run spells them; ids are
//! the run's own (memory ids as in the event log, NPC ids from 0 in scenario order).

use std::collections::BTreeMap;

use hearsay_brain::BrainCall;
use hearsay_runtime::core::events::{
    ForgotLine, LearnedLine, MemoryLine, MoveLine, ReflectedLine, ScenarioEventLine, SpawnLine,
    StayLine, TalkLine, TickLine,
};
use hearsay_runtime::core::wake::WakeReason;
use hearsay_runtime::core::{Decision, MemoryId, NpcId, Pos, SimEvent};
use hearsay_runtime::summary::Summary;

use crate::table::Kind::{Bool, Float, FloatList, Int, IntList, Text, TextList};
use crate::table::{Cell, TableSpec, col, ids, opt};
use crate::write::{Sink, WriteError};

/// `npcs`: one row per NPC.
pub const NPCS: TableSpec = TableSpec {
    name: "npcs",
    doc: "One row per NPC of the scenario, in scenario order.",
    columns: &[
        col(
            "id",
            Int,
            "The NPC's id: its place among the scenario's `[[npcs]]`, from 0.",
        ),
        col("npc", Text, "Its name, as every other table spells it."),
        col(
            "brain",
            Text,
            "The brain it thinks with (`default` for `[brain]`).",
        ),
        col("persona", Text, "Its persona, as the scenario gives it."),
        col("start_x", Int, "The cell it spawned on: column."),
        col("start_y", Int, "The cell it spawned on: row."),
        col(
            "end_x",
            Int,
            "Where it stood after the last tick the run completed: column.",
        ),
        col("end_y", Int, "… row."),
        col(
            "memories",
            Int,
            "Memories it holds in the store, archived ones included.",
        ),
        col(
            "talks",
            Int,
            "Times it talked (to everyone, to someone, or in a whisper).",
        ),
        col(
            "facts_known",
            Int,
            "Tracked facts it knew by the end (`summary.json`).",
        ),
    ],
};

/// `events`: one row per line of the event log.
pub const EVENTS: TableSpec = TableSpec {
    name: "events",
    doc: "One row per line of the event log (`events.jsonl.zst`), in file order; a column that a line's type \
          does not have is null. `seq` is the line number, so `ORDER BY seq` is the log.",
    columns: &[
        col("seq", Int, "The line number in the event log, from 1."),
        col("tick", Int, "The tick the line belongs to."),
        col(
            "type",
            Text,
            "spawn, scenario_event, talk, move, stay, memory, forgot, reflected, learned, tick.",
        ),
        opt(
            "npc",
            Text,
            "The NPC the line is about (null for scenario_event and tick).",
        ),
        opt(
            "x",
            Int,
            "spawn and stay: the cell (`at`); move: the cell after the step (`to`).",
        ),
        opt("y", Int, "… row."),
        opt("from_x", Int, "move: the cell before the step."),
        opt("from_y", Int, "… row."),
        opt("target_x", Int, "move: where it is heading."),
        opt("target_y", Int, "… row."),
        opt(
            "text",
            Text,
            "talk: the words spoken; scenario_event: the event's text.",
        ),
        opt("listeners", TextList, "talk: who heard it, in id order."),
        opt(
            "to",
            Text,
            "talk: the NPC it was addressed to (null for talk to everyone).",
        ),
        opt("whisper", Bool, "talk: whispered to `to` alone."),
        opt(
            "recalled",
            IntList,
            "talk, move, stay: the memories recalled for the decision.",
        ),
        opt(
            "recall_failed",
            Bool,
            "talk, move, stay: recall failed this tick.",
        ),
        opt(
            "brain_failed",
            Bool,
            "stay: the brain failed and staying was the fallback.",
        ),
        opt(
            "continued",
            Bool,
            "move, stay: under `on_change`, it did not think this tick.",
        ),
        opt(
            "wake",
            TextList,
            "talk, move, stay: under `on_change`, why it thought.",
        ),
        opt(
            "memory",
            Int,
            "memory, forgot: the memory's id; learned: the memory that holds the fact.",
        ),
        opt(
            "kind",
            Text,
            "memory: seed, observation, conversation or reflection.",
        ),
        opt(
            "importance",
            Int,
            "memory: 1–10; reflected: the importance accumulated since the last reflection.",
        ),
        opt("content", Text, "memory: its text."),
        opt(
            "from",
            Text,
            "memory, learned: the speaker whose words it records (null if none).",
        ),
        opt(
            "evidence",
            IntList,
            "memory (a reflection): the memories it was drawn from.",
        ),
        opt("fact", Text, "learned: the tracked fact's name."),
        opt(
            "via",
            Int,
            "learned through a reflection: the evidence memory that taught it.",
        ),
        opt("insights", Int, "reflected: how many insights it drew."),
        opt("failed", Bool, "reflected: the reflection failed."),
        opt("place", Text, "scenario_event: where it happened."),
        opt(
            "witnesses",
            TextList,
            "scenario_event: who saw it, in id order.",
        ),
        opt("hash", Text, "tick: the rolling hash the tick closes with."),
    ],
};

/// `memories`: one row per memory in the store.
pub const MEMORIES: TableSpec = TableSpec {
    name: "memories",
    doc: "One row per memory in the run's store (SQLite or PostgreSQL), archived ones \
          included, by id; as the store stands after the last tick.",
    columns: &[
        col(
            "id",
            Int,
            "The memory's id, as the event log's memory line gives it.",
        ),
        col("npc", Text, "The NPC that remembers it."),
        col("npc_id", Int, "That NPC's id (`npcs.id`)."),
        col("tick", Int, "The tick it was formed."),
        col(
            "kind",
            Text,
            "seed, observation, conversation or reflection.",
        ),
        col("importance", Int, "1–10."),
        col("content", Text, "Its text."),
        opt(
            "from",
            Text,
            "The speaker whose words it records (null for none).",
        ),
        col("core", Bool, "A core memory: it never fades."),
        col(
            "evidence",
            IntList,
            "For a reflection, the memories it was drawn from.",
        ),
        col("recalls", Int, "Ticks in which it was recalled."),
        col(
            "last_recalled",
            Int,
            "The tick it was last recalled (its own tick if never).",
        ),
        opt(
            "archived_tick",
            Int,
            "The tick it faded and was archived (null: it was not).",
        ),
        col("embedded", Bool, "Its vector is in the store."),
    ],
};

/// `vectors`: one row per embedded chunk (only with `--vectors`).
pub const VECTORS: TableSpec = TableSpec {
    name: "vectors",
    doc: "Only with `--vectors`: one row per embedded chunk of a memory (a memory longer \
          than the chunk size has several), in the run's current vector space.",
    columns: &[
        col("memory", Int, "The memory's id (`memories.id`)."),
        col("chunk", Int, "The chunk's place in the memory, from 0."),
        col(
            "model",
            Text,
            "The embedding model of the run's current space (`summary.json`).",
        ),
        col("vector", FloatList, "The vector."),
    ],
};

/// `knowers`: one row per NPC that came to know a tracked fact.
pub const KNOWERS: TableSpec = TableSpec {
    name: "knowers",
    doc: "One row per (tracked fact, NPC that came to know it), from `summary.json`: \
          when, from whom, how many tellers away from where its chain started, and how \
          similar the words it learned from stayed.",
    columns: &[
        col("fact", Text, "The fact's name from `[[facts]]`."),
        col("npc", Text, "The NPC that knew it."),
        col("tick", Int, "The first tick it held a matching memory."),
        opt(
            "from",
            Text,
            "Whose words taught it (null: a seed memory or seen first-hand).",
        ),
        col(
            "depth",
            Int,
            "Tellers between it and the start of its chain (0: the start).",
        ),
        opt(
            "similarity",
            Float,
            "Cosine of its words with the fact (null: no vector).",
        ),
        col("memory", Int, "The memory that taught it (`memories.id`)."),
        col("words", Text, "That memory's words."),
    ],
};

/// `calls`: one row per brain call on the tape.
pub const CALLS: TableSpec = TableSpec {
    name: "calls",
    doc: "One row per decision on the tape (`llm.jsonl.zst`), by tick then NPC id: what the \
          brain was given and answered, and what it cost.",
    columns: &[
        col("tick", Int, "The tick decided."),
        col("npc", Text, "The deciding NPC."),
        col("brain", Text, "The brain's name in the scenario."),
        col("provider", Text, "heuristic or openai."),
        col("outcome", Text, "ok, fallback or failed."),
        col(
            "action",
            Text,
            "talk, whisper, move or stay (stay after a failure).",
        ),
        opt(
            "speech",
            Text,
            "talk, whisper: the words as the brain gave them.",
        ),
        opt("to_npc", Text, "talk, whisper: the addressee."),
        opt(
            "to_x",
            Int,
            "move: the destination the brain named: column.",
        ),
        opt("to_y", Int, "… row."),
        col(
            "recalled",
            IntList,
            "The memories recalled for it, best first.",
        ),
        col(
            "recall_failed",
            Bool,
            "Recall failed, so it decided without memories.",
        ),
        col(
            "recall_query",
            Text,
            "The text recall embedded (empty: nothing observed).",
        ),
        col("wake", TextList, "Under `on_change`: why it thought."),
        opt(
            "latency_ms",
            Float,
            "Wall-clock time of the call (null for the heuristic brain).",
        ),
        opt(
            "prompt_tokens",
            Int,
            "Tokens of the request, as the server counted them.",
        ),
        opt("completion_tokens", Int, "Tokens generated."),
        opt(
            "cached_tokens",
            Int,
            "Prompt tokens the server took from its cache.",
        ),
        col("retries", Int, "Attempts after the first."),
        opt(
            "fallback",
            Text,
            "The response format fallen back to, if any.",
        ),
        col(
            "repairs",
            TextList,
            "Repairs made to the answer before it parsed.",
        ),
        col(
            "rejections",
            TextList,
            "Answers rejected before the one kept.",
        ),
        col(
            "trimmed",
            TextList,
            "Prompt parts trimmed to fit the context.",
        ),
        opt("error", Text, "The failure, for a failed call."),
        opt(
            "request",
            Text,
            "Digest of the request, what replay compares (null for the heuristic brain).",
        ),
        opt(
            "response",
            Text,
            "The response text (its start, for a long one).",
        ),
        opt(
            "reflection_outcome",
            Text,
            "When it reflected this tick: ok, fallback or failed.",
        ),
        opt("insights", Int, "When it reflected: the insights kept."),
    ],
};

/// `ticks`: one row per completed tick.
pub const TICKS: TableSpec = TableSpec {
    name: "ticks",
    doc: "One row per completed tick: what happened (counts of the event log's lines by \
          type, calls on the tape) and what it took (phases from `summary.json`, null \
          for ticks another process ran before a resume, and for summaries older than \
          per-tick timing).",
    columns: &[
        col("tick", Int, "The tick."),
        col("hash", Text, "The rolling hash it closed with."),
        col(
            "events",
            Int,
            "Lines of the tick in the event log, its closing line excluded.",
        ),
        col("talks", Int, "talk lines."),
        col("moves", Int, "move lines."),
        col("stays", Int, "stay lines."),
        col("memories", Int, "memory lines: memories written."),
        col(
            "learned",
            Int,
            "learned lines: NPCs that came to know a fact.",
        ),
        col("forgot", Int, "forgot lines: memories archived."),
        col("reflected", Int, "reflected lines."),
        col("calls", Int, "Brain calls on the tape."),
        col("failed_calls", Int, "Of those, failed."),
        opt(
            "latency_ms_max",
            Float,
            "The slowest call's latency (null: none timed).",
        ),
        opt("perceive_ms", Float, "Perceive, milliseconds."),
        opt(
            "barrier_ms",
            Float,
            "Waiting for the embedding backfill, milliseconds.",
        ),
        opt(
            "think_ms",
            Float,
            "Think without the barrier, milliseconds.",
        ),
        opt("act_ms", Float, "Act, milliseconds."),
        opt(
            "persist_ms",
            Float,
            "Persist (event log, checkpoint, store), milliseconds.",
        ),
        opt(
            "checkpoint_bytes",
            Int,
            "The checkpoint saved after it, bytes (0: none).",
        ),
    ],
};

/// Every table, in the order they are written (`vectors` only with `--vectors`).
pub const TABLES: [TableSpec; 7] = [NPCS, EVENTS, MEMORIES, VECTORS, KNOWERS, CALLS, TICKS];

fn xy(p: Pos) -> (Cell, Cell) {
    (Cell::from(p.x), Cell::from(p.y))
}

fn wake(reasons: &[WakeReason]) -> Cell {
    Cell::TextList(
        reasons
            .iter()
            .map(|w| match serde_json::to_value(w) {
                Ok(serde_json::Value::String(s)) => s,
                Ok(other) => other.to_string(),
                Err(_) => String::new(),
            })
            .collect(),
    )
}

/// The NPC-named fields an event line carries, beyond the ones every line has.
#[derive(Default)]
struct EventRow {
    npc: Option<String>,
    at: Option<Pos>,
    from_at: Option<Pos>,
    target: Option<Pos>,
    text: Option<String>,
    listeners: Option<Vec<String>>,
    to: Option<String>,
    whisper: Option<bool>,
    recalled: Option<Vec<MemoryId>>,
    recall_failed: Option<bool>,
    brain_failed: Option<bool>,
    continued: Option<bool>,
    wake: Option<Vec<WakeReason>>,
    memory: Option<MemoryId>,
    kind: Option<String>,
    importance: Option<i64>,
    content: Option<String>,
    from: Option<String>,
    evidence: Option<Vec<MemoryId>>,
    fact: Option<String>,
    via: Option<MemoryId>,
    insights: Option<u64>,
    failed: Option<bool>,
    place: Option<String>,
    witnesses: Option<Vec<String>>,
    hash: Option<String>,
}

fn type_name(event: &SimEvent) -> &'static str {
    match event {
        SimEvent::Spawn(SpawnLine { .. }) => "spawn",
        SimEvent::ScenarioEvent(ScenarioEventLine { .. }) => "scenario_event",
        SimEvent::Talk(TalkLine { .. }) => "talk",
        SimEvent::Move(MoveLine { .. }) => "move",
        SimEvent::Stay(StayLine { .. }) => "stay",
        SimEvent::Memory(MemoryLine { .. }) => "memory",
        SimEvent::Forgot(ForgotLine { .. }) => "forgot",
        SimEvent::Reflected(ReflectedLine { .. }) => "reflected",
        SimEvent::Learned(LearnedLine { .. }) => "learned",
        SimEvent::Tick(TickLine { .. }) => "tick",
    }
}

fn event_row(event: SimEvent) -> EventRow {
    match event {
        SimEvent::Spawn(SpawnLine { npc, at, .. }) => EventRow {
            npc: Some(npc),
            at: Some(at),
            ..EventRow::default()
        },
        SimEvent::ScenarioEvent(ScenarioEventLine {
            place,
            text,
            witnesses,
            ..
        }) => EventRow {
            place: Some(place),
            text: Some(text),
            witnesses: Some(witnesses),
            ..EventRow::default()
        },
        SimEvent::Talk(TalkLine {
            npc,
            text,
            listeners,
            to,
            whisper,
            recalled,
            recall_failed,
            wake,
            ..
        }) => EventRow {
            npc: Some(npc),
            text: Some(text),
            listeners: Some(listeners),
            to,
            whisper: Some(whisper),
            recalled: Some(recalled),
            recall_failed: Some(recall_failed),
            wake: Some(wake),
            ..EventRow::default()
        },
        SimEvent::Move(MoveLine {
            npc,
            from,
            to,
            target,
            recalled,
            recall_failed,
            wake,
            continued,
            ..
        }) => EventRow {
            npc: Some(npc),
            at: Some(to),
            from_at: Some(from),
            target: Some(target),
            recalled: Some(recalled),
            recall_failed: Some(recall_failed),
            continued: Some(continued),
            wake: Some(wake),
            ..EventRow::default()
        },
        SimEvent::Stay(StayLine {
            npc,
            at,
            recalled,
            recall_failed,
            brain_failed,
            wake,
            continued,
            ..
        }) => EventRow {
            npc: Some(npc),
            at: Some(at),
            recalled: Some(recalled),
            recall_failed: Some(recall_failed),
            brain_failed: Some(brain_failed),
            continued: Some(continued),
            wake: Some(wake),
            ..EventRow::default()
        },
        SimEvent::Memory(MemoryLine {
            npc,
            id,
            kind,
            importance,
            content,
            from,
            evidence,
            ..
        }) => EventRow {
            npc: Some(npc),
            memory: Some(id),
            kind: Some(kind.as_str().to_owned()),
            importance: Some(i64::from(importance)),
            content: Some(content.to_string()),
            from,
            evidence: Some(evidence),
            ..EventRow::default()
        },
        SimEvent::Forgot(ForgotLine { npc, id, .. }) => EventRow {
            npc: Some(npc),
            memory: Some(id),
            ..EventRow::default()
        },
        SimEvent::Reflected(ReflectedLine {
            npc,
            insights,
            importance,
            failed,
            ..
        }) => EventRow {
            npc: Some(npc),
            insights: Some(insights as u64),
            importance: Some(i64::from(importance)),
            failed: Some(failed),
            ..EventRow::default()
        },
        SimEvent::Learned(LearnedLine {
            fact,
            npc,
            from,
            memory,
            via,
            ..
        }) => EventRow {
            npc: Some(npc),
            fact: Some(fact),
            from,
            memory: Some(memory),
            via,
            ..EventRow::default()
        },
        SimEvent::Tick(TickLine { hash, .. }) => EventRow {
            hash: Some(hash),
            ..EventRow::default()
        },
    }
}

/// What one tick's lines added up to (for `ticks`), and where each NPC ended (for `npcs`).
#[derive(Clone, Debug, Default)]
pub struct TickCounts {
    events: u64,
    talks: u64,
    moves: u64,
    stays: u64,
    memories: u64,
    learned: u64,
    forgot: u64,
    reflected: u64,
}

/// What reading the event log gathered for the other tables.
#[derive(Debug, Default)]
pub struct LogFacts {
    /// Counts per completed tick, by tick.
    pub ticks: BTreeMap<u64, (TickCounts, String)>,
    /// The last cell each NPC stood on, by name.
    pub last_at: BTreeMap<String, Pos>,
    /// Talks per NPC, by name.
    pub talks: BTreeMap<String, u64>,
}

/// `events`: every line of the log, handed over in order as it is read; gathers
/// [`LogFacts`] on the way.
#[derive(Debug, Default)]
pub struct Events {
    facts: LogFacts,
    /// The open tick's counts so far.
    counts: TickCounts,
    /// Lines taken so far.
    lines: u64,
}

impl Events {
    /// What the lines gathered for the other tables.
    pub fn finish(self) -> LogFacts {
        self.facts
    }

    /// The log's next line, as its row.
    pub fn line(&mut self, line: &str, sink: &mut dyn Sink) -> Result<(), WriteError> {
        self.lines += 1;
        let i = self.lines - 1;
        let (facts, counts) = (&mut self.facts, &mut self.counts);
        let event: SimEvent = serde_json::from_str(line).map_err(|e| WriteError::Row {
            table: "events",
            problem: format!("event log line {}: {e}", i + 1),
        })?;
        let tick = event.tick();
        let kind = type_name(&event);
        match kind {
            "talk" => counts.talks += 1,
            "move" => counts.moves += 1,
            "stay" => counts.stays += 1,
            "memory" => counts.memories += 1,
            "learned" => counts.learned += 1,
            "forgot" => counts.forgot += 1,
            "reflected" => counts.reflected += 1,
            _ => {}
        }
        if kind != "tick" {
            counts.events += 1;
        }
        let r = event_row(event);
        if let (Some(npc), Some(at)) = (&r.npc, r.at)
            && matches!(kind, "spawn" | "move" | "stay")
        {
            facts.last_at.insert(npc.clone(), at);
        }
        if kind == "talk"
            && let Some(npc) = &r.npc
        {
            *facts.talks.entry(npc.clone()).or_default() += 1;
        }
        if let Some(hash) = &r.hash {
            facts
                .ticks
                .insert(tick, (std::mem::take(counts), hash.clone()));
        }
        let (x, y) = r.at.map_or((Cell::Null, Cell::Null), xy);
        let (fx, fy) = r.from_at.map_or((Cell::Null, Cell::Null), xy);
        let (tx, ty) = r.target.map_or((Cell::Null, Cell::Null), xy);
        sink.row(vec![
            Cell::from(i + 1),
            Cell::from(tick),
            Cell::from(kind),
            r.npc.into(),
            x,
            y,
            fx,
            fy,
            tx,
            ty,
            r.text.into(),
            r.listeners.into(),
            r.to.into(),
            r.whisper.into(),
            r.recalled.as_deref().map_or(Cell::Null, ids),
            r.recall_failed.into(),
            r.brain_failed.into(),
            r.continued.into(),
            r.wake.as_deref().map_or(Cell::Null, wake),
            r.memory.map(|m| m.0).into(),
            r.kind.into(),
            r.importance.into(),
            r.content.into(),
            r.from.into(),
            r.evidence.as_deref().map_or(Cell::Null, ids),
            r.fact.into(),
            r.via.map(|m| m.0).into(),
            r.insights.into(),
            r.failed.into(),
            r.place.into(),
            r.witnesses.into(),
            r.hash.into(),
        ])
    }
}

/// One NPC, as `npcs` needs it.
pub struct NpcInfo<'a> {
    /// Its name.
    pub name: &'a str,
    /// Its brain's name.
    pub brain: &'a str,
    /// Its persona.
    pub persona: &'a str,
    /// Where it spawned.
    pub at: Pos,
}

/// `npcs`.
pub fn npcs(
    roster: &[NpcInfo<'_>],
    log: &LogFacts,
    memories: &BTreeMap<NpcId, u64>,
    summary: Option<&Summary>,
    sink: &mut dyn Sink,
) -> Result<(), WriteError> {
    for (i, npc) in roster.iter().enumerate() {
        let end = log.last_at.get(npc.name).copied().unwrap_or(npc.at);
        let known = summary.map_or(0, |s| {
            s.facts
                .iter()
                .filter(|f| f.knowers.iter().any(|k| k.npc == npc.name))
                .count()
        });
        sink.row(vec![
            Cell::from(i),
            npc.name.into(),
            npc.brain.into(),
            npc.persona.into(),
            Cell::from(npc.at.x),
            Cell::from(npc.at.y),
            Cell::from(end.x),
            Cell::from(end.y),
            Cell::from(memories.get(&NpcId(i as u32)).copied().unwrap_or(0)),
            Cell::from(log.talks.get(npc.name).copied().unwrap_or(0)),
            Cell::from(known),
        ])?;
    }
    Ok(())
}

/// `memories`: the store's rows, each handed over in id order as it is read.
pub fn memory(
    meta: &hearsay_memory::MemoryMeta,
    names: &[String],
    sink: &mut dyn Sink,
) -> Result<(), WriteError> {
    let name = |id: NpcId| names.get(id.0 as usize).cloned().unwrap_or_default();
    {
        let m = &meta.memory;
        sink.row(vec![
            Cell::from(m.id.0),
            name(m.npc).into(),
            Cell::from(m.npc.0),
            Cell::from(m.tick),
            m.kind.as_str().into(),
            Cell::from(m.importance),
            (&*m.content).into(),
            m.source.map(name).into(),
            Cell::from(m.core),
            ids(&m.evidence),
            Cell::from(meta.recalls),
            Cell::from(meta.last_recalled),
            meta.forgotten.into(),
            Cell::from(meta.embedded),
        ])
    }
}

/// `vectors`: the chunks of a batch of memories, by id (`model`: the space they are in).
pub fn vectors(
    batch: BTreeMap<MemoryId, Vec<Vec<f32>>>,
    model: &str,
    sink: &mut dyn Sink,
) -> Result<(), WriteError> {
    for (id, chunks) in batch {
        for (chunk, vector) in chunks.into_iter().enumerate() {
            sink.row(vec![
                Cell::from(id.0),
                Cell::from(chunk),
                model.into(),
                vector.into(),
            ])?;
        }
    }
    Ok(())
}

/// `knowers`: from `summary.json`'s facts.
pub fn knowers(summary: Option<&Summary>, sink: &mut dyn Sink) -> Result<(), WriteError> {
    for fact in summary.map(|s| s.facts.as_slice()).unwrap_or_default() {
        for k in &fact.knowers {
            sink.row(vec![
                fact.name.as_str().into(),
                k.npc.as_str().into(),
                Cell::from(k.tick),
                k.from.clone().into(),
                Cell::from(k.depth),
                k.similarity.into(),
                Cell::from(k.memory),
                k.words.as_str().into(),
            ])?;
        }
    }
    Ok(())
}

/// Calls and failures per tick, and the slowest timed call, for `ticks`.
#[derive(Clone, Copy, Debug, Default)]
pub struct TickCalls {
    calls: u64,
    failed: u64,
    latency_max: Option<f64>,
}

/// `calls`: every decision on the tape, handed over by tick then NPC id; gathers what
/// `ticks` needs on the way.
#[derive(Debug, Default)]
pub struct Calls {
    per_tick: BTreeMap<u64, TickCalls>,
}

impl Calls {
    /// Calls and failures per tick, for `ticks`.
    pub fn finish(self) -> BTreeMap<u64, TickCalls> {
        self.per_tick
    }

    /// The next call, as its row.
    pub fn call(
        &mut self,
        call: &BrainCall,
        names: &[String],
        sink: &mut dyn Sink,
    ) -> Result<(), WriteError> {
        use hearsay_brain::CallOutcome;
        let outcome = |o: CallOutcome| match serde_json::to_value(o) {
            Ok(serde_json::Value::String(s)) => s,
            _ => format!("{o:?}").to_lowercase(),
        };
        let name = |id: NpcId| names.get(id.0 as usize).cloned().unwrap_or_default();
        let per_tick = &mut self.per_tick;
        let ex = &call.exchange;
        let timed = (call.provider != "heuristic").then_some(ex.latency_ms);
        let t = per_tick.entry(call.tick).or_default();
        t.calls += 1;
        t.failed += u64::from(ex.outcome == CallOutcome::Failed);
        if let Some(ms) = timed {
            t.latency_max = Some(t.latency_max.map_or(ms, |m: f64| m.max(ms)));
        }
        let (action, speech, to_npc, to_at) = match &call.decision {
            Decision::Talk { speech, to } => ("talk", Some(speech.clone()), to.map(name), None),
            Decision::Whisper { speech, to } => {
                ("whisper", Some(speech.clone()), Some(name(*to)), None)
            }
            Decision::Move { to } => ("move", None, None, Some(*to)),
            Decision::Stay => ("stay", None, None, None),
        };
        let (to_x, to_y) = to_at.map_or((Cell::Null, Cell::Null), xy);
        let usage = ex.carried.usage.as_ref();
        let reflection = call.reflection.as_ref();
        sink.row(vec![
            Cell::from(call.tick),
            call.npc.as_str().into(),
            call.brain.as_str().into(),
            call.provider.as_str().into(),
            outcome(ex.outcome).into(),
            action.into(),
            speech.into(),
            to_npc.into(),
            to_x,
            to_y,
            ids(&call.recalled),
            Cell::from(call.recall_failed),
            call.recall_query.as_str().into(),
            wake(&call.wake),
            timed.into(),
            usage.map(|u| u.prompt_tokens).into(),
            usage.map(|u| u.completion_tokens).into(),
            usage.map(|u| u.cached_tokens).into(),
            Cell::from(ex.carried.retries),
            ex.carried.fallback.clone().into(),
            ex.carried.repairs.clone().into(),
            ex.carried.rejections.clone().into(),
            ex.carried.trimmed.clone().into(),
            ex.error.clone().into(),
            ex.request.clone().into(),
            ex.response.clone().into(),
            reflection.map(|r| outcome(r.exchange.outcome)).into(),
            reflection.map(|r| r.insights.len()).into(),
        ])
    }
}

/// `ticks`: the log's counts, the tape's calls and the summary's timings, per tick.
pub fn ticks(
    log: &LogFacts,
    calls: &BTreeMap<u64, TickCalls>,
    summary: Option<&Summary>,
    sink: &mut dyn Sink,
) -> Result<(), WriteError> {
    let timing = summary.and_then(|s| s.timing.per_tick.as_ref());
    for (tick, (counts, hash)) in &log.ticks {
        let c = calls.get(tick).copied().unwrap_or_default();
        let at = timing.and_then(|p| {
            let i = usize::try_from(tick.checked_sub(p.first_tick)?).ok()?;
            (i < p.len()).then_some((p, i))
        });
        let ms = |pick: fn(&hearsay_runtime::summary::PerTick) -> &Vec<f64>| {
            at.and_then(|(p, i)| pick(p).get(i).copied()).into()
        };
        sink.row(vec![
            Cell::from(*tick),
            hash.as_str().into(),
            Cell::from(counts.events),
            Cell::from(counts.talks),
            Cell::from(counts.moves),
            Cell::from(counts.stays),
            Cell::from(counts.memories),
            Cell::from(counts.learned),
            Cell::from(counts.forgot),
            Cell::from(counts.reflected),
            Cell::from(c.calls),
            Cell::from(c.failed),
            c.latency_max.into(),
            ms(|p| &p.perceive),
            ms(|p| &p.barrier),
            ms(|p| &p.think),
            ms(|p| &p.act),
            ms(|p| &p.persist),
            at.and_then(|(p, i)| p.checkpoint_bytes.get(i).copied())
                .into(),
        ])?;
    }
    Ok(())
}
