//! Reading a run directory back: `run.json`, the event log and the brain-call tape —
//! to replay a run, to resume it after a crash, or to fork it.

use std::collections::BTreeMap;
use std::io::BufRead;
use std::ops::Range;
use std::path::Path;

use hearsay_brain::{BrainCall, TickNote};
use hearsay_core::MemoryId;
use serde::{Deserialize, Serialize};

use crate::RunError;

/// `run.json`: the settings a run actually ran with (the scenario file may have been
/// overridden on the command line).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunManifest {
    /// The hearsay version that started the run.
    pub hearsay: String,
    /// The scenario's `name` (not a file path); `scenario.toml` holds the file itself.
    pub scenario: String,
    /// Ticks the run is to last.
    pub ticks: u64,
    /// (first tick, seed): the seed in force from each tick on (a fork may change it).
    pub seeds: Vec<(u64, u64)>,
    /// Where the memories are.
    pub store: StoreInfo,
    /// Checkpoint interval in ticks (0: none).
    pub checkpoint_every: u64,
    /// The run this one was forked from, and at which tick.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub forked_from: Option<(String, u64)>,
    /// The scenarios that were in force before `scenario.toml` (a fork with `--set`
    /// changes the scenario at its fork tick), oldest first: replay and inspect need the
    /// settings each tick actually ran with.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub earlier_scenarios: Vec<EarlierScenario>,
}

/// A scenario that was in force for the ticks before `until_tick`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct EarlierScenario {
    /// The first tick it was no longer in force.
    pub until_tick: u64,
    /// The whole scenario TOML as it was then, verbatim.
    pub text: String,
}

impl RunManifest {
    /// The seed in force at `tick`.
    pub fn seed_at(&self, tick: u64) -> u64 {
        self.seeds
            .iter()
            .rev()
            .find(|(from, _)| *from <= tick)
            .or(self.seeds.first())
            .map_or(0, |(_, seed)| *seed)
    }

    /// The text of the scenario in force at `tick`, given the text of `scenario.toml`.
    pub fn scenario_text_at<'a>(&'a self, tick: u64, current: &'a str) -> &'a str {
        self.earlier_scenarios
            .iter()
            .find(|s| tick < s.until_tick)
            .map_or(current, |s| s.text.as_str())
    }

    /// Reads `dir/run.json`.
    pub fn read(dir: &Path) -> Result<RunManifest, RunError> {
        let path = dir.join(crate::rundir::MANIFEST_FILE);
        let text = crate::rundir::read_small(&path).map_err(|e| RunError::RunDir {
            path: path.clone(),
            problem: format!("cannot read it ({e}); is this a hearsay run directory?"),
        })?;
        serde_json::from_str(&text).map_err(|e| RunError::RunDir {
            path,
            problem: format!("not a run manifest: {e}"),
        })
    }

    /// Writes `dir/run.json`.
    pub fn write(&self, dir: &Path) -> Result<(), RunError> {
        let text = serde_json::to_string_pretty(self).map_err(|e| RunError::RunDir {
            path: dir.join(crate::rundir::MANIFEST_FILE),
            problem: format!("cannot encode the manifest: {e}"),
        })? + "\n";
        crate::rundir::write_file(&dir.join(crate::rundir::MANIFEST_FILE), text.as_bytes())
    }
}

/// How the scenario of an earlier stage differs from `current` (`scenario.toml`), as
/// `- line` / `+ line` lines: the lines between their common start and common end, at
/// most `max` of them. Run text, made safe for a terminal.
pub fn stage_diff(earlier: &str, current: &str, max: usize) -> Vec<String> {
    let a: Vec<&str> = earlier.lines().collect();
    let b: Vec<&str> = current.lines().collect();
    let prefix = a.iter().zip(&b).take_while(|(x, y)| x == y).count();
    let suffix = a[prefix..]
        .iter()
        .rev()
        .zip(b[prefix..].iter().rev())
        .take_while(|(x, y)| x == y)
        .count();
    let removed = &a[prefix..a.len() - suffix];
    let added = &b[prefix..b.len() - suffix];
    let mut out: Vec<String> = removed
        .iter()
        .map(|l| format!("- {}", crate::terminal::safe(l)))
        .chain(
            added
                .iter()
                .map(|l| format!("+ {}", crate::terminal::safe(l))),
        )
        .collect();
    if out.len() > max {
        let more = out.len() - max;
        out.truncate(max);
        out.push(format!("… {more} more lines"));
    }
    out
}

/// A finished run (one with `summary.json`) must have an event log that closes all of
/// its `ticks`; fewer means the log was cut short after the run wrote it.
pub fn check_not_cut_short(dir: &Path, ticks: u64, completed: u64) -> Result<(), RunError> {
    if completed < ticks && dir.join(crate::rundir::SUMMARY_FILE).is_file() {
        return Err(RunError::RunDir {
            path: dir.join(crate::rundir::EVENTS_FILE),
            problem: format!(
                "closes {completed} ticks, but the run finished all {ticks} ({} says so): \
                 the log was cut short after it was written",
                crate::rundir::SUMMARY_FILE
            ),
        });
    }
    Ok(())
}

/// Follows the rolling hash of an event log line by line (see `hearsay_core::digest`),
/// from tick 0: each tick's closing line must carry the hash of everything before it.
#[derive(Default)]
pub struct HashChain {
    prev: [u8; 32],
    /// The tick being read.
    tick: u64,
    /// Its hash so far, from its first line on.
    roll: Option<Box<hearsay_core::digest::Roll>>,
    lines: usize,
}

impl HashChain {
    /// A line of the tick being read (not its closing `tick` line).
    pub fn add(&mut self, line: &str) {
        let (prev, tick) = (self.prev, self.tick);
        self.roll
            .get_or_insert_with(|| Box::new(hearsay_core::digest::Roll::new(&prev, tick)))
            .line(line);
        self.lines += 1;
    }

    /// The closing line of `tick` says `hash`: checks it, then starts the next tick.
    pub fn close(&mut self, tick: u64, hash: &str) -> Result<(), String> {
        if tick != self.tick {
            return Err(format!(
                "closes tick {tick}, but tick {} was expected",
                self.tick
            ));
        }
        let next = self
            .roll
            .take()
            .unwrap_or_else(|| Box::new(hearsay_core::digest::Roll::new(&self.prev, tick)))
            .finish();
        let n = std::mem::take(&mut self.lines);
        self.prev = next;
        self.tick += 1;
        if hearsay_core::digest::hex(&next) != hash {
            return Err(format!(
                "closes tick {tick} with a hash its {n} events do not give: the log was edited \
                 or damaged after it was written"
            ));
        }
        Ok(())
    }
}

/// Where an event log's ticks close, with what hash, and where the file can be cut: what
/// a pass over the log keeps without its lines' text. A resume and a fork need no more of
/// a log than this and its recall state ([`TickIndex::read`], [`Recalls`]): a big run's
/// text is gigabytes, and held whole it took a resume of the 100,000-NPC town far above
/// the run's own peak of memory.
#[derive(Clone, Debug, Default)]
pub struct TickIndex {
    /// For each completed tick, in order: (tick, index of its closing `tick` line, hash).
    pub ticks: Vec<(u64, usize, String)>,
    /// The first closing line (1-based) whose hash the tick's lines do not give, and why.
    pub broken_seal: Option<(usize, String)>,
    /// For each completed tick, the offset in the text just past its closing line: where
    /// a log cut back to that tick ends.
    pub tick_ends: Vec<u64>,
    /// The file read, and where it can be cut.
    pub cuts: crate::logfile::Cuts,
}

/// The event log of a run, one line per entry, with where each tick closes.
#[derive(Clone, Debug, Default)]
pub struct EventLog {
    /// Every complete line (a trailing partial line is dropped).
    pub lines: Lines,
    /// Where its ticks close.
    pub index: TickIndex,
}

/// Lines kept in one text, one after another without their line breaks, each a place in
/// it. (A `String` per line held a big run's log twice while it was read, and once more
/// in the lines' own headers and allocations: 3.2 million lines at 100,000 NPCs.)
#[derive(Clone, Debug, Default)]
pub struct Lines {
    text: String,
    at: Vec<Range<usize>>,
}

impl Lines {
    /// How many lines.
    pub fn len(&self) -> usize {
        self.at.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.at.is_empty()
    }

    /// Lines `range` (by index).
    pub fn slice(&self, range: Range<usize>) -> LineSlice<'_> {
        LineSlice {
            text: &self.text,
            at: &self.at[range],
        }
    }
}

/// Consecutive lines of [`Lines`].
#[derive(Clone, Copy, Debug, Default)]
pub struct LineSlice<'a> {
    text: &'a str,
    at: &'a [Range<usize>],
}

impl<'a> LineSlice<'a> {
    /// How many lines.
    pub fn len(&self) -> usize {
        self.at.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.at.is_empty()
    }

    /// The lines, in order.
    pub fn iter(&self) -> LineIter<'a> {
        LineIter {
            text: self.text,
            at: self.at.iter(),
        }
    }
}

impl<'a> IntoIterator for LineSlice<'a> {
    type Item = &'a str;
    type IntoIter = LineIter<'a>;

    fn into_iter(self) -> LineIter<'a> {
        self.iter()
    }
}

/// The lines of a [`LineSlice`].
#[derive(Clone, Debug)]
pub struct LineIter<'a> {
    text: &'a str,
    at: std::slice::Iter<'a, Range<usize>>,
}

