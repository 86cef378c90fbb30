//! The two logs of a run directory as files on disk: the event log and the brain-call
//! tape are JSON lines, written as one zstd stream that is flushed at the end of every
//! tick (`events.jsonl.zst`, `llm.jsonl.zst`).
//!
//! Why compressed: the two logs were most of a run directory's bytes (the rows "of which
//! the event log" and "of which the tape" of docs/BENCHMARKS.md), and their lines repeat
//! themselves tick after tick. Why one stream flushed per tick rather than a frame per
//! tick: a flush ends the current zstd block, so everything through a tick is on disk
//! and any zstd decoder (`zstd -dc events.jsonl.zst`) gives its lines back, while the
//! frame stays open and the next tick is compressed against the ones before it, which a
//! frame per tick cannot do (tried by hand on the P3 town's logs: markedly larger). The
//! text inside is the format-1 file byte for byte: the same lines, the same rolling
//! hashes.
//!
//! Cutting back (`resume`, which keeps what was written before a stop and nothing
//! after): the reader notes where every block ends, in the file and in the text. A tick
//! ends at a block end because the writer flushed there, so the file can be cut at that
//! byte. A cut inside a frame is followed by the end the frame never got — an empty last
//! block, the three bytes `01 00 00` zstd itself writes to end a frame — so the file stays
//! a valid stream of frames and the next writer starts a frame of its own after it.
//!
//! A crash leaves the last block unfinished: readers stop before it, as they stop before
//! an unterminated last line. Everything a reader decodes is bounded: blocks by the
//! format's 128 KiB, the text by [`RATIO_MAX`] times the file.
//!
//! Format 1, before: plain `events.jsonl` and `llm.jsonl`. They are still read, and a
//! run directory that has one keeps writing it (`resume`), so one log never mixes the
//! two; new runs and forks write format 2.

use std::fs::File;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};

use zstd::zstd_safe::zstd_sys::ZSTD_EndDirective as EndDirective;
use zstd::zstd_safe::{self, CCtx, CParameter, DCtx, InBuffer, OutBuffer};

use crate::RunError;

/// The compression level: zstd's fastest. Measured on a 10,000-NPC town's logs (40 ticks,
/// 217 MB of text): level 1 wrote 42.5 MB in about half the CPU time of the default
/// level 3's 43.1 MB (the event log came out smaller, the tape 4 % larger); on the P3
/// town it costs 3.6 MB over 500 ticks (the tape 12 % larger). The logs are compressed
/// on a thread of their own, but on two cores every thread's time is the tick's.
pub const LEVEL: i32 = 1;

/// A log's text may be at most this many times its file (plus `SLACK`): far above
/// what a run's logs compress by (about 10), far below what a crafted file could claim.
pub const RATIO_MAX: u64 = 1000;

/// Text allowed beyond [`RATIO_MAX`] times the file, so small files are not refused.
const SLACK: u64 = 64 << 20;

/// The zstd frame's magic number, little-endian on disk.
const MAGIC: u32 = 0xFD2F_B528;

/// The largest block the format allows (`Block_Maximum_Size`).
const BLOCK_MAX: usize = 128 << 10;

/// An empty raw block marked last: what ends a frame that was flushed but never ended.
const END_OF_FRAME: [u8; 3] = [0x01, 0x00, 0x00];

/// The file a log's name stands for in `dir`: `name` itself (format 2,
/// `events.jsonl.zst`) or, in a run directory written before, the same name without
/// `.zst` (format 1); `None` if neither is there. Both there is refused: a log never
/// mixes the two, so one of them was put there by hand.
/// A `path` not ending in `.zst` names a plain file, read as one.
pub fn locate(path: &Path) -> Result<Option<(PathBuf, Format)>, RunError> {
    let old = plain_name(path);
    if old == path {
        return Ok(path.is_file().then(|| (path.to_owned(), Format::Plain)));
    }
    match (path.is_file(), old.is_file()) {
        (true, true) => Err(RunError::RunDir {
            path: path.to_owned(),
            problem: format!(
                "is beside {}, the same log in the format before: hearsay writes one of the \
                 two, so one was copied in; remove the one that is not this run's",
                old.display()
            ),
        }),
        (true, false) => Ok(Some((path.to_owned(), Format::Zstd))),
        (false, true) => Ok(Some((old, Format::Plain))),
        (false, false) => Ok(None),
    }
}

/// `events.jsonl.zst` → `events.jsonl`; a path not ending in `.zst` is itself.
pub fn plain_name(path: &Path) -> PathBuf {
    match path.extension() {
        Some(ext) if ext == "zst" => path.with_extension(""),
        _ => path.to_owned(),
    }
}

/// Whether the log `path` stands for is there, in either format (see [`locate`]).
pub fn present(path: &Path) -> bool {
    path.is_file() || plain_name(path).is_file()
}

