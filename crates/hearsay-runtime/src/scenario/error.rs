//! Scenario errors that point at the file, line and column, with the source shown.

use std::path::Path;

use miette::{Diagnostic, NamedSource, SourceSpan};

/// One thing wrong with a scenario file, at a place in it.
#[derive(Debug, thiserror::Error, Diagnostic)]
#[error("{location}: {message}")]
pub struct ScenarioProblem {
    /// `path:line:col`.
    pub location: String,
    /// What is wrong, in one line, shown after `location`.
    pub message: String,
    /// What to do about it.
    #[help]
    pub help: Option<String>,
    #[source_code]
    source_code: NamedSource<String>,
    #[label("here")]
    span: SourceSpan,
}

/// Why a scenario could not be used.
#[derive(Debug, thiserror::Error, Diagnostic)]
pub enum ScenarioError {
    /// The file could not be read.
    #[error("cannot read scenario {path}: {source}")]
    #[diagnostic(help("check the path; scenario files are TOML, e.g. scenarios/fish-market.toml"))]
    Read {
        /// The scenario path as the user gave it (not canonicalised).
        path: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The file was read but is not a valid scenario.
    #[error("scenario {path} is invalid ({} problem{})", problems.len(), if problems.len() == 1 { "" } else { "s" })]
    Invalid {
        /// The scenario path as the user gave it; each problem's location starts with it.
        path: String,
        /// Every problem found, in file order.
        #[related]
        problems: Vec<ScenarioProblem>,
    },
}

impl ScenarioError {
    /// The problems, if the file was read.
    pub fn problems(&self) -> &[ScenarioProblem] {
        match self {
            ScenarioError::Read { .. } => &[],
            ScenarioError::Invalid { problems, .. } => problems,
        }
    }
}

/// Collects problems against one source text.
#[derive(Debug)]
pub(crate) struct Problems {
    path: String,
    text: String,
    found: Vec<(usize, ScenarioProblem)>,
    /// Things worth saying that do not stop a run (`path:line:col: message`), in file
    /// order.
    notes: Vec<(usize, String)>,
}

impl Problems {
    pub(crate) fn new(path: &Path, text: String) -> Self {
        Self {
            path: path.display().to_string(),
            text,
            found: Vec::new(),
            notes: Vec::new(),
        }
    }

    /// Records a note at byte `at` of the text: something the run will do that the
    /// author may not expect, which is not an error (an event after the last tick).
    pub(crate) fn note(&mut self, at: usize, message: impl std::fmt::Display) {
        let (line, col) = line_col(&self.text, at);
        self.notes
            .push((at, format!("{}:{line}:{col}: {message}", self.path)));
    }

    /// The notes, in file order.
    pub(crate) fn take_notes(&mut self) -> Vec<String> {
        self.notes.sort_by_key(|(at, _)| *at);
        std::mem::take(&mut self.notes)
            .into_iter()
            .map(|(_, n)| n)
            .collect()
    }

    /// Records a problem at byte range `span` of the text.
    pub(crate) fn add(
        &mut self,
        span: std::ops::Range<usize>,
        message: impl Into<String>,
        help: Option<&str>,
    ) {
        let start = span.start.min(self.text.len());
        let end = span.end.clamp(start, self.text.len());
        let (line, col) = line_col(&self.text, start);
        self.found.push((
            start,
            ScenarioProblem {
                location: format!("{}:{line}:{col}", self.path),
                message: message.into(),
                help: help.map(str::to_owned),
                source_code: NamedSource::new(&self.path, self.text.clone()),
                span: (start, end - start).into(),
            },
        ));
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.found.is_empty()
    }

    pub(crate) fn into_error(mut self) -> ScenarioError {
        self.found.sort_by_key(|(at, _)| *at);
        ScenarioError::Invalid {
            path: self.path,
            problems: self.found.into_iter().map(|(_, p)| p).collect(),
        }
    }
}

/// 1-based line and column (in characters) of byte offset `at`.
pub(crate) fn line_col(text: &str, at: usize) -> (usize, usize) {
    let mut at = at.min(text.len());
    while !text.is_char_boundary(at) {
        at -= 1;
    }
    let before = &text[..at];
    let line = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    let col = text[line_start..at].chars().count() + 1;
    (line, col)
}

#[cfg(test)]
mod tests {
    use super::line_col;

    #[test]
    fn lines_and_columns_are_one_based_and_count_characters() {
        let text = "a = 1\nname = \"市场\"\nx";
        assert_eq!(line_col(text, 0), (1, 1));
        assert_eq!(line_col(text, 6), (2, 1));
        let x = text.find('x').expect("x");
        assert_eq!(line_col(text, x), (3, 1));
        let quote = text.rfind('"').expect("quote");
        assert_eq!(line_col(text, quote), (2, 11));
        assert_eq!(
            line_col(text, quote - 1),
            (2, 10),
            "inside a multi-byte char"
        );
    }
}