impl<'a> Iterator for LineIter<'a> {
    type Item = &'a str;

    fn next(&mut self) -> Option<&'a str> {
        self.at.next().map(|r| &self.text[r.clone()])
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.at.size_hint()
    }
}

impl ExactSizeIterator for LineIter<'_> {}

/// What a pass over the event log reads of a line: whether it closes a tick, and then
/// which with what hash; and an action's recalled memories, their text left unparsed
/// until [`Recalls`] asks (so a pass that counts recalls parses each line once, not
/// twice). The rest of the line is checked to be JSON and skipped, not built: building
/// every line as a `serde_json::Value` (a map, a string per key) was most of reading a
/// big run's log, for three fields of one line per tick.
#[derive(Deserialize)]
struct Peek<'a> {
    #[serde(rename = "type", borrow, default)]
    kind: Option<std::borrow::Cow<'a, str>>,
    #[serde(default)]
    tick: Option<u64>,
    #[serde(borrow, default)]
    hash: Option<std::borrow::Cow<'a, str>>,
    #[serde(borrow, default)]
    npc: Option<std::borrow::Cow<'a, str>>,
    #[serde(borrow, default)]
    recalled: Option<&'a serde_json::value::RawValue>,
}

impl Peek<'_> {
    /// The line's tick, its actor and the memories it recalled, if it is an action (a
    /// list that is not one of ids reads as none).
    fn action(&self) -> Option<(u64, &str, Vec<u64>)> {
        if !matches!(self.kind.as_deref(), Some("talk" | "move" | "stay")) {
            return None;
        }
        let recalled = serde_json::from_str(self.recalled?.get()).ok()?;
        Some((
            self.tick.unwrap_or(0),
            self.npc.as_deref().unwrap_or_default(),
            recalled,
        ))
    }
}

