//! The `hearsay` binary: command-line parsing, logging setup and exit codes.
//!
//! Everything else lives in the libraries (`hearsay-runtime` and below, `hearsay-watch`
//! for the terminal view, `hearsay-mcp` for the MCP server); this file only turns arguments into calls and results into
//! output and an exit code: 0 success, 1 the run failed (or a replay diverged, or runs
//! of a sweep failed), 2 bad input (scenario, flags, paths, run directories), 3 the run
//! finished but an `[[expect]]` of its scenario was not met.

mod cli;

use std::io::{IsTerminal, Write};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use clap::Parser;
use cli::{Cli, Command};
use hearsay_runtime::expect::Verdict;
use hearsay_runtime::source::RunSource;
use hearsay_runtime::{ForkOptions, ResumeOptions, RunError, RunOptions, scenario, summary};

/// The allocator. A tick allocates and frees hundreds of thousands of small values
/// (observations, prompts, memories, checkpoint deltas), and glibc's allocator spent a
/// growing share of a long run's CPU on a fragmented heap: BENCHMARKS.md, the sixth
/// round, has the profile and the harness's before and after.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Turns transparent huge pages off for this process (Linux; elsewhere, and where the
/// kernel refuses, nothing changes), unless `MIMALLOC_ALLOW_THP` is set, which then
/// decides as mimalloc documents it. mimalloc's memory gets huge pages from the kernel; a
/// tick's buffers come and go, and on the development machine (a VM) zeroing fresh 2 MiB
/// pages (`clear_page_erms`) was a large share of a big town's `perf` samples. Off, the
/// 10,000-NPC and 1,000-NPC towns ran faster on less memory, and recall showed no cost
/// from the extra TLB misses: docs/BENCHMARKS.md, the thirteenth round, has the runs.
fn huge_pages_off() {
    #[cfg(any(target_os = "linux", target_os = "android"))]
    if std::env::var_os("MIMALLOC_ALLOW_THP").is_none() {
        let _ = rustix::thread::disable_transparent_huge_pages(true);
    }
}

/// Set once stdout is closed (`hearsay run … | head`): nothing more is printed there,
/// and the command ends as it would have, its run intact.
static STDOUT_CLOSED: AtomicBool = AtomicBool::new(false);

/// Prints `text` to stdout with every control character but line breaks and tabs
/// replaced (text from a run never drives the terminal); a closed pipe ends the printing
/// quietly instead of panicking.
fn print_out(text: &str) {
    if STDOUT_CLOSED.load(Ordering::Relaxed) {
        return;
    }
    let mut stdout = std::io::stdout().lock();
    let written = stdout
        .write_all(hearsay_runtime::terminal::printable(text).as_bytes())
        .and_then(|()| stdout.flush());
    if written.is_err() {
        STDOUT_CLOSED.store(true, Ordering::Relaxed);
    }
}

/// Writes `text` to stderr, ignoring a closed stderr.
fn err(text: &str) {
    let _ = std::io::stderr().write_all(text.as_bytes());
}

macro_rules! outln {
    ($($arg:tt)*) => { print_out(&format!("{}\n", format_args!($($arg)*))) };
}

macro_rules! errln {
    ($($arg:tt)*) => { err(&format!("{}\n", format_args!($($arg)*))) };
}

fn main() -> ExitCode {
    huge_pages_off();
    let cli = Cli::parse();
    // What a command says before it starts (which key goes to which host, notes on the
    // scenario) goes to stderr, printable characters only.
    hearsay_runtime::notice::set_sink(|line| {
        errln!("{}", hearsay_runtime::terminal::safe(line));
    });
    // While a terminal view is up, log lines would tear it: they wait in memory.
    let watching = matches!(
        cli.command,
        Command::Run { watch: true, .. } | Command::Watch { .. }
    );
    let held = init_tracing(watching);
    // One line per problem, however narrow the terminal: `file:line:col: message` must
    // stay greppable.
    let _ = miette::set_hook(Box::new(|_| {
        Box::new(miette::MietteHandlerOpts::new().wrap_lines(false).build())
    }));
    let code = dispatch(cli.command);
    if let Some(held) = held
        && let Ok(bytes) = held.lock()
    {
        let _ = std::io::stderr().write_all(&bytes);
    }
    code
}

