//! `hearsay export`: the tables say what the run directory says — `events.csv` is
//! `events.jsonl` line for line, `memories.csv` the store's rows, `calls.csv` the tape,
//! `knowers.csv` the summary's knowers, `ticks.csv` the tick lines' hashes and the
//! summary's per-tick phases; Parquet files are Parquet (magic bytes at both ends, a footer
//! naming the columns) and `vectors` comes only with `--vectors`. The export never writes
//! where it may not: a directory hearsay did not make, an earlier export without `--force`,
//! the run it reads (or anything inside or above it), another run are all refused (exit 2)
//! and left byte-for-byte as they were; a failed export (of something that is not a run,
//! or one whose write fails half-way) leaves no directory and no half-written file behind;
//! the default directory is the run's sibling `NAME-export`; `--schema` prints every table.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use hearsay_tests::{
    assert_untouched, bin, hearsay, path_str, read_jsonl, root, run_ok, scenario, snapshot,
    sqlite_rows, summary,
};
use serde_json::Value;
use sqlx::Row;

/// The tables every export writes, in the order it prints them.
const TABLES: [&str; 6] = ["npcs", "events", "memories", "knowers", "calls", "ticks"];

/// The ticks of the fish-market run every test exports.
const TICKS: usize = 60;

/// A finished fish-market run of [`TICKS`] ticks in `dir/run`.
fn market(dir: &Path) -> PathBuf {
    let run = dir.join("run");
    run_ok(
        &scenario("fish-market.toml"),
        &run,
        &["--ticks", &TICKS.to_string(), "--no-progress"],
    );
    run
}

fn said(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// `hearsay export ARGS` in `cwd`.
fn export(cwd: &Path, args: &[&str]) -> Output {
    let mut all = vec!["export"];
    all.extend_from_slice(args);
    hearsay(cwd, &all)
}

/// One line of what `hearsay export` prints: `name rows rows KB KB path`.
#[derive(Debug)]
struct Line {
    table: String,
    rows: u64,
    path: PathBuf,
}

/// `hearsay export ARGS` in `cwd`, which must succeed; the tables it says it wrote (paths
/// as printed, joined to `cwd` when relative).
fn export_ok(cwd: &Path, args: &[&str]) -> Vec<Line> {
    let o = export(cwd, args);
    assert!(
        o.status.success(),
        "hearsay export {} failed with {:?}:\n{}",
        args.join(" "),
        o.status.code(),
        said(&o)
    );
    String::from_utf8_lossy(&o.stdout)
        .lines()
        .map(|line| {
            let words: Vec<&str> = line.split_whitespace().collect();
            assert!(
                words.len() >= 6 && words[2] == "rows" && words[4] == "KB",
                "a line per table, `name N rows N KB path`: {line:?}"
            );
            let (_, path) = line
                .split_once(" KB  ")
                .unwrap_or_else(|| panic!("the path follows ` KB  `: {line:?}"));
            Line {
                table: words[0].to_owned(),
                rows: words[1]
                    .parse()
                    .unwrap_or_else(|e| panic!("{line:?}: rows: {e}")),
                path: cwd.join(path),
            }
        })
        .collect()
}

/// `hearsay export ARGS` in `cwd` is refused (exit 2, naming `out`), and nothing under
/// `watched` changed.
fn refused(cwd: &Path, args: &[&str], out: &str, watched: &Path) -> String {
    let before = snapshot(watched);
    let o = export(cwd, args);
    assert_eq!(o.status.code(), Some(2), "export {args:?}: {}", said(&o));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains(out),
        "export {args:?}: the error names {out:?}: {}",
        said(&o)
    );
    assert_untouched(&before, &snapshot(watched), &format!("export {args:?}"));
    said(&o)
}