/// One pass over the event log `path`, streamed (its text never held whole): checks that
/// every line is JSON (but an unterminated last one, a crash mid-write, which is not
/// read), that ticks close in order, and the rolling hash each closes with against its
/// lines (the first mismatch noted in `broken_seal`). Each line, without its line break
/// (bytes that are not UTF-8 replaced as the line's own would be: a line break ends any
/// sequence they began), goes to `line` with the tick it belongs to and whether it closes
/// it. With `until`, the pass ends once tick `until - 1` closed.
fn pass(
    path: &Path,
    until: Option<u64>,
    mut line: impl FnMut(u64, bool, &str, &Peek<'_>) -> Result<(), RunError>,
) -> Result<TickIndex, RunError> {
    let Some((found, format)) = crate::logfile::locate(path)? else {
        return Err(RunError::RunDir {
            path: path.to_owned(),
            problem: "cannot read the event log (it is not there); is this a hearsay run \
                      directory?"
                .into(),
        });
    };
    let mut reader = crate::logfile::LogReader::open_as(&found, format)?;
    let path = found.as_path();
    let mut index = TickIndex::default();
    let mut chain = HashChain::default();
    let mut raw = Vec::new();
    // The file's bytes read so far (`tick_ends` count them as read, not as replaced),
    // and the lines.
    let (mut offset, mut n) = (0u64, 0usize);
    while until.is_none_or(|until| (index.ticks.len() as u64) < until) {
        if !next_line(&mut reader, path, &mut raw)? {
            break;
        }
        offset += raw.len() as u64;
        // Checked as UTF-8 first: the lossy decoding walks the text far more slowly, and
        // is only needed for a line that is not.
        let bytes = &raw[..raw.len() - 1];
        let text = match std::str::from_utf8(bytes) {
            Ok(text) => std::borrow::Cow::Borrowed(text),
            Err(_) => String::from_utf8_lossy(bytes),
        };
        let text = text.strip_suffix('\r').unwrap_or(&text);
        n += 1;
        let peek: Peek = serde_json::from_str(text).map_err(|e| RunError::RunDir {
            path: path.to_owned(),
            problem: format!("line {n} is not an event: {e}"),
        })?;
        let open = index.ticks.len() as u64;
        let closes = peek.kind.as_deref() == Some("tick");
        if closes {
            let tick = peek.tick.unwrap_or(u64::MAX);
            let hash = peek.hash.as_deref().unwrap_or_default().to_owned();
            if tick != open {
                return Err(RunError::RunDir {
                    path: path.to_owned(),
                    problem: format!("line {n} closes tick {tick}, but tick {open} was expected"),
                });
            }
            if let Err(problem) = chain.close(tick, &hash)
                && index.broken_seal.is_none()
            {
                index.broken_seal = Some((n, problem));
            }
            index.ticks.push((tick, n - 1, hash));
            index.tick_ends.push(offset);
        } else {
            chain.add(text);
        }
        line(open, closes, text, &peek)?;
    }
    index.cuts = reader.into_cuts();
    Ok(index)
}

/// Reads the next line of the log `path` into `raw`, its line break included: `false` at
/// the end, or at an unterminated last line (a crash mid-write), which is not read.
fn next_line(
    reader: &mut crate::logfile::LogReader,
    path: &Path,
    raw: &mut Vec<u8>,
) -> Result<bool, RunError> {
    raw.clear();
    reader
        .read_until(b'\n', raw)
        .map_err(|e| RunError::RunDir {
            path: path.to_owned(),
            problem: format!("cannot be read: {e}"),
        })?;
    Ok(raw.last() == Some(&b'\n'))
}

impl TickIndex {
    /// A pass over the log `path` (streamed, checked as [`EventLog::read`] checks it: a
    /// log whose seal is broken is refused), handing each line to `line` with the tick it
    /// belongs to and whether it closes it; with `until`, only through tick `until - 1`.
    pub fn read(
        path: &Path,
        until: Option<u64>,
        mut line: impl FnMut(u64, bool, &str) -> Result<(), RunError>,
    ) -> Result<TickIndex, RunError> {
        Self::read_peeked(path, until, |tick, closes, text, _| {
            line(tick, closes, text)
        })
    }

    /// [`TickIndex::read`], each line handed over with what the pass read of it.
    fn read_peeked(
        path: &Path,
        until: Option<u64>,
        line: impl FnMut(u64, bool, &str, &Peek<'_>) -> Result<(), RunError>,
    ) -> Result<TickIndex, RunError> {
        pass(path, until, line)?.sealed(path)
    }

    /// Itself, or the refusal of a log whose seal is broken.
    fn sealed(self, path: &Path) -> Result<TickIndex, RunError> {
        self.check_seal(path).map(|()| self)
    }

    /// The refusal of a log whose seal is broken.
    fn check_seal(&self, path: &Path) -> Result<(), RunError> {
        match &self.broken_seal {
            Some((line, problem)) => Err(RunError::RunDir {
                path: path.to_owned(),
                problem: format!("line {line} {problem}"),
            }),
            None => Ok(()),
        }
    }

    /// How many ticks the log closes.
    pub fn completed(&self) -> u64 {
        self.ticks.len() as u64
    }

    /// Itself, or the refusal of a log `path` that does not close tick `next_tick - 1`:
    /// a later pass over a log an earlier pass read through it (a fork reads its
    /// source's in three) must find it there, or the log changed in between.
    fn reaching(self, path: &Path, next_tick: u64) -> Result<TickIndex, RunError> {
        if self.completed() >= next_tick {
            return Ok(self);
        }
        Err(RunError::RunDir {
            path: path.to_owned(),
            problem: format!(
                "closes {} ticks, not the {next_tick} it was found to close a moment before: \
                 it changed while it was read; try again once nothing writes it",
                self.completed()
            ),
        })
    }

    /// The first tick whose closing hash its lines do not give, if any.
    pub fn broken_tick(&self) -> Option<u64> {
        let (line, _) = self.broken_seal.as_ref()?;
        self.ticks
            .iter()
            .find(|(_, at, _)| at + 1 == *line)
            .map(|(t, _, _)| *t)
    }

    /// The length of the text up to and including the close of tick `next_tick - 1`
    /// (0 for 0).
    fn bytes_through(&self, next_tick: u64) -> u64 {
        next_tick
            .checked_sub(1)
            .and_then(|t| self.tick_ends.get(t as usize))
            .copied()
            .unwrap_or(0)
    }

    /// Cuts the file back to the close of tick `next_tick - 1` (to nothing for 0): what
    /// `resume` keeps of it, byte for byte.
    pub fn cut_back(&self, next_tick: u64) -> Result<(), RunError> {
        self.cuts.cut_back(self.bytes_through(next_tick))
    }

    /// The rolling hash after tick `next_tick - 1` (zeros before tick 0).
    pub fn hash_before(&self, next_tick: u64) -> Option<String> {
        match next_tick.checked_sub(1) {
            None => Some(hearsay_core::digest::hex(&[0; 32])),
            Some(t) => self.ticks.get(t as usize).map(|(_, _, h)| h.clone()),
        }
    }
}

/// Writes `to` whole (format 2) with the ticks of the event log `from` before
/// `next_tick` (a fork's log), given the pass that read and checked `from` (`read`): the
/// file's own bytes through that tick when it is format 2, those the pass read (a log
/// that changed since is refused: [`crate::logfile::Cuts::copy_through`]). Otherwise
/// each tick is read and written before the next, `from` checked as it is read; its text
/// is never held whole.
pub fn copy_events_through(
    from: &Path,
    read: &TickIndex,
    to: &Path,
    next_tick: u64,
) -> Result<(), RunError> {
    if (1..=read.completed()).contains(&next_tick) {
        read.check_seal(from)?;
        if read.cuts.copy_through(to, read.bytes_through(next_tick))? {
            return Ok(());
        }
    }
    let mut refused = None;
    let written = crate::logfile::write_log_with(to, |put| {
        let mut tick = Vec::new();
        let copied = pass(from, Some(next_tick), |_, closes, line, _| {
            tick.extend_from_slice(line.as_bytes());
            tick.push(b'\n');
            if closes {
                put(&tick).map_err(|source| RunError::Io {
                    path: to.to_owned(),
                    source,
                })?;
                tick.clear();
            }
            Ok(())
        })
        .and_then(|index| index.sealed(from)?.reaching(from, next_tick));
        copied.map(drop).map_err(|e| {
            let said = std::io::Error::other(e.to_string());
            refused = Some(e);
            said
        })
    });
    match refused {
        Some(e) => Err(e),
        None => written,
    }
}

/// When each memory was last recalled and in how many ticks, as an event log's lines
/// tell: what a store needs to go back to a tick. A memory recalled by its owner counts
/// once per tick.
#[derive(Clone, Debug, Default)]
pub struct Recalls(BTreeMap<MemoryId, (u64, u32)>);

impl Recalls {
    /// Takes in the log's next line (lines that are not decisions change nothing).
    pub fn add(&mut self, line: &str) {
        if let Ok(peek) = serde_json::from_str::<Peek>(line) {
            self.add_peeked(&peek);
        }
    }

    /// Takes in a line a pass read.
    fn add_peeked(&mut self, peek: &Peek<'_>) {
        if let Some((tick, _, recalled)) = peek.action() {
            self.count(tick, &recalled, |_| true);
        }
    }

    /// An action of `tick` recalled `recalled`: counts those `of` admits.
    fn count(&mut self, tick: u64, recalled: &[u64], of: impl Fn(MemoryId) -> bool) {
        for id in recalled.iter().copied().map(MemoryId).filter(|&id| of(id)) {
            let entry = self.0.entry(id).or_insert((tick, 0));
            if entry.1 == 0 || entry.0 < tick {
                entry.1 += 1;
            }
            entry.0 = entry.0.max(tick);
        }
    }

    /// Over the ticks of the log `path` before `next_tick`, in one pass that ends there
    /// (the log checked that far).
    pub fn of_log(path: &Path, next_tick: u64) -> Result<Recalls, RunError> {
        let mut recalls = Recalls::default();
        if next_tick > 0 {
            TickIndex::read_peeked(path, Some(next_tick), |_, _, _, peek| {
                recalls.add_peeked(peek);
                Ok(())
            })?
            .reaching(path, next_tick)?;
        }
        Ok(recalls)
    }

    /// (last tick recalled, ticks recalled in) per memory.
    pub fn into_map(self) -> BTreeMap<MemoryId, (u64, u32)> {
        self.0
    }

    /// The same as two maps: when each memory was last recalled, and in how many ticks.
    pub fn into_state(self) -> (BTreeMap<MemoryId, u64>, BTreeMap<MemoryId, u32>) {
        let mut last = BTreeMap::new();
        let mut counts = BTreeMap::new();
        for (id, (tick, count)) in self.0 {
            last.insert(id, tick);
            counts.insert(id, count);
        }
        (last, counts)
    }
}

/// A sealed event log read by passes over its file, never held: where its ticks close
/// (read once, when it is opened) and the file to read again for lines. The readers of a
/// finished run (`inspect`, `ask`, `export`, an MCP session) each need a few lines of
/// it or need them once, in order; held whole, the log of a 1,000-NPC town over 2,000
/// ticks was about a gigabyte of text in every one of them.
#[derive(Clone, Debug)]
pub struct EventsFile {
    /// The log's path, as given (`.zst` or plain, found as [`TickIndex::read`] finds it).
    pub path: std::path::PathBuf,
    /// Where its ticks closed when it was opened (the seal checked).
    pub index: TickIndex,
    /// The NPC it was opened for, and its actions' recalls in the order of the log.
    focus: Option<(String, Vec<Recalled>)>,
}

/// An action's recall, as a log opened for its NPC keeps it: the tick the line is in, the
/// tick it says, the memories it recalled.
type Recalled = (u64, u64, Vec<u64>);

impl EventsFile {
    /// Opens the log `path`: one pass, streamed, that checks it as [`EventLog::read`] does
    /// and keeps where its ticks close.
    pub fn open(path: &Path) -> Result<EventsFile, RunError> {
        Self::open_for(path, None)
    }

    /// [`EventsFile::open`], keeping on the way what [`EventsFile::recalls`] needs of
    /// NPC `npc`'s recalls (its actions' lists, a few per tick), so that a reader of one
    /// NPC (`inspect`, `ask`) reads the log once, not twice.
    pub fn open_for(path: &Path, npc: Option<&str>) -> Result<EventsFile, RunError> {
        let mut kept = Vec::new();
        let index = TickIndex::read_peeked(path, None, |open, _, _, peek| {
            if let Some(npc) = npc
                && let Some((tick, by, recalled)) = peek.action()
                && by == npc
            {
                kept.push((open, tick, recalled));
            }
            Ok(())
        })?;
        Ok(EventsFile {
            path: path.to_owned(),
            index,
            focus: npc.map(|n| (n.to_owned(), kept)),
        })
    }

    /// How many ticks the log closed when it was opened.
    pub fn completed(&self) -> u64 {
        self.index.completed()
    }

    /// Hands every line of ticks before `next_tick` (each tick's closing line included)
    /// to `line`, with its tick, in one pass over the file that ends there. The ticks read
    /// must close with the hashes they closed with when the log was opened: a log
    /// replaced or cut since is refused, not read as another run's.
    pub fn each_line<E: From<RunError>>(
        &self,
        next_tick: u64,
        mut line: impl FnMut(u64, &str) -> Result<(), E>,
    ) -> Result<(), E> {
        self.each_peeked(next_tick, |tick, text, _| line(tick, text))
    }

    /// [`EventsFile::each_line`], each line handed over with what the pass read of it.
    fn each_peeked<E: From<RunError>>(
        &self,
        next_tick: u64,
        mut line: impl FnMut(u64, &str, &Peek<'_>) -> Result<(), E>,
    ) -> Result<(), E> {
        let next_tick = next_tick.min(self.completed());
        if next_tick == 0 {
            return Ok(());
        }
        // The pass speaks `RunError`: an error of `line` stops it, and is the one returned.
        let mut failed = None;
        let read = TickIndex::read_peeked(&self.path, Some(next_tick), |tick, _, text, peek| {
            line(tick, text, peek).map_err(|e| {
                failed = Some(e);
                RunError::Refused(String::new())
            })
        });
        if let Some(e) = failed {
            return Err(e);
        }
        let read = read?.reaching(&self.path, next_tick)?;
        let now = read.ticks.iter().map(|(t, _, h)| (t, h));
        let then = self.index.ticks.iter().map(|(t, _, h)| (t, h));
        if now.ne(then.take(next_tick as usize)) {
            return Err(RunError::RunDir {
                path: self.path.clone(),
                problem: "is not the log it was a moment before (its ticks close with other \
                          hashes): it changed while it was read; try again once nothing \
                          writes it"
                    .into(),
            }
            .into());
        }
        Ok(())
    }

    /// (last tick recalled, ticks recalled in) over the ticks before `next_tick` of NPC
    /// `npc`'s memories that `of` admits, by its own actions (one NPC's, for `inspect`:
    /// a map of every memory a big run recalled is millions of entries). From what the
    /// open kept, for the NPC it was opened for; by a pass over the log for another.
    pub fn recalls(
        &self,
        next_tick: u64,
        npc: &str,
        of: impl Fn(MemoryId) -> bool,
    ) -> Result<BTreeMap<MemoryId, (u64, u32)>, RunError> {
        let mut recalls = Recalls::default();
        match &self.focus {
            Some((focus, kept)) if focus == npc => {
                let next_tick = next_tick.min(self.completed());
                for (_, tick, recalled) in kept.iter().filter(|(open, ..)| *open < next_tick) {
                    recalls.count(*tick, recalled, &of);
                }
            }
            _ => self.each_peeked(next_tick, |_, _, peek| {
                if let Some((tick, by, recalled)) = peek.action()
                    && by == npc
                {
                    recalls.count(tick, &recalled, &of);
                }
                Ok::<(), RunError>(())
            })?,
        }
        Ok(recalls.into_map())
    }
}

impl EventLog {
    /// Reads `path` whole and checks the rolling hash every tick closes with against the
    /// tick's lines, so an edited or damaged log is refused with the line that gives it
    /// away. A line that is not JSON is an error unless it is the unterminated last line
    /// (a crash mid-write); a missing file is an error.
    pub fn read(path: &Path) -> Result<EventLog, RunError> {
        let log = Self::read_unsealed(path)?;
        let index = log.index.sealed(path)?;
        Ok(EventLog { index, ..log })
    }

    /// Like [`EventLog::read`], but a tick whose closing hash does not match its lines is
    /// only noted in the index's `broken_seal` (`hearsay replay` shows what differs
    /// instead).
    pub fn read_unsealed(path: &Path) -> Result<EventLog, RunError> {
        let (mut text, mut at) = (String::new(), Vec::new());
        let index = pass(path, None, |_, _, line, _| {
            let start = text.len();
            text.push_str(line);
            at.push(start..text.len());
            Ok(())
        })?;
        Ok(EventLog {
            lines: Lines { text, at },
            index,
        })
    }

    /// The lines up to and including the close of tick `next_tick - 1` (none for 0).
    pub fn through(&self, next_tick: u64) -> LineSlice<'_> {
        match next_tick
            .checked_sub(1)
            .and_then(|t| self.index.ticks.get(t as usize))
        {
            Some((_, end, _)) => self.lines.slice(0..end + 1),
            None => LineSlice::default(),
        }
    }

    /// The lines of tick `tick` (its events and its closing line).
    pub fn tick_lines(&self, tick: u64) -> Option<LineSlice<'_>> {
        let ticks = &self.index.ticks;
        let (_, end, _) = ticks.get(tick as usize)?;
        let start = match tick.checked_sub(1) {
            Some(prev) => ticks.get(prev as usize)?.1 + 1,
            None => 0,
        };
        Some(self.lines.slice(start..end + 1))
    }
}

/// The brain-call tape, by tick and NPC name, with its lines as they were written (so
/// what is kept of it is kept byte for byte, never decoded and encoded again).
#[derive(Clone, Debug, Default)]
pub struct Tape {
    /// Calls by tick, then NPC name.
    pub ticks: BTreeMap<u64, BTreeMap<String, BrainCall>>,
    /// The NPC-ticks that made no call (continued, or a reflection deferred), by tick.
    pub notes: BTreeMap<u64, Vec<TickNote>>,
    /// Calls kept as their lines, each parsed when its tick is taken ([`Tape::take_tick`]):
    /// by tick, each call's NPC and its line's place in `raw`. A resume or a fork keeps
    /// the ticks it replays so: parsed all at once, the calls of seven ticks of the
    /// 100,000-NPC town held 1.2 GB, more than the run's own growth in those ticks.
    unparsed: BTreeMap<u64, BTreeMap<String, Range<usize>>>,
    /// The file as read (shared by clones, never copied line by line).
    raw: std::sync::Arc<Vec<u8>>,
    /// Every complete line, in file order: its tick and its bytes in `raw`, line break
    /// included.
    lines: Vec<(u64, std::ops::Range<usize>)>,
    /// The file read, and where it can be cut.
    cuts: crate::logfile::Cuts,
}

impl Tape {
    /// Reads `path` (`llm.jsonl`). A line that is neither a brain call nor a tick's note
    /// is an error (with its number), unless it is an unterminated last line.
    pub fn read(path: &Path) -> Result<Tape, RunError> {
        Self::read_with(path, |_| Keep::Call)
    }

    /// Reads `path` as [`Tape::read`] does, for a replay, a resume or a fork: it keeps
    /// the calls of `ticks` alone, unparsed until their tick is taken
    /// ([`Tape::take_tick`]; every line's text and place stay, for cutting and copying the
    /// file), hands each earlier call to `earlier` as it is read and drops later ones. A call or a note of an NPC not in `names` (the scenario's) is refused
    /// by name rather than as a divergence, each name looked up in a set: a scan of the
    /// roster per call made a resume of a 10,000-NPC town spend seconds, growing with NPCs
    /// × calls. What a resume needs of the calls before its checkpoint is the figures
    /// they add to the summary; kept whole, the calls of a 100,000-NPC town's first 17
    /// ticks were gigabytes.
    pub fn read_range(
        path: &Path,
        ticks: std::ops::Range<u64>,
        names: &[String],
        mut earlier: impl FnMut(&BrainCall),
    ) -> Result<Tape, RunError> {
        let cast: std::collections::HashSet<&str> = names.iter().map(String::as_str).collect();
        let mut stranger: Option<String> = None;
        let tape = Self::read_with(path, |entry| {
            if stranger.is_none() {
                let npc = match entry {
                    Entry::Call(call) => Some(call.npc.as_ref()).filter(|n| !cast.contains(n)),
                    Entry::Note(note) => note
                        .continued
                        .iter()
                        .chain(&note.deferred)
                        .map(String::as_str)
                        .find(|n| !cast.contains(n)),
                };
                stranger = npc.map(str::to_owned);
            }
            match entry {
                Entry::Call(call) if call.tick < ticks.start => {
                    earlier(call);
                    Keep::Line
                }
                Entry::Call(call) if call.tick >= ticks.end => Keep::Line,
                Entry::Call(_) => Keep::Unparsed,
                Entry::Note(_) => Keep::Call,
            }
        })?;
        match stranger {
            Some(npc) => Err(not_cast(path, &npc)),
            None => Ok(tape),
        }
    }

    /// The tape of `path`, each entry kept as `keep` says.
    fn read_with(path: &Path, mut keep: impl FnMut(Entry<'_>) -> Keep) -> Result<Tape, RunError> {
        let read = crate::logfile::LogText::read(path)?.ok_or_else(|| RunError::RunDir {
            path: path.to_owned(),
            problem: "cannot read the tape (it is not there)".into(),
        })?;
        let path = read.cuts.path.as_path();
        let bytes = read.text;
        let complete = bytes.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
        let mut tape = Tape::default();
        let mut start = 0;
        for (i, raw) in bytes[..complete]
            .split_inclusive(|&b| b == b'\n')
            .enumerate()
        {
            let range = start..start + raw.len();
            start = range.end;
            match tape_entry(path, i + 1, raw)? {
                Parsed::Call(call) => {
                    tape.lines.push((call.tick, range.clone()));
                    match keep(Entry::Call(&call)) {
                        Keep::Call => {
                            tape.ticks
                                .entry(call.tick)
                                .or_default()
                                .insert(call.npc.to_string(), call);
                        }
                        Keep::Unparsed => {
                            tape.unparsed
                                .entry(call.tick)
                                .or_default()
                                .insert(call.npc.to_string(), range);
                        }
                        Keep::Line => {}
                    }
                }
                Parsed::Note(note) => {
                    tape.lines.push((note.tick, range));
                    keep(Entry::Note(&note));
                    tape.notes.entry(note.tick).or_default().push(note);
                }
            }
        }
        tape.raw = std::sync::Arc::new(bytes);
        tape.cuts = read.cuts;
        Ok(tape)
    }

    /// Every call of the tape `path`, a tick at a time in tick order, each tick's calls
    /// by NPC name (the last of an NPC's calls in a tick, as [`Tape::read`] keeps them),
    /// handed to `each` as the file is read, never held whole: what `hearsay export`
    /// writes out of a big run's tape. Lines are checked as [`Tape::read`] checks them.
    /// Returns `false`, having stopped, at a call of a tick before one already handed
    /// over — a tape not in tick order, which only [`Tape::read`] puts in order.
    pub fn each_tick<E: From<RunError>>(
        path: &Path,
        mut each: impl FnMut(u64, BTreeMap<String, BrainCall>) -> Result<(), E>,
    ) -> Result<bool, E> {
        let mut reader = crate::logfile::LogReader::open(path)?;
        let path = reader.path().to_owned();
        let mut tick: Option<(u64, BTreeMap<String, BrainCall>)> = None;
        let mut raw = Vec::new();
        for n in 1.. {
            if !next_line(&mut reader, &path, &mut raw)? {
                break;
            }
            let Parsed::Call(call) = tape_entry(&path, n, &raw)? else {
                continue;
            };
            match &mut tick {
                Some((at, calls)) if *at == call.tick => {
                    calls.insert(call.npc.to_string(), call);
                }
                Some((at, _)) if *at > call.tick => return Ok(false),
                _ => {
                    let next = (call.tick, BTreeMap::from([(call.npc.to_string(), call)]));
                    if let Some((at, calls)) = tick.replace(next) {
                        each(at, calls)?;
                    }
                }
            }
        }
        if let Some((at, calls)) = tick {
            each(at, calls)?;
        }
        Ok(true)
    }

    /// Whether every one of `names` has a call at `tick` or is noted as having continued
    /// (a tick with neither is not on the tape).
    pub fn complete_tick(&self, tick: u64, names: &[String]) -> bool {
        let calls = self.ticks.get(&tick);
        let unparsed = self.unparsed.get(&tick);
        if calls.is_none() && unparsed.is_none() && !self.notes.contains_key(&tick) {
            return false;
        }
        let continued: std::collections::BTreeSet<&str> =
            self.continued(tick).into_iter().collect();
        names.iter().all(|n| {
            calls.is_some_and(|c| c.contains_key(n))
                || unparsed.is_some_and(|c| c.contains_key(n))
                || continued.contains(n.as_str())
        })
    }

    /// The calls of tick `tick`, taken out of the tape (those kept unparsed parsed now),
    /// if the tick is complete ([`Tape::complete_tick`]); empty when every NPC continued.
    pub fn take_tick(
        &mut self,
        tick: u64,
        names: &[String],
    ) -> Result<Option<BTreeMap<String, BrainCall>>, RunError> {
        if !self.complete_tick(tick, names) {
            return Ok(None);
        }
        Ok(Some(self.take_calls(tick)?.unwrap_or_default()))
    }

    /// The calls of tick `tick` taken out of the tape (those kept unparsed parsed now),
    /// whoever lacks one; `None` when it has none.
    pub fn take_calls(
        &mut self,
        tick: u64,
    ) -> Result<Option<BTreeMap<String, BrainCall>>, RunError> {
        let (parsed, unparsed) = (self.ticks.remove(&tick), self.unparsed.remove(&tick));
        if parsed.is_none() && unparsed.is_none() {
            return Ok(None);
        }
        let mut calls = parsed.unwrap_or_default();
        for (npc, line) in unparsed.unwrap_or_default() {
            let call = std::str::from_utf8(&self.raw[line])
                .ok()
                .and_then(|text| serde_json::from_str(text.trim_end()).ok())
                .ok_or_else(|| RunError::RunDir {
                    path: self.cuts.path.clone(),
                    problem: format!("the brain call of {npc} at tick {tick} no longer reads"),
                })?;
            calls.insert(npc, call);
        }
        Ok(Some(calls))
    }

    /// The names noted as having continued at `tick`, in the order written.
    pub fn continued(&self, tick: u64) -> Vec<&str> {
        self.notes
            .get(&tick)
            .into_iter()
            .flatten()
            .flat_map(|n| n.continued.iter().map(String::as_str))
            .collect()
    }

    /// The calls and notes of the ticks `from..until` alone, to take decisions from: the
    /// others dropped, not copied (a tape read for a resume or a fork holds little else),
    /// and of the file's text only the lines of calls kept unparsed in those ticks (a big
    /// run's tape is gigabytes, and the ticks that replay from it need their calls
    /// alone). Cut or copied, it refuses: it no longer knows its file.
    pub fn into_range(mut self, from: u64, until: u64) -> Tape {
        let until = until.max(from);
        fn between<V>(map: &mut BTreeMap<u64, V>, from: u64, until: u64) -> BTreeMap<u64, V> {
            let mut kept = map.split_off(&from);
            kept.split_off(&until);
            kept
        }
        let ticks = between(&mut self.ticks, from, until);
        let notes = between(&mut self.notes, from, until);
        let mut unparsed = between(&mut self.unparsed, from, until);
        // Their lines, one after another in a text of their own.
        let mut raw = Vec::with_capacity(
            unparsed
                .values()
                .flat_map(|calls| calls.values())
                .map(|line| line.len())
                .sum(),
        );
        for line in unparsed.values_mut().flat_map(|calls| calls.values_mut()) {
            let start = raw.len();
            raw.extend_from_slice(&self.raw[line.clone()]);
            *line = start..raw.len();
        }
        Tape {
            ticks,
            notes,
            unparsed,
            raw: std::sync::Arc::new(raw),
            ..Tape::default()
        }
    }

    /// Where the ticks from `from` on that every one of `names` has a call in (or is
    /// noted as having continued) end: the first that lacks one (a crash mid-tick). What
    /// a resumed run can take as decided is `from` up to it.
    pub fn complete_until(&self, from: u64, names: &[String]) -> u64 {
        let mut end = from;
        while self.complete_tick(end, names) {
            end += 1;
        }
        end
    }

    /// The bytes of the lines of the ticks before `until`, as written, a run of lines of
    /// one tick at a time (in file order).
    fn raw_runs_before(&self, until: u64) -> Vec<Vec<u8>> {
        let mut runs: Vec<(u64, Vec<u8>)> = Vec::new();
        for (tick, line) in self.lines.iter().filter(|(t, _)| *t < until) {
            match runs.last_mut() {
                Some((t, run)) if t == tick => run.extend_from_slice(&self.raw[line.clone()]),
                _ => runs.push((*tick, self.raw[line.clone()].to_vec())),
            }
        }
        runs.into_iter().map(|(_, run)| run).collect()
    }

    /// The length of the text's lines of ticks before `until`, when those lines all come
    /// before any later tick's (as hearsay writes them): where to cut the file back to.
    /// `None` for a tape out of order.
    fn bytes_before(&self, until: u64) -> Option<u64> {
        let kept = self.lines.iter().take_while(|(t, _)| *t < until).count();
        if self.lines[kept..].iter().any(|(t, _)| *t < until) {
            return None;
        }
        Some(self.lines[..kept].iter().map(|(_, l)| l.len() as u64).sum())
    }

    /// Keeps in the file read only the lines of ticks before `until`: cut back byte for
    /// byte, or, for a tape out of order (not as hearsay writes it), its kept lines
    /// written again as read, in the file's format.
    pub fn keep_before(&self, until: u64) -> Result<(), RunError> {
        match (self.bytes_before(until), self.cuts.format) {
            (Some(len), _) => self.cuts.cut_back_keeping(&self.raw, len),
            (None, crate::logfile::Format::Plain) => {
                crate::rundir::write_file(&self.cuts.path, &self.raw_runs_before(until).concat())
            }
            (None, crate::logfile::Format::Zstd) => self.write_before(&self.cuts.path, until),
        }
    }

    /// Writes `path` whole (format 2) with the lines of the ticks before `until`, as
    /// written: a fork's tape. From a tape in tick order, in format 2, whose file has a
    /// block ending there (as hearsay writes it), the file's own bytes through them, those
    /// it read (a file that changed since is refused:
    /// [`crate::logfile::Cuts::copy_through`]); else the lines compressed anew.
    pub fn write_before(&self, path: &Path, until: u64) -> Result<(), RunError> {
        if let Some(len) = self.bytes_before(until).filter(|&len| len > 0)
            && self.cuts.copy_through(path, len)?
        {
            return Ok(());
        }
        let runs = self.raw_runs_before(until);
        crate::logfile::write_log(path, runs.iter().map(Vec::as_slice))
    }

    /// Every call, in file order (tick, then NPC id order as written), of a tape read
    /// whole ([`Tape::read`]): one read for a range keeps that range's calls unparsed
    /// until they are taken, and they would not be among these.
    pub fn calls(&self, names: &[String]) -> Vec<&BrainCall> {
        debug_assert!(
            self.unparsed.is_empty(),
            "the calls of a tape read for a range are taken a tick at a time"
        );
        let order = roster_order(names);
        let mut out = Vec::new();
        for calls in self.ticks.values() {
            out.extend(in_roster_order(calls, &order));
        }
        out
    }
}

/// One tick's calls (kept by NPC name) in roster order, names the roster lacks last in
/// name order: each call's place looked up once, not once per comparison of the sort.
pub fn in_roster_order<'a, V>(
    calls: &'a BTreeMap<String, V>,
    order: &BTreeMap<&str, usize>,
) -> impl Iterator<Item = &'a V> {
    let mut placed: Vec<(usize, &V)> = calls
        .iter()
        .map(|(npc, c)| (order.get(npc.as_str()).copied().unwrap_or(usize::MAX), c))
        .collect();
    // Stable: the calls of names the roster lacks keep the map's (name) order.
    placed.sort_by_key(|(place, _)| *place);
    placed.into_iter().map(|(_, c)| c)
}

