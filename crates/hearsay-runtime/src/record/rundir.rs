//! The run directory: what a run writes, how hearsay recognises a directory it made, and
//! the only ways hearsay creates, replaces and writes files in one.
//!
//! Run directories are shared, copied and unpacked from archives, so hearsay treats what
//! it finds in one as data and never lets it choose where a byte goes:
//! - **Recognised, not guessed.** Every directory hearsay makes (a run's, a sweep's)
//!   first gets a marker file, [`MARKER_FILE`], naming its kind and a fresh id.
//!   `--force` replaces a directory only when it carries such a marker and holds nothing
//!   but hearsay's own files (regular files with known names; for a sweep, its runs);
//!   never the current directory or one above it, never one holding the input.
//! - **Locked.** A writer holds an exclusive lock ([`DirLock`], `flock` on the directory
//!   itself) for as long as it writes; a second writer is refused at once.
//! - **Created, not followed.** Whole files are written to a fresh temporary file in the
//!   same directory (created exclusively: an existing name, a symlink included, is never
//!   opened) and renamed over the target only if the target is absent or a regular file;
//!   appends open with `O_NOFOLLOW`. A command that reads a run refuses a directory with
//!   a symlinked or special entry ([`require`]).
//!
//! What it must never do: delete or overwrite anything it cannot show it made.
//!
//! Over 600 lines because every rule about what hearsay may write, replace or refuse in a
//! directory stays in one file, where it can be read as a whole; about 130 of them are
//! its tests.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use serde::{Deserialize, Serialize};

use crate::RunError;

/// The scenario the run ran with (the file as given, after `--set` edits).
pub const SCENARIO_FILE: &str = "scenario.toml";
/// Every event, one JSON line each; every tick closes with its rolling hash. Compressed,
/// flushed at every tick's end ([`crate::logfile`]).
pub const EVENTS_FILE: &str = "events.jsonl.zst";
/// Every brain call, one JSON line each: what replay, resume and fork take decisions from.
/// Compressed as the event log is.
pub const LLM_FILE: &str = "llm.jsonl.zst";
/// The event log as run directories written before format 2 hold it: plain lines. Read
/// wherever [`EVENTS_FILE`] is, and kept in its format by `resume`.
pub const OLD_EVENTS_FILE: &str = "events.jsonl";
/// The tape as run directories written before format 2 hold it (see [`OLD_EVENTS_FILE`]).
pub const OLD_LLM_FILE: &str = "llm.jsonl";
/// The embedded memory store (SQLite).
pub const MEMORIES_FILE: &str = "memories.db";
/// Written when the run ends; read by scripts.
pub const SUMMARY_FILE: &str = "summary.json";
/// The settings a run actually ran with (seeds per tick range, store, earlier stages).
pub const MANIFEST_FILE: &str = "run.json";
/// The self-contained report page.
pub const REPORT_FILE: &str = "report.html";
/// hearsay's mark on a directory it made: `{"kind": "run"|"sweep", "id": …}`.
pub const MARKER_FILE: &str = ".hearsay";
/// A sweep's table, in its directory.
pub const SWEEP_FILE: &str = "sweep.json";
/// A shard's report (`hearsay sweep --shard I/N`): its runs, and its place in the sweep.
pub const SHARD_FILE: &str = "shard.json";
/// Where a sweep's (or each shard's) runs were written and how long they took.
pub const SHARDS_FILE: &str = "shards.json";

/// Every name a run directory may hold. SQLite's `-wal`, `-shm` and `-journal` files sit
/// beside the store while it is open (and after a crash).
pub const RUN_FILES: &[&str] = &[
    MARKER_FILE,
    SCENARIO_FILE,
    MANIFEST_FILE,
    EVENTS_FILE,
    LLM_FILE,
    OLD_EVENTS_FILE,
    OLD_LLM_FILE,
    MEMORIES_FILE,
    "memories.db-wal",
    "memories.db-shm",
    "memories.db-journal",
    SUMMARY_FILE,
    REPORT_FILE,
    crate::spread::FACTS_FILE,
    crate::spread::JUDGE_FILE,
];