/// The names in `dir`, sorted.
fn names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("list {}: {e}", dir.display()))
        .map(|e| {
            e.expect("a directory entry")
                .file_name()
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    names.sort();
    names
}

/// `.hearsay` and `TABLE.EXT` for each table: what an export directory holds.
fn export_files(tables: &[&str], ext: &str) -> Vec<String> {
    let mut files: Vec<String> = tables.iter().map(|t| format!("{t}.{ext}")).collect();
    files.push(".hearsay".into());
    files.sort();
    files
}

/// The `kind` of the marker in `dir`.
fn marker_kind(dir: &Path) -> String {
    let text = std::fs::read_to_string(dir.join(".hearsay")).expect("the directory is marked");
    let marker: Value = serde_json::from_str(&text).expect("the marker is JSON");
    marker["kind"]
        .as_str()
        .expect("the marker has a kind")
        .to_owned()
}

/// A CSV file: its header and its rows, each as column → field.
fn read_csv(path: &Path) -> (Vec<String>, Vec<BTreeMap<String, String>>) {
    let mut reader =
        csv::Reader::from_path(path).unwrap_or_else(|e| panic!("open {}: {e}", path.display()));
    let header: Vec<String> = reader
        .headers()
        .unwrap_or_else(|e| panic!("{}: header: {e}", path.display()))
        .iter()
        .map(str::to_owned)
        .collect();
    let rows = reader
        .records()
        .enumerate()
        .map(|(i, record)| {
            let record = record.unwrap_or_else(|e| panic!("{}: row {}: {e}", path.display(), i));
            assert_eq!(
                record.len(),
                header.len(),
                "{} row {i}: a field per column",
                path.display()
            );
            header
                .iter()
                .cloned()
                .zip(record.iter().map(str::to_owned))
                .collect()
        })
        .collect();
    (header, rows)
}

/// A CSV field as JSON would give it: a null is an empty field, a number or a string its
/// text.
fn field(v: &Value) -> String {
    match v {
        Value::Null => String::new(),
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

fn cell<'a>(row: &'a BTreeMap<String, String>, column: &str) -> &'a str {
    row.get(column)
        .unwrap_or_else(|| panic!("no column {column:?} in {row:?}"))
}

#[test]
fn csv_tables_say_what_the_run_directory_says() {
    let dir = tempfile::tempdir().expect("tempdir");
    let run = market(dir.path());
    let out = dir.path().join("tables");
    let lines = export_ok(
        &root(),
        &[path_str(&run), "--format", "csv", "--out", path_str(&out)],
    );
    let printed: Vec<&str> = lines.iter().map(|l| l.table.as_str()).collect();
    assert_eq!(printed, TABLES, "a line per table, in table order");
    assert_eq!(
        names(&out),
        export_files(&TABLES, "csv"),
        "the tables and the marker, nothing else (no vectors, no temporary file)"
    );
    assert_eq!(marker_kind(&out), "export");
    let mut tables = BTreeMap::new();
    for line in &lines {
        assert_eq!(line.path, out.join(format!("{}.csv", line.table)));
        let (header, rows) = read_csv(&line.path);
        assert_eq!(
            line.rows,
            rows.len() as u64,
            "{}: the rows printed are the rows written",
            line.table
        );
        tables.insert(line.table.clone(), (header, rows));
    }
    let rows = |t: &str| &tables[t].1;

    // events: one row per line of events.jsonl, in file order.
    let events = read_jsonl(&run.join("events.jsonl"));
    assert_eq!(rows("events").len(), events.len(), "a row per line");
    for (i, (row, event)) in rows("events").iter().zip(&events).enumerate() {
        let at = format!("events.jsonl line {}", i + 1);
        assert_eq!(cell(row, "seq"), (i + 1).to_string(), "{at}");
        assert_eq!(cell(row, "tick"), field(&event["tick"]), "{at}");
        assert_eq!(cell(row, "type"), field(&event["type"]), "{at}");
        assert_eq!(cell(row, "npc"), field(&event["npc"]), "{at}");
        match event["type"].as_str() {
            Some("memory") => {
                assert_eq!(cell(row, "memory"), field(&event["id"]), "{at}");
                assert_eq!(cell(row, "content"), field(&event["content"]), "{at}");
                assert_eq!(cell(row, "kind"), field(&event["kind"]), "{at}");
            }
            Some("tick") => assert_eq!(cell(row, "hash"), field(&event["hash"]), "{at}"),
            Some("move") => {
                assert_eq!(cell(row, "x"), field(&event["to"][0]), "{at}");
                assert_eq!(cell(row, "from_y"), field(&event["from"][1]), "{at}");
            }
            _ => assert_eq!(cell(row, "hash"), "", "{at}: only a tick line has a hash"),
        }
    }

    // memories: one row per row of the store's memories table, by id.
    let stored = sqlite_rows(
        &run.join("memories.db"),
        "SELECT id, npc_name, kind, content FROM memories ORDER BY id",
    );
    assert!(!stored.is_empty(), "the run remembered something");
    assert_eq!(rows("memories").len(), stored.len(), "a row per memory");
    for (row, m) in rows("memories").iter().zip(&stored) {
        let id: i64 = m.get("id");
        assert_eq!(cell(row, "id"), id.to_string());
        assert_eq!(
            cell(row, "npc"),
            m.get::<String, _>("npc_name"),
            "memory {id}"
        );
        assert_eq!(cell(row, "kind"), m.get::<String, _>("kind"), "memory {id}");
        assert_eq!(
            cell(row, "content"),
            m.get::<String, _>("content"),
            "memory {id}"
        );
    }

    // npcs: the spawn lines' NPCs in scenario order, each with its memories counted.
    let spawned: Vec<String> = events
        .iter()
        .filter(|e| e["type"] == "spawn")
        .map(|e| field(&e["npc"]))
        .collect();
    let listed: Vec<&str> = rows("npcs").iter().map(|r| cell(r, "npc")).collect();
    assert_eq!(listed, spawned);
    for row in rows("npcs") {
        let held = stored
            .iter()
            .filter(|m| m.get::<String, _>("npc_name") == cell(row, "npc"))
            .count();
        assert_eq!(cell(row, "memories"), held.to_string(), "{row:?}");
    }

    // calls: one row per line of llm.jsonl.
    let tape = read_jsonl(&run.join("llm.jsonl"));
    assert_eq!(
        rows("calls").len(),
        tape.len(),
        "a row per call on the tape"
    );
    for (i, (row, call)) in rows("calls").iter().zip(&tape).enumerate() {
        let at = format!("llm.jsonl line {}", i + 1);
        assert_eq!(cell(row, "tick"), field(&call["tick"]), "{at}");
        assert_eq!(cell(row, "npc"), field(&call["npc"]), "{at}");
        assert_eq!(cell(row, "request"), field(&call["request"]), "{at}");
        assert_eq!(
            cell(row, "action"),
            field(&call["decision"]["action"]),
            "{at}"
        );
    }

    // knowers: summary.json's facts[].knowers.
    let s = summary(&run);
    let knowers: Vec<[String; 4]> = s["facts"]
        .as_array()
        .expect("summary.json has facts")
        .iter()
        .flat_map(|f| {
            let fact = field(&f["name"]);
            f["knowers"]
                .as_array()
                .expect("a fact has knowers")
                .iter()
                .map(move |k| {
                    [
                        fact.clone(),
                        field(&k["npc"]),
                        field(&k["tick"]),
                        field(&k["from"]),
                    ]
                })
        })
        .collect();
    assert!(!knowers.is_empty(), "the rumour reached someone");
    let exported: Vec<[String; 4]> = rows("knowers")
        .iter()
        .map(|r| ["fact", "npc", "tick", "from"].map(|c| cell(r, c).to_owned()))
        .collect();
    assert_eq!(exported, knowers);

    // ticks: one row per completed tick, its hash the tick line's, its phases the
    // summary's per-tick timing.
    let tick_lines: Vec<&Value> = events.iter().filter(|e| e["type"] == "tick").collect();
    assert_eq!(tick_lines.len(), TICKS);
    assert_eq!(rows("ticks").len(), TICKS, "a row per completed tick");
    let per_tick = &s["timing"]["per_tick"];
    let first = per_tick["first_tick"]
        .as_u64()
        .expect("summary.json has timing.per_tick");
    for (row, line) in rows("ticks").iter().zip(&tick_lines) {
        let tick = line["tick"].as_u64().expect("a tick line's tick");
        assert_eq!(cell(row, "tick"), tick.to_string());
        assert_eq!(cell(row, "hash"), field(&line["hash"]), "tick {tick}");
        let perceive = cell(row, "perceive_ms");
        assert!(!perceive.is_empty(), "tick {tick}: perceive_ms is timed");
        let perceive: f64 = perceive
            .parse()
            .unwrap_or_else(|e| panic!("tick {tick}: perceive_ms {perceive:?}: {e}"));
        let timed = per_tick["perceive"][(tick - first) as usize]
            .as_f64()
            .expect("a perceive time per tick");
        assert_eq!(perceive, timed, "tick {tick}: the summary's perceive time");
        let logged = events
            .iter()
            .filter(|e| e["tick"] == tick && e["type"] != "tick")
            .count();
        assert_eq!(cell(row, "events"), logged.to_string(), "tick {tick}");
    }
    // Each phase's CPU time (the whole process's): the phases of `phases_ms` without
    // their persist parts, over disjoint stretches of the tick loop, so together no more
    // than the process's CPU time over the loop.
    let cpu = s["timing"]["phases_cpu_ms"]
        .as_object()
        .expect("summary.json has timing.phases_cpu_ms");
    let phases: Vec<&str> = cpu.keys().map(String::as_str).collect();
    assert_eq!(phases, ["act", "barrier", "perceive", "persist", "think"]);
    let in_phases: f64 = cpu.values().map(|v| v.as_f64().unwrap_or(-1.0)).sum();
    let in_loop = s["timing"]["cpu_ms_per_tick"]
        .as_f64()
        .expect("cpu_ms_per_tick")
        * TICKS as f64;
    assert!(
        cpu.values().all(|v| v.as_f64().is_some_and(|ms| ms >= 0.0)) && in_phases > 0.0,
        "{cpu:?}"
    );
    assert!(
        in_phases <= in_loop * 1.000_001 + 1e-3,
        "phases {in_phases} ms of CPU, the loop {in_loop}"
    );
    println!(
        "figure: CSV export of a {TICKS}-tick fish-market run: {} events, {} memories, {} calls, {} knowers, {} ticks, each equal to the run's own files",
        events.len(),
        stored.len(),
        tape.len(),
        knowers.len(),
        TICKS
    );
}

/// Whether `bytes` is a whole Parquet file: `PAR1` at both ends, and the 4-byte length
/// before the closing magic a footer that fits the file. Returns the footer.
fn parquet_footer<'a>(path: &Path, bytes: &'a [u8]) -> &'a [u8] {
    let n = bytes.len();
    assert!(n >= 12, "{}: {n} bytes is no Parquet file", path.display());
    assert_eq!(&bytes[..4], b"PAR1", "{}: starts with PAR1", path.display());
    assert_eq!(
        &bytes[n - 4..],
        b"PAR1",
        "{}: ends with PAR1",
        path.display()
    );
    let len = u32::from_le_bytes(bytes[n - 8..n - 4].try_into().expect("4 bytes")) as usize;
    assert!(
        len > 0 && len + 12 <= n,
        "{}: a footer of {len} bytes in a file of {n}",
        path.display()
    );
    &bytes[n - 8 - len..n - 8]
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