/// How a log file is written.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Format {
    /// Format 1: JSON lines as they are.
    Plain,
    /// Format 2: the same lines as one zstd stream, flushed at every tick's end.
    #[default]
    Zstd,
}

/// A place the file can be cut at: where a block ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Cut {
    /// The text's length through the block.
    text: u64,
    /// The file's length through the block.
    file: u64,
    /// Whether the block is not its frame's last (a cut there must end the frame).
    open: bool,
    /// The blake3 hash of the file's bytes before the cut, as they were read: what a
    /// copy of them is checked against ([`Cuts::copy_through`]).
    digest: [u8; 32],
}

/// Where a log that was read can be cut back to, text offset by text offset.
#[derive(Clone, Debug, Default)]
pub struct Cuts {
    /// The file read.
    pub path: PathBuf,
    /// The format it was read in, which is the format it is cut back and added to in.
    pub format: Format,
    /// Block ends in order (format 2 only; in format 1 text and file offsets are one).
    cuts: Vec<Cut>,
}

impl Cuts {
    /// Cuts the file back so that it holds the first `text_len` bytes of its text, and
    /// nothing after (see the module doc). `text_len` must be where a tick ended.
    pub fn cut_back(&self, text_len: u64) -> Result<(), RunError> {
        match self.format {
            Format::Plain => crate::rundir::truncate(&self.path, text_len),
            Format::Zstd => {
                let cut = self.cut_at(text_len).ok_or_else(|| RunError::RunDir {
                    path: self.path.clone(),
                    problem: format!(
                        "has no block that ends after its first {text_len} bytes of \
                         text, where it is to be cut back: it was not written by hearsay"
                    ),
                })?;
                crate::rundir::truncate(&self.path, cut.file)?;
                if cut.open {
                    let mut file = crate::rundir::open_append(&self.path)?;
                    file.write_all(&END_OF_FRAME)
                        .and_then(|()| file.flush())
                        .map_err(|source| RunError::Io {
                            path: self.path.clone(),
                            source,
                        })?;
                }
                Ok(())
            }
        }
    }

    /// Writes `to` whole with the first `text_len` bytes of this file's text in the
    /// file's own bytes: its blocks through that place copied as they are and the frame
    /// then ended, as [`Cuts::cut_back`] leaves a file — nothing decoded or compressed
    /// again (a fork's copy of its source's logs; compressing them again was most of
    /// copying them). `false`, with nothing written, for a plain file (format 1, which a
    /// fork writes in format 2) or a place no block ends at: the caller writes the text.
    /// The bytes copied are the bytes read: a file that changed since is refused by their
    /// hash, and nothing is written.
    pub fn copy_through(&self, to: &Path, text_len: u64) -> Result<bool, RunError> {
        let Some(cut) = (self.format == Format::Zstd)
            .then(|| self.cut_at(text_len))
            .flatten()
        else {
            return Ok(false);
        };
        crate::rundir::refuse_link_or_special(&self.path)?;
        let from = File::open(&self.path).map_err(|source| RunError::Io {
            path: self.path.clone(),
            source,
        })?;
        let mut from = Hashed {
            file: BufReader::with_capacity(1 << 20, from),
            hash: blake3::Hasher::new(),
        }
        .take(cut.file);
        crate::rundir::write_file_with(to, |file| {
            let copied = std::io::copy(&mut from, file)?;
            if copied != cut.file || *from.get_ref().hash.finalize().as_bytes() != cut.digest {
                return Err(std::io::Error::other(format!(
                    "{} changed while it was read (its first {} bytes are not those read); \
                     try again once nothing writes it",
                    self.path.display(),
                    cut.file
                )));
            }
            if cut.open {
                file.write_all(&END_OF_FRAME)?;
            }
            Ok(())
        })?;
        Ok(true)
    }

    /// Where the file holds exactly the first `text_len` bytes of its text (format 2): a
    /// block's end, or the start. `None` if no block ends there.
    fn cut_at(&self, text_len: u64) -> Option<Cut> {
        if text_len == 0 {
            return Some(Cut {
                text: 0,
                file: 0,
                open: false,
                digest: *blake3::hash(&[]).as_bytes(),
            });
        }
        let i = self.cuts.binary_search_by_key(&text_len, |c| c.text).ok()?;
        // Empty blocks may share a text offset: the first one is enough.
        Some(self.cuts[i])
    }

