//! The story of a run, read back from its event log: where everyone stood, who said what
//! to whom, who learned each tracked fact when and from whom — and where each knower's
//! knowledge came from, followed back along the chain of tellers to a seed memory, a
//! scenario event seen first-hand, or nothing at all (an invention).
//!
//! `hearsay watch` plays it frame by frame, `hearsay report` draws it, and scenario
//! expectations are judged on it. It never re-simulates (that is replay's job) and never
//! reads the store: everything comes from `events.jsonl` and the scenario.
//!
//! Over 600 lines because reading a run back (frames, tellers' chains, roots) is one pass
//! over one log with one state; about 130 of them are its tests.

use std::collections::{BTreeMap, BTreeSet};
use std::io::BufRead;
use std::path::Path;

use hearsay_core::events::{
    ForgotLine, LearnedLine, MemoryLine, MoveLine, ReflectedLine, ScenarioEventLine, SpawnLine,
    StayLine, TalkLine, TickLine,
};
use hearsay_core::{Grid, MemoryId, MemoryKind, Pos, SimEvent, WakeReason};

use crate::RunError;
use crate::scenario::Scenario;

/// The fixed parts of a run: map, places, NPCs and facts, by index.
#[derive(Clone, Debug, PartialEq)]
pub struct Cast {
    /// The scenario's `name` (not a file path).
    pub name: String,
    /// Ticks the run was to last.
    pub ticks: u64,
    /// The map's width and height in cells (`hearsay watch` draws it).
    pub grid: Grid,
    /// Places: name and cell.
    pub places: Vec<(String, Pos)>,
    /// NPC names, by id.
    pub npcs: Vec<String>,
    /// Tracked fact names.
    pub facts: Vec<String>,
    /// NPC index by name, for every name a log line carries (several per line). Only
    /// looked up, never iterated: its order cannot reach an output. A `BTreeMap` spent a
    /// tenth of a 10,000-NPC report comparing names.
    by_name: std::collections::HashMap<String, usize>,
}

impl Cast {
    /// The cast of `scenario`.
    pub fn new(scenario: &Scenario) -> Self {
        let npcs: Vec<String> = scenario.npcs.iter().map(|n| n.name.clone()).collect();
        Self {
            name: scenario.name.clone(),
            ticks: scenario.ticks,
            grid: scenario.grid,
            places: scenario
                .places
                .iter()
                .map(|p| (p.name.to_string(), p.at))
                .collect(),
            by_name: npcs
                .iter()
                .enumerate()
                .map(|(i, n)| (n.clone(), i))
                .collect(),
            npcs,
            facts: scenario.facts.iter().map(|f| f.name.clone()).collect(),
        }
    }

    /// The index of the NPC called `name`.
    pub fn npc(&self, name: &str) -> Option<usize> {
        self.by_name.get(name).copied()
    }

    /// The index of the fact called `name`.
    pub fn fact(&self, name: &str) -> Option<usize> {
        self.facts.iter().position(|f| f == name)
    }

    /// The index of the place called `name`.
    pub fn place(&self, name: &str) -> Option<usize> {
        self.places.iter().position(|(p, _)| p == name)
    }
}

/// An NPC took a step.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Step {
    /// The mover, as an index into [`Cast::npcs`].
    pub npc: usize,
    /// The cell it stands on after the step (one step per tick).
    pub to: Pos,
}

/// An NPC spoke.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Speech {
    /// The speaker, as an index into [`Cast::npcs`].
    pub npc: usize,
    /// The words as the `talk` line gives them.
    pub text: String,
    /// Indices into [`Cast::npcs`] of those who heard it, in id order: within hearing
    /// radius, or the addressee alone for a whisper.
    pub listeners: Vec<usize>,
    /// Index into [`Cast::npcs`] of the NPC it was addressed to, if any.
    pub to: Option<usize>,
    /// Whispered to `to`: nobody else heard it.
    pub whisper: bool,
}

/// A scenario event fired.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Happening {
    /// The place's name, as in [`Cast::places`].
    pub place: String,
    /// The event's text as the scenario words it.
    pub text: String,
    /// Indices into [`Cast::npcs`] of those within sight radius of the place.
    pub witnesses: Vec<usize>,
}

/// An NPC came to know a tracked fact.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Learning {
    /// Index into [`Cast::facts`].
    pub fact: usize,
    /// The learner, as an index into [`Cast::npcs`].
    pub npc: usize,
    /// From whose words.
    pub from: Option<usize>,
    /// The memory that holds it.
    pub memory: MemoryId,
    /// For a reflection: the evidence memory that taught it.
    pub via: Option<MemoryId>,
}

/// A memory was written.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Written {
    /// The id its `memory` line gives it; `learned` lines cite it.
    pub id: MemoryId,
    /// The owner, as an index into [`Cast::npcs`].
    pub npc: usize,
    /// Seed, observation, conversation or reflection.
    pub kind: MemoryKind,
    /// The speaker whose words it records (index into [`Cast::npcs`]); `None` if not heard.
    pub from: Option<usize>,
    /// The memory's full text.
    pub content: std::sync::Arc<str>,
}

