//! `--set KEY=VALUE` (and `--seed`, `--ticks`, which are the same edits): a scenario
//! changed by dotted TOML key before it is validated.
//!
//! Edits keep the file as its author wrote it — comments, order, spacing — and change
//! only the keys named, so the `scenario.toml` a run directory keeps reads like the
//! user's file with those lines changed, and says exactly what ran.

use crate::RunError;

/// What to call a scenario file in messages once `--set` has edited it: the line and
/// column of a problem are those of the edited text.
pub fn edited_label(path: &std::path::Path) -> std::path::PathBuf {
    std::path::PathBuf::from(format!("{} (after --set)", path.display()))
}

/// The edits the command line asks for, in order: every `--set`, then `--seed` and
/// `--ticks` as `seed=N` and `ticks=N` (so a flag and the `--set` it stands for behave
/// the same everywhere).
pub fn overrides(sets: &[String], seed: Option<u64>, ticks: Option<u64>) -> Vec<String> {
    let mut all = sets.to_vec();
    all.extend(seed.map(|s| format!("seed={s}")));
    all.extend(ticks.map(|t| format!("ticks={t}")));
    all
}

/// The top-level key a `--set` names (`ticks` for `ticks=5`, `memory` for
/// `memory.recall_k=3`).
pub fn set_key(set: &str) -> &str {
    set.split_once('=')
        .map_or(set, |(k, _)| k)
        .trim()
        .split('.')
        .next()
        .unwrap_or_default()
        .trim()
}

/// Reads and validates the scenario at `path` with `sets` applied first (see
/// [`overrides`]): the scenario and the bytes a run directory keeps as `scenario.toml`.
pub fn load_edited(
    path: &std::path::Path,
    sets: &[String],
) -> Result<(crate::Scenario, Vec<u8>), RunError> {
    if sets.is_empty() {
        return Ok(crate::scenario::load(path)?);
    }
    let bytes = crate::scenario::read(path)?;
    let text = match std::str::from_utf8(&bytes) {
        Ok(text) => text,
        // Not UTF-8 (or, below, not TOML): the file's own problem, said at its place.
        Err(_) => {
            return Err(crate::scenario::parse(path, &bytes).err().map_or_else(
                || RunError::BadOption("the scenario cannot be edited".into()),
                RunError::from,
            ));
        }
    };
    let edited = match apply_sets(text, sets) {
        Ok(edited) => edited,
        Err(e) => {
            return Err(crate::scenario::parse(path, &bytes)
                .err()
                .map_or(e, RunError::from));
        }
    };
    let scenario = crate::scenario::parse(&edited_label(path), edited.as_bytes())?;
    Ok((scenario, edited.into_bytes()))
}