    /// [`Cuts::cut_back`] to a place that may not be a block end, given the `text` read:
    /// the tape's last whole tick may end inside the block a crash tore (its calls all
    /// in blocks before it, only the tick's note in the torn one). The file is cut at
    /// the last block end before `text_len`, and the text between is written again, as
    /// a frame of its own.
    pub fn cut_back_keeping(&self, text: &[u8], text_len: u64) -> Result<(), RunError> {
        let at_block_end = self
            .cuts
            .binary_search_by_key(&text_len, |c| c.text)
            .is_ok();
        if self.format == Format::Plain || text_len == 0 || at_block_end {
            return self.cut_back(text_len);
        }
        let Some(missing) = usize::try_from(text_len).ok().filter(|&n| n <= text.len()) else {
            return Err(RunError::RunDir {
                path: self.path.clone(),
                problem: format!("holds no {text_len} bytes of text to keep"),
            });
        };
        let before = self
            .cuts
            .iter()
            .rev()
            .find(|c| c.text < text_len)
            .map_or(0, |c| c.text);
        self.cut_back(before)?;
        let mut writer = LogWriter::append(&self.path)?;
        writer
            .write_all(&text[before as usize..missing])
            .and_then(|()| writer.finish())
            .map_err(|source| RunError::Io {
                path: self.path.clone(),
                source,
            })
    }
}

/// A log read whole: its text and where it can be cut back to.
#[derive(Debug)]
pub struct LogText {
    /// The lines, as format 1 holds them.
    pub text: Vec<u8>,
    /// Where the file can be cut back to.
    pub cuts: Cuts,
}

impl LogText {
    /// Reads the log `path` stands for (see [`locate`]); `None` if there is none. A
    /// last block or frame left unfinished by a crash is not part of the text.
    pub fn read(path: &Path) -> Result<Option<LogText>, RunError> {
        let Some((path, format)) = locate(path)? else {
            return Ok(None);
        };
        let mut reader = LogReader::open_as(&path, format)?;
        let mut text = Vec::new();
        reader
            .read_to_end(&mut text)
            .map_err(|e| RunError::RunDir {
                path: path.clone(),
                problem: format!("cannot be read: {e}"),
            })?;
        Ok(Some(LogText {
            text,
            cuts: reader.into_cuts(),
        }))
    }
}

/// The file a log is read from, and where it is in it.
enum Source {
    Plain(BufReader<File>),
    Zstd(Box<Decoding>),
}

/// A file read for its text, every byte it gives also hashed: the digest each [`Cut`]
/// holds.
struct Hashed {
    file: BufReader<File>,
    hash: blake3::Hasher,
}

impl Read for Hashed {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.file.read(buf)?;
        self.hash.update(&buf[..n]);
        Ok(n)
    }
}

/// A format-2 log being decoded block by block.
struct Decoding {
    file: Hashed,
    dctx: DCtx<'static>,
    /// Bytes of the file consumed so far.
    at: u64,
    /// Inside a frame: whether the frame carries a checksum after its last block.
    frame: Option<bool>,
    /// The block being read, header included.
    block: Vec<u8>,
    /// The text the last block gave, and how much of it was handed out.
    out: Vec<u8>,
    out_pos: usize,
    /// Text given so far, and the most it may reach.
    text: u64,
    text_max: u64,
    /// The end of the file or of its last whole block.
    done: bool,
}

/// Reads a log's text as it streams (`BufRead`), format 1 or 2, noting where blocks end.
pub struct LogReader {
    source: Source,
    path: PathBuf,
    cuts: Vec<Cut>,
}

impl LogReader {
    /// Opens the log `path` stands for (see [`locate`]); a missing log is an error.
    pub fn open(path: &Path) -> Result<LogReader, RunError> {
        match locate(path)? {
            Some((found, format)) => Self::open_as(&found, format),
            None => Err(RunError::RunDir {
                path: path.to_owned(),
                problem: "cannot be read: it is not there; is this a hearsay run directory?".into(),
            }),
        }
    }

    /// Opens `path`, a log in `format` (as [`locate`] found it).
    pub fn open_as(path: &Path, format: Format) -> Result<LogReader, RunError> {
        let io = |source| RunError::Io {
            path: path.to_owned(),
            source,
        };
        crate::rundir::refuse_link_or_special(path)?;
        let file = File::open(path).map_err(io)?;
        let len = file.metadata().map_err(io)?.len();
        let file = BufReader::with_capacity(1 << 20, file);
        let source = match format {
            Format::Plain => Source::Plain(file),
            Format::Zstd => Source::Zstd(Box::new(Decoding {
                file: Hashed {
                    file,
                    hash: blake3::Hasher::new(),
                },
                dctx: DCtx::create(),
                at: 0,
                frame: None,
                block: Vec::with_capacity(BLOCK_MAX + 3),
                out: Vec::with_capacity(BLOCK_MAX),
                out_pos: 0,
                text: 0,
                text_max: len.saturating_mul(RATIO_MAX).saturating_add(SLACK),
                done: false,
            })),
        };
        Ok(LogReader {
            source,
            path: path.to_owned(),
            cuts: Vec::new(),
        })
    }