/// The tables `hearsay export` writes, each as `NAME.parquet` or `NAME.csv`: the only
/// files besides its marker an export directory may hold (so `--force` clears nothing
/// else).
pub const EXPORT_TABLES: &[&str] = &[
    "npcs", "events", "memories", "vectors", "knowers", "calls", "ticks",
];

/// Whether `name` is a file `hearsay export` writes.
fn export_file_name(name: &str) -> bool {
    let stem = name
        .strip_suffix(".parquet")
        .or_else(|| name.strip_suffix(".csv"));
    stem.is_some_and(|s| EXPORT_TABLES.contains(&s))
}

/// The largest `run.json`, `summary.json` or marker hearsay reads (a `run.json` carries
/// the texts of earlier scenarios, each at most a scenario's size).
pub const SMALL_FILE_MAX: u64 = 256 * 1024 * 1024;

/// Which kind of directory hearsay made.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DirKind {
    /// A run (`hearsay run`, `fork`).
    Run,
    /// A sweep's directory of runs.
    Sweep,
    /// `hearsay export`'s tables ([`EXPORT_TABLES`], as Parquet or CSV files).
    Export,
}

impl DirKind {
    fn noun(self) -> &'static str {
        match self {
            DirKind::Run => "run",
            DirKind::Sweep => "sweep",
            DirKind::Export => "export",
        }
    }
}

/// The content of [`MARKER_FILE`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Marker {
    /// A run or a sweep: neither reuses (or clears) a directory of the other kind.
    pub kind: DirKind,
    /// A fresh id per directory made: 32 hex digits.
    pub id: String,
    /// The hearsay version that made it.
    pub hearsay: String,
}

impl Marker {
    fn new(kind: DirKind) -> Marker {
        Marker {
            kind,
            id: fresh_id(),
            hearsay: env!("CARGO_PKG_VERSION").to_owned(),
        }
    }

    /// Reads the marker of `dir`, if it has a well-formed one.
    pub fn read(dir: &Path) -> Option<Marker> {
        let path = dir.join(MARKER_FILE);
        let meta = std::fs::symlink_metadata(&path).ok()?;
        if !meta.is_file() || meta.len() > 4096 {
            return None;
        }
        let text = std::fs::read_to_string(path).ok()?;
        let marker: Marker = serde_json::from_str(&text).ok()?;
        let well_formed = marker.id.len() == 32 && marker.id.chars().all(|c| c.is_ascii_hexdigit());
        well_formed.then_some(marker)
    }
}

/// A fresh id: not secret, only distinct (the clock, the process and a counter, hashed).
fn fresh_id() -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let mut hasher = blake3::Hasher::new_derive_key("hearsay directory id v1");
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    hasher.update(&now.to_le_bytes());
    hasher.update(&std::process::id().to_le_bytes());
    hasher.update(&COUNTER.fetch_add(1, Ordering::Relaxed).to_le_bytes());
    let mut id = hasher.finalize().to_hex().to_string();
    id.truncate(32);
    id
}

/// Whether `name` is one of hearsay's temporary files (`.NAME.PID-N.tmp`).
fn is_temp(name: &str) -> bool {
    name.starts_with('.') && name.ends_with(".tmp") && name.len() > 5
}

/// Checks that `dir` is a run directory holding `files` before a command reads it, so a
/// missing file is reported once, by name, instead of as the first read that fails. A
/// directory with a symlink, a subdirectory or a device among its entries is refused:
/// hearsay made none of those, and following one would read or write outside the run.
pub fn require(dir: &Path, files: &[&str]) -> Result<(), RunError> {
    if !dir.is_dir() {
        let problem = if dir.exists() {
            "is not a directory; a run directory is what `hearsay run` writes (runs/NAME-seedN)"
        } else {
            "no such run directory; `hearsay run SCENARIO` writes one (runs/NAME-seedN by default)"
        };
        return Err(RunError::RunDir {
            path: dir.to_owned(),
            problem: problem.into(),
        });
    }
    refuse_strange_entries(dir)?;
    let missing: Vec<&str> = files
        .iter()
        .copied()
        // A log is there in either format.
        .filter(|f| !crate::logfile::present(&dir.join(f)))
        .collect();
    if missing.is_empty() {
        return Ok(());
    }
    let problem = if missing.contains(&MANIFEST_FILE) && missing.contains(&SCENARIO_FILE) {
        format!(
            "is not a hearsay run directory (no {MANIFEST_FILE}, no {SCENARIO_FILE}); \
             `hearsay run SCENARIO` writes one"
        )
    } else {
        format!(
            "is incomplete: {} missing (a hearsay run writes {})",
            missing.join(", "),
            [
                MANIFEST_FILE,
                SCENARIO_FILE,
                EVENTS_FILE,
                LLM_FILE,
                MEMORIES_FILE,
                SUMMARY_FILE
            ]
            .join(", ")
        )
    };
    Err(RunError::RunDir {
        path: dir.to_owned(),
        problem,
    })
}

