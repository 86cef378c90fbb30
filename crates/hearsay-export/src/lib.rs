//! `hearsay export`: a recorded run as tables any analysis tool reads without hearsay —
//! `npcs`, `events`, `memories` (and `vectors` on request), `knowers`, `calls`, `ticks` —
//! as Parquet (typed columns, lists as Parquet lists) or CSV (lists as JSON arrays).
//!
//! It owns the tables' schema ([`tables::TABLES`], which `--schema` prints and
//! `docs/EXPORT.md` holds) and their two encodings. Every row comes from the run's own
//! readers in `hearsay-runtime` (the sealed event log, the tape, the store, the
//! summary), so an export says what `inspect`, `trace` and the report say.
//!
//! It must never change the run it reads, and never write anywhere but the directory it
//! was given: that directory is checked and claimed like a run's (absent, empty, or — with
//! `--force` — an earlier export of hearsay's, holding nothing else), and each table is
//! written to a temporary file renamed into place when whole.

pub mod table;
pub mod tables;
pub mod write;

use std::collections::BTreeMap;
use std::io::BufWriter;
use std::path::{Path, PathBuf};

use hearsay_memory::{AnyStore, Store};
use hearsay_runtime::RunError;
use hearsay_runtime::core::{MemoryId, NpcId};
use hearsay_runtime::logfile::LogReader;
use hearsay_runtime::logs::{Tape, in_roster_order, roster_order};
use hearsay_runtime::rundir::{self, DirKind, LLM_FILE, Protected};
use hearsay_runtime::source::RunSource;
use hearsay_runtime::summary::Summary;

pub use table::{Cell, ColumnSpec, Kind, TableSpec};
use write::{CsvSink, ParquetSink, Sink, WriteError};

/// The file format.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// Apache Parquet, Snappy-compressed.
    Parquet,
    /// Comma-separated values with a header row.
    Csv,
}

impl Format {
    /// The files' extension.
    pub fn extension(self) -> &'static str {
        match self {
            Format::Parquet => "parquet",
            Format::Csv => "csv",
        }
    }
}

/// What to export, and where.
#[derive(Clone, Debug)]
pub struct ExportOptions {
    /// The run directory.
    pub dir: PathBuf,
    /// For a run kept in PostgreSQL: the server the user named.
    pub database_url: Option<String>,
    /// Parquet or CSV.
    pub format: Format,
    /// The directory the tables go to.
    pub out: PathBuf,
    /// Also write `vectors` (every embedded chunk's vector).
    pub vectors: bool,
    /// Replace `out` if it holds an earlier export.
    pub force: bool,
}

/// One table written.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Written {
    /// Its name.
    pub table: &'static str,
    /// Its file.
    pub path: PathBuf,
    /// Rows.
    pub rows: u64,
    /// The file's size.
    pub bytes: u64,
}

/// The schema of every table as Markdown (`hearsay export --schema`, `docs/EXPORT.md`).
pub fn schema_markdown() -> String {
    table::markdown(&tables::TABLES)
}

/// Writes the run's tables into `opts.out`; returns them in the order written.
pub fn export(opts: &ExportOptions) -> Result<Vec<Written>, RunError> {
    let source = RunSource::open_dir(&opts.dir, opts.database_url.as_deref())?;
    let target = rundir::check_target(
        &opts.out,
        DirKind::Export,
        opts.force,
        &Protected {
            inputs: Vec::new(),
            source: Some(opts.dir.clone()),
        },
    )?;
    // What can be checked is checked before the directory is claimed (the event log's
    // seal, the summary, the tape's presence, the store); the rows are read as they are
    // written, never held whole, and a run that fails to read half-way leaves no export
    // behind: the claim is undone.
    let tape = opts.dir.join(LLM_FILE);
    drop(LogReader::open(&tape)?);
    let summary = Summary::read(&opts.dir)?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(RunError::Runtime)?;
    let store = runtime.block_on(source.open_reader())?;
    let read = Read {
        source: &source,
        tape: &tape,
        summary: summary.as_ref(),
        runtime: &runtime,
        store: &store,
    };
    let result = target.claim().and_then(|lock| {
        let written = write_all(opts, lock.path(), &read);
        lock.or_abandon(written)
    });
    runtime.block_on(store.close());
    let (written, _lock) = result?;
    Ok(written)
}

/// What the tables are read from.
struct Read<'a> {
    source: &'a RunSource,
    /// The tape's path.
    tape: &'a Path,
    summary: Option<&'a Summary>,
    runtime: &'a tokio::runtime::Runtime,
    /// The store, open for reading.
    store: &'a AnyStore,
}

