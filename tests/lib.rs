//! Helpers for the end-to-end suites: find and run the real `hearsay` binary, read what
//! it wrote. The binary is built by `scripts/test.sh` (or `cargo build -p hearsay`)
//! before the suites run; they never build or fake it.

pub mod browser;
pub mod mock;
pub mod tty;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

/// The workspace root.
pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ sits in the workspace root")
        .to_owned()
}

/// The `hearsay` binary: `$HEARSAY_BIN`, or the one next to this test executable's
/// profile directory (`target/<profile>/hearsay`).
pub fn bin() -> PathBuf {
    if let Some(path) = std::env::var_os("HEARSAY_BIN") {
        return PathBuf::from(path);
    }
    let exe = std::env::current_exe().expect("test executable path");
    // target/<profile>/deps/e2e-<hash> → target/<profile>/hearsay
    let profile_dir = exe
        .parent()
        .and_then(Path::parent)
        .expect("test executable lives in target/<profile>/deps");
    let bin = profile_dir.join("hearsay");
    assert!(
        bin.is_file(),
        "{} is missing: build it first (`cargo build -p hearsay`, or run scripts/test.sh)",
        bin.display()
    );
    bin
}

/// A scenario shipped in `scenarios/`.
pub fn scenario(name: &str) -> PathBuf {
    root().join("scenarios").join(name)
}

/// Runs `hearsay` with `args` in `cwd`.
pub fn hearsay(cwd: &Path, args: &[&str]) -> Output {
    Command::new(bin())
        .args(args)
        .current_dir(cwd)
        .env_remove("RUST_LOG")
        .output()
        .expect("hearsay starts")
}

/// Runs `hearsay ARGS…` in the repository root and insists it succeeded (the failure
/// shows the command line, its exit code and both streams).
pub fn hearsay_ok(args: &[&str]) -> Output {
    let output = hearsay(&root(), args);
    assert_ok(&output, &format!("hearsay {}", args.join(" ")));
    output
}

/// Insists the finished command `what` succeeded; if not, fails with its exit code,
/// stdout and stderr.
pub fn assert_ok(output: &Output, what: &str) {
    assert!(
        output.status.success(),
        "{what} failed with {:?}\nstdout:\n{}\nstderr:\n{}",
        output.status.code(),
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}

/// Runs `hearsay run SCENARIO --out OUT [extra]` and insists it succeeded.
pub fn run_ok(scenario: &Path, out: &Path, extra: &[&str]) -> Output {
    let mut args = vec!["run", path_str(scenario), "--out", path_str(out)];
    args.extend_from_slice(extra);
    hearsay_ok(&args)
}

/// `hearsay fork FROM --at-tick AT --out OUT --no-progress EXTRA…`, which must succeed.
pub fn fork_ok(from: &Path, at_tick: u64, out: &Path, extra: &[&str]) -> Output {
    let at = at_tick.to_string();
    let mut args = vec![
        "fork",
        path_str(from),
        "--at-tick",
        &at,
        "--out",
        path_str(out),
        "--no-progress",
    ];
    args.extend_from_slice(extra);
    hearsay_ok(&args)
}

/// A path as `&str` (test paths are always UTF-8).
pub fn path_str(p: &Path) -> &str {
    p.to_str().expect("test paths are UTF-8")
}

/// Every line of a JSON-lines file.
pub fn read_jsonl(path: &Path) -> Vec<Value> {
    let text = log_text(path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
    text.lines()
        .enumerate()
        .map(|(i, line)| {
            serde_json::from_str(line)
                .unwrap_or_else(|e| panic!("{}:{}: {e}", path.display(), i + 1))
        })
        .collect()
}

/// The text of a run's log: `path` names it as the format before did (`events.jsonl`,
/// `llm.jsonl`); what is read is `path.zst`, decoded by zstd's own streaming decoder
/// (not hearsay's reader), or `path` itself where there is no `.zst` (a plain file a
/// test wrote). A frame a run is still writing, or one a crash left open, reads through
/// its last whole block, as `zstd -dc` prints it before it stops.
pub fn log_bytes(path: impl AsRef<Path>) -> std::io::Result<Vec<u8>> {
    let path = path.as_ref();
    let zst = PathBuf::from(format!("{}.zst", path.display()));
    if !zst.is_file() {
        return std::fs::read(path);
    }
    decode_zstd(std::fs::File::open(&zst)?)
}

/// What zstd's streaming decoder gives of `input` up to its first unfinished block (see
/// [`log_bytes`]).
pub fn decode_zstd(input: impl std::io::Read) -> std::io::Result<Vec<u8>> {
    use std::io::Read;
    let mut decoder = zstd::stream::read::Decoder::new(input)?;
    let mut text = Vec::new();
    let mut chunk = vec![0; 1 << 16];
    loop {
        match decoder.read(&mut chunk) {
            Ok(0) => return Ok(text),
            Ok(n) => text.extend_from_slice(&chunk[..n]),
            // The end of an open frame.
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(text),
            Err(e) => return Err(e),
        }
    }
}

/// Writes a run's log as `path.zst` (`path` named as in [`log_bytes`]): `text` as one
/// zstd frame made by zstd itself, as a user who decoded, edited and compressed it again
/// would leave it.
pub fn write_log(path: impl AsRef<Path>, text: impl AsRef<[u8]>) {
    let zst = PathBuf::from(format!("{}.zst", path.as_ref().display()));
    let bytes = zstd::stream::encode_all(text.as_ref(), 3).expect("zstd");
    std::fs::write(&zst, bytes).unwrap_or_else(|e| panic!("write {}: {e}", zst.display()));
}

/// [`log_bytes`] as text.
pub fn log_text(path: impl AsRef<Path>) -> std::io::Result<String> {
    String::from_utf8(log_bytes(path)?)
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))
}