    /// The file being read.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Where the file can be cut back to, as far as it was read.
    pub fn into_cuts(self) -> Cuts {
        Cuts {
            format: match self.source {
                Source::Plain(_) => Format::Plain,
                Source::Zstd(_) => Format::Zstd,
            },
            path: self.path,
            cuts: self.cuts,
        }
    }
}

impl Read for LogReader {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let avail = self.fill_buf()?;
        let n = avail.len().min(buf.len());
        buf[..n].copy_from_slice(&avail[..n]);
        self.consume(n);
        Ok(n)
    }
}

impl BufRead for LogReader {
    fn fill_buf(&mut self) -> std::io::Result<&[u8]> {
        match &mut self.source {
            Source::Plain(file) => file.fill_buf(),
            Source::Zstd(d) => {
                while d.out_pos == d.out.len() && !d.done {
                    d.out.clear();
                    d.out_pos = 0;
                    if let Some(cut) = d.next_block()? {
                        self.cuts.push(cut);
                    }
                }
                Ok(&d.out[d.out_pos..])
            }
        }
    }

    fn consume(&mut self, n: usize) {
        match &mut self.source {
            Source::Plain(file) => file.consume(n),
            Source::Zstd(d) => d.out_pos = (d.out_pos + n).min(d.out.len()),
        }
    }
}

fn damaged(at: u64, what: impl std::fmt::Display) -> std::io::Error {
    std::io::Error::new(
        std::io::ErrorKind::InvalidData,
        format!("damaged at byte {at}: {what}"),
    )
}

/// Reads up to `n` bytes into `buf`: fewer only at the end of the file.
fn read_up_to(file: &mut impl Read, buf: &mut Vec<u8>, n: usize) -> std::io::Result<usize> {
    let start = buf.len();
    file.take(n as u64).read_to_end(buf)?;
    Ok(buf.len() - start)
}

impl Decoding {
    /// Reads the next frame header or block, decoding what it holds into `out`; the
    /// place after a block, if it was one. At an unfinished unit (a crash mid-write) or
    /// the end of the file, `done`.
    fn next_block(&mut self) -> std::io::Result<Option<Cut>> {
        self.block.clear();
        let Some(checksum) = self.frame else {
            return self.next_frame().map(|()| None);
        };
        if read_up_to(&mut self.file, &mut self.block, 3)? < 3 {
            self.done = true;
            return Ok(None);
        }
        let header = u32::from(self.block[0])
            | (u32::from(self.block[1]) << 8)
            | (u32::from(self.block[2]) << 16);
        let last = header & 1 == 1;
        let size = (header >> 3) as usize;
        let stored = match (header >> 1) & 3 {
            0 | 2 if size > BLOCK_MAX => {
                return Err(damaged(self.at, "a block larger than the format allows"));
            }
            0 | 2 => size,
            1 => 1,
            _ => return Err(damaged(self.at, "a block of the reserved type")),
        };
        let trailer = if last && checksum { 4 } else { 0 };
        if read_up_to(&mut self.file, &mut self.block, stored + trailer)? < stored + trailer {
            self.done = true;
            return Ok(None);
        }
        self.decode()?;
        self.at += self.block.len() as u64;
        if last {
            self.frame = None;
        }
        // Every byte read went through the hash, so it covers exactly `at` of them.
        debug_assert_eq!(self.file.hash.count(), self.at);
        Ok(Some(Cut {
            text: self.text,
            file: self.at,
            open: !last,
            digest: *self.file.hash.finalize().as_bytes(),
        }))
    }

    /// Reads a frame's header (or skips a skippable frame).
    fn next_frame(&mut self) -> std::io::Result<()> {
        if read_up_to(&mut self.file, &mut self.block, 4)? < 4 {
            self.done = true;
            return Ok(());
        }
        let magic =
            u32::from_le_bytes([self.block[0], self.block[1], self.block[2], self.block[3]]);
        if magic & 0xFFFF_FFF0 == 0x184D_2A50 {
            // A skippable frame: its length, then bytes no decoder reads.
            if read_up_to(&mut self.file, &mut self.block, 4)? < 4 {
                self.done = true;
                return Ok(());
            }
            let len =
                u32::from_le_bytes([self.block[4], self.block[5], self.block[6], self.block[7]]);
            let skipped =
                std::io::copy(&mut (&mut self.file).take(len.into()), &mut std::io::sink())?;
            if skipped < u64::from(len) {
                self.done = true;
            } else {
                self.at += 8 + skipped;
            }
            return Ok(());
        }
        if magic != MAGIC {
            return Err(damaged(self.at, "not the start of a zstd frame"));
        }
        if read_up_to(&mut self.file, &mut self.block, 1)? < 1 {
            self.done = true;
            return Ok(());
        }
        let descriptor = self.block[4];
        let single_segment = descriptor & 0x20 != 0;
        let content_size = match descriptor >> 6 {
            0 => usize::from(single_segment),
            1 => 2,
            2 => 4,
            _ => 8,
        };
        let dictionary = [0, 1, 2, 4][usize::from(descriptor & 3)];
        let rest = usize::from(!single_segment) + dictionary + content_size;
        if read_up_to(&mut self.file, &mut self.block, rest)? < rest {
            self.done = true;
            return Ok(());
        }
        self.dctx
            .reset(zstd_safe::ResetDirective::SessionOnly)
            .map_err(|code| damaged(self.at, zstd_safe::get_error_name(code)))?;
        self.decode()?;
        self.at += self.block.len() as u64;
        self.frame = Some(descriptor & 0x04 != 0);
        Ok(())
    }