#[test]
fn parquet_files_are_parquet_and_vectors_come_only_when_asked() {
    let dir = tempfile::tempdir().expect("tempdir");
    let run = market(dir.path());
    let r = path_str(&run);
    let csv_out = dir.path().join("csv");
    let csv_rows: BTreeMap<String, u64> = export_ok(
        &root(),
        &[r, "--format", "csv", "--out", path_str(&csv_out)],
    )
    .into_iter()
    .map(|l| (l.table, l.rows))
    .collect();

    let plain = dir.path().join("plain");
    let lines = export_ok(&root(), &[r, "--out", path_str(&plain)]);
    let printed: Vec<&str> = lines.iter().map(|l| l.table.as_str()).collect();
    assert_eq!(
        printed, TABLES,
        "Parquet is the default; no vectors unasked"
    );
    assert_eq!(names(&plain), export_files(&TABLES, "parquet"));
    for line in &lines {
        assert_eq!(line.path, plain.join(format!("{}.parquet", line.table)));
        let bytes = std::fs::read(&line.path).expect("the table's file");
        let footer = parquet_footer(&line.path, &bytes);
        assert!(
            contains(footer, b"hearsay"),
            "{}: created by hearsay",
            line.table
        );
        assert_eq!(
            Some(&line.rows),
            csv_rows.get(&line.table),
            "{}: the rows of the CSV export",
            line.table
        );
        // Every column of the CSV header is named in the Parquet schema.
        let (header, _) = read_csv(&csv_out.join(format!("{}.csv", line.table)));
        for column in header {
            assert!(
                contains(footer, column.as_bytes()),
                "{}: the footer names column {column}",
                line.table
            );
        }
    }
    assert!(!plain.join("vectors.parquet").exists());

    let with = dir.path().join("with-vectors");
    let lines = export_ok(&root(), &[r, "--vectors", "--out", path_str(&with)]);
    let printed: Vec<&str> = lines.iter().map(|l| l.table.as_str()).collect();
    let mut expected = TABLES.to_vec();
    expected.insert(3, "vectors");
    assert_eq!(printed, expected, "vectors after memories");
    assert_eq!(names(&with), export_files(&expected, "parquet"));
    for line in &lines {
        let bytes = std::fs::read(&line.path).expect("the table's file");
        parquet_footer(&line.path, &bytes);
    }
    let chunks: i64 = sqlite_rows(
        &run.join("memories.db"),
        "SELECT COUNT(*) AS n FROM memory_vectors",
    )[0]
    .get("n");
    let vectors = lines
        .iter()
        .find(|l| l.table == "vectors")
        .expect("a vectors line");
    assert!(chunks > 0, "the run embedded its memories");
    assert_eq!(vectors.rows, chunks as u64, "a row per embedded chunk");
}