/// `summary.json` of a run directory.
pub fn summary(dir: &Path) -> Value {
    let path = dir.join("summary.json");
    let text =
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
    serde_json::from_str(&text).expect("summary.json is JSON")
}

/// The events of one type.
pub fn of_type<'a>(events: &'a [Value], kind: &str) -> Vec<&'a Value> {
    events.iter().filter(|e| e["type"] == kind).collect()
}

/// What one entry of a directory tree is, for [`snapshot`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Entry {
    /// A directory.
    Dir,
    /// A regular file and its bytes.
    File(Vec<u8>),
    /// A symbolic link and where it points.
    Link(PathBuf),
    /// Anything else (a FIFO, a socket, a device).
    Other,
}

/// Every entry under `dir`, by path relative to it, never following a link: two equal
/// snapshots mean nothing there was created, removed, replaced or changed by a byte.
pub fn snapshot(dir: &Path) -> std::collections::BTreeMap<PathBuf, Entry> {
    fn walk(root: &Path, dir: &Path, out: &mut std::collections::BTreeMap<PathBuf, Entry>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            let rel = path.strip_prefix(root).unwrap_or(&path).to_owned();
            let Ok(meta) = std::fs::symlink_metadata(&path) else {
                continue;
            };
            let kind = if meta.file_type().is_symlink() {
                Entry::Link(std::fs::read_link(&path).unwrap_or_default())
            } else if meta.is_dir() {
                walk(root, &path, out);
                Entry::Dir
            } else if meta.is_file() {
                Entry::File(std::fs::read(&path).unwrap_or_default())
            } else {
                Entry::Other
            };
            out.insert(rel, kind);
        }
    }
    let mut out = std::collections::BTreeMap::new();
    walk(dir, dir, &mut out);
    out
}

/// Asserts two snapshots are equal, naming what differs.
pub fn assert_untouched(
    before: &std::collections::BTreeMap<PathBuf, Entry>,
    after: &std::collections::BTreeMap<PathBuf, Entry>,
    what: &str,
) {
    let mut diffs = Vec::new();
    for (path, entry) in before {
        match after.get(path) {
            None => diffs.push(format!("{} removed", path.display())),
            Some(e) if e != entry => diffs.push(format!("{} changed", path.display())),
            _ => {}
        }
    }
    for path in after.keys().filter(|p| !before.contains_key(*p)) {
        diffs.push(format!("{} created", path.display()));
    }
    assert!(diffs.is_empty(), "{what}: {}", diffs.join(", "));
}

/// `f` on a pool of the SQLite store `db`, opened with `mode` (`ro` or `rw`), on a
/// runtime of its own; the pool is closed after.
fn with_sqlite<T>(db: &Path, mode: &str, f: impl AsyncFnOnce(&sqlx::SqlitePool) -> T) -> T {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .expect("runtime");
    runtime.block_on(async {
        let url = format!("sqlite://{}?mode={mode}", db.display());
        let pool = sqlx::SqlitePool::connect(&url)
            .await
            .expect("open memories.db");
        let out = f(&pool).await;
        pool.close().await;
        out
    })
}

/// Runs `sql` on the SQLite store `db` (read-write: for a test that damages or edits a
/// store on purpose); how many rows it changed.
pub fn sqlite_exec(db: &Path, sql: &str) -> u64 {
    with_sqlite(db, "rw", async |pool| {
        sqlx::query(sqlx::AssertSqlSafe(sql.to_owned()))
            .execute(pool)
            .await
            .expect("statement")
            .rows_affected()
    })
}

/// The rows `sql` selects from the SQLite store `db`, opened read-only.
pub fn sqlite_rows(db: &Path, sql: &str) -> Vec<sqlx::sqlite::SqliteRow> {
    with_sqlite(db, "ro", async |pool| {
        sqlx::query(sqlx::AssertSqlSafe(sql.to_owned()))
            .fetch_all(pool)
            .await
            .expect("query")
    })
}