/// Refuses a run directory holding a symlink or anything but regular files among the
/// names a run uses.
fn refuse_strange_entries(dir: &Path) -> Result<(), RunError> {
    let entries = std::fs::read_dir(dir).map_err(|source| RunError::Io {
        path: dir.to_owned(),
        source,
    })?;
    for entry in entries.take(10_000).flatten() {
        let name = entry.file_name();
        let name = name.to_string_lossy();
        let Ok(meta) = std::fs::symlink_metadata(entry.path()) else {
            continue;
        };
        let ours = RUN_FILES.contains(&name.as_ref()) || is_temp(&name);
        if meta.file_type().is_symlink() {
            return Err(RunError::RunDir {
                path: entry.path(),
                problem: "is a symbolic link: hearsay never writes one, and following it could \
                          read or write outside the run directory; refusing the directory"
                    .into(),
            });
        }
        if ours && !meta.is_file() {
            return Err(RunError::RunDir {
                path: entry.path(),
                problem: "is not a regular file (hearsay writes only regular files here); \
                          refusing the directory"
                    .into(),
            });
        }
    }
    Ok(())
}

/// `name` with everything but letters, digits, `-` and `_` replaced by `-`.
fn safe_name(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '-'
            }
        })
        .collect()
}

/// `runs/<name>-seed<seed>`, with the name made safe for a path.
pub fn default_dir(name: &str, seed: u64) -> PathBuf {
    PathBuf::from("runs").join(format!("{}-seed{seed}", safe_name(name)))
}

/// `runs/<name>-sweep`, where `hearsay sweep` puts its runs.
pub fn default_sweep_dir(name: &str) -> PathBuf {
    PathBuf::from("runs").join(format!("{}-sweep", safe_name(name)))
}

/// `path` made absolute with every symlink of the part that exists resolved (the rest
/// appended as given), so two spellings of one directory compare equal.
fn resolved(path: &Path) -> PathBuf {
    let absolute = std::path::absolute(path).unwrap_or_else(|_| path.to_owned());
    let mut existing = absolute.as_path();
    let mut rest: Vec<&std::ffi::OsStr> = Vec::new();
    loop {
        if let Ok(real) = existing.canonicalize() {
            let mut out = real;
            for part in rest.iter().rev() {
                out.push(part);
            }
            return out;
        }
        match (existing.parent(), existing.file_name()) {
            (Some(parent), Some(name)) => {
                rest.push(name);
                existing = parent;
            }
            _ => return absolute,
        }
    }
}

/// What a new run or sweep must never be written over or into.
#[derive(Clone, Debug, Default)]
pub struct Protected {
    /// Input files (the scenario): never inside the directory.
    pub inputs: Vec<PathBuf>,
    /// A fork's source run: never it, above it or inside it.
    pub source: Option<PathBuf>,
}