#[test]
fn a_directory_hearsay_did_not_make_is_never_written() {
    let dir = tempfile::tempdir().expect("tempdir");
    let run = market(dir.path());
    let r = path_str(&run);
    let mine = dir.path().join("mine");
    std::fs::create_dir(&mine).expect("mkdir");
    std::fs::write(mine.join("notes.txt"), "my notes").expect("write");
    let m = path_str(&mine);
    refused(&root(), &[r, "--out", m], m, dir.path());
    let said = refused(&root(), &[r, "--out", m, "--force"], m, dir.path());
    assert!(said.contains("no .hearsay marker"), "{said}");
    assert_eq!(
        std::fs::read_to_string(mine.join("notes.txt")).expect("notes.txt is still there"),
        "my notes"
    );
    assert_eq!(names(&mine), ["notes.txt"], "nothing was written beside it");

    // An export of hearsay's with a file of the user's added is not replaced either.
    let tables = dir.path().join("tables");
    let t = path_str(&tables);
    export_ok(&root(), &[r, "--out", t]);
    std::fs::write(tables.join("notes.txt"), "mine too").expect("write");
    let said = refused(&root(), &[r, "--out", t, "--force"], t, dir.path());
    assert!(
        said.contains("notes.txt"),
        "the error names the stranger: {said}"
    );
}