/// Everything one tick's lines say, by NPC index.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Frame {
    /// The tick all of the frame's lines belong to.
    pub tick: u64,
    /// NPCs entering the world (tick 0).
    pub spawns: Vec<(usize, Pos)>,
    /// One per `move` line, in log order (NPC id order).
    pub steps: Vec<Step>,
    /// One per `talk` line, in log order (NPC id order).
    pub speeches: Vec<Speech>,
    /// One per `scenario_event` line, in scenario order.
    pub happenings: Vec<Happening>,
    /// One per `learned` line: who came to know which tracked fact.
    pub learnings: Vec<Learning>,
    /// One per `memory` line, in id order.
    pub written: Vec<Written>,
    /// NPCs that reflected, with how many insights.
    pub reflections: Vec<(usize, usize)>,
    /// Memories archived, by owner.
    pub forgotten: Vec<usize>,
    /// NPCs that stayed because their brain failed.
    pub brain_failures: Vec<usize>,
    /// NPCs that decided without memories because recall failed.
    pub recall_failures: Vec<usize>,
    /// Under `think = "on_change"`: NPCs that thought this tick, with why.
    pub woken: Vec<(usize, Vec<WakeReason>)>,
    /// Under `think = "on_change"`: NPCs that carried on without thinking.
    pub continued: Vec<usize>,
    /// The rolling hash closing the tick.
    pub hash: String,
}

impl Frame {
    /// Notes whether `who` thought (and why) or continued, when its line says.
    fn thought(&mut self, who: usize, wake: Vec<WakeReason>, continued: bool) {
        if continued {
            self.continued.push(who);
        } else if !wake.is_empty() {
            self.woken.push((who, wake));
        }
    }