/// `text` (a scenario) with every `KEY=VALUE` of `sets` applied, in order. `KEY` is a
/// dotted path (`brains.gemini.model`, `memory.scoring.w_rec`); `VALUE` is a TOML value
/// (`0.5`, `true`, `"text"`), or else taken as a string. Missing tables are created.
pub fn apply_sets(text: &str, sets: &[String]) -> Result<String, RunError> {
    if sets.is_empty() {
        return Ok(text.to_owned());
    }
    let mut doc: toml_edit::DocumentMut = text.parse().map_err(|e: toml_edit::TomlError| {
        RunError::BadOption(format!(
            "the scenario cannot be edited: {}",
            e.message().trim()
        ))
    })?;
    for set in sets {
        let (key, raw) = set.split_once('=').ok_or_else(|| {
            RunError::BadOption(format!(
                "--set {set:?}: expected KEY=VALUE, e.g. brains.b.model=\"gpt-4o\""
            ))
        })?;
        let path: Vec<&str> = key.trim().split('.').map(str::trim).collect();
        if path.iter().any(|p| p.is_empty()) {
            return Err(RunError::BadOption(format!(
                "--set {set:?}: {key:?} is not a dotted key"
            )));
        }
        let raw = raw.trim();
        let mut value = raw
            .parse::<toml_edit::Value>()
            .unwrap_or_else(|_| toml_edit::Value::from(raw));
        let (last, parents) = path
            .split_last()
            .ok_or_else(|| RunError::BadOption(format!("--set {set:?}: empty key")))?;
        let mut table: &mut dyn toml_edit::TableLike = doc.as_table_mut();
        for part in parents {
            let entry = table
                .entry(part)
                .or_insert_with(|| toml_edit::Item::Table(toml_edit::Table::new()));
            table = entry.as_table_like_mut().ok_or_else(|| {
                RunError::BadOption(format!("--set {set:?}: {part:?} is not a table"))
            })?;
        }
        match table.get_mut(last) {
            // Keep the author's spacing and any comment after the value.
            Some(toml_edit::Item::Value(old)) => {
                *value.decor_mut() = old.decor().clone();
                *old = value;
            }
            // A whole table is replaced by an inline table (`memory.embedder={provider=
            // "hashing"}`): the way to drop keys another value would not allow.
            Some(item @ toml_edit::Item::Table(_)) if value.is_inline_table() => {
                if let toml_edit::Value::InlineTable(inline) = value {
                    *item = toml_edit::Item::Table(inline.into_table());
                }
            }
            Some(toml_edit::Item::Table(_) | toml_edit::Item::ArrayOfTables(_)) => {
                return Err(RunError::BadOption(format!(
                    "--set {set:?}: {last:?} is a table: replace it with an inline table \
                     ({last}={{key = value, …}}), or set one of its keys"
                )));
            }
            _ => {
                table.insert(last, toml_edit::Item::Value(value));
            }
        }
    }
    Ok(doc.to_string())
}

#[cfg(test)]
mod tests {
    use super::{apply_sets, overrides, set_key};

    #[test]
    fn sets_edit_nested_keys_and_parse_values() {
        let text = "name = \"x\"\n[brains.b]\nprovider = \"heuristic\"\n";
        let edited = apply_sets(
            text,
            &[
                "brains.b.model=\"gpt-4o\"".into(),
                "memory.scoring.w_rec=0.5".into(),
                "memory.visibility=eventual".into(),
            ],
        )
        .expect("edits");
        let doc: toml::Table = toml::from_str(&edited).expect("toml");
        assert_eq!(doc["brains"]["b"]["model"].as_str(), Some("gpt-4o"));
        assert_eq!(doc["memory"]["scoring"]["w_rec"].as_float(), Some(0.5));
        assert_eq!(
            doc["memory"]["visibility"].as_str(),
            Some("eventual"),
            "bare words are strings"
        );
        assert!(apply_sets(text, &["no-equals".into()]).is_err());
        assert!(
            apply_sets(text, &["name.sub=1".into()]).is_err(),
            "name is not a table"
        );
        assert!(
            apply_sets(text, &["brains.b=1".into()]).is_err(),
            "a table is not replaced by a value"
        );
        let replaced = apply_sets(
            "[memory.embedder]\nprovider = \"openai\"\nmodel = \"e5\"\n",
            &["memory.embedder={provider=\"hashing\"}".into()],
        )
        .expect("replace");
        let doc: toml::Table = toml::from_str(&replaced).expect("toml");
        assert_eq!(
            doc["memory"]["embedder"].as_table().map(|t| t.len()),
            Some(1),
            "an inline table replaces the whole table: {replaced}"
        );
        assert_eq!(
            doc["memory"]["embedder"]["provider"].as_str(),
            Some("hashing")
        );
    }

    #[test]
    fn edits_keep_the_file_as_written() {
        let text = "# the town\nname = \"x\"\nseed = 42   # the usual\nticks = 240\n\n[world]\nwidth = 3 # small\n";
        let edited = apply_sets(text, &overrides(&[], Some(7), Some(10))).expect("edits");
        assert_eq!(
            edited,
            "# the town\nname = \"x\"\nseed = 7   # the usual\nticks = 10\n\n[world]\nwidth = 3 # small\n"
        );
        assert_eq!(set_key("memory.recall_k=3"), "memory");
        assert_eq!(set_key(" ticks = 5"), "ticks");
    }
}