#[test]
fn a_second_export_needs_force_and_replaces_the_first() {
    let dir = tempfile::tempdir().expect("tempdir");
    let run = market(dir.path());
    let r = path_str(&run);
    let out = dir.path().join("tables");
    let o = path_str(&out);
    export_ok(&root(), &[r, "--format", "csv", "--out", o]);
    let first = std::fs::read_to_string(out.join(".hearsay")).expect("marker");
    let said = refused(&root(), &[r, "--out", o], o, dir.path());
    assert!(said.contains("pass --force"), "{said}");
    refused(&root(), &[r, "--format", "csv", "--out", o], o, dir.path());

    let lines = export_ok(&root(), &[r, "--out", o, "--force"]);
    assert_eq!(lines.len(), TABLES.len());
    assert_eq!(
        names(&out),
        export_files(&TABLES, "parquet"),
        "the CSV files replaced by the Parquet ones, the marker kept"
    );
    assert_eq!(marker_kind(&out), "export");
    let second = std::fs::read_to_string(out.join(".hearsay")).expect("marker");
    assert_ne!(first, second, "a fresh marker for the new export");
    for line in &lines {
        let bytes = std::fs::read(&line.path).expect("the table's file");
        parquet_footer(&line.path, &bytes);
    }
    // And back again, same format, same directory.
    export_ok(&root(), &[r, "--format", "csv", "--out", o, "--force"]);
    assert_eq!(names(&out), export_files(&TABLES, "csv"));
}