    /// Adds one event to the frame; returns whether it closed the tick.
    fn add(&mut self, event: SimEvent, cast: &Cast) -> Result<bool, String> {
        let npc = |name: &str| {
            cast.npc(name)
                .ok_or_else(|| format!("names an NPC the scenario does not have: {name:?}"))
        };
        let npcs = |names: &[String]| names.iter().map(|n| npc(n)).collect::<Result<_, _>>();
        let fact = |name: &str| {
            cast.fact(name)
                .ok_or_else(|| format!("names a fact the scenario does not track: {name:?}"))
        };
        self.tick = event.tick();
        match event {
            SimEvent::Spawn(SpawnLine { npc: n, at, .. }) => self.spawns.push((npc(&n)?, at)),
            SimEvent::ScenarioEvent(ScenarioEventLine {
                place,
                text,
                witnesses,
                ..
            }) => self.happenings.push(Happening {
                place,
                text,
                witnesses: npcs(&witnesses)?,
            }),
            SimEvent::Talk(TalkLine {
                npc: n,
                text,
                listeners,
                to,
                whisper,
                recall_failed,
                wake,
                ..
            }) => {
                let who = npc(&n)?;
                if recall_failed {
                    self.recall_failures.push(who);
                }
                self.thought(who, wake, false);
                let to = to.as_deref().map(npc).transpose()?;
                if whisper && to.is_none() {
                    return Err("is a whisper to nobody".to_owned());
                }
                self.speeches.push(Speech {
                    npc: who,
                    text,
                    listeners: npcs(&listeners)?,
                    to,
                    whisper,
                });
            }
            SimEvent::Move(MoveLine {
                npc: n,
                to,
                recall_failed,
                wake,
                continued,
                ..
            }) => {
                let who = npc(&n)?;
                if recall_failed {
                    self.recall_failures.push(who);
                }
                self.thought(who, wake, continued);
                self.steps.push(Step { npc: who, to });
            }
            SimEvent::Stay(StayLine {
                npc: n,
                recall_failed,
                brain_failed,
                wake,
                continued,
                ..
            }) => {
                let who = npc(&n)?;
                if recall_failed {
                    self.recall_failures.push(who);
                }
                self.thought(who, wake, continued);
                if brain_failed {
                    self.brain_failures.push(who);
                }
            }
            SimEvent::Memory(MemoryLine {
                npc: n,
                id,
                kind,
                from,
                content,
                ..
            }) => self.written.push(Written {
                id,
                npc: npc(&n)?,
                kind,
                from: from.as_deref().map(npc).transpose()?,
                content,
            }),
            SimEvent::Forgot(ForgotLine { npc: n, .. }) => self.forgotten.push(npc(&n)?),
            SimEvent::Reflected(ReflectedLine {
                npc: n, insights, ..
            }) => self.reflections.push((npc(&n)?, insights)),
            SimEvent::Learned(LearnedLine {
                fact: f,
                npc: n,
                from,
                memory,
                via,
                ..
            }) => self.learnings.push(Learning {
                fact: fact(&f)?,
                npc: npc(&n)?,
                from: from.as_deref().map(npc).transpose()?,
                memory,
                via,
            }),
            SimEvent::Tick(TickLine { hash, .. }) => {
                self.hash = hash;
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// The frame of one tick's lines (its closing `tick` line included).
    pub fn parse(lines: &[String], cast: &Cast) -> Result<Frame, String> {
        let mut frame = Frame::default();
        for (i, line) in lines.iter().enumerate() {
            let event: SimEvent = serde_json::from_str(line)
                .map_err(|e| format!("event {} of the tick is not an event: {e}", i + 1))?;
            frame
                .add(event, cast)
                .map_err(|e| format!("event {} of the tick {e}", i + 1))?;
        }
        Ok(frame)
    }
}

/// Reads an event log frame by frame. A last tick without its closing line (a run that
/// stopped mid-tick) is not returned.
///
/// Two halves, which [`FrameReader::for_each_frame`] runs on two threads and
/// [`FrameReader::next_frame`] on one: `TickReader` reads a tick's lines and checks them
/// against the hash chain without parsing them (but for the closing line), and
/// `FrameBuilder` builds the frame from their parses. Parsing is most of the work, so
/// on two threads each parses half of every tick's lines. Every check reports the same
/// error at the same line as one reader taking the lines one by one would.
pub struct FrameReader<R> {
    lines: TickReader<R>,
    frames: FrameBuilder,
}

/// Reads a log's lines a tick at a time; see [`FrameReader`].
struct TickReader<R> {
    reader: R,
    /// Lines read so far.
    line_no: usize,
    /// Checks every tick's closing hash against its lines (an edited log is refused).
    chain: crate::logs::HashChain,
    /// The log ended (or a read failed): nothing more is read.
    done: bool,
}

/// One tick's lines as read: unparsed, but checked against the hash chain.
struct TickLines {
    /// The number (from 1) of its first line.
    first: usize,
    /// The lines, each with its `\n`.
    text: String,
    /// Where each line ends in `text` (just past its `\n`).
    ends: Vec<usize>,
    /// The last line closed the tick (else the log ended first).
    complete: bool,
    /// What the hash chain says of the closing line: `Err` with why the tick's lines do
    /// not give its hash.
    sealed: Result<(), String>,
}

impl TickLines {
    fn lines(&self) -> impl Iterator<Item = &str> {
        let starts = std::iter::once(0).chain(self.ends.iter().copied());
        starts
            .zip(self.ends.iter().copied())
            .map(|(start, end)| &self.text[start..end - 1])
    }

    /// Lines `range` (indices into the tick's lines) parsed, in order.
    fn parse(&self, range: std::ops::Range<usize>) -> Vec<Result<SimEvent, serde_json::Error>> {
        self.lines()
            .skip(range.start)
            .take(range.len())
            .map(serde_json::from_str)
            .collect()
    }
}

/// A closing `tick` line as hearsay writes it: `type` first. The reader of lines knows a
/// tick ends by this prefix alone; a closing line written otherwise is refused
/// ([`FrameBuilder::frame_of`]).
const TICK_LINE: &str = r#"{"type":"tick","#;

impl<R: BufRead> TickReader<R> {
    /// The next tick's lines; `None` when the log has no more lines.
    fn next_tick(&mut self, path: &Path) -> Result<Option<TickLines>, RunError> {
        if self.done {
            return Ok(None);
        }
        let mut tick = TickLines {
            first: self.line_no + 1,
            text: String::new(),
            ends: Vec::new(),
            complete: false,
            sealed: Ok(()),
        };
        loop {
            let start = tick.text.len();
            let n = match self.reader.read_line(&mut tick.text) {
                Ok(n) => n,
                Err(e) => {
                    self.done = true;
                    return Err(RunError::RunDir {
                        path: path.to_owned(),
                        problem: format!("line {} cannot be read: {e}", self.line_no + 1),
                    });
                }
            };
            // The end, or the unterminated last line of a run killed mid-write.
            if n == 0 || !tick.text.ends_with('\n') {
                tick.text.truncate(start);
                self.done = true;
                return Ok((!tick.ends.is_empty()).then_some(tick));
            }
            self.line_no += 1;
            tick.ends.push(tick.text.len());
            let line = &tick.text[start..tick.text.len() - 1];
            if !line.starts_with(TICK_LINE) {
                self.chain.add(line);
                continue;
            }
            // The closing line; one that does not parse ends the batch too, and the
            // builder reports it.
            if let Ok(SimEvent::Tick(TickLine { tick: t, hash })) = serde_json::from_str(line) {
                tick.sealed = self.chain.close(t, &hash);
            }
            tick.complete = true;
            return Ok(Some(tick));
        }
    }
}

/// Builds frames from ticks' lines; see [`FrameReader`].
struct FrameBuilder {
    path: std::path::PathBuf,
    /// Per fact, whether it has a statement: its `learned` lines come from `decided`.
    meaning: Vec<bool>,
    /// The `learned` lines decided by meaning when the run ended, by tick.
    decided: BTreeMap<u64, Vec<Learning>>,
}

impl FrameBuilder {
    /// The frame of `tick`'s lines, `events` their parses; `None` for the lines of a tick
    /// the log ends before closing (after checking them).
    fn frame_of(
        &mut self,
        tick: &TickLines,
        events: Vec<Result<SimEvent, serde_json::Error>>,
        cast: &Cast,
    ) -> Result<Option<Frame>, RunError> {
        let bad = |problem: String, line_no: usize| RunError::RunDir {
            path: self.path.clone(),
            problem: format!("line {line_no} {problem}"),
        };
        let mut frame = Frame::default();
        let mut expected_tick = None;
        let count = events.len();
        for (i, event) in events.into_iter().enumerate() {
            let line_no = tick.first + i;
            let event = event.map_err(|e| bad(format!("is not an event: {e}"), line_no))?;
            if let SimEvent::Tick(_) = event {
                if !(tick.complete && i + 1 == count) {
                    return Err(bad(
                        format!(
                            "closes a tick but does not begin with `{TICK_LINE}` as hearsay writes it"
                        ),
                        line_no,
                    ));
                }
                tick.sealed.clone().map_err(|e| bad(e, line_no))?;
            }
            let t = event.tick();
            if *expected_tick.get_or_insert(t) != t {
                return Err(bad(
                    format!(
                        "belongs to tick {t}, but tick {} has not been closed",
                        frame.tick
                    ),
                    line_no,
                ));
            }
            if frame.add(event, cast).map_err(|e| bad(e, line_no))? {
                if self.meaning.contains(&true) {
                    let meaning = &self.meaning;
                    frame
                        .learnings
                        .retain(|l| !meaning.get(l.fact).copied().unwrap_or(false));
                    if let Some(d) = self.decided.remove(&frame.tick) {
                        frame.learnings.extend(
                            d.into_iter()
                                .filter(|l| meaning.get(l.fact).copied().unwrap_or(false)),
                        );
                    }
                }
                return Ok(Some(frame));
            }
        }
        Ok(None)
    }
}

impl FrameReader<crate::logfile::LogReader> {
    /// Opens the event log `path` stands for (`events.jsonl.zst`, or the plain file of
    /// the format before).
    pub fn open(path: &Path) -> Result<Self, RunError> {
        let reader = crate::logfile::LogReader::open(path)?;
        let path = reader.path().to_owned();
        Ok(Self::new(reader, &path))
    }

    /// Opens the event log of the run in `dir`, with the `learned` lines of its facts by
    /// meaning from `facts.json` in place of the log's (decided when the run ended: none
    /// before, [`crate::spread`]).
    pub fn open_run(dir: &Path, scenario: &Scenario, cast: &Cast) -> Result<Self, RunError> {
        let mut reader = Self::open(&dir.join(crate::rundir::EVENTS_FILE))?;
        reader.frames.meaning = scenario.facts.iter().map(|f| f.meaning.is_some()).collect();
        if reader.frames.meaning.contains(&true) {
            let path = dir.join(crate::spread::FACTS_FILE);
            let mut frames: BTreeMap<u64, Frame> = BTreeMap::new();
            for line in crate::spread::FactsFile::read(dir)?.learned {
                frames
                    .entry(line.tick())
                    .or_default()
                    .add(line, cast)
                    .map_err(|problem| RunError::RunDir {
                        path: path.clone(),
                        problem,
                    })?;
            }
            reader.frames.decided = frames
                .into_iter()
                .map(|(tick, f)| (tick, f.learnings))
                .collect();
        }
        Ok(reader)
    }
}

impl<R: BufRead> FrameReader<R> {
    /// Reads frames from `reader`; `path` is only used in messages.
    pub fn new(reader: R, path: &Path) -> Self {
        Self {
            lines: TickReader {
                reader,
                line_no: 0,
                chain: crate::logs::HashChain::default(),
                done: false,
            },
            frames: FrameBuilder {
                path: path.to_owned(),
                meaning: Vec::new(),
                decided: BTreeMap::new(),
            },
        }
    }

    /// The next complete frame, `None` at the end of the log.
    pub fn next_frame(&mut self, cast: &Cast) -> Result<Option<Frame>, RunError> {
        match self.lines.next_tick(&self.frames.path)? {
            Some(tick) => {
                let events = tick.parse(0..tick.ends.len());
                self.frames.frame_of(&tick, events, cast)
            }
            None => Ok(None),
        }
    }

    /// Every complete frame, in order, each handed to `apply`: the log read, checked and
    /// half parsed on another thread while this one parses the other half, builds and
    /// applies (see [`FrameReader`]). Stops at the first error, as
    /// [`FrameReader::next_frame`] would.
    pub fn for_each_frame(self, cast: &Cast, mut apply: impl FnMut(Frame)) -> Result<(), RunError>
    where
        R: Send,
    {
        let Self {
            mut lines,
            mut frames,
        } = self;
        let path = frames.path.clone();
        std::thread::scope(|s| {
            // Two ticks ahead at most: a 100,000-NPC tick's lines are tens of megabytes.
            let (send, receive) = std::sync::mpsc::sync_channel(2);
            // Named for profiles (`scripts/cpu_profile.py`); as `s.spawn` does, a thread
            // the system cannot start is a panic.
            let reader = std::thread::Builder::new().name("hearsay-story".into());
            let started = reader.spawn_scoped(s, move || {
                loop {
                    // The first half of the tick's lines parsed here, the rest by the
                    // builder's thread, which also builds the frames and applies them.
                    let next = lines.next_tick(&path).map(|tick| {
                        tick.map(|tick| {
                            let front = tick.parse(0..tick.ends.len() / 2);
                            (tick, front)
                        })
                    });
                    let last = !matches!(&next, Ok(Some((t, _))) if t.complete);
                    // The builder stopped (an error): so does the reader.
                    if send.send(next).is_err() || last {
                        break;
                    }
                }
            });
            if let Err(e) = started {
                panic!("cannot start the event log's reading thread: {e}");
            }
            for tick in receive {
                let Some((tick, mut events)) = tick? else {
                    break;
                };
                events.extend(tick.parse(events.len()..tick.ends.len()));
                match frames.frame_of(&tick, events, cast)? {
                    Some(frame) => apply(frame),
                    None => break,
                }
            }
            Ok(())
        })
    }
}

/// How a knower came by its knowledge, directly.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case", tag = "how")]
pub enum How {
    /// A seed memory from the scenario.
    Seed,
    /// A scenario event it saw.
    Witnessed,
    /// Another NPC's words.
    Told {
        /// The teller, as an index into [`Cast::npcs`].
        by: usize,
    },
    /// Nothing: its own words or thoughts, with no memory behind them that holds the fact.
    Invented,
}

/// One knower of one fact.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Knowing {
    /// The knower, as an index into [`Cast::npcs`].
    pub npc: usize,
    /// The tick it learned the fact (its `learned` line's tick).
    pub tick: u64,
    /// Its direct source: a seed memory, an event seen, a teller, or none.
    pub how: How,
    /// The memory that holds it.
    pub memory: MemoryId,
    /// That memory's text: the fact as this knower has it.
    pub content: String,
}

/// Where a knower's chain of tellers ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Root {
    /// At an NPC's seed memory.
    Seed(usize),
    /// At an NPC who saw a scenario event.
    Witnessed(usize),
    /// At an NPC who came up with it (an invention, or a model's hallucination).
    Invented(usize),
    /// At a teller who never knew it, or in a loop: the record does not explain it.
    Broken(usize),
}

impl Root {
    /// Whether the chain ends at something the scenario put into the world.
    pub fn sourced(self) -> bool {
        matches!(self, Root::Seed(_) | Root::Witnessed(_))
    }
}

/// What one NPC did over the run.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Life {
    /// Ticks it talked in (whispers included).
    pub talks: Vec<u64>,
    /// Of its talks, those addressed to someone everyone in earshot still heard.
    pub addressed: u64,
    /// Of its talks, the whispers.
    pub whispers: u64,
    /// How many `move` lines it has: one cell per step.
    pub steps: u64,
    /// Ticks it reflected in, with the insights drawn.
    pub reflections: Vec<(u64, usize)>,
    /// How many memories it formed, seed memories included.
    pub memories: u64,
    /// How many of its memories were archived (kept, but no longer recalled).
    pub forgotten: u64,
    /// Ticks it stayed because its brain failed.
    pub brain_failures: u64,
    /// Ticks it decided without memories because recall failed.
    pub recall_failures: u64,
    /// (tick, cell) at spawn and after every step.
    pub path: Vec<(u64, Pos)>,
    /// Under `think = "on_change"`: the ticks it thought in (its brain was asked).
    pub thoughts: Vec<u64>,
    /// Under `think = "on_change"`: the ticks it carried on without thinking.
    pub continued: u64,
}