    /// Feeds `block` to the decoder, whole, appending the text it gives to `out`.
    fn decode(&mut self) -> std::io::Result<()> {
        let mut input = InBuffer::around(&self.block);
        loop {
            self.out.reserve(BLOCK_MAX);
            let before = self.out.len();
            let mut output = OutBuffer::around_pos(&mut self.out, before);
            self.dctx
                .decompress_stream(&mut output, &mut input)
                .map_err(|code| damaged(self.at, zstd_safe::get_error_name(code)))?;
            let made = output.pos() - before;
            self.text += made as u64;
            if self.text > self.text_max {
                return Err(damaged(
                    self.at,
                    format!("it decodes to more than {RATIO_MAX} times its size"),
                ));
            }
            if input.pos() == self.block.len() && made == 0 {
                return Ok(());
            }
        }
    }
}

/// Writes a log: plain (format 1, a run directory that has one) or as one zstd stream
/// flushed by [`LogWriter::end_tick`].
pub struct LogWriter {
    file: File,
    path: PathBuf,
    cctx: Option<CCtx<'static>>,
    /// Bytes waiting for the file: compressed (format 2) or text (format 1).
    out: Vec<u8>,
    /// Whether text went in since the last flush.
    pending: bool,
}

impl LogWriter {
    /// Opens the log `path` stands for to add to it: the file there, in its format, or a
    /// new format-2 file. A format-2 log must have been cut back first (its last frame
    /// ended, [`Cuts::cut_back`]); what is added starts a frame of its own.
    pub fn append(path: &Path) -> Result<LogWriter, RunError> {
        let (path, format) = locate(path)?.unwrap_or((path.to_owned(), Format::Zstd));
        let file = crate::rundir::open_append(&path)?;
        Self::new(file, path.clone(), format).map_err(|source| RunError::Io { path, source })
    }

    fn new(file: File, path: PathBuf, format: Format) -> std::io::Result<LogWriter> {
        let cctx = match format {
            Format::Plain => None,
            Format::Zstd => {
                let mut cctx = CCtx::create();
                for param in [
                    CParameter::CompressionLevel(LEVEL),
                    CParameter::ChecksumFlag(false),
                    CParameter::ContentSizeFlag(false),
                ] {
                    cctx.set_parameter(param)
                        .map_err(|code| std::io::Error::other(zstd_safe::get_error_name(code)))?;
                }
                Some(cctx)
            }
        };
        Ok(LogWriter {
            file,
            path,
            cctx,
            out: Vec::with_capacity(1 << 16),
            pending: false,
        })
    }

    /// The file written.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Compresses `text` with `directive`, into `out`.
    fn compress(&mut self, text: &[u8], directive: EndDirective) -> std::io::Result<()> {
        let Some(cctx) = &mut self.cctx else {
            self.out.extend_from_slice(text);
            return Ok(());
        };
        let mut input = InBuffer::around(text);
        loop {
            self.out.reserve(zstd_safe::CCtx::out_size());
            let before = self.out.len();
            let mut output = OutBuffer::around_pos(&mut self.out, before);
            let left = cctx
                .compress_stream2(&mut output, &mut input, directive)
                .map_err(|code| std::io::Error::other(zstd_safe::get_error_name(code)))?;
            let done = match directive {
                EndDirective::ZSTD_e_continue => input.pos() == text.len(),
                _ => left == 0,
            };
            if done {
                return Ok(());
            }
        }
    }

    fn write_out(&mut self) -> std::io::Result<()> {
        self.file.write_all(&self.out)?;
        self.out.clear();
        Ok(())
    }

    /// Puts everything written so far on disk, decodable: the end of a tick (or of the
    /// part of it that must survive a crash). Nothing is written if nothing was added.
    pub fn end_tick(&mut self) -> std::io::Result<()> {
        if self.pending {
            self.compress(&[], EndDirective::ZSTD_e_flush)?;
            self.pending = false;
        }
        self.write_out()?;
        self.file.flush()
    }