#[test]
fn never_into_the_run_it_reads() {
    let dir = tempfile::tempdir().expect("tempdir");
    let run = market(dir.path());
    let r = path_str(&run);
    let files = names(&run);
    let log = hearsay_tests::log_bytes(run.join("events.jsonl")).expect("events.jsonl");
    let inner = run.join("inner");
    let i = path_str(&inner);
    let above = path_str(dir.path());
    for args in [
        vec![r, "--out", r],
        vec![r, "--out", r, "--force"],
        vec![r, "--out", i],
        vec![r, "--out", i, "--force", "--format", "csv"],
        vec![r, "--out", above, "--force"],
    ] {
        let out = args[2];
        refused(&root(), &args, out, dir.path());
        assert_eq!(names(&run), files, "export {args:?}: the run's files");
        assert_eq!(
            hearsay_tests::log_bytes(run.join("events.jsonl")).expect("events.jsonl"),
            log,
            "export {args:?}: events.jsonl"
        );
    }
    assert!(!inner.exists());
    // The same run through another spelling: relative, from inside it.
    refused(&run, &[".", "--out", "inner"], "inner", dir.path());
    refused(&run, &["../run", "--out", ".", "--force"], ".", dir.path());
}

#[test]
fn force_never_replaces_a_run() {
    let dir = tempfile::tempdir().expect("tempdir");
    let run = market(dir.path());
    let other = dir.path().join("other");
    run_ok(
        &scenario("fish-market.toml"),
        &other,
        &["--ticks", "5", "--no-progress"],
    );
    let files = names(&other);
    let log = hearsay_tests::log_bytes(other.join("events.jsonl")).expect("events.jsonl");
    let o = path_str(&other);
    refused(&root(), &[path_str(&run), "--out", o], o, dir.path());
    let said = refused(
        &root(),
        &[path_str(&run), "--out", o, "--force"],
        o,
        dir.path(),
    );
    assert!(said.contains("it is a hearsay run directory"), "{said}");
    assert_eq!(names(&other), files);
    assert_eq!(
        hearsay_tests::log_bytes(other.join("events.jsonl")).expect("events.jsonl"),
        log
    );
}