/// The whole run, told from its log.
#[derive(Clone, Debug)]
pub struct Story {
    /// The scenario's map, places, NPCs and facts, which indices refer to.
    pub cast: Cast,
    /// Ticks whose closing `tick` line was read: the last one plus 1.
    pub completed: u64,
    /// Per fact, its knowers in the order they learned it.
    pub knowers: Vec<Vec<Knowing>>,
    /// Per NPC.
    pub lives: Vec<Life>,
    /// Speeches over the run.
    pub speeches: u64,
    /// Scenario events: (tick, place, text, witnesses).
    pub happenings: Vec<(u64, String, String, usize)>,
    kinds: Vec<Option<MemoryKind>>,
    witnessed: BTreeSet<(u64, usize)>,
    /// Per fact, per NPC: 1 + the NPC's place in `knowers[fact]`, 0 if it does not know
    /// the fact. Following a chain of tellers looks up one knower per hop; scanning the
    /// list instead made the report quadratic in the knowers (a fact 10,000 NPCs heard).
    knower_at: Vec<Vec<u32>>,
}

impl Story {
    /// An empty story of `cast`.
    pub fn new(cast: Cast) -> Self {
        Self {
            knowers: vec![Vec::new(); cast.facts.len()],
            lives: vec![Life::default(); cast.npcs.len()],
            knower_at: vec![vec![0; cast.npcs.len()]; cast.facts.len()],
            cast,
            completed: 0,
            speeches: 0,
            happenings: Vec::new(),
            kinds: Vec::new(),
            witnessed: BTreeSet::new(),
        }
    }