fn write_all(opts: &ExportOptions, out: &Path, read: &Read<'_>) -> Result<Vec<Written>, RunError> {
    let Read {
        source,
        tape,
        summary,
        runtime,
        store,
    } = *read;
    let mut written = Vec::new();
    let mut table = |spec: TableSpec,
                     fill: &mut dyn FnMut(&mut dyn Sink) -> Result<(), WriteError>|
     -> Result<(), RunError> {
        let path = out.join(format!("{}.{}", spec.name, opts.format.extension()));
        let mut rows = 0;
        let mut failure = None;
        rundir::write_file_with(&path, |file| {
            let out = BufWriter::with_capacity(1 << 16, file);
            let result = (|| {
                let mut sink: Box<dyn Sink> = match opts.format {
                    Format::Parquet => Box::new(ParquetSink::new(spec, out)?),
                    Format::Csv => Box::new(CsvSink::new(spec, out)?),
                };
                fill(sink.as_mut())?;
                sink.finish()
            })();
            match result {
                Ok(n) => {
                    rows = n;
                    Ok(())
                }
                Err(e) => {
                    let shown = std::io::Error::other(e.to_string());
                    failure = Some(e);
                    Err(shown)
                }
            }
        })
        .map_err(|e| match failure.take() {
            Some(WriteError::Io(_)) | None => e,
            // The run's own refusal, and the store's, as the commands that read them
            // would say it.
            Some(WriteError::Read(refused)) => refused,
            Some(WriteError::Store(failed)) => failed.into(),
            Some(other) => RunError::RunDir {
                path: path.clone(),
                problem: other.to_string(),
            },
        })?;
        let bytes = std::fs::metadata(&path).map_or(0, |m| m.len());
        written.push(Written {
            table: spec.name,
            path,
            rows,
            bytes,
        });
        Ok(())
    };

    // `events` first: reading the log gathers what `npcs` and `ticks` need.
    let mut log = tables::LogFacts::default();
    table(tables::EVENTS, &mut |sink| {
        let mut events = tables::Events::default();
        if let Some(file) = &source.events {
            file.each_line(source.completed, |_, line| events.line(line, sink))?;
        }
        log = events.finish();
        Ok(())
    })?;
    // `memories` before `npcs`, which counts each NPC's.
    let mut per_npc: BTreeMap<NpcId, u64> = BTreeMap::new();
    let mut embedded: Vec<MemoryId> = Vec::new();
    table(tables::MEMORIES, &mut |sink| {
        let names = &source.names;
        runtime.block_on(store.each_meta(|meta| {
            *per_npc.entry(meta.memory.npc).or_default() += 1;
            if opts.vectors && meta.embedded {
                embedded.push(meta.memory.id);
            }
            tables::memory(&meta, names, sink)
        }))
    })?;
    let roster: Vec<tables::NpcInfo<'_>> = source
        .scenario
        .npcs
        .iter()
        .map(|n| tables::NpcInfo {
            name: &n.name,
            brain: &n.brain,
            persona: &n.persona,
            at: n.at,
        })
        .collect();
    table(tables::NPCS, &mut |sink| {
        tables::npcs(&roster, &log, &per_npc, summary, sink)
    })?;
    if opts.vectors {
        let model = summary.map_or("", |s| s.embedder.model.as_str());
        table(tables::VECTORS, &mut |sink| {
            for batch in embedded.chunks(VECTOR_BATCH) {
                let got = runtime.block_on(store.vectors_of(batch))?;
                tables::vectors(got, model, sink)?;
            }
            Ok(())
        })?;
    }
    table(tables::KNOWERS, &mut |sink| tables::knowers(summary, sink))?;
    let mut per_tick = BTreeMap::new();
    let mut in_order = true;
    table(tables::CALLS, &mut |sink| {
        let order = roster_order(&source.names);
        let mut calls = tables::Calls::default();
        in_order = Tape::each_tick(tape, |_, of_tick| {
            for call in in_roster_order(&of_tick, &order) {
                calls.call(call, &source.names, sink)?;
            }
            Ok::<(), WriteError>(())
        })?;
        per_tick = calls.finish();
        // Left unwritten, and written below from the tape put in order.
        if !in_order {
            return Err(WriteError::Row {
                table: "calls",
                problem: "the tape is not in tick order".into(),
            });
        }
        Ok(())
    })
    .or_else(|e| if in_order { Err(e) } else { Ok(()) })?;
    if !in_order {
        // A tape out of tick order (hearsay writes its ticks in order) is read whole.
        let whole = Tape::read(tape)?;
        table(tables::CALLS, &mut |sink| {
            let mut calls = tables::Calls::default();
            for call in whole.calls(&source.names) {
                calls.call(call, &source.names, sink)?;
            }
            per_tick = calls.finish();
            Ok(())
        })?;
    }
    table(tables::TICKS, &mut |sink| {
        tables::ticks(&log, &per_tick, summary, sink)
    })?;
    // Files in table order; the order the closure pushed them in.
    written.sort_by_key(|w| tables::TABLES.iter().position(|t| t.name == w.table));
    Ok(written)
}

/// Memories whose vectors are read at once for `vectors`: a few MB of them at 1,536 dims.
const VECTOR_BATCH: usize = 1024;

#[cfg(test)]
mod tests;