/// A line of a tape, parsed.
#[expect(
    clippy::large_enum_variant,
    reason = "returned once per line and taken apart at once; a box would be an allocation per call"
)]
enum Parsed {
    Call(BrainCall),
    Note(TickNote),
}

/// Line `n` of the tape `path` (`raw`, its line break included): a brain call or a tick's
/// note, or the refusal of a line that is neither.
fn tape_entry(path: &Path, n: usize, raw: &[u8]) -> Result<Parsed, RunError> {
    let line = std::str::from_utf8(raw).map_err(|_| RunError::RunDir {
        path: path.to_owned(),
        problem: format!("line {n} is not UTF-8 text"),
    })?;
    let text = line.trim_end();
    match serde_json::from_str::<BrainCall>(text) {
        Ok(call) => Ok(Parsed::Call(call)),
        Err(e) => serde_json::from_str(text)
            .map(Parsed::Note)
            .map_err(|_| RunError::RunDir {
                path: path.to_owned(),
                problem: format!("line {n} is not a brain call: {e}"),
            }),
    }
}

/// An entry of a tape as it is read.
enum Entry<'a> {
    Call(&'a BrainCall),
    Note(&'a TickNote),
}

/// What a tape keeps of a call it reads (notes are always kept: a few per tick).
#[derive(PartialEq)]
enum Keep {
    /// The call, and its line's place.
    Call,
    /// Its line's place, also as the call's, to be parsed when its tick is taken.
    Unparsed,
    /// Its line's place alone.
    Line,
}

/// The refusal of a tape with calls of `npc`, whom the scenario lacks.
fn not_cast(path: &Path, npc: &str) -> RunError {
    RunError::RunDir {
        path: path.to_owned(),
        problem: format!(
            "holds brain calls of {npc:?}, an NPC the scenario does not have: \
             the tape is from another run"
        ),
    }
}

/// Each NPC name's place in the roster: how a tick's calls, kept by name, are put back in
/// roster order (a lookup, not a scan of the roster per call).
pub fn roster_order(names: &[String]) -> BTreeMap<&str, usize> {
    names
        .iter()
        .enumerate()
        .map(|(i, n)| (n.as_str(), i))
        .collect()
}

/// A brain call (or a [`TickNote`]) as its `llm.jsonl` line.
pub fn tape_line<T: serde::Serialize>(call: &T) -> String {
    serde_json::to_string(call).unwrap_or_default()
}

/// Which store holds a run's memories: read once from `run.json`, never compared as a
/// string again.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Backend {
    /// `memories.db` in the run directory.
    #[default]
    Sqlite,
    /// A run in a PostgreSQL database (`run_id`).
    Postgres,
}

