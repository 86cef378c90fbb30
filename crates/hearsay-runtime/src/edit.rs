//! `--set KEY=VALUE`: edits of a scenario by dotted TOML key, for forks.

use crate::RunError;

/// What to call a scenario file in messages once `--set` has edited it: the line and
/// column of a problem are those of the edited text.
pub fn edited_label(path: &std::path::Path) -> std::path::PathBuf {
    std::path::PathBuf::from(format!("{} (after --set)", path.display()))
}

/// `text` (a scenario) with every `KEY=VALUE` of `sets` applied, in order. `KEY` is a
/// dotted path (`brains.gemini.model`, `memory.scoring.w_rec`); `VALUE` is a TOML value
/// (`0.5`, `true`, `"text"`), or else taken as a string. Missing tables are created.
pub fn apply_sets(text: &str, sets: &[String]) -> Result<String, RunError> {
    if sets.is_empty() {
        return Ok(text.to_owned());
    }
    let mut doc: toml::Table = toml::from_str(text).map_err(|e| {
        RunError::BadOption(format!("the scenario cannot be edited: {}", e.message()))
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
        let value = toml::from_str::<toml::Table>(&format!("v = {}", raw.trim()))
            .ok()
            .and_then(|mut t| t.remove("v"))
            .unwrap_or_else(|| toml::Value::String(raw.trim().to_owned()));
        let (last, parents) = path
            .split_last()
            .ok_or_else(|| RunError::BadOption(format!("--set {set:?}: empty key")))?;
        let mut table = &mut doc;
        for part in parents {
            let entry = table
                .entry((*part).to_owned())
                .or_insert_with(|| toml::Value::Table(toml::Table::new()));
            table = entry.as_table_mut().ok_or_else(|| {
                RunError::BadOption(format!("--set {set:?}: {part:?} is not a table"))
            })?;
        }
        table.insert((*last).to_owned(), value);
    }
    toml::to_string(&doc)
        .map_err(|e| RunError::BadOption(format!("the edited scenario cannot be written: {e}")))
}

#[cfg(test)]
mod tests {
    use super::apply_sets;

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
    }
}