fn needs_terminal() -> Option<ExitCode> {
    if std::io::stdout().is_terminal() {
        return None;
    }
    errln!("error: the terminal view needs a terminal (stdout is not one)");
    Some(ExitCode::from(2))
}

fn dispatch(command: Command) -> ExitCode {
    match command {
        Command::Run {
            scenario,
            seed,
            ticks,
            out,
            force,
            sets,
            watch,
            speed,
            engine,
        } => {
            let opts = RunOptions {
                scenario,
                seed,
                ticks,
                out,
                force,
                progress: if watch {
                    hearsay_runtime::terminal::Progress::Hidden
                } else {
                    engine.progress()
                },
                database_url: engine.database_url.clone(),
                pool_size: engine.pool_size,
                threads: engine.threads(),
                sets,
                no_preflight: engine.no_preflight,
            };
            if !watch {
                return finished(hearsay_runtime::run(&opts));
            }
            if let Some(code) = needs_terminal() {
                return code;
            }
            let view = hearsay_watch::ViewOptions {
                speed,
                paused: false,
            };
            finished(hearsay_watch::run_watched(opts, view))
        }
        Command::Watch {
            run_dir,
            speed,
            paused,
        } => {
            if let Some(code) = needs_terminal() {
                return code;
            }
            match hearsay_watch::watch_dir(&run_dir, hearsay_watch::ViewOptions { speed, paused }) {
                Ok(_) => ExitCode::SUCCESS,
                Err(e) => fail(e),
            }
        }
        Command::Report { run_dir, out } => {
            match hearsay_runtime::report::write_for_dir(&run_dir, out.as_deref()) {
                Ok(w) => {
                    outln!(
                        "wrote {} ({} KB in {:.2} s)",
                        w.path.display(),
                        w.bytes.div_ceil(1024),
                        w.seconds
                    );
                    ExitCode::SUCCESS
                }
                Err(e) => fail(e),
            }
        }
        Command::Export {
            run_dir,
            format,
            out,
            vectors,
            force,
            schema,
            database_url,
        } => {
            if schema {
                outln!("{}", hearsay_export::schema_markdown().trim_end());
                return ExitCode::SUCCESS;
            }
            let Some(dir) = run_dir else {
                return fail(hearsay_runtime::RunError::BadOption(
                    "give the run directory to export".into(),
                ));
            };
            // RUN_DIR-export beside the run, however the run was spelled (`.`, `run/`).
            let out = out.unwrap_or_else(|| {
                let real = dir.canonicalize().unwrap_or_else(|_| dir.clone());
                let mut name = real.file_name().unwrap_or_default().to_os_string();
                name.push("-export");
                real.with_file_name(name)
            });
            let opts = hearsay_export::ExportOptions {
                dir,
                database_url,
                format: match format {
                    cli::ExportFormat::Parquet => hearsay_export::Format::Parquet,
                    cli::ExportFormat::Csv => hearsay_export::Format::Csv,
                },
                out,
                vectors,
                force,
            };
            match hearsay_export::export(&opts) {
                Ok(written) => {
                    for w in &written {
                        outln!(
                            "{:<9} {:>9} rows {:>9} KB  {}",
                            w.table,
                            w.rows,
                            w.bytes.div_ceil(1024),
                            w.path.display()
                        );
                    }
                    ExitCode::SUCCESS
                }
                Err(e) => fail(e),
            }
        }
        Command::Ask {
            run_dir,
            npc,
            at_tick,
            question,
            json,
            database_url,
        } => {
            let opts = hearsay_runtime::AskOptions {
                dir: run_dir,
                npc,
                question,
                at_tick,
                database_url,
            };
            match hearsay_runtime::ask(&opts) {
                Ok(a) if json => {
                    outln!("{}", serde_json::to_string_pretty(&a).unwrap_or_default());
                    ExitCode::SUCCESS
                }
                Ok(a) => {
                    print_out(&hearsay_runtime::ask::render(&a));
                    ExitCode::SUCCESS
                }
                Err(e) => fail(e),
            }
        }
        Command::Sweep {
            scenario,
            seeds,
            sets,
            jobs,
            ticks,
            shard,
            collect,
            sweep_name,
            out,
            force,
            engine,
        } => {
            let outcome = match (scenario, collect) {
                (_, Some(dirs)) => {
                    let shards = if dirs.is_empty() {
                        match (engine.database_url.clone(), sweep_name) {
                            (Some(url), Some(name)) => {
                                hearsay_runtime::sweep::Shards::Database { url, name }
                            }
                            _ => {
                                return fail(RunError::BadOption(
                                    "--collect: give the shards' directories, or --database-url URL and --sweep NAME for shards recorded in PostgreSQL".into(),
                                ));
                            }
                        }
                    } else {
                        hearsay_runtime::sweep::Shards::Dirs(dirs)
                    };
                    hearsay_runtime::sweep::collect(&hearsay_runtime::sweep::CollectOptions {
                        shards,
                        out,
                        force,
                    })
                }
                (Some(scenario), None) => {
                    let seeds = match hearsay_runtime::sweep::parse_seeds(
                        seeds.as_deref().unwrap_or_default(),
                    ) {
                        Ok(s) => s,
                        Err(e) => return fail(e),
                    };
                    let shard = match shard
                        .map(|s| {
                            hearsay_runtime::sweep::Shard::parse(&s, &|var| std::env::var(var).ok())
                        })
                        .transpose()
                    {
                        Ok(s) => s,
                        Err(e) => return fail(e),
                    };
                    let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
                    hearsay_runtime::sweep(&hearsay_runtime::SweepOptions {
                        scenario,
                        seeds,
                        sets,
                        jobs: jobs.map_or(cores, usize::from),
                        out,
                        ticks,
                        force,
                        database_url: engine.database_url.clone(),
                        pool_size: engine.pool_size,
                        shard,
                        record_as: sweep_name,
                        progress: engine.progress(),
                        no_preflight: engine.no_preflight,
                    })
                }
                (None, None) => Err(RunError::BadOption("give a scenario, or --collect".into())),
            };
            match outcome {
                Ok(outcome) => {
                    print_out(&hearsay_runtime::sweep::table(&outcome.report));
                    let t = &outcome.timing;
                    let file = if outcome.report.shard.is_some() {
                        hearsay_runtime::sweep::SHARD_FILE
                    } else {
                        hearsay_runtime::sweep::SWEEP_FILE
                    };
                    errln!(
                        "{} runs in {:.1} s with {} jobs: {:.1} runs per minute; {}/{file}",
                        outcome.report.runs.len(),
                        t.wall_ms / 1000.0,
                        t.jobs,
                        t.runs_per_minute,
                        outcome.out.display()
                    );
                    if outcome.report.failures() > 0 {
                        ExitCode::from(1)
                    } else {
                        ExitCode::SUCCESS
                    }
                }
                Err(e) => fail(e),
            }
        }
        Command::Backfill {
            run_dir,
            run_id,
            stall_s,
            database_url,
        } => {
            let runtime = match tokio::runtime::Builder::new_multi_thread()
                .enable_all()
                .build()
            {
                Ok(r) => r,
                Err(e) => {
                    return fail(RunError::BadOption(format!(
                        "cannot start the async runtime: {e}"
                    )));
                }
            };
            let done = runtime.block_on(async {
                let source = match (&run_dir, run_id, &database_url) {
                    (Some(dir), None, url) => RunSource::open_dir(dir, url.as_deref())?,
                    (None, Some(id), Some(url)) => RunSource::open_postgres(url, id).await?,
                    (None, Some(_), None) => return Err(RunError::NoDatabaseUrl),
                    (Some(_), Some(_), _) => {
                        return Err(RunError::BadOption(
                            "give a run directory or --run RUN_ID, not both".into(),
                        ));
                    }
                    (None, None, _) => {
                        return Err(RunError::BadOption(
                            "give a run directory, or --database-url URL --run RUN_ID".into(),
                        ));
                    }
                };
                let done = hearsay_runtime::annex::backfill(
                    &source,
                    std::time::Duration::from_secs(stall_s),
                )
                .await?;
                Ok((source.label, done))
            });
            match done {
                Ok((label, done)) => {
                    print_out(&format!(
                        "{label}: embedded {} memories ({} texts, {} failed calls); none is left without an embedding\n",
                        done.embedded, done.texts, done.failures
                    ));
                    ExitCode::SUCCESS
                }
                Err(e) => fail(e),
            }
        }
        Command::Mcp {
            run_dir,
            run_id,
            allow_writes,
            database_url,
        } => {
            let served = hearsay_mcp::serve_stdio(
                |runtime| match (&run_dir, run_id, &database_url) {
                    (Some(dir), None, url) => RunSource::open_dir(dir, url.as_deref()),
                    (None, Some(id), Some(url)) => {
                        runtime.block_on(RunSource::open_postgres(url, id))
                    }
                    (None, Some(_), None) => Err(RunError::NoDatabaseUrl),
                    (Some(_), Some(_), _) => Err(RunError::BadOption(
                        "give a run directory or --run RUN_ID, not both".into(),
                    )),
                    (None, None, _) => Err(RunError::BadOption(
                        "hearsay mcp RUN_DIR, or hearsay mcp --database-url URL --run RUN_ID"
                            .into(),
                    )),
                },
                allow_writes,
            );
            match served {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => fail(e),
            }
        }
        Command::Check { scenario, sets } => {
            let opts = RunOptions {
                scenario,
                sets,
                ..RunOptions::default()
            };
            match hearsay_runtime::run::check(&opts) {
                Ok(report) if report.brains.is_empty() && report.embedder.is_none() => {
                    outln!("ok: no model server to check (offline brains and embedder)");
                    ExitCode::SUCCESS
                }
                Ok(report) => {
                    for line in report.lines() {
                        outln!("ok: {line}");
                    }
                    ExitCode::SUCCESS
                }
                Err(e) => fail(e),
            }
        }
        Command::Validate { scenario } => match hearsay_runtime::validate::validate(&scenario) {
            Ok(v) => {
                let s = &v.scenario;
                outln!(
                    "ok: {} is valid: {:?}, {} NPCs, {} places, {} events, {} facts, {} expectations, {} ticks",
                    v.path.display(),
                    s.name,
                    s.npcs.len(),
                    s.places.len(),
                    s.events.len(),
                    s.facts.len(),
                    s.expectations.len(),
                    s.ticks
                );
                for note in &s.notes {
                    outln!("{note}");
                }
                if v.network.is_empty() {
                    outln!("network: none (offline brains and embedder)");
                }
                for line in &v.network {
                    outln!("network: {line}");
                }
                for (until, diff) in &v.stages {
                    outln!(
                        "ticks before {until} ran under an earlier scenario (kept in run.json); it differs from scenario.toml:"
                    );
                    for line in diff {
                        outln!("  {line}");
                    }
                }
                match v.refused.into_iter().next() {
                    // Valid, but this machine would refuse to run it: say so, like `run`.
                    Some(refused) => fail(RunError::KeyRefused(refused)),
                    None => ExitCode::SUCCESS,
                }
            }
            Err(e) => fail(e),
        },
        Command::Replay { run_dir } => match hearsay_runtime::replay(&run_dir) {
            Ok(report) => match report.divergence {
                None => {
                    use hearsay_runtime::spread::SpreadCheck;
                    outln!("identical: {} ticks", report.ticks);
                    match &report.spread {
                        SpreadCheck::NoMeaning => ExitCode::SUCCESS,
                        SpreadCheck::Same(n) => {
                            outln!(
                                "facts by meaning: the same {n} learned lines, decided again from the run directory"
                            );
                            ExitCode::SUCCESS
                        }
                        SpreadCheck::Unchecked(why) => {
                            outln!("facts by meaning: not decided again: {why}");
                            ExitCode::SUCCESS
                        }
                        SpreadCheck::Differs(what) => {
                            outln!("facts by meaning differ: {what}");
                            ExitCode::from(1)
                        }
                    }
                }
                Some(d) => {
                    outln!("diverged at tick {}: {}", d.tick, d.what);
                    for line in &d.expected {
                        outln!("  - recorded: {line}");
                    }
                    for line in &d.replayed {
                        outln!("  + replayed: {line}");
                    }
                    outln!("({} ticks identical before it)", report.ticks);
                    if let Some(edited) = &d.edited {
                        outln!("{edited}");
                    }
                    ExitCode::from(1)
                }
            },
            Err(e) => fail(e),
        },
        Command::Resume { run_dir, engine } => {
            let opts = ResumeOptions {
                dir: run_dir,
                progress: engine.progress(),
                database_url: engine.database_url.clone(),
                pool_size: engine.pool_size,
                threads: engine.threads(),
                no_preflight: engine.no_preflight,
            };
            finished(hearsay_runtime::resume(&opts))
        }
        Command::Fork {
            run_dir,
            at_tick,
            out,
            force,
            seed,
            sets,
            engine,
        } => {
            let opts = ForkOptions {
                dir: run_dir,
                at_tick,
                out,
                force,
                seed,
                sets,
                progress: engine.progress(),
                database_url: engine.database_url.clone(),
                pool_size: engine.pool_size,
                threads: engine.threads(),
                no_preflight: engine.no_preflight,
            };
            finished(hearsay_runtime::fork(&opts))
        }
        Command::Trace { run_dir, fact, npc } => {
            match hearsay_runtime::trace::trace(&run_dir, &fact, npc.as_deref()) {
                Ok(text) => {
                    print_out(&text);
                    ExitCode::SUCCESS
                }
                Err(e) => fail(e),
            }
        }
        Command::Inspect {
            run_dir,
            npc,
            query,
            at_tick,
            all,
            thinking,
            json,
            database_url,
        } => {
            let opts = hearsay_runtime::InspectOptions {
                dir: run_dir.clone(),
                npc,
                query,
                at_tick,
                all,
                thinking,
                database_url,
            };
            match hearsay_runtime::inspect(&opts) {
                Ok(r) if json => {
                    outln!("{}", serde_json::to_string_pretty(&r).unwrap_or_default());
                    ExitCode::SUCCESS
                }
                Ok(r) => {
                    print_out(&hearsay_runtime::inspect::table(&r, &run_dir));
                    ExitCode::SUCCESS
                }
                Err(e) => fail(e),
            }
        }
    }
}