#[test]
fn a_failed_export_leaves_no_directory() {
    let dir = tempfile::tempdir().expect("tempdir");
    // A directory that is not a run.
    let notrun = dir.path().join("notrun");
    std::fs::create_dir(&notrun).expect("mkdir");
    std::fs::write(notrun.join("notes.txt"), "not a run").expect("write");
    let fresh = dir.path().join("fresh");
    refused(
        &root(),
        &[path_str(&notrun), "--out", path_str(&fresh)],
        "notrun",
        dir.path(),
    );
    assert!(
        !fresh.exists(),
        "no directory made for an export that failed"
    );
    refused(dir.path(), &["notrun"], "notrun", dir.path());
    assert!(!dir.path().join("notrun-export").exists());

    // A run whose store is gone: refused before anything is made, and the store is not
    // made again in the run directory.
    let run = market(dir.path());
    std::fs::remove_file(run.join("memories.db")).expect("rm memories.db");
    refused(
        &root(),
        &[path_str(&run), "--out", path_str(&fresh), "--force"],
        "memories.db",
        dir.path(),
    );
    assert!(
        !fresh.exists(),
        "no directory made for an export that failed"
    );
    assert!(!run.join("memories.db").exists());
}

/// The tables are read as they are written, not first: a tape found broken half-way
/// through stops the export with the tape's own refusal (its file and line), and no
/// table of it is left.
#[test]
fn a_run_found_broken_half_way_leaves_no_export() {
    let dir = tempfile::tempdir().expect("tempdir");
    let run = market(dir.path());
    let tape = hearsay_tests::log_bytes(run.join("llm.jsonl")).expect("the tape");
    let text = String::from_utf8(tape).expect("UTF-8");
    let mut lines: Vec<&str> = text.lines().collect();
    let broken = lines.len() / 2;
    lines.insert(broken, "not a brain call");
    std::fs::remove_file(run.join("llm.jsonl.zst")).expect("rm the tape");
    std::fs::write(run.join("llm.jsonl"), lines.join("\n") + "\n").expect("write the tape");
    let fresh = dir.path().join("fresh");
    let said = refused(
        &root(),
        &[path_str(&run), "--out", path_str(&fresh)],
        "llm.jsonl",
        dir.path(),
    );
    assert!(said.contains(&format!("line {}", broken + 1)), "{said}");
    assert!(
        !fresh.exists(),
        "no directory left by an export that failed"
    );
}

/// `hearsay export ARGS` in `cwd` with every file it writes limited to 36 KiB (`ulimit -f
/// 72`, in 512-byte blocks) and SIGXFSZ ignored, so a write past the limit fails with
/// EFBIG instead of killing the process: `events.csv` of a 60-tick run (about 45 KB)
/// cannot be written, the store's 32 KiB shared-memory index can.
fn export_limited(cwd: &Path, args: &[&str]) -> Output {
    Command::new("sh")
        .arg("-c")
        .arg("trap '' XFSZ; ulimit -f 72 && exec \"$0\" export \"$@\"")
        .arg(bin())
        .args(args)
        .current_dir(cwd)
        .env_remove("RUST_LOG")
        .output()
        .expect("sh starts")
}

/// `export_limited` fails writing `events.csv`, and nothing under `watched` changed.
fn fails_half_way(args: &[&str], watched: &Path) {
    let before = snapshot(watched);
    let o = export_limited(&root(), args);
    assert!(
        !o.status.success(),
        "export {args:?} succeeded: {}",
        said(&o)
    );
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("events.csv"),
        "export {args:?}: the error names the file it could not write: {}",
        said(&o)
    );
    assert_untouched(&before, &snapshot(watched), &format!("export {args:?}"));
}