    /// Reads the story of the run in `dir` (its scenario and `events.jsonl`). The
    /// knowers of a fact with a statement come from `facts.json` (decided when the run
    /// ended, [`crate::spread`]) rather than from the log: until then it has none.
    pub fn read(dir: &Path, scenario: &Scenario) -> Result<Story, RunError> {
        let cast = Cast::new(scenario);
        let reader = FrameReader::open_run(dir, scenario, &cast)?;
        let mut story = Story::new(cast.clone());
        reader.for_each_frame(&cast, |frame| story.apply(&frame))?;
        Ok(story)
    }

    fn kind(&self, id: MemoryId) -> Option<MemoryKind> {
        self.kinds.get(id.0 as usize).copied().flatten()
    }

    /// Adds a tick.
    pub fn apply(&mut self, frame: &Frame) {
        let t = frame.tick;
        for &(npc, at) in &frame.spawns {
            self.lives[npc].path.push((t, at));
        }
        for s in &frame.steps {
            let life = &mut self.lives[s.npc];
            life.steps += 1;
            life.path.push((t, s.to));
        }
        for s in &frame.speeches {
            let life = &mut self.lives[s.npc];
            life.talks.push(t);
            match (s.to, s.whisper) {
                (_, true) => life.whispers += 1,
                (Some(_), false) => life.addressed += 1,
                (None, false) => {}
            }
            self.speeches += 1;
        }
        for h in &frame.happenings {
            for &w in &h.witnesses {
                self.witnessed.insert((t, w));
            }
            self.happenings
                .push((t, h.place.clone(), h.text.clone(), h.witnesses.len()));
        }
        for w in &frame.written {
            let i = w.id.0 as usize;
            if self.kinds.len() <= i {
                self.kinds.resize(i + 1, None);
            }
            self.kinds[i] = Some(w.kind);
            self.lives[w.npc].memories += 1;
        }
        for &(npc, n) in &frame.reflections {
            self.lives[npc].reflections.push((t, n));
        }
        for &npc in &frame.forgotten {
            self.lives[npc].forgotten += 1;
        }
        for &npc in &frame.brain_failures {
            self.lives[npc].brain_failures += 1;
        }
        for &npc in &frame.recall_failures {
            self.lives[npc].recall_failures += 1;
        }
        for (npc, _) in &frame.woken {
            self.lives[*npc].thoughts.push(t);
        }
        for &npc in &frame.continued {
            self.lives[npc].continued += 1;
        }
        for l in &frame.learnings {
            let how = match l.from {
                Some(by) => How::Told { by },
                None => {
                    // A reflection teaches what its evidence held.
                    let origin = l.via.unwrap_or(l.memory);
                    match self.kind(origin) {
                        Some(MemoryKind::Seed) => How::Seed,
                        Some(MemoryKind::Observation) if self.witnessed.contains(&(t, l.npc)) => {
                            How::Witnessed
                        }
                        Some(MemoryKind::Observation) if l.via.is_some() => How::Witnessed,
                        _ => How::Invented,
                    }
                }
            };
            let content = frame
                .written
                .iter()
                .find(|w| w.id == l.memory)
                .map(|w| w.content.to_string())
                .unwrap_or_default();
            let at = &mut self.knower_at[l.fact][l.npc];
            if *at == 0 {
                *at = u32::try_from(self.knowers[l.fact].len() + 1).unwrap_or(u32::MAX);
            }
            self.knowers[l.fact].push(Knowing {
                npc: l.npc,
                tick: t,
                how,
                memory: l.memory,
                content,
            });
        }
        self.completed = t + 1;
    }