/// An output directory that passed the checks a run makes before it does anything else.
#[derive(Debug)]
pub struct Target {
    path: PathBuf,
    kind: DirKind,
    /// Set when a directory is there: replaced (with `--force`) or reused (empty).
    existing: Option<Existing>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Existing {
    Empty,
    Ours,
}

/// Checks `path` as the output directory of a new run or sweep (`kind`), before anything
/// is written: it may not exist yet, be empty, or — with `force` — be a directory of that
/// kind that hearsay made and that holds nothing else. Never the current directory or one
/// above it, never one holding an input, never a fork's source, and never a directory
/// another hearsay process is writing.
pub fn check_target(
    path: &Path,
    kind: DirKind,
    force: bool,
    protected: &Protected,
) -> Result<Target, RunError> {
    let refuse = |problem: String| RunError::OutDir {
        path: path.to_owned(),
        problem,
    };
    let real = resolved(path);
    if let Ok(cwd) = std::env::current_dir() {
        let cwd = resolved(&cwd);
        if cwd.starts_with(&real) {
            return Err(refuse(
                "is the current directory or one above it; a run needs a directory of its own \
                 (e.g. --out runs/NAME)"
                    .into(),
            ));
        }
    }
    for input in &protected.inputs {
        if resolved(input).starts_with(&real) {
            return Err(refuse(format!(
                "holds {}, an input of this command; choose a directory of its own",
                input.display()
            )));
        }
    }
    if let Some(source) = &protected.source {
        let source = resolved(source);
        let (verb, what) = match kind {
            DirKind::Export => ("exported", "an export"),
            _ => ("forked", "a fork"),
        };
        if source.starts_with(&real) {
            return Err(refuse(format!(
                "is the run being {verb} ({}) or holds it; {what} needs a directory of its own",
                source.display()
            )));
        }
        if real.starts_with(&source) {
            return Err(refuse(format!(
                "is inside the run being {verb} ({}); {what} needs a directory of its own",
                source.display()
            )));
        }
    }
    let meta = match std::fs::symlink_metadata(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Ok(Target {
                path: path.to_owned(),
                kind,
                existing: None,
            });
        }
        Err(source) => {
            return Err(RunError::Io {
                path: path.to_owned(),
                source,
            });
        }
        Ok(meta) => meta,
    };
    if meta.file_type().is_symlink() {
        return Err(refuse(
            "is a symbolic link; hearsay writes a run only into a directory it creates or \
             made before"
                .into(),
        ));
    }
    if !meta.is_dir() {
        return Err(refuse(
            "exists and is not a directory; nothing was changed".into(),
        ));
    }
    let existing = match survey(path, kind)? {
        Survey::Empty => Existing::Empty,
        Survey::Ours if force => Existing::Ours,
        Survey::Ours if kind == DirKind::Export => {
            return Err(refuse(
                "holds an earlier export; pass --force to replace it".into(),
            ));
        }
        Survey::Ours => return Err(RunError::Exists(path.to_owned())),
        Survey::Foreign(found) if force || kind == DirKind::Export => {
            return Err(refuse(format!(
                "is not a hearsay {} directory, so --force will not replace it: {found}; \
                 nothing was changed",
                kind.noun()
            )));
        }
        Survey::Foreign(_) => return Err(RunError::Exists(path.to_owned())),
    };
    // Someone writing it right now: refused before anything is done, not after.
    drop(DirLock::acquire(path)?);
    Ok(Target {
        path: path.to_owned(),
        kind,
        existing: Some(existing),
    })
}

enum Survey {
    Empty,
    /// Marked by hearsay as `kind`, holding only hearsay's files.
    Ours,
    /// Anything else; what gives it away.
    Foreign(String),
}