    /// Ends the stream's frame and puts everything on disk (the run ended).
    pub fn finish(mut self) -> std::io::Result<()> {
        self.compress(&[], EndDirective::ZSTD_e_end)?;
        self.write_out()?;
        self.file.flush()
    }
}

impl Write for LogWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.write_all(buf)?;
        Ok(buf.len())
    }

    fn write_all(&mut self, buf: &[u8]) -> std::io::Result<()> {
        if buf.is_empty() {
            return Ok(());
        }
        self.pending = true;
        self.compress(buf, EndDirective::ZSTD_e_continue)?;
        if self.out.len() >= 1 << 16 {
            self.write_out()?;
        }
        Ok(())
    }

    /// The same as [`LogWriter::end_tick`].
    fn flush(&mut self) -> std::io::Result<()> {
        self.end_tick()
    }
}

/// A [`LogWriter`] whose ticks are compressed and written on a thread of their own, so
/// that the tick thread goes on meanwhile (zstd on a 10,000-NPC tick's tape or events
/// is 10-15 ms). [`BackgroundLog::settle`] waits for the tick handed over last: whoever
/// writes what must follow it on disk (the events after the tape, the store after the
/// events) settles first, so the order on disk, and what a crash can leave, is the
/// same as when the tick thread wrote it.
pub struct BackgroundLog {
    state: Background,
    path: PathBuf,
}

enum Background {
    Idle(LogWriter),
    Writing(std::thread::JoinHandle<(LogWriter, std::io::Result<()>)>),
    /// After a write thread panicked: the log cannot be trusted to continue.
    Lost,
}

impl BackgroundLog {
    /// `log`, written in the background from now on.
    pub fn new(log: LogWriter) -> Self {
        let path = log.path().to_owned();
        Self {
            state: Background::Idle(log),
            path,
        }
    }

    /// The file written.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Hands `text` (a tick's lines) to a thread that compresses it and ends the tick
    /// ([`LogWriter::end_tick`]); the tick handed over before is settled first.
    pub fn send_tick(&mut self, text: Vec<u8>) -> std::io::Result<()> {
        self.settle()?;
        let Background::Idle(mut log) = std::mem::replace(&mut self.state, Background::Lost) else {
            return Err(lost());
        };
        let thread = std::thread::Builder::new()
            .name("hearsay-log".into())
            .spawn(move || {
                let written = log.write_all(&text).and_then(|()| log.end_tick());
                (log, written)
            })?;
        self.state = Background::Writing(thread);
        Ok(())
    }

    /// Waits until the tick handed over last is on disk; its error, if it failed.
    pub fn settle(&mut self) -> std::io::Result<()> {
        match std::mem::replace(&mut self.state, Background::Lost) {
            Background::Idle(log) => {
                self.state = Background::Idle(log);
                Ok(())
            }
            Background::Writing(thread) => match thread.join() {
                Ok((log, written)) => {
                    self.state = Background::Idle(log);
                    written
                }
                Err(_) => Err(lost()),
            },
            Background::Lost => Err(lost()),
        }
    }

    /// Settles, then ends the stream's frame ([`LogWriter::finish`]).
    pub fn finish(mut self) -> std::io::Result<()> {
        self.settle()?;
        match std::mem::replace(&mut self.state, Background::Lost) {
            Background::Idle(log) => log.finish(),
            _ => Err(lost()),
        }
    }
}

impl Drop for BackgroundLog {
    /// A tick handed over and not settled — a run that stopped on an error between two
    /// checkpoints, whose last tick's events were still being compressed — is written
    /// out before the log goes, so a stop leaves every tick it ran in the file, as a run
    /// that settled every tick did. Its error, if any, is the stop's to report, not this.
    fn drop(&mut self) {
        if let Background::Writing(thread) = std::mem::replace(&mut self.state, Background::Lost) {
            let _ = thread.join();
        }
    }
}

fn lost() -> std::io::Error {
    std::io::Error::other("the log's writing thread panicked")
}

/// Writes `path` whole (format 2, see [`crate::rundir::write_file`]) with `ticks`: each
/// the text of one tick, flushed after it so the file can be cut back at any of them.
pub fn write_log<'a>(
    path: &Path,
    ticks: impl IntoIterator<Item = &'a [u8]>,
) -> Result<(), RunError> {
    write_log_with(path, |put| ticks.into_iter().try_for_each(put))
}