/// Prints how a run ended; exit 3 when an expectation was not met.
fn finished(result: Result<hearsay_runtime::RunOutcome, RunError>) -> ExitCode {
    match result {
        Ok(outcome) => {
            if let Some(next) = outcome.stopped_at {
                outln!(
                    "stopped before tick {next} of {}: `hearsay resume {}` finishes the run",
                    outcome.summary.ticks,
                    outcome.dir.display()
                );
                return ExitCode::SUCCESS;
            }
            if outcome.started_at > 0 {
                outln!("(continued from tick {})", outcome.started_at);
            }
            print_out(&summary::render(&outcome.summary));
            outln!(
                "report: {}",
                outcome
                    .dir
                    .join(hearsay_runtime::report::REPORT_FILE)
                    .display()
            );
            let unmet = outcome
                .summary
                .expectations
                .iter()
                .any(|j| j.verdict == Verdict::Unmet);
            if unmet {
                ExitCode::from(3)
            } else {
                ExitCode::SUCCESS
            }
        }
        Err(e) => fail(e),
    }
}

fn fail(error: RunError) -> ExitCode {
    let code = if error.is_bad_input() { 2 } else { 1 };
    let hint = if error.is_disk_full() {
        Some(
            "the disk holding the run directory is full; the store is intact up to the last \
             committed tick. Free some space, then `hearsay resume RUN_DIR` finishes the run.",
        )
    } else if error.is_memory_low() {
        Some(
            "memory ran low, so the run stopped between two ticks with everything before them \
             committed; `hearsay resume RUN_DIR` continues it once memory is free (or on a \
             bigger machine). Lower [world] max_listeners, the NPCs or the ticks to bound what \
             a run can hold.",
        )
    } else if error.is_damaged_store() {
        Some(
            "the run's memory store cannot be used. `hearsay replay RUN_DIR` still checks the \
             run against its event log and tape (it needs no store); running its scenario again \
             with the same seed into a new directory rebuilds the memories (identically with \
             offline brains).",
        )
    } else {
        None
    };
    match error {
        // Each problem of a scenario gets its own report, pointing into the file.
        RunError::Scenario(scenario::ScenarioError::Invalid { path, problems }) => {
            let n = problems.len();
            for problem in problems {
                errln!("{:?}", miette::Report::new(problem));
            }
            let plural = if n == 1 { "" } else { "s" };
            errln!("error: {path} is not a valid scenario ({n} problem{plural}); nothing was run");
        }
        other => errln!("{:?}", miette::Report::new(Unrepeated(other))),
    }
    if let Some(hint) = hint {
        errln!("hint: {hint}");
    }
    ExitCode::from(code)
}