    /// Knower `npc` of `fact`, if it knows it.
    pub fn knowing(&self, fact: usize, npc: usize) -> Option<&Knowing> {
        let at = *self.knower_at.get(fact)?.get(npc)?;
        self.knowers[fact].get(usize::try_from(at).ok()?.checked_sub(1)?)
    }

    /// The chain of tellers behind `npc`'s knowledge of `fact` (itself first) and where
    /// it ends.
    pub fn chain(&self, fact: usize, npc: usize) -> (Vec<usize>, Root) {
        let mut chain = vec![npc];
        let mut seen = BTreeSet::from([npc]);
        let mut at = npc;
        loop {
            let Some(k) = self.knowing(fact, at) else {
                return (chain, Root::Broken(at));
            };
            match k.how {
                How::Seed => return (chain, Root::Seed(at)),
                How::Witnessed => return (chain, Root::Witnessed(at)),
                How::Invented => return (chain, Root::Invented(at)),
                How::Told { by } => {
                    chain.push(by);
                    if !seen.insert(by) {
                        return (chain, Root::Broken(by));
                    }
                    at = by;
                }
            }
        }
    }

    /// Knowers of `fact` whose chain does not end at a seed memory or a scenario event.
    pub fn unsourced(&self, fact: usize) -> Vec<(Knowing, Vec<usize>, Root)> {
        self.knowers[fact]
            .iter()
            .filter_map(|k| {
                let (chain, root) = self.chain(fact, k.npc);
                (!root.sourced()).then(|| (k.clone(), chain, root))
            })
            .collect()
    }

    /// Knowers of `fact` by the end of tick `tick`.
    pub fn knowers_by(&self, fact: usize, tick: u64) -> usize {
        self.knowers[fact].iter().filter(|k| k.tick <= tick).count()
    }

    /// The first tick `npc` stood within `radius` cells of `at`, if it did.
    pub fn first_within(&self, npc: usize, at: Pos, radius: u32) -> Option<u64> {
        self.lives[npc]
            .path
            .iter()
            .find(|(_, p)| p.within(at, radius))
            .map(|(t, _)| *t)
    }

    /// How close `npc` ever came to `at` (Euclidean, cells), and where it ended.
    pub fn closest(&self, npc: usize, at: Pos) -> (f64, Option<Pos>) {
        let path = &self.lives[npc].path;
        let nearest = path
            .iter()
            .map(|(_, p)| (p.dist2(at) as f64).sqrt())
            .fold(f64::INFINITY, f64::min);
        (nearest, path.last().map(|(_, p)| *p))
    }