/// What `dir` holds, for the kind of directory it should be.
fn survey(dir: &Path, kind: DirKind) -> Result<Survey, RunError> {
    let io = |source| RunError::Io {
        path: dir.to_owned(),
        source,
    };
    let mut names = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(io)? {
        let entry = entry.map_err(io)?;
        names.push(entry.file_name());
        if names.len() > 100_000 {
            return Ok(Survey::Foreign("more than 100,000 entries".into()));
        }
    }
    if names.is_empty() {
        return Ok(Survey::Empty);
    }
    let Some(marker) = Marker::read(dir) else {
        return Ok(Survey::Foreign(format!(
            "no {MARKER_FILE} marker (hearsay marks every directory it makes; a run made by \
             hearsay before 0.1 has none: delete it yourself if you are sure)"
        )));
    };
    if marker.kind != kind {
        return Ok(Survey::Foreign(format!(
            "it is a hearsay {} directory",
            marker.kind.noun()
        )));
    }
    names.sort();
    for name in names {
        let shown = name.to_string_lossy().into_owned();
        let path = dir.join(&name);
        let meta = std::fs::symlink_metadata(&path).map_err(|source| RunError::Io {
            path: path.clone(),
            source,
        })?;
        let known_file = RUN_FILES.contains(&shown.as_str()) || is_temp(&shown);
        let ok = match kind {
            DirKind::Run => known_file && meta.is_file(),
            DirKind::Sweep => {
                let known_sweep_file = [MARKER_FILE, SWEEP_FILE, SHARD_FILE, SHARDS_FILE]
                    .contains(&shown.as_str())
                    || is_temp(&shown);
                if known_sweep_file {
                    meta.is_file()
                } else {
                    seed_dir_name(&shown)
                        && meta.is_dir()
                        && matches!(survey(&path, DirKind::Run)?, Survey::Ours | Survey::Empty)
                }
            }
            DirKind::Export => {
                (shown == MARKER_FILE || export_file_name(&shown) || is_temp(&shown))
                    && meta.is_file()
            }
        };
        if !ok {
            let what = if meta.file_type().is_symlink() {
                "a symbolic link"
            } else if meta.is_dir() {
                "a directory"
            } else if meta.is_file() {
                "a file"
            } else {
                "a special file"
            };
            return Ok(Survey::Foreign(format!(
                "it holds {what} hearsay did not write: {shown:?}"
            )));
        }
    }
    Ok(Survey::Ours)
}

/// `seed-N`, the name of a sweep's run.
fn seed_dir_name(name: &str) -> bool {
    name.strip_prefix("seed-")
        .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
}

impl Target {
    /// Where the directory is.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Makes the directory (or empties the earlier one of hearsay's), locks it and marks
    /// it: from here on it is this process's, until the lock is dropped.
    pub fn claim(self) -> Result<DirLock, RunError> {
        let io = |path: &Path| {
            let path = path.to_owned();
            move |source| RunError::Io { path, source }
        };
        let mut created = false;
        // The parents this claim makes, deepest first: an abandoned claim removes them too.
        let mut parents = Vec::new();
        if self.existing.is_none() {
            if let Some(parent) = self.path.parent().filter(|p| !p.as_os_str().is_empty()) {
                let mut missing = Some(parent);
                while let Some(p) = missing.filter(|p| !p.as_os_str().is_empty()) {
                    if std::fs::symlink_metadata(p).is_ok() {
                        break;
                    }
                    parents.push(p.to_owned());
                    missing = p.parent();
                }
                std::fs::create_dir_all(parent).map_err(io(parent))?;
            }
            match std::fs::create_dir(&self.path) {
                Ok(()) => created = true,
                // Made by someone else since the check: survey it again, under the lock.
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
                Err(e) => return Err(io(&self.path)(e)),
            }
        }
        let mut lock = DirLock::acquire(&self.path)?;
        lock.created = created;
        lock.parents = parents;
        if !created {
            match survey(&self.path, self.kind)? {
                Survey::Empty => {}
                Survey::Ours if self.existing == Some(Existing::Ours) => {
                    clear(&self.path, self.kind)?;
                }
                Survey::Ours => return Err(RunError::Exists(self.path.clone())),
                Survey::Foreign(found) => {
                    return Err(RunError::OutDir {
                        path: self.path.clone(),
                        problem: format!("changed while hearsay was starting: {found}"),
                    });
                }
            }
        }
        let marker = Marker::new(self.kind);
        let text = serde_json::to_string(&marker).unwrap_or_default() + "\n";
        write_file(&self.path.join(MARKER_FILE), text.as_bytes())?;
        lock.id = marker.id;
        Ok(lock)
    }
}

