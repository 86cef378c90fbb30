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