    /// (tick, knowers) at every tick where the number of knowers of `fact` changes.
    pub fn curve(&self, fact: usize) -> Vec<(u64, u32)> {
        let mut out: Vec<(u64, u32)> = Vec::new();
        for (i, k) in self.knowers[fact].iter().enumerate() {
            match out.last_mut() {
                Some((t, n)) if *t == k.tick => *n = i as u32 + 1,
                _ => out.push((k.tick, i as u32 + 1)),
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cast() -> Cast {
        let npcs: Vec<String> = ["Bob", "Alice", "Carol", "Dave"]
            .iter()
            .map(|s| (*s).to_owned())
            .collect();
        Cast {
            name: "t".into(),
            ticks: 10,
            grid: Grid {
                width: 10,
                height: 10,
            },
            places: vec![("market".into(), Pos::new(5, 5))],
            by_name: npcs
                .iter()
                .enumerate()
                .map(|(i, n)| (n.clone(), i))
                .collect(),
            npcs,
            facts: vec!["fish".into()],
        }
    }

    /// A log of `ticks`, each tick's lines closed by the line with its rolling hash.
    fn sealed(ticks: &[Vec<String>]) -> String {
        let mut prev = [0u8; 32];
        let mut text = String::new();
        for (t, lines) in ticks.iter().enumerate() {
            prev = hearsay_core::digest::roll(&prev, t as u64, lines);
            for line in lines {
                text.push_str(line);
                text.push('\n');
            }
            let hash = hearsay_core::digest::hex(&prev);
            text.push_str(&format!(r#"{{"type":"tick","tick":{t},"hash":"{hash}"}}"#));
            text.push('\n');
        }
        text
    }

    /// Three ticks of every common kind of line.
    fn three_ticks() -> Vec<Vec<String>> {
        let lines = |ls: &[&str]| ls.iter().map(|l| (*l).to_owned()).collect::<Vec<_>>();
        vec![
            lines(&[
                r#"{"type":"spawn","tick":0,"npc":"Bob","at":[1,1]}"#,
                r#"{"type":"spawn","tick":0,"npc":"Alice","at":[1,2]}"#,
                r#"{"type":"spawn","tick":0,"npc":"Carol","at":[5,5]}"#,
                r#"{"type":"spawn","tick":0,"npc":"Dave","at":[9,9]}"#,
                r#"{"type":"memory","tick":0,"npc":"Alice","id":1,"kind":"seed","importance":5,"content":"the fish is fresh"}"#,
                r#"{"type":"learned","tick":0,"fact":"fish","npc":"Alice","from":null,"memory":1}"#,
            ]),
            lines(&[
                r#"{"type":"talk","tick":1,"npc":"Alice","text":"fresh fish!","listeners":["Bob"],"recalled":[1]}"#,
                r#"{"type":"move","tick":1,"npc":"Carol","from":[5,5],"to":[5,6],"target":[5,9],"recalled":[]}"#,
                r#"{"type":"stay","tick":1,"npc":"Dave","at":[9,9],"recalled":[]}"#,
                r#"{"type":"memory","tick":1,"npc":"Bob","id":2,"kind":"conversation","importance":8,"content":"Alice said: fresh fish!","from":"Alice"}"#,
                r#"{"type":"learned","tick":1,"fact":"fish","npc":"Bob","from":"Alice","memory":2}"#,
            ]),
            lines(&[
                r#"{"type":"move","tick":2,"npc":"Dave","from":[9,9],"to":[8,9],"target":[1,1],"recalled":[]}"#,
                r#"{"type":"stay","tick":2,"npc":"Bob","at":[1,1],"recalled":[2]}"#,
            ]),
        ]
    }

    /// The frames of `text` read one at a time on this thread, or the error that stopped
    /// the reading.
    fn read_on_one(text: &str) -> Result<Vec<Frame>, String> {
        let mut reader = FrameReader::new(text.as_bytes(), Path::new("events.jsonl"));
        let mut frames = Vec::new();
        loop {
            match reader.next_frame(&cast()) {
                Ok(Some(frame)) => frames.push(frame),
                Ok(None) => return Ok(frames),
                Err(e) => return Err(e.to_string()),
            }
        }
    }

    /// The same, read on two threads.
    fn read_on_two(text: &str) -> Result<Vec<Frame>, String> {
        let mut frames = Vec::new();
        FrameReader::new(text.as_bytes(), Path::new("events.jsonl"))
            .for_each_frame(&cast(), |frame| frames.push(frame))
            .map_err(|e| e.to_string())?;
        Ok(frames)
    }

    #[test]
    fn a_log_reads_alike_on_one_thread_and_on_two() {
        let ticks = three_ticks();
        let log = sealed(&ticks);
        let frames = read_on_one(&log).expect("a sealed log reads");
        assert_eq!(frames.len(), 3);
        assert_eq!(frames[1].speeches[0].listeners, vec![0]);
        assert_eq!(frames[1].learnings[0].from, Some(1));
        assert_eq!(read_on_two(&log), Ok(frames.clone()));

        // A run killed mid-tick: the unclosed tick is not a frame, nor a half-written line.
        let cut = log
            .rfind(r#"{"type":"tick","tick":2"#)
            .expect("tick 2 closes");
        assert_eq!(read_on_one(&log[..cut]), Ok(frames[..2].to_vec()));
        assert_eq!(read_on_two(&log[..cut]), Ok(frames[..2].to_vec()));
        let unterminated = format!("{log}{{\"type\":\"stay\",\"ti");
        assert_eq!(read_on_two(&unterminated), Ok(frames.clone()));

        // Each damage stops both at the same line with the same words.
        let edit = |tick: usize, line: usize, to: &str| {
            let mut ticks = ticks.clone();
            ticks[tick][line] = to.to_owned();
            ticks
        };
        let damaged = [
            // Not JSON, in a tick that is sealed over it.
            sealed(&edit(1, 2, "{not json")),
            // A line edited after the seal was made.
            log.replacen("fresh fish!", "stale fish!", 1),
            // A line of tick 2 within tick 1.
            sealed(&edit(1, 1, &ticks[2][0])),
            // An NPC the scenario does not have.
            sealed(&edit(2, 1, &ticks[2][1].replace("Bob", "Zed"))),
            // A closing line that does not begin with its type.
            log.replacen(
                r#"{"type":"tick","tick":1,"#,
                r#"{"tick":1,"type":"tick","#,
                1,
            ),
            // A closing line cut short: not JSON.
            log.replacen(
                r#"{"type":"tick","tick":1,"hash":""#,
                r#"{"type":"tick","tick":1,"ha"#,
                1,
            ),
        ];
        let expected = [
            "line 10 is not an event",
            "line 13 closes tick 1 with a hash its 5 events do not give",
            "line 9 belongs to tick 2, but tick 1 has not been closed",
            "line 15 names an NPC the scenario does not have",
            "line 13 closes a tick but does not begin with",
            "line 13 is not an event",
        ];
        for (log, expected) in damaged.iter().zip(expected) {
            let one = read_on_one(log).expect_err(expected);
            assert!(one.contains(expected), "{one}, not {expected}");
            assert_eq!(read_on_two(log), Err(one));
        }
    }

    fn frame(lines: &[&str]) -> Frame {
        let lines: Vec<String> = lines.iter().map(|s| (*s).to_owned()).collect();
        Frame::parse(&lines, &cast()).expect("frame")
    }

    #[test]
    fn chains_end_at_seeds_witnesses_or_inventions() {
        let mut story = Story::new(cast());
        story.apply(&frame(&[
            r#"{"type":"spawn","tick":0,"npc":"Bob","at":[1,1]}"#,
            r#"{"type":"memory","tick":0,"npc":"Bob","id":1,"kind":"seed","importance":8,"content":"fish"}"#,
            r#"{"type":"learned","tick":0,"fact":"fish","npc":"Bob","from":null,"memory":1}"#,
            r#"{"type":"tick","tick":0,"hash":"00"}"#,
        ]));
        story.apply(&frame(&[
            r#"{"type":"talk","tick":1,"npc":"Bob","text":"fish","listeners":["Alice"],"recalled":[1]}"#,
            r#"{"type":"memory","tick":1,"npc":"Alice","id":2,"kind":"conversation","importance":8,"content":"Bob said: fish","from":"Bob"}"#,
            r#"{"type":"learned","tick":1,"fact":"fish","npc":"Alice","from":"Bob","memory":2}"#,
            r#"{"type":"memory","tick":1,"npc":"Dave","id":3,"kind":"conversation","importance":8,"content":"I said to everyone: fish"}"#,
            r#"{"type":"learned","tick":1,"fact":"fish","npc":"Dave","from":null,"memory":3}"#,
            r#"{"type":"tick","tick":1,"hash":"01"}"#,
        ]));
        story.apply(&frame(&[
            r#"{"type":"memory","tick":2,"npc":"Carol","id":4,"kind":"conversation","importance":8,"content":"Dave said: fish","from":"Dave"}"#,
            r#"{"type":"learned","tick":2,"fact":"fish","npc":"Carol","from":"Dave","memory":4}"#,
            r#"{"type":"tick","tick":2,"hash":"02"}"#,
        ]));
        assert_eq!(story.chain(0, 1), (vec![1, 0], Root::Seed(0)));
        assert_eq!(story.chain(0, 2), (vec![2, 3], Root::Invented(3)));
        let unsourced: Vec<usize> = story.unsourced(0).iter().map(|(k, _, _)| k.npc).collect();
        assert_eq!(
            unsourced,
            vec![3, 2],
            "Dave made it up and Carol heard it from him"
        );
        assert_eq!(story.curve(0), vec![(0, 1), (1, 3), (2, 4)]);
        assert_eq!(story.knowers_by(0, 1), 3);
        assert_eq!(story.completed, 3);
        assert_eq!(story.lives[0].talks, vec![1]);
    }

    #[test]
    fn witnesses_are_sources_and_paths_reach_places() {
        let mut story = Story::new(cast());
        story.apply(&frame(&[
            r#"{"type":"spawn","tick":0,"npc":"Alice","at":[3,3]}"#,
            r#"{"type":"scenario_event","tick":0,"place":"market","text":"fish","witnesses":["Alice"]}"#,
            r#"{"type":"memory","tick":0,"npc":"Alice","id":1,"kind":"observation","importance":6,"content":"At the market: fish"}"#,
            r#"{"type":"learned","tick":0,"fact":"fish","npc":"Alice","from":null,"memory":1}"#,
            r#"{"type":"move","tick":0,"npc":"Alice","from":[3,3],"to":[4,4],"target":[5,5],"recalled":[]}"#,
            r#"{"type":"tick","tick":0,"hash":"00"}"#,
        ]));
        story.apply(&frame(&[
            r#"{"type":"move","tick":1,"npc":"Alice","from":[4,4],"to":[5,5],"target":[5,5],"recalled":[]}"#,
            r#"{"type":"tick","tick":1,"hash":"01"}"#,
        ]));
        assert_eq!(story.chain(0, 1).1, Root::Witnessed(1));
        assert_eq!(story.first_within(1, Pos::new(5, 5), 0), Some(1));
        assert_eq!(story.first_within(1, Pos::new(5, 5), 2), Some(0));
        assert_eq!(
            story.first_within(0, Pos::new(5, 5), 2),
            None,
            "Bob never spawned"
        );
    }

    #[test]
    fn a_log_cut_mid_tick_yields_only_complete_frames() {
        let cast = cast();
        let spawn = "{\"type\":\"spawn\",\"tick\":0,\"npc\":\"Bob\",\"at\":[1,1]}";
        let hash = hearsay_core::digest::hex(&hearsay_core::digest::roll(
            &[0; 32],
            0,
            &[spawn.to_owned()],
        ));
        let text = format!(
            "{spawn}\n{{\"type\":\"tick\",\"tick\":0,\"hash\":\"{hash}\"}}\n\
             {{\"type\":\"stay\",\"tick\":1,\"npc\":\"Bob\",\"at\":[1,1],\"recalled\":[]}}\n\
             {{\"type\":\"mem"
        );
        let mut reader = FrameReader::new(text.as_bytes(), Path::new("events.jsonl"));
        assert_eq!(
            reader.next_frame(&cast).expect("ok").map(|f| f.tick),
            Some(0)
        );
        assert_eq!(
            reader.next_frame(&cast).expect("ok"),
            None,
            "tick 1 never closed"
        );

        let garbage = "{\"type\":\"spawn\",\"tick\":0,\"npc\":\"Bob\",\"at\":[1,1]}\nnot json\n";
        let mut reader = FrameReader::new(garbage.as_bytes(), Path::new("events.jsonl"));
        let err = reader.next_frame(&cast).expect_err("garbage");
        assert!(
            err.to_string()
                .contains("events.jsonl: line 2 is not an event"),
            "{err}"
        );

        let bad = "{\"type\":\"spawn\",\"tick\":0,\"npc\":\"Zed\",\"at\":[1,1]}\n";
        let mut reader = FrameReader::new(bad.as_bytes(), Path::new("events.jsonl"));
        let err = reader.next_frame(&cast).expect_err("unknown NPC");
        assert!(err.to_string().contains("\"Zed\""), "{err}");
    }
}