/// Empties a directory [`survey`] found to be hearsay's own (`kind`): its files, and for a
/// sweep its runs, one known entry at a time. The directory itself stays (its lock with it).
fn clear(dir: &Path, kind: DirKind) -> Result<(), RunError> {
    let io = |path: PathBuf| move |source| RunError::Io { path, source };
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(io(dir.to_owned()))?
        .flatten()
        .map(|e| e.path())
        .collect();
    entries.sort();
    // The marker last: a directory interrupted half-way is still recognised.
    entries.sort_by_key(|p| p.file_name().is_some_and(|n| n == MARKER_FILE));
    for path in entries {
        let meta = std::fs::symlink_metadata(&path).map_err(io(path.clone()))?;
        if meta.is_dir() && kind == DirKind::Sweep {
            if Marker::read(&path).is_some()
                || std::fs::read_dir(&path)
                    .map_err(io(path.clone()))?
                    .next()
                    .is_none()
            {
                let lock = DirLock::acquire(&path)?;
                clear(&path, DirKind::Run)?;
                drop(lock);
                std::fs::remove_dir(&path).map_err(io(path.clone()))?;
            }
        } else if meta.is_file() {
            std::fs::remove_file(&path).map_err(io(path.clone()))?;
        }
    }
    Ok(())
}

/// An exclusive lock on a directory hearsay writes, held until dropped: `flock` on the
/// directory itself, so it leaves no file behind and dies with the process (`kill -9`
/// included).
#[derive(Debug)]
pub struct DirLock {
    dir: PathBuf,
    _file: File,
    created: bool,
    /// Parent directories the claim made, deepest first.
    parents: Vec<PathBuf>,
    id: String,
}

impl DirLock {
    /// Locks `dir`, or says who holds it.
    pub fn acquire(dir: &Path) -> Result<DirLock, RunError> {
        let file = File::open(dir).map_err(|source| RunError::Io {
            path: dir.to_owned(),
            source,
        })?;
        match file.try_lock() {
            Ok(()) => Ok(DirLock {
                dir: dir.to_owned(),
                _file: file,
                created: false,
                parents: Vec::new(),
                id: String::new(),
            }),
            Err(std::fs::TryLockError::WouldBlock) => Err(RunError::OutDir {
                path: dir.to_owned(),
                problem: "another hearsay process is writing it right now (it holds the \
                          directory's lock); wait for it to end, or choose another directory"
                    .into(),
            }),
            Err(std::fs::TryLockError::Error(source)) => Err(RunError::Io {
                path: dir.to_owned(),
                source,
            }),
        }
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        &self.dir
    }

    /// The id in its marker (empty for a directory locked, not made, by this process).
    pub fn id(&self) -> &str {
        &self.id
    }

    /// `result` with the lock, or — when it is an error (the run failed before its first
    /// tick) — the error, with the claim undone ([`DirLock::abandon`]).
    pub fn or_abandon<T>(self, result: Result<T, RunError>) -> Result<(T, DirLock), RunError> {
        match result {
            Ok(value) => Ok((value, self)),
            Err(e) => {
                self.abandon();
                Err(e)
            }
        }
    }

    /// Undoes a claim that came to nothing (the run failed before its first tick): the
    /// files written since, then the directory and the parents it made if this process
    /// made them (each only while empty).
    pub fn abandon(mut self) {
        let _ = clear(&self.dir, DirKind::Run);
        if self.created {
            let dir = self.dir.clone();
            let parents = std::mem::take(&mut self.parents);
            drop(self);
            if std::fs::remove_dir(dir).is_ok() {
                for parent in parents {
                    if std::fs::remove_dir(parent).is_err() {
                        break;
                    }
                }
            }
        }
    }
}

/// Writes `bytes` to `path` whole: into a fresh temporary file beside it (created
/// exclusively, so nothing already there is opened), renamed over `path` only if `path`
/// is absent or a regular file. A reader never sees half a file; a symlink planted at
/// `path` is refused, not followed or replaced.
pub fn write_file(path: &Path, bytes: &[u8]) -> Result<(), RunError> {
    write_file_with(path, |f| f.write_all(bytes))
}

