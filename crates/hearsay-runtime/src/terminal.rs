//! Text from a run on its way to a terminal. Names, speech, memories and model answers
//! are data that someone else may have written; a newline in a name forges a table row,
//! an escape sequence retitles the window or rewrites the screen. Everything hearsay
//! prints from a run passes [`safe`] (or is JSON, which escapes control characters).

use std::borrow::Cow;

/// `text` with every control character replaced: tabs and line breaks by a space (one
/// line stays one line), everything else — escapes, bidirectional overrides — by `�`.
pub fn safe(text: &str) -> Cow<'_, str> {
    if !text.chars().any(hearsay_core::is_control) {
        return Cow::Borrowed(text);
    }
    Cow::Owned(
        text.chars()
            .map(|c| match c {
                '\t' | '\n' | '\r' => ' ',
                c if hearsay_core::is_control(c) => '\u{FFFD}',
                c => c,
            })
            .collect(),
    )
}

/// `text` with line breaks and tabs kept and every other control character replaced by
/// `�`: for whole blocks of output (tables, reports), whose lines hearsay made itself.
pub fn printable(text: &str) -> Cow<'_, str> {
    let bad = |c: char| hearsay_core::is_control(c) && c != '\n' && c != '\t';
    if !text.chars().any(bad) {
        return Cow::Borrowed(text);
    }
    Cow::Owned(
        text.chars()
            .map(|c| if bad(c) { '\u{FFFD}' } else { c })
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::{printable, safe};

    #[test]
    fn printable_keeps_lines() {
        assert_eq!(printable("a\n\tb"), "a\n\tb");
        assert_eq!(printable("a\r\n\u{1b}[2J"), "a\u{FFFD}\n\u{FFFD}[2J");
    }

    #[test]
    fn control_characters_never_reach_a_terminal() {
        assert_eq!(safe("Bob"), "Bob");
        assert_eq!(safe("Bob\nfact x: 4 of 4"), "Bob fact x: 4 of 4");
        assert_eq!(safe("\u{1b}]0;pwned\u{7}"), "\u{FFFD}]0;pwned\u{FFFD}");
        assert_eq!(safe("a\u{202E}b\u{9b}c"), "a\u{FFFD}b\u{FFFD}c");
        assert_eq!(safe("市场\t鱼"), "市场 鱼");
    }
}

/// How a long command shows how far it got.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Progress {
    /// Nothing.
    #[default]
    Hidden,
    /// A bar redrawn in place on a terminal.
    Bar,
    /// Plain lines on stderr, `hearsay-progress DONE OF` at most ten times a second and
    /// at the end: for programs that drive hearsay (the Python package draws its own
    /// bar from them).
    Lines,
}

/// A progress bar over `len` steps drawn as `progress` says, with `template` (indicatif's)
/// when it is a bar.
pub fn progress_bar(progress: Progress, len: u64, template: &str) -> indicatif::ProgressBar {
    use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
    let bar = match progress {
        Progress::Hidden => return ProgressBar::hidden(),
        Progress::Bar => ProgressBar::new(len),
        Progress::Lines => ProgressBar::with_draw_target(
            Some(len),
            ProgressDrawTarget::term_like_with_hz(Box::new(LineTerm::default()), 10),
        ),
    };
    let template = match progress {
        Progress::Lines => "hearsay-progress {pos} {len}",
        _ => template,
    };
    if let Ok(style) = ProgressStyle::with_template(template) {
        bar.set_style(style.progress_chars("=> "));
    }
    bar
}

/// A "terminal" that prints each drawn state as one line on stderr and ignores cursor
/// movement, so a bar becomes a stream of lines a program can read.
#[derive(Debug, Default)]
struct LineTerm {
    line: std::sync::Mutex<String>,
}

impl indicatif::TermLike for LineTerm {
    fn width(&self) -> u16 {
        200
    }
    fn move_cursor_up(&self, _: usize) -> std::io::Result<()> {
        Ok(())
    }
    fn move_cursor_down(&self, _: usize) -> std::io::Result<()> {
        Ok(())
    }
    fn move_cursor_right(&self, _: usize) -> std::io::Result<()> {
        Ok(())
    }
    fn move_cursor_left(&self, _: usize) -> std::io::Result<()> {
        Ok(())
    }
    fn write_line(&self, s: &str) -> std::io::Result<()> {
        self.write_str(s)
    }
    fn write_str(&self, s: &str) -> std::io::Result<()> {
        if let Ok(mut line) = self.line.lock() {
            line.push_str(s);
        }
        Ok(())
    }
    fn clear_line(&self) -> std::io::Result<()> {
        Ok(())
    }
    fn flush(&self) -> std::io::Result<()> {
        use std::io::Write;
        let Ok(mut line) = self.line.lock() else {
            return Ok(());
        };
        let text = std::mem::take(&mut *line);
        let text = text.trim();
        if text.is_empty() {
            return Ok(());
        }
        let mut err = std::io::stderr().lock();
        writeln!(err, "{text}")?;
        err.flush()
    }
}

/// Ends a bar from [`progress_bar`]: a terminal's is cleared; as lines, the last state is
/// printed (so a reader sees `DONE OF` with DONE = OF at the end of a whole run).
pub fn finish_progress(bar: &indicatif::ProgressBar, progress: Progress) {
    match progress {
        Progress::Lines => bar.finish(),
        _ => bar.finish_and_clear(),
    }
}

/// Under [`Progress::Lines`], says first where the command writes: `hearsay-dir PATH`
/// (absolute), so a program that left the directory to its default finds it.
pub fn announce_dir(progress: Progress, dir: &std::path::Path) {
    if progress == Progress::Lines {
        let dir = std::path::absolute(dir).unwrap_or_else(|_| dir.to_owned());
        eprintln!("hearsay-dir {}", safe(&dir.display().to_string()));
    }
}