/// [`write_log`] with the ticks handed over by `ticks`, which calls `put` with each
/// tick's text in order: a log written as its ticks are made, never held whole.
pub fn write_log_with(
    path: &Path,
    ticks: impl FnOnce(&mut dyn FnMut(&[u8]) -> std::io::Result<()>) -> std::io::Result<()>,
) -> Result<(), RunError> {
    crate::rundir::write_file_with(path, |file| {
        let mut writer = LogWriter::new(file.try_clone()?, path.to_owned(), Format::Zstd)?;
        ticks(&mut |tick| {
            writer.write_all(tick)?;
            writer.end_tick()
        })?;
        writer.finish()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tick_text(t: u64) -> Vec<u8> {
        let mut text = String::new();
        for npc in 0..200 {
            text.push_str(&format!(
                "{{\"type\":\"move\",\"tick\":{t},\"npc\":\"N{npc}\",\"to\":[{},{}]}}\n",
                (npc * 7 + t) % 97,
                (npc * 13 + t * 3) % 89
            ));
        }
        text.push_str(&format!("{{\"type\":\"tick\",\"tick\":{t}}}\n"));
        text.into_bytes()
    }

    /// Writes `ticks` ticks through a `LogWriter` as a run does; the text and where
    /// each tick ended in it.
    fn write_run(path: &Path, ticks: std::ops::Range<u64>, finish: bool) -> (Vec<u8>, Vec<u64>) {
        let mut writer = LogWriter::append(path).expect("open");
        let (mut text, mut ends) = (Vec::new(), Vec::new());
        for t in ticks {
            let tick = tick_text(t);
            // In pieces, as lines are written.
            for line in tick.split_inclusive(|&b| b == b'\n') {
                writer.write_all(line).expect("write");
            }
            writer.end_tick().expect("flush");
            text.extend_from_slice(&tick);
            ends.push(text.len() as u64);
        }
        if finish {
            writer.finish().expect("finish");
        }
        (text, ends)
    }

    #[test]
    fn a_log_reads_back_as_written_and_as_zstd_itself_decodes_it() {
        let dir = tempfile::tempdir().expect("tmp");
        let path = dir.path().join("events.jsonl.zst");
        let (text, ends) = write_run(&path, 0..30, true);
        let log = LogText::read(&path).expect("read").expect("there");
        assert_eq!(log.text, text);
        assert_eq!(log.cuts.format, Format::Zstd);
        // The library's own decoder, which knows nothing of ticks, agrees.
        let bytes = std::fs::read(&path).expect("bytes");
        assert_eq!(zstd::stream::decode_all(&bytes[..]).expect("zstd"), text);
        // Every tick's end is a place to cut.
        for end in &ends {
            assert!(
                log.cuts.cuts.iter().any(|c| c.text == *end),
                "no cut at {end}"
            );
        }
        assert!(
            bytes.len() * 5 < text.len(),
            "{} bytes of text took {} bytes",
            text.len(),
            bytes.len()
        );
    }

    /// A run that stops on an error between two checkpoints drops its logs with the last
    /// tick still being compressed: the drop waits for it, so the tick is in the file.
    /// (Many ticks of text, so that the write outlasts the drop by far without the wait.)
    #[test]
    fn a_log_dropped_while_a_tick_is_written_keeps_the_tick() {
        let dir = tempfile::tempdir().expect("tmp");
        let path = dir.path().join("events.jsonl.zst");
        let mut log = BackgroundLog::new(LogWriter::append(&path).expect("open"));
        let text: Vec<u8> = (0..4_000).flat_map(tick_text).collect();
        log.send_tick(text.clone()).expect("handed over");
        drop(log);
        let read = LogText::read(&path).expect("read").expect("there");
        assert!(
            read.text == text,
            "{} of {} bytes",
            read.text.len(),
            text.len()
        );
    }

    #[test]
    fn a_crash_loses_only_the_unfinished_block_and_a_cut_back_log_takes_more_ticks() {
        let dir = tempfile::tempdir().expect("tmp");
        let path = dir.path().join("llm.jsonl.zst");
        // A run killed after tick 19 never ended its frame.
        let (text, ends) = write_run(&path, 0..20, false);
        let bytes = std::fs::read(&path).expect("bytes");
        // And its last write was torn: every length of the file reads as a prefix of
        // the text that ends at a block.
        for len in (0..bytes.len()).step_by(97).chain([bytes.len()]) {
            std::fs::write(&path, &bytes[..len]).expect("write");
            let log = LogText::read(&path).expect("read").expect("there");
            assert!(text.starts_with(&log.text), "at {len}");
        }
        std::fs::write(&path, &bytes).expect("write");
        let log = LogText::read(&path).expect("read").expect("there");
        assert_eq!(log.text, text);
        // Resume after tick 11: cut back there, then ticks 12.. again.
        log.cuts.cut_back(ends[11]).expect("cut");
        let (more, _) = write_run(&path, 12..25, true);
        let mut whole = text[..ends[11] as usize].to_vec();
        whole.extend_from_slice(&more);
        let again = LogText::read(&path).expect("read").expect("there");
        assert_eq!(again.text, whole);
        let bytes = std::fs::read(&path).expect("bytes");
        assert_eq!(zstd::stream::decode_all(&bytes[..]).expect("zstd"), whole);
        // Back to nothing.
        again.cuts.cut_back(0).expect("cut");
        assert_eq!(std::fs::metadata(&path).expect("meta").len(), 0);
        // A place that is no block's end is refused, not cut.
        let (_, ends) = write_run(&path, 0..3, true);
        let log = LogText::read(&path).expect("read").expect("there");
        assert!(log.cuts.cut_back(ends[1] - 5).is_err());
    }

    #[test]
    fn a_cut_inside_a_block_keeps_the_text_before_it() {
        let dir = tempfile::tempdir().expect("tmp");
        let path = dir.path().join("llm.jsonl.zst");
        let (text, ends) = write_run(&path, 0..6, false);
        let log = LogText::read(&path).expect("read").expect("there");
        let inside = ends[3] - 40;
        assert!(log.cuts.cut_back(inside).is_err(), "not a block end");
        log.cuts.cut_back_keeping(&log.text, inside).expect("cut");
        let kept = LogText::read(&path).expect("read").expect("there");
        assert_eq!(kept.text, &text[..inside as usize]);
        // A block end is cut at as `cut_back` does, and what follows starts its own frame.
        kept.cuts
            .cut_back_keeping(&kept.text, ends[2])
            .expect("cut");
        let (more, _) = write_run(&path, 3..4, true);
        let bytes = std::fs::read(&path).expect("bytes");
        assert_eq!(
            zstd::stream::decode_all(&bytes[..]).expect("zstd"),
            [&text[..ends[2] as usize], &more[..]].concat()
        );
    }

    #[test]
    fn damage_and_bombs_are_refused_and_both_formats_beside_each_other_too() {
        let dir = tempfile::tempdir().expect("tmp");
        let path = dir.path().join("events.jsonl.zst");
        write_run(&path, 0..10, true);
        let mut bytes = std::fs::read(&path).expect("bytes");
        let middle = bytes.len() / 2;
        bytes[middle] ^= 0x5a;
        bytes[middle + 1] ^= 0xa5;
        std::fs::write(&path, &bytes).expect("write");
        // Either the decoder notices, or the damage reads as other text (which the
        // logs' own checks refuse); it never panics.
        if let Ok(Some(log)) = LogText::read(&path) {
            assert!(!log.text.is_empty());
        }
        std::fs::write(&path, b"{\"type\":\"tick\"}\n").expect("write");
        let e = LogText::read(&path).expect_err("not zstd");
        assert!(
            e.to_string().contains("not the start of a zstd frame"),
            "{e}"
        );
        // 200 MB of one byte, compressed to a few KB.
        let bomb = zstd::stream::encode_all(&vec![b'x'; 200 << 20][..], 19).expect("bomb");
        std::fs::write(&path, &bomb).expect("write");
        let e = LogText::read(&path).expect_err("bomb");
        assert!(e.to_string().contains("times its size"), "{e}");
        std::fs::write(dir.path().join("events.jsonl"), b"").expect("write");
        let e = LogText::read(&path).expect_err("both");
        assert!(
            e.to_string().contains("same log in the format before"),
            "{e}"
        );
    }

    #[test]
    fn a_format_one_log_is_read_and_kept_in_its_format() {
        let dir = tempfile::tempdir().expect("tmp");
        let path = dir.path().join("events.jsonl.zst");
        let old = dir.path().join("events.jsonl");
        let text = [tick_text(0), tick_text(1)].concat();
        std::fs::write(&old, &text).expect("write");
        let log = LogText::read(&path).expect("read").expect("there");
        assert_eq!(
            (log.text.as_slice(), log.cuts.format),
            (&text[..], Format::Plain)
        );
        log.cuts.cut_back(tick_text(0).len() as u64).expect("cut");
        let mut writer = LogWriter::append(&path).expect("open");
        writer.write_all(&tick_text(1)).expect("write");
        writer.finish().expect("finish");
        assert!(!path.exists());
        assert_eq!(std::fs::read(&old).expect("read"), text);
    }

    #[test]
    fn a_log_written_whole_reads_back_and_cuts_at_its_ticks() {
        let dir = tempfile::tempdir().expect("tmp");
        let path = dir.path().join("events.jsonl.zst");
        let ticks: Vec<Vec<u8>> = (0..5).map(tick_text).collect();
        write_log(&path, ticks.iter().map(Vec::as_slice)).expect("write");
        let log = LogText::read(&path).expect("read").expect("there");
        assert_eq!(log.text, ticks.concat());
        let first_two = (ticks[0].len() + ticks[1].len()) as u64;
        log.cuts.cut_back(first_two).expect("cut");
        let log = LogText::read(&path).expect("read").expect("there");
        assert_eq!(log.text, ticks[..2].concat());
    }
}