/// [`write_file`] for contents written as they are made: `write` fills the temporary
/// file, which replaces `path` only if it returned `Ok`.
pub fn write_file_with(
    path: &Path,
    write: impl FnOnce(&mut File) -> std::io::Result<()>,
) -> Result<(), RunError> {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let io = |path: &Path| {
        let path = path.to_owned();
        move |source| RunError::Io { path, source }
    };
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let dir = path.parent().unwrap_or(Path::new("."));
    refuse_link_or_special(path)?;
    let tmp = dir.join(format!(
        ".{name}.{}-{}.tmp",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    ));
    let written = OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&tmp)
        .and_then(|mut f| write(&mut f).and_then(|()| f.flush()));
    if let Err(e) = written {
        let _ = std::fs::remove_file(&tmp);
        return Err(io(path)(e));
    }
    // Checked again right before the rename: a link made meanwhile is still refused.
    if let Err(e) = refuse_link_or_special(path) {
        let _ = std::fs::remove_file(&tmp);
        return Err(e);
    }
    std::fs::rename(&tmp, path).map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        io(path)(e)
    })
}

/// Refuses `path` when something other than a regular file is there.
pub(crate) fn refuse_link_or_special(path: &Path) -> Result<(), RunError> {
    match std::fs::symlink_metadata(path) {
        Ok(meta) if meta.file_type().is_symlink() => Err(RunError::RunDir {
            path: path.to_owned(),
            problem: "is a symbolic link: hearsay writes its files itself and never through \
                      a link; nothing was written"
                .into(),
        }),
        Ok(meta) if !meta.is_file() => Err(RunError::RunDir {
            path: path.to_owned(),
            problem: "is not a regular file; nothing was written".into(),
        }),
        _ => Ok(()),
    }
}

/// Opens `path` for appending, creating it if it is absent; never through a symlink
/// (`O_NOFOLLOW`) and never anything but a regular file.
pub fn open_append(path: &Path) -> Result<File, RunError> {
    refuse_link_or_special(path)?;
    let mut options = OpenOptions::new();
    options.create(true).append(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.custom_flags(rustix::fs::OFlags::NOFOLLOW.bits() as i32);
    }
    options.open(path).map_err(|source| RunError::Io {
        path: path.to_owned(),
        source,
    })
}

/// Cuts `path` back to its first `len` bytes (what was written before a crash and is
/// kept), never through a symlink.
pub fn truncate(path: &Path, len: u64) -> Result<(), RunError> {
    refuse_link_or_special(path)?;
    let mut options = OpenOptions::new();
    options.write(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.custom_flags(rustix::fs::OFlags::NOFOLLOW.bits() as i32);
    }
    options
        .open(path)
        .and_then(|f| f.set_len(len))
        .map_err(|source| RunError::Io {
            path: path.to_owned(),
            source,
        })
}