#[test]
fn an_export_that_fails_half_way_leaves_nothing_half_written() {
    let dir = tempfile::tempdir().expect("tempdir");
    let run = market(dir.path());
    let r = path_str(&run);
    // A fresh directory: made, then removed again.
    let fresh = dir.path().join("fresh");
    fails_half_way(
        &[r, "--format", "csv", "--out", path_str(&fresh)],
        dir.path(),
    );
    assert!(
        !fresh.exists(),
        "no directory left by an export that failed"
    );
    // An empty directory of the user's: kept, empty.
    let empty = dir.path().join("empty");
    std::fs::create_dir(&empty).expect("mkdir");
    fails_half_way(
        &[r, "--format", "csv", "--out", path_str(&empty)],
        dir.path(),
    );
    assert_eq!(names(&empty), Vec::<String>::new());
    // Over an earlier export: no file of the failed one is left (no table, no temporary).
    let tables = dir.path().join("tables");
    let t = path_str(&tables);
    export_ok(&root(), &[r, "--out", t]);
    let o = export_limited(&root(), &[r, "--format", "csv", "--out", t, "--force"]);
    assert!(!o.status.success(), "{}", said(&o));
    let left = names(&tables);
    assert!(
        !left
            .iter()
            .any(|n| n.ends_with(".csv") || n.ends_with(".tmp")),
        "half an export left behind: {left:?}"
    );
}

#[test]
fn a_failed_export_removes_the_parents_it_made() {
    let dir = tempfile::tempdir().expect("tempdir");
    let run = market(dir.path());
    let nested = dir.path().join("a/b/c");
    fails_half_way(
        &[
            path_str(&run),
            "--format",
            "csv",
            "--out",
            path_str(&nested),
        ],
        dir.path(),
    );
}

#[test]
fn schema_prints_every_table() {
    let o = export(&root(), &["--schema"]);
    assert!(o.status.success(), "{}", said(&o));
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.contains("### `events`"), "{text}");
    for table in TABLES.iter().chain(&["vectors"]) {
        assert!(
            text.contains(&format!("### `{table}`")),
            "a section for {table}: {text}"
        );
    }
    assert!(
        text.contains("| column | type | null | what it holds |"),
        "{text}"
    );
    assert!(text.contains("| `hash` | string |"), "{text}");
    // --schema takes no other option.
    let dir = tempfile::tempdir().expect("tempdir");
    let o = export(dir.path(), &["--schema", "--out", "somewhere"]);
    assert_eq!(o.status.code(), Some(2), "{}", said(&o));
    assert!(!dir.path().join("somewhere").exists());
}

#[test]
fn the_default_directory_is_the_runs_sibling() {
    let dir = tempfile::tempdir().expect("tempdir");
    let run = market(dir.path());
    let sibling = dir.path().join("run-export");
    let lines = export_ok(&root(), &[path_str(&run)]);
    assert_eq!(names(&sibling), export_files(&TABLES, "parquet"));
    for line in &lines {
        assert_eq!(line.path.parent(), Some(sibling.as_path()), "{line:?}");
    }
    // Relative, with a trailing slash, from beside it: the same sibling, replaced.
    let lines = export_ok(dir.path(), &["run/", "--format", "csv", "--force"]);
    assert_eq!(names(&sibling), export_files(&TABLES, "csv"));
    for line in &lines {
        assert_eq!(
            std::fs::canonicalize(&line.path).expect("the printed path exists"),
            std::fs::canonicalize(sibling.join(format!("{}.csv", line.table)))
                .expect("the table is in the sibling")
        );
    }
    assert_eq!(
        names(dir.path()),
        ["run", "run-export"],
        "nothing else was written"
    );
}

#[test]
fn the_default_directory_of_the_current_run_is_its_sibling() {
    let dir = tempfile::tempdir().expect("tempdir");
    let run = market(dir.path());
    let lines = export_ok(&run, &["."]);
    assert_eq!(lines.len(), TABLES.len());
    assert_eq!(
        names(&dir.path().join("run-export")),
        export_files(&TABLES, "parquet")
    );
}
