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

use hearsay_memory::Store;
use hearsay_runtime::RunError;
use hearsay_runtime::core::MemoryId;
use hearsay_runtime::logs::Tape;
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
    // Everything is read before the directory is claimed: a run that cannot be read
    // leaves no half-made export behind.
    let tape = Tape::read(&opts.dir.join(LLM_FILE))?;
    let summary = Summary::read(&opts.dir)?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(RunError::Runtime)?;
    let metas = runtime.block_on(source.metadata())?;
    // The vectors are most of a big run's bytes: read in batches while they are written,
    // through one store opened here (so a store that cannot be opened stops the export
    // before anything is made).
    let store = if opts.vectors {
        Some(runtime.block_on(source.open_reader())?)
    } else {
        None
    };
    let lines = source
        .events
        .as_ref()
        .map(|log| log.through(source.completed))
        .unwrap_or_default();

    let lock = target.claim()?;
    let vectors = store.as_ref().map(|store| Vectors {
        runtime: &runtime,
        store,
    });
    let result = write_all(
        opts,
        lock.path(),
        &source,
        lines,
        &tape,
        summary.as_ref(),
        &metas,
        vectors,
    );
    if let Some(store) = store {
        runtime.block_on(store.close());
    }
    let (written, _lock) = lock.or_abandon(result)?;
    Ok(written)
}

#[expect(
    clippy::too_many_arguments,
    reason = "one call, every input read beforehand"
)]
fn write_all(
    opts: &ExportOptions,
    out: &Path,
    source: &RunSource,
    lines: hearsay_runtime::logs::LineSlice<'_>,
    tape: &Tape,
    summary: Option<&Summary>,
    metas: &[hearsay_memory::MemoryMeta],
    vectors: Option<Vectors<'_>>,
) -> Result<Vec<Written>, RunError> {
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

    let mut log = tables::LogFacts::default();
    // `events` first: reading the log gathers what `npcs` and `ticks` need.
    table(tables::EVENTS, &mut |sink| {
        log = tables::events(lines, sink)?;
        Ok(())
    })?;
    let mut per_npc: BTreeMap<hearsay_runtime::core::NpcId, u64> = BTreeMap::new();
    for m in metas {
        *per_npc.entry(m.memory.npc).or_default() += 1;
    }
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
    table(tables::MEMORIES, &mut |sink| {
        tables::memories(metas, &source.names, sink)
    })?;
    if let Some(v) = vectors {
        let model = summary.map_or("", |s| s.embedder.model.as_str());
        let embedded: Vec<MemoryId> = metas
            .iter()
            .filter(|m| m.embedded)
            .map(|m| m.memory.id)
            .collect();
        table(tables::VECTORS, &mut |sink| {
            for batch in embedded.chunks(VECTOR_BATCH) {
                let got = v
                    .runtime
                    .block_on(v.store.vectors_of(batch))
                    .map_err(|e| WriteError::Store(e.to_string()))?;
                tables::vectors(got, model, sink)?;
            }
            Ok(())
        })?;
    }
    table(tables::KNOWERS, &mut |sink| tables::knowers(summary, sink))?;
    let calls = tape.calls(&source.names);
    let mut per_tick = BTreeMap::new();
    table(tables::CALLS, &mut |sink| {
        per_tick = tables::calls(&calls, &source.names, sink)?;
        Ok(())
    })?;
    table(tables::TICKS, &mut |sink| {
        tables::ticks(&log, &per_tick, summary, sink)
    })?;
    // Files in table order; the order the closure pushed them in.
    written.sort_by_key(|w| tables::TABLES.iter().position(|t| t.name == w.table));
    Ok(written)
}

/// Memories whose vectors are read at once for `vectors`: a few MB of them at 1,536 dims.
const VECTOR_BATCH: usize = 1024;

/// The open store `vectors` is read from.
struct Vectors<'a> {
    runtime: &'a tokio::runtime::Runtime,
    store: &'a hearsay_memory::AnyStore,
}

#[cfg(test)]
mod tests;