impl Backend {
    /// As `run.json` spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            Backend::Sqlite => "sqlite",
            Backend::Postgres => "postgres",
        }
    }
}

/// Where a run's memories are kept.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoreInfo {
    /// Which kind of store (lowercase in `run.json`: `sqlite`, `postgres`).
    pub backend: Backend,
    /// The run's id in the PostgreSQL `runs` table.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_id: Option<i64>,
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::{
        EventLog, EventsFile, MemoryId, Recalls, RunError, Tape, TickIndex, copy_events_through,
        stage_diff,
    };

    /// `copy` is the start of `source`'s bytes, its frame then ended (three bytes): copied,
    /// not compressed again.
    fn assert_copied_as_is(source: &std::path::Path, copy: &std::path::Path) {
        let (source, copied) = (
            std::fs::read(source).expect("source"),
            std::fs::read(copy).expect("copy"),
        );
        let kept = copied.len() - 3;
        assert!(kept > 0 && kept < source.len());
        assert_eq!(
            copied[..kept],
            source[..kept],
            "copied, not compressed again"
        );
    }

    /// A tape of a 50,000-NPC town's first `ticks` ticks, every NPC staying, with the
    /// call of `missing` left out of its last tick.
    fn big_tape(
        names: &[String],
        ticks: u64,
        missing: &str,
    ) -> (tempfile::TempDir, std::path::PathBuf, Tape) {
        let dir = tempfile::tempdir().expect("temp dir");
        let mut text = String::new();
        for tick in 0..ticks {
            for npc in names {
                if tick + 1 == ticks && npc == missing {
                    continue;
                }
                text.push_str(&format!(
                    r#"{{"tick":{tick},"npc":"{npc}","brain":"default","provider":"heuristic","recalled":[],"outcome":"ok","decision":{{"action":"stay"}}}}"#
                ));
                text.push('\n');
            }
        }
        let path = dir.path().join("llm.jsonl");
        std::fs::write(&path, text).expect("write the tape");
        let tape = Tape::read(&path).expect("the tape reads");
        (dir, path, tape)
    }

    /// A tape read a tick at a time gives each tick's calls as the whole read keeps them
    /// (an NPC's last call of a tick, notes and an unterminated last line left out), says
    /// when the tape is not in tick order, and refuses a line that is no entry.
    #[test]
    fn a_tape_read_a_tick_at_a_time_gives_what_the_whole_read_gives() {
        let call = |tick: u64, npc: &str, action: &str| {
            format!(
                r#"{{"tick":{tick},"npc":"{npc}","brain":"default","provider":"heuristic","recalled":[],"outcome":"ok","decision":{{"action":"{action}"}}}}"#
            )
        };
        let note = r#"{"tick":1,"brain":"default","continued":["N0"]}"#;
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("llm.jsonl");
        let text = [
            call(0, "N2", "stay"),
            call(0, "N0", "stay"),
            call(0, "N2", "stay").replace("heuristic", "mock"),
            note.to_owned(),
            call(1, "N1", "stay"),
            call(3, "N0", "stay"),
        ]
        .join("\n")
            + "\n"
            + &call(4, "N0", "stay");
        std::fs::write(&path, &text).expect("write the tape");
        let whole = Tape::read(&path).expect("the tape reads");
        assert_eq!(whole.notes.len(), 1, "the note is an entry");
        let mut ticks = BTreeMap::new();
        let in_order = Tape::each_tick(&path, |tick, calls| {
            assert!(
                ticks.insert(tick, calls).is_none(),
                "tick {tick} handed over once"
            );
            Ok::<(), RunError>(())
        })
        .expect("reads");
        assert!(in_order);
        assert_eq!(ticks, whole.ticks);
        assert_eq!(ticks.keys().copied().collect::<Vec<_>>(), [0, 1, 3]);

        std::fs::write(
            &path,
            [call(1, "N0", "stay"), call(0, "N0", "stay")].join("\n") + "\n",
        )
        .expect("write the tape");
        let mut handed = 0;
        let in_order = Tape::each_tick(&path, |_, _| {
            handed += 1;
            Ok::<(), RunError>(())
        })
        .expect("reads");
        assert!(!in_order, "tick 0 after tick 1");
        assert_eq!(handed, 0, "stopped before tick 1 was handed over");

        std::fs::write(&path, call(0, "N0", "stay") + "\n{\"tick\":\n").expect("write the tape");
        let refused = Tape::each_tick(&path, |_, _| Ok::<(), RunError>(()))
            .expect_err("line 2 is no entry")
            .to_string();
        let whole = Tape::read(&path)
            .expect_err("refused whole too")
            .to_string();
        assert_eq!(refused, whole);
        assert!(refused.contains("line 2"), "{refused}");
    }

    /// The cast is checked by lookups: a scan of the roster for each call took seconds
    /// for a resume of a 10,000-NPC town (about 10⁹ comparisons here, where a set takes
    /// 5 × 10⁴ lookups, and the read itself a fraction of the bound). A caller the
    /// scenario lacks is still refused by name.
    #[test]
    fn a_big_cast_is_checked_in_time_and_a_stranger_refused() {
        let names: Vec<String> = (0..50_000).map(|i| format!("N{i}")).collect();
        let (_dir, path, _tape) = big_tape(&names, 1, "N7");
        let started = std::time::Instant::now();
        Tape::read_range(&path, 0..u64::MAX, &names, |_| {}).expect("every caller is cast");
        let took = started.elapsed();
        assert!(
            took < std::time::Duration::from_secs(2),
            "50,000 calls of 50,000 NPCs read and checked in {took:?}"
        );
        let refused = Tape::read_range(&path, 0..u64::MAX, &names[1..], |_| {})
            .expect_err("N0 is not in the cast");
        assert!(refused.to_string().contains("\"N0\""), "{refused}");
    }

    /// A tape read for a resume or a fork keeps the calls of its range, hands each
    /// earlier one over as it is read, keeps every line's place, and refuses a caller the
    /// cast lacks wherever it is.
    #[test]
    fn a_tape_read_for_a_resume_keeps_its_range_and_hands_over_the_rest() {
        let names: Vec<String> = (0..5).map(|i| format!("N{i}")).collect();
        let (_dir, path, whole) = big_tape(&names, 4, "N3");
        let mut handed = Vec::new();
        let tape = Tape::read_range(&path, 1..3, &names, |c| {
            handed.push((c.tick, c.npc.to_string()));
        })
        .expect("the tape reads");
        // The range's calls are kept as their lines, parsed when a tick is taken.
        assert!(tape.ticks.is_empty());
        assert_eq!(tape.unparsed.keys().copied().collect::<Vec<_>>(), [1, 2]);
        let mut taken = tape.clone();
        assert_eq!(
            taken.take_tick(2, &names).expect("reads"),
            Some(whole.ticks[&2].clone())
        );
        assert!(!taken.unparsed.contains_key(&2), "taken out");
        assert_eq!(taken.take_tick(2, &names).expect("reads"), None);
        assert_eq!(
            handed,
            names.iter().map(|n| (0, n.clone())).collect::<Vec<_>>(),
            "tick 0's calls, in the file's order"
        );
        assert_eq!(tape.lines, whole.lines);
        let refused = Tape::read_range(&path, 3..4, &names[1..], |_| {})
            .expect_err("N0, at tick 0, is not in the cast");
        assert!(refused.to_string().contains("\"N0\""), "{refused}");
    }

    /// The earlier calls' figures counted as the tape is read equal those counted with
    /// every call held; calls out of tick order are said to be so, to be counted whole.
    #[test]
    fn earlier_calls_counted_as_read_are_those_counted_whole() {
        use crate::summary::{Counted, EarlierCalls, Tallies};
        let names: Vec<String> = (0..50).map(|i| format!("N{i}")).collect();
        let (_dir, path, _) = big_tape(&names, 4, "N3");
        let mut fold = EarlierCalls::new(&names);
        let mut counted: BTreeMap<u64, BTreeMap<String, Counted>> = BTreeMap::new();
        let tape = Tape::read_range(&path, 3..4, &names, |call| {
            fold.add(call.tick, &call.npc, Counted::of(call));
            counted
                .entry(call.tick)
                .or_default()
                .insert(call.npc.to_string(), Counted::of(call));
        })
        .expect("the tape reads");
        let whole = Tallies::of_earlier(&tape.notes, &counted, &names, 3);
        let read = fold.finish(&tape.notes, 3).expect("in tick order");
        assert_eq!(format!("{read:?}"), format!("{whole:?}"));
        assert!(format!("{read:?}").contains("calls: 150"), "{read:?}");
        // A call of tick 0 after tick 1's.
        let mut disordered = EarlierCalls::new(&names);
        for (tick, calls) in counted.iter().rev() {
            for (npc, call) in calls {
                disordered.add(*tick, npc, call.clone());
            }
        }
        assert!(disordered.finish(&tape.notes, 3).is_none());
    }

    /// A fork's tape: the lines of the ticks before its tick, from a tape in format 2 in
    /// the file's own bytes (checked against what was read), from a plain one written
    /// anew; a file that changed since it was read is refused, and no copy is written.
    #[test]
    fn a_forks_tape_is_the_sources_bytes_through_its_tick() {
        let names: Vec<String> = (0..5).map(|i| format!("N{i}")).collect();
        let (dir, plain, whole) = big_tape(&names, 4, "N3");
        let text = std::fs::read(&plain).expect("the tape");
        // Lines of one length, five a tick (the last tick's fourth is missing).
        let line = text.iter().position(|&b| b == b'\n').expect("a line") + 1;
        let per_tick = line * names.len();
        let zst = dir.path().join("z").join("llm.jsonl.zst");
        std::fs::create_dir_all(zst.parent().expect("dir")).expect("dir");
        crate::logfile::write_log(&zst, text.chunks(per_tick)).expect("format 2");
        let read = Tape::read(&zst).expect("the tape reads");
        let copy = dir.path().join("copy.jsonl.zst");
        for tape in [&whole, &read] {
            tape.write_before(&copy, 2).expect("written");
            let copied = Tape::read(&copy).expect("the copy reads");
            assert_eq!(copied.ticks.keys().copied().collect::<Vec<_>>(), [0, 1]);
            assert_eq!(copied.ticks[&1], whole.ticks[&1]);
        }
        assert_copied_as_is(&zst, &copy);
        // Another tape of the same length written in its place after the read.
        let other = String::from_utf8(text)
            .expect("text")
            .replace("stay", "STAY");
        let other_path = dir.path().join("other.jsonl.zst");
        crate::logfile::write_log(&other_path, other.as_bytes().chunks(per_tick)).expect("other");
        std::fs::rename(&other_path, &zst).expect("replaced");
        std::fs::remove_file(&copy).expect("removed");
        let changed = read
            .write_before(&copy, 2)
            .expect_err("changed")
            .to_string();
        assert!(changed.contains("changed while it was read"), "{changed}");
        assert!(!copy.exists());
    }

    /// What a resume takes as decided, and a fork's ticks, are their ticks alone: the
    /// calls and notes of the range, nothing before or after, and not the file's text.
    #[test]
    fn a_tapes_range_holds_its_ticks_alone() {
        let names: Vec<String> = (0..5).map(|i| format!("N{i}")).collect();
        let (_dir, path, tape) = big_tape(&names, 4, "N3");
        let range = tape.clone().into_range(1, 3);
        assert_eq!(range.ticks.keys().copied().collect::<Vec<_>>(), [1, 2]);
        assert_eq!(range.ticks[&1], tape.ticks[&1]);
        assert!(range.raw.is_empty() && range.lines.is_empty());
        assert!(
            range.keep_before(1).is_err(),
            "a range cut its file, which it no longer knows"
        );
        assert!(tape.clone().into_range(3, 1).ticks.is_empty());
        // Tick 3 lacks N3's call: a resume from tick 1 takes ticks 1 and 2.
        assert_eq!(tape.complete_until(1, &names), 3);
        assert_eq!(tape.complete_until(3, &names), 3);
        // As a resume reads it: of the file's text, the range's calls' lines alone, each
        // tick's parsed when it is taken.
        let read = Tape::read_range(&path, 1..4, &names, |_| {}).expect("the tape reads");
        let mut range = read.clone().into_range(1, 3);
        let lines: usize = read
            .lines
            .iter()
            .filter(|(t, _)| (1..3).contains(t))
            .map(|(_, l)| l.len())
            .sum();
        assert_eq!(range.raw.len(), lines);
        assert!(range.lines.is_empty() && range.ticks.is_empty());
        assert_eq!(range.complete_until(1, &names), 3);
        for tick in 1..3 {
            assert_eq!(
                range.take_tick(tick, &names).expect("reads"),
                Some(tape.ticks[&tick].clone())
            );
        }
        assert!(range.unparsed.is_empty());
    }

    /// A log of `ticks` in a fresh directory (the plain file of format 1), each tick closed
    /// by `close(tick, hash)`.
    fn log_of(
        ticks: &[Vec<&str>],
        close: impl Fn(usize, &str) -> String,
    ) -> (tempfile::TempDir, std::path::PathBuf) {
        let dir = tempfile::tempdir().expect("temp dir");
        let mut prev = [0u8; 32];
        let mut text = String::new();
        for (t, lines) in ticks.iter().enumerate() {
            let owned: Vec<String> = lines.iter().map(|l| (*l).to_owned()).collect();
            prev = hearsay_core::digest::roll(&prev, t as u64, &owned);
            for line in lines {
                text.push_str(line);
                text.push('\n');
            }
            text.push_str(&close(t, &hearsay_core::digest::hex(&prev)));
            text.push('\n');
        }
        let path = dir.path().join("events.jsonl");
        std::fs::write(&path, text).expect("write the log");
        (dir, path)
    }

    fn ticks() -> Vec<Vec<&'static str>> {
        vec![
            vec![
                r#"{"type":"stay","tick":0,"npc":"Ann","at":[0,0],"recalled":[1,2]}"#,
                r#"{"type":"memory","tick":0,"npc":"Ann","id":3,"kind":"seed","importance":1,"content":"\"recalled\":[9]"}"#,
            ],
            vec![
                r#"{"recalled":[1],"type":"move","tick":1,"npc":"Ann","from":[0,0],"to":[0,1],"target":[0,5]}"#,
                r#"{"type":"talk","tick":1,"npc":"Bo","text":"hi","listeners":[],"recalled":[1,1]}"#,
            ],
        ]
    }

    /// The lines are places in the text read once: a line break `\r\n` is not part of
    /// its line, bytes that are not UTF-8 read as U+FFFD in their line alone, and a tick
    /// ends where the file's bytes say, whatever was replaced.
    #[test]
    fn the_logs_lines_are_its_text_without_line_breaks() {
        let standard = |t: usize, h: &str| format!(r#"{{"type":"tick","tick":{t},"hash":"{h}"}}"#);
        let (_dir, path) = log_of(&ticks(), standard);
        let lf = std::fs::read(&path).expect("the log");
        let mut crlf = String::from_utf8(lf.clone())
            .expect("UTF-8")
            .replace('\n', "\r\n")
            .into_bytes();
        // The second line's text gets a byte that is not UTF-8 (its seal breaks).
        let at = crlf
            .windows(4)
            .position(|w| w == b"seed")
            .expect("the seed line");
        crlf[at] = 0xff;
        std::fs::write(&path, &crlf).expect("write");
        let log = EventLog::read_unsealed(&path).expect("reads");
        let want: Vec<String> = String::from_utf8_lossy(&crlf)
            .split("\r\n")
            .filter(|l| !l.is_empty())
            .map(str::to_owned)
            .collect();
        assert_eq!(log.lines.len(), want.len());
        assert_eq!(log.through(2).iter().collect::<Vec<_>>(), want);
        assert!(want[1].contains('\u{fffd}'));
        let close = br#""type":"tick""#;
        let first_close = crlf
            .windows(close.len())
            .position(|w| w == close)
            .expect("a closing line");
        let first_end = first_close
            + crlf[first_close..]
                .iter()
                .position(|&b| b == b'\n')
                .unwrap()
            + 1;
        assert_eq!(log.index.tick_ends, [first_end as u64, crlf.len() as u64]);
        assert_eq!(log.tick_lines(1).expect("tick 1").len(), 3);
        assert_eq!(log.through(1).len(), 3);
        assert!(log.through(0).is_empty());
    }

    #[test]
    fn the_log_finds_its_ticks_wherever_a_line_puts_its_type() {
        let standard = |t: usize, h: &str| format!(r#"{{"type":"tick","tick":{t},"hash":"{h}"}}"#);
        let (_dir, path) = log_of(&ticks(), standard);
        let log = EventLog::read(&path).expect("a sealed log reads");
        assert_eq!(log.index.ticks.len(), 2);
        assert_eq!(log.lines.len(), 6);
        // `type` last, as another writer might put it: still a closing line.
        let last = |t: usize, h: &str| format!(r#"{{"tick":{t},"hash":"{h}","type":"tick"}}"#);
        let (_dir, path) = log_of(&ticks(), last);
        assert_eq!(
            EventLog::read(&path).expect("reads").index.ticks,
            log.index.ticks
        );
        // The memory's text mentions "recalled": only the actions' own lists count, and
        // an NPC that recalls a memory twice in a tick counts it once.
        let mut whole = Recalls::default();
        for line in log.through(2) {
            whole.add(line);
        }
        let counts = whole.into_map();
        assert_eq!(counts[&MemoryId(1)], (1, 2));
        assert_eq!(counts[&MemoryId(2)], (0, 1));
        assert!(!counts.contains_key(&MemoryId(9)));
        // A reader of one NPC counts its own actions' recalls alone, and only the
        // memories it asks about; opened for that NPC, from what the open kept, the same.
        for file in [
            EventsFile::open(&path).expect("opens"),
            EventsFile::open_for(&path, Some("Ann")).expect("opens"),
            EventsFile::open_for(&path, Some("Bo")).expect("opens"),
        ] {
            let ann = file.recalls(2, "Ann", |_| true).expect("read");
            assert_eq!(
                ann,
                BTreeMap::from([(MemoryId(1), (1, 2)), (MemoryId(2), (0, 1))])
            );
            let bo = file.recalls(2, "Bo", |_| true).expect("read");
            assert_eq!(bo, BTreeMap::from([(MemoryId(1), (1, 1))]));
            for (next, want) in [(0, 0), (1, 1), (2, 2), (3, 2)] {
                let ann = file.recalls(next, "Ann", |_| true).expect("read");
                assert_eq!(
                    ann.get(&MemoryId(1)).map_or(0, |c| c.1),
                    want,
                    "before {next}"
                );
            }
            let one = file
                .recalls(2, "Ann", |id| id == MemoryId(2))
                .expect("read");
            assert_eq!(one, BTreeMap::from([(MemoryId(2), (0, 1))]));
        }
    }

    /// A log opened for its readers is read again by passes: each gives the lines a
    /// whole read gives through its tick, an error of the reader's ends the pass as it
    /// is, and a log replaced since it was opened is refused rather than read as the
    /// same run.
    #[test]
    fn an_opened_log_is_read_again_as_it_was_opened() {
        let standard = |t: usize, h: &str| format!(r#"{{"type":"tick","tick":{t},"hash":"{h}"}}"#);
        let (_dir, path) = log_of(&ticks(), standard);
        let whole = EventLog::read(&path).expect("a sealed log reads");
        let file = EventsFile::open(&path).expect("opens");
        assert_eq!(file.completed(), 2);
        for next in 0..=3 {
            let mut seen = Vec::new();
            file.each_line(next, |tick, line| {
                seen.push((tick, line.to_owned()));
                Ok::<(), RunError>(())
            })
            .expect("read through the tick");
            let want: Vec<&str> = whole.through(next.min(2)).iter().collect();
            assert_eq!(
                seen.iter().map(|(_, l)| l.as_str()).collect::<Vec<_>>(),
                want,
                "through tick {next}"
            );
            assert!(seen.iter().all(|&(t, _)| t < next));
        }
        #[derive(Debug, PartialEq)]
        struct Mine;
        impl From<RunError> for Mine {
            fn from(_: RunError) -> Mine {
                panic!("the pass itself did not fail")
            }
        }
        let mut read = 0;
        let stopped = file.each_line(2, |_, _| {
            read += 1;
            if read == 2 { Err(Mine) } else { Ok(()) }
        });
        assert_eq!((stopped, read), (Err(Mine), 2));
        // The same number of ticks, other lines (sealed as a log of their own).
        let mut other = ticks();
        other[0][0] = r#"{"type":"stay","tick":0,"npc":"Ann","at":[1,1],"recalled":[1,2]}"#;
        let (_other_dir, other_path) = log_of(&other, standard);
        std::fs::copy(&other_path, &path).expect("replace the log");
        let refused = file
            .each_line(1, |_, _| Ok::<(), RunError>(()))
            .expect_err("another log")
            .to_string();
        assert!(refused.contains("changed while it was read"), "{refused}");
    }

    /// What a resume and a fork read of a log in passes, never holding its text, is what
    /// a whole read gives: the ticks, the recall state before a tick, the copy of the
    /// ticks before it; and a pass refuses what the whole read refuses.
    #[test]
    fn a_log_read_in_passes_gives_what_it_read_whole_gives() {
        let standard = |t: usize, h: &str| format!(r#"{{"type":"tick","tick":{t},"hash":"{h}"}}"#);
        let (dir, path) = log_of(&ticks(), standard);
        let whole = EventLog::read(&path).expect("a sealed log reads");
        let mut seen = Vec::new();
        let index = TickIndex::read(&path, None, |tick, closes, line| {
            seen.push((tick, closes, line.to_owned()));
            Ok(())
        })
        .expect("a pass reads it");
        assert_eq!(index.ticks, whole.index.ticks);
        assert_eq!(index.tick_ends, whole.index.tick_ends);
        let lines: Vec<&str> = whole.through(2).iter().collect();
        assert_eq!(
            seen.iter().map(|(_, _, l)| l.as_str()).collect::<Vec<_>>(),
            lines
        );
        // Each line in the tick it belongs to; the closing line closes it.
        assert_eq!(
            seen.iter().map(|&(t, c, _)| (t, c)).collect::<Vec<_>>(),
            [
                (0, false),
                (0, false),
                (0, true),
                (1, false),
                (1, false),
                (1, true)
            ]
        );
        for next in 0..=2 {
            let recalls = Recalls::of_log(&path, next).expect("read through the tick");
            let mut counted = Recalls::default();
            for line in whole.through(next) {
                counted.add(line);
            }
            assert_eq!(recalls.into_map(), counted.into_map(), "before tick {next}");
        }
        // A pass with an end reads no further.
        let mut read = 0;
        let first = TickIndex::read(&path, Some(1), |_, _, _| {
            read += 1;
            Ok(())
        })
        .expect("the first tick");
        assert_eq!((first.completed(), read), (1, 3));
        // A fork's copy: the first tick's lines, as the whole read has them — from a log
        // in format 2 in its own bytes through that tick (the frame then ended), from a
        // plain one written anew.
        let plain_read = TickIndex::read(&path, None, |_, _, _| Ok(())).expect("read");
        let format2 = |dir: &std::path::Path, ticks: &[Vec<&str>]| {
            let (_plain_dir, plain) = log_of(ticks, standard);
            let text = std::fs::read(plain).expect("the log");
            let end = plain_read.tick_ends[0] as usize;
            let zst = dir.join("z").join("events.jsonl.zst");
            std::fs::create_dir_all(zst.parent().expect("dir")).expect("dir");
            crate::logfile::write_log(&zst, [&text[..end], &text[end..]]).expect("format 2");
            zst
        };
        let zst = format2(dir.path(), &self::ticks());
        let read = TickIndex::read(&zst, None, |_, _, _| Ok(())).expect("read");
        let copy = dir.path().join("copy.jsonl.zst");
        for (from, read) in [(&path, &plain_read), (&zst, &read)] {
            copy_events_through(from, read, &copy, 1).expect("copied");
            let copied = EventLog::read(&copy).expect("the copy reads");
            assert_eq!(
                copied.through(1).iter().collect::<Vec<_>>(),
                whole.through(1).iter().collect::<Vec<_>>()
            );
            assert_eq!(copied.index.completed(), 1);
        }
        assert_copied_as_is(&zst, &copy);
        // A log that changed after it was read (another one written in its place): the
        // copy is refused, and goes.
        let other: Vec<Vec<String>> = self::ticks()
            .into_iter()
            .map(|t| t.into_iter().map(|l| l.replace("Ann", "Amy")).collect())
            .collect();
        let other: Vec<Vec<&str>> = other
            .iter()
            .map(|t| t.iter().map(String::as_str).collect())
            .collect();
        let other_dir = tempfile::tempdir().expect("temp dir");
        std::fs::rename(format2(other_dir.path(), &other), &zst).expect("replaced");
        std::fs::remove_file(&copy).expect("removed");
        let changed = copy_events_through(&zst, &read, &copy, 1)
            .expect_err("changed")
            .to_string();
        assert!(changed.contains("changed while it was read"), "{changed}");
        assert!(!copy.exists());
        // A log that does not reach the tick is refused by the recall state's pass and
        // by the copy, which leaves no file.
        let short = Recalls::of_log(&path, 3)
            .expect_err("two ticks, not three")
            .to_string();
        assert!(short.contains("closes 2 ticks, not the 3"), "{short}");
        let copy = dir.path().join("short.jsonl.zst");
        let short = copy_events_through(&path, &read, &copy, 3)
            .expect_err("two ticks")
            .to_string();
        assert!(short.contains("closes 2 ticks, not the 3"), "{short}");
        assert!(!copy.exists());
        // A broken seal is refused by a pass, and by the copy (whatever pass read it),
        // which leaves no file.
        let wrong = |t: usize, _: &str| format!(r#"{{"type":"tick","tick":{t},"hash":"00"}}"#);
        let (dir, path) = log_of(&self::ticks(), wrong);
        let refused = TickIndex::read(&path, None, |_, _, _| Ok(()))
            .expect_err("a wrong seal")
            .to_string();
        assert!(
            refused.contains("line 3 closes tick 0 with a hash"),
            "{refused}"
        );
        let unsealed = super::pass(&path, None, |_, _, _, _| Ok(())).expect("read unchecked");
        let copy = dir.path().join("copy.jsonl.zst");
        let refused = copy_events_through(&path, &unsealed, &copy, 2)
            .expect_err("a wrong seal")
            .to_string();
        assert!(
            refused.contains("line 3 closes tick 0 with a hash"),
            "{refused}"
        );
        assert!(!copy.exists());
    }

    #[test]
    fn a_damaged_log_is_refused_at_its_line() {
        let standard = |t: usize, h: &str| format!(r#"{{"type":"tick","tick":{t},"hash":"{h}"}}"#);
        let mut ticks = ticks();
        ticks[1][1] = "{not json";
        let (_dir, path) = log_of(&ticks, standard);
        let refused = EventLog::read(&path).expect_err("not JSON").to_string();
        assert!(refused.contains("line 5 is not an event"), "{refused}");
        let wrong = |t: usize, _: &str| format!(r#"{{"type":"tick","tick":{t},"hash":"00"}}"#);
        let (_dir, path) = log_of(&self::ticks(), wrong);
        let refused = EventLog::read(&path).expect_err("a wrong seal").to_string();
        assert!(
            refused.contains("line 3 closes tick 0 with a hash"),
            "{refused}"
        );
        let unsealed = EventLog::read_unsealed(&path).expect("read, the seal noted");
        assert_eq!(unsealed.index.broken_tick(), Some(0));
        let skipped =
            |t: usize, h: &str| format!(r#"{{"type":"tick","tick":{},"hash":"{h}"}}"#, t * 2);
        let (_dir, path) = log_of(&self::ticks(), skipped);
        let refused = EventLog::read(&path)
            .expect_err("tick 2 after 0")
            .to_string();
        assert!(
            refused.contains("line 6 closes tick 2, but tick 1 was expected"),
            "{refused}"
        );
    }

    #[test]
    fn stage_diffs_show_the_changed_lines() {
        let a = "name = \"x\"\nseed = 1\n[brain]\nmodel = \"a\"\n";
        let b = "name = \"x\"\nseed = 1\n[brain]\nmodel = \"b\"\n";
        assert_eq!(
            stage_diff(a, b, 10),
            vec!["- model = \"a\"", "+ model = \"b\""]
        );
        assert!(stage_diff(a, a, 10).is_empty());
        let long = stage_diff("", &"x\n".repeat(50), 5);
        assert_eq!(long.len(), 6);
        assert_eq!(long[5], "… 45 more lines");
    }
}