/// Reads a small file of a run directory (`run.json`, `summary.json`), refusing one larger
/// than [`SMALL_FILE_MAX`] rather than reading it whole.
pub fn read_small(path: &Path) -> std::io::Result<String> {
    let meta = std::fs::metadata(path)?;
    if meta.len() > SMALL_FILE_MAX {
        return Err(std::io::Error::other(format!(
            "it is {} bytes, more than the {SMALL_FILE_MAX} a run writes",
            meta.len()
        )));
    }
    std::fs::read_to_string(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn protected() -> Protected {
        Protected::default()
    }

    #[test]
    fn a_new_directory_is_made_marked_and_locked() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let out = tmp.path().join("a/b/run");
        let lock = check_target(&out, DirKind::Run, false, &protected())
            .and_then(Target::claim)
            .expect("claimed");
        let marker = Marker::read(&out).expect("marked");
        assert_eq!(marker.kind, DirKind::Run);
        assert_eq!(marker.id, lock.id());
        // A second writer is refused while the first holds it.
        let err = check_target(&out, DirKind::Run, true, &protected()).expect_err("locked");
        assert!(err.to_string().contains("another hearsay process"), "{err}");
        drop(lock);
        // Without --force an earlier run stays; with it, it is replaced.
        assert!(matches!(
            check_target(&out, DirKind::Run, false, &protected()),
            Err(RunError::Exists(_))
        ));
        std::fs::write(out.join(EVENTS_FILE), "x").expect("write");
        let again = check_target(&out, DirKind::Run, true, &protected())
            .and_then(Target::claim)
            .expect("replaced");
        assert!(
            !out.join(EVENTS_FILE).exists(),
            "the old run's files are gone"
        );
        assert_ne!(again.id(), marker.id, "a new id");
    }

    #[test]
    fn force_never_replaces_what_hearsay_did_not_make() {
        let tmp = tempfile::tempdir().expect("tempdir");
        // A project directory that happens to hold a scenario.toml.
        let proj = tmp.path().join("proj");
        std::fs::create_dir_all(proj.join("src")).expect("mkdir");
        std::fs::write(proj.join(SCENARIO_FILE), "name = \"x\"").expect("write");
        std::fs::write(proj.join("notes.txt"), "mine").expect("write");
        let err = check_target(&proj, DirKind::Run, true, &protected()).expect_err("refused");
        assert!(err.to_string().contains("no .hearsay marker"), "{err}");
        // A marked run with one stranger in it.
        let run = tmp.path().join("run");
        drop(
            check_target(&run, DirKind::Run, false, &protected())
                .and_then(Target::claim)
                .expect("claimed"),
        );
        std::fs::write(run.join("notes.txt"), "mine").expect("write");
        let err = check_target(&run, DirKind::Run, true, &protected()).expect_err("refused");
        assert!(err.to_string().contains("notes.txt"), "{err}");
        // A symlink among a run's names.
        std::fs::remove_file(run.join("notes.txt")).expect("rm");
        #[cfg(unix)]
        std::os::unix::fs::symlink(proj.join("notes.txt"), run.join(SUMMARY_FILE)).expect("ln");
        let err = check_target(&run, DirKind::Run, true, &protected()).expect_err("refused");
        assert!(err.to_string().contains("summary.json"), "{err}");
        assert_eq!(
            std::fs::read_to_string(proj.join("notes.txt")).expect("read"),
            "mine"
        );
        // A sweep's marker does not make a run.
        let sweep = tmp.path().join("sweep");
        drop(
            check_target(&sweep, DirKind::Sweep, false, &protected())
                .and_then(Target::claim)
                .expect("claimed"),
        );
        let err = check_target(&sweep, DirKind::Run, true, &protected()).expect_err("refused");
        assert!(err.to_string().contains("sweep directory"), "{err}");
    }

    #[test]
    fn never_the_current_directory_an_input_or_a_fork_source() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let err =
            check_target(Path::new("."), DirKind::Run, true, &protected()).expect_err("refused");
        assert!(err.to_string().contains("current directory"), "{err}");
        let input = tmp.path().join("in/s.toml");
        let p = Protected {
            inputs: vec![input.clone()],
            source: Some(tmp.path().join("src/run")),
        };
        for out in ["in", "src", "src/run", "src/run/inner"] {
            let err =
                check_target(&tmp.path().join(out), DirKind::Run, true, &p).expect_err("refused");
            assert!(matches!(err, RunError::OutDir { .. }), "{out}: {err}");
        }
        assert!(check_target(&tmp.path().join("elsewhere"), DirKind::Run, true, &p).is_ok());
    }

    #[test]
    fn writes_replace_regular_files_and_refuse_links() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let target = tmp.path().join("summary.json");
        write_file(&target, b"one").expect("write");
        write_file(&target, b"two").expect("rewrite");
        assert_eq!(std::fs::read(&target).expect("read"), b"two");
        let outside = tmp.path().join("outside.txt");
        std::fs::write(&outside, "precious").expect("write");
        let link = tmp.path().join("events.jsonl");
        #[cfg(unix)]
        std::os::unix::fs::symlink(&outside, &link).expect("ln");
        assert!(write_file(&link, b"x").is_err());
        assert!(open_append(&link).is_err());
        assert!(truncate(&link, 0).is_err());
        assert_eq!(std::fs::read_to_string(&outside).expect("read"), "precious");
        let left: Vec<_> = std::fs::read_dir(tmp.path())
            .expect("ls")
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| is_temp(n))
            .collect();
        assert!(left.is_empty(), "no temporary file left: {left:?}");
        assert!(
            require(tmp.path(), &[]).is_err(),
            "a run dir with a link is refused"
        );
    }
}