/// An error shown without the causes its own message already quotes ("cannot write X:
/// No such file" is not followed by "╰─▶ No such file"); everything else is the error's.
#[derive(Debug)]
struct Unrepeated(RunError);

impl std::fmt::Display for Unrepeated {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

impl std::error::Error for Unrepeated {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        let message = self.0.to_string();
        let mut cause = std::error::Error::source(&self.0);
        while let Some(c) = cause {
            if !message.contains(&c.to_string()) {
                return Some(c);
            }
            cause = c.source();
        }
        None
    }
}

impl miette::Diagnostic for Unrepeated {
    fn code<'a>(&'a self) -> Option<Box<dyn std::fmt::Display + 'a>> {
        self.0.code()
    }
    fn help<'a>(&'a self) -> Option<Box<dyn std::fmt::Display + 'a>> {
        self.0.help()
    }
    fn url<'a>(&'a self) -> Option<Box<dyn std::fmt::Display + 'a>> {
        self.0.url()
    }
    fn source_code(&self) -> Option<&dyn miette::SourceCode> {
        self.0.source_code()
    }
    fn labels(&self) -> Option<Box<dyn Iterator<Item = miette::LabeledSpan> + '_>> {
        self.0.labels()
    }
}

/// Log lines held in memory while a terminal view is up.
#[derive(Clone)]
struct Held(Arc<Mutex<Vec<u8>>>);

impl Write for Held {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if let Ok(mut held) = self.0.lock() {
            held.extend_from_slice(buf);
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Logs go to stderr, filtered by `RUST_LOG` (default: hearsay's warnings and errors, and
/// only errors from sqlx, whose slow-query warnings are hearsay's business to report, and
/// from rmcp, which warns of every error answer it sends) —
/// or, with `hold`, into memory until the view is gone (returned, to be printed then).
fn init_tracing(hold: bool) -> Option<Arc<Mutex<Vec<u8>>>> {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn,sqlx=error,rmcp=error"));
    let builder = tracing_subscriber::fmt().with_env_filter(filter);
    if hold {
        let held = Held(Arc::new(Mutex::new(Vec::new())));
        let buffer = held.0.clone();
        builder
            .with_writer(move || held.clone())
            .with_ansi(false)
            .init();
        Some(buffer)
    } else {
        builder
            .with_writer(std::io::stderr)
            .with_ansi(std::io::stderr().is_terminal())
            .init();
        None
    }
}
