//! Migrations embedded in the binary: each store lists its `migrations/<backend>` files
//! (a test keeps the list and the directory in step), and this turns a list into a
//! sqlx [`Migrator`] without sqlx's macros.

use std::borrow::Cow;

use sqlx::SqlSafeStr;
use sqlx::migrate::{Migration, MigrationType, Migrator};

/// (version, description, SQL) — the file `{version:04}_{description}.sql`.
pub type Embedded = (i64, &'static str, &'static str);

/// A migrator for `list`.
pub fn migrator(list: &[Embedded]) -> Migrator {
    Migrator::with_migrations(
        list.iter()
            .map(|&(version, description, sql)| {
                Migration::new(
                    version,
                    Cow::Borrowed(description),
                    MigrationType::Simple,
                    sql.into_sql_str(),
                    false,
                )
            })
            .collect(),
    )
}

/// Asserts that `list` names exactly the `.sql` files of `migrations/<backend>`.
#[cfg(test)]
pub fn assert_lists_directory(list: &[Embedded], backend: &str) {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../migrations")
        .join(backend);
    let mut files: Vec<String> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".sql"))
        .collect();
    files.sort();
    let listed: Vec<String> = list
        .iter()
        .map(|(v, d, _)| format!("{v:04}_{d}.sql"))
        .collect();
    assert_eq!(
        files, listed,
        "migrations/{backend} and the embedded list differ"
    );
}
