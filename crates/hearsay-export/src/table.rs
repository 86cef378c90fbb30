//! What a table is to the writers: a name, typed columns with their documentation, and
//! rows of cells. Both formats (and `hearsay export --schema`) read the same [`TableSpec`],
//! so the Parquet schema, the CSV header and the documented schema cannot drift apart.

/// A column's type, as both formats spell it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// A 64-bit signed integer (Parquet `INT64`).
    Int,
    /// A 64-bit float (`DOUBLE`).
    Float,
    /// `BOOLEAN`.
    Bool,
    /// UTF-8 text (`BYTE_ARRAY` annotated `STRING`).
    Text,
    /// A list of 64-bit integers (`LIST<INT64>`; in CSV a JSON array).
    IntList,
    /// A list of texts (`LIST<STRING>`; in CSV a JSON array).
    TextList,
    /// A list of 32-bit floats, a vector (`LIST<FLOAT>`; in CSV a JSON array).
    FloatList,
}

impl Kind {
    /// The type's name in the documented schema.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Int => "int64",
            Kind::Float => "float64",
            Kind::Bool => "bool",
            Kind::Text => "string",
            Kind::IntList => "list<int64>",
            Kind::TextList => "list<string>",
            Kind::FloatList => "list<float32>",
        }
    }
}

/// One column: its name, type, whether it may be null, and what it holds.
#[derive(Clone, Copy, Debug)]
pub struct ColumnSpec {
    /// snake_case, unique in its table.
    pub name: &'static str,
    /// The type of every non-null cell.
    pub kind: Kind,
    /// Whether a cell may be null (for a column that only some rows have).
    pub nullable: bool,
    /// One line for the schema document.
    pub doc: &'static str,
}

/// A column that every row fills.
pub const fn col(name: &'static str, kind: Kind, doc: &'static str) -> ColumnSpec {
    ColumnSpec {
        name,
        kind,
        nullable: false,
        doc,
    }
}

/// A column some rows leave null.
pub const fn opt(name: &'static str, kind: Kind, doc: &'static str) -> ColumnSpec {
    ColumnSpec {
        name,
        kind,
        nullable: true,
        doc,
    }
}

/// A table: its file name (without extension), what one row is, its columns in order.
#[derive(Clone, Copy, Debug)]
pub struct TableSpec {
    /// The file's stem: `events` → `events.parquet` / `events.csv`.
    pub name: &'static str,
    /// What one row is, and where it comes from.
    pub doc: &'static str,
    /// In file order.
    pub columns: &'static [ColumnSpec],
}

/// One cell of a row.
#[derive(Clone, Debug, PartialEq)]
pub enum Cell {
    /// No value (only in a nullable column).
    Null,
    /// For [`Kind::Int`].
    Int(i64),
    /// For [`Kind::Float`].
    Float(f64),
    /// For [`Kind::Bool`].
    Bool(bool),
    /// For [`Kind::Text`].
    Text(String),
    /// For [`Kind::IntList`].
    IntList(Vec<i64>),
    /// For [`Kind::TextList`].
    TextList(Vec<String>),
    /// For [`Kind::FloatList`].
    FloatList(Vec<f32>),
}

impl Cell {
    /// About what the cell holds in memory, bytes (for sizing a row group).
    pub fn bytes(&self) -> usize {
        8 + match self {
            Cell::Text(s) => s.len(),
            Cell::IntList(v) => v.len() * 8,
            Cell::TextList(v) => v.iter().map(|s| s.len() + 8).sum(),
            Cell::FloatList(v) => v.len() * 4,
            _ => 0,
        }
    }

    /// Whether the cell may stand in a column of `spec`.
    pub fn fits(&self, spec: &ColumnSpec) -> bool {
        match self {
            Cell::Null => spec.nullable,
            Cell::Int(_) => spec.kind == Kind::Int,
            Cell::Float(_) => spec.kind == Kind::Float,
            Cell::Bool(_) => spec.kind == Kind::Bool,
            Cell::Text(_) => spec.kind == Kind::Text,
            Cell::IntList(_) => spec.kind == Kind::IntList,
            Cell::TextList(_) => spec.kind == Kind::TextList,
            Cell::FloatList(_) => spec.kind == Kind::FloatList,
        }
    }
}

/// Cells from the values a table builder has at hand.
impl From<i64> for Cell {
    fn from(v: i64) -> Cell {
        Cell::Int(v)
    }
}

impl From<u64> for Cell {
    fn from(v: u64) -> Cell {
        // Ticks, ids and counts: far below 2^63 in any run (a tick is a model call).
        Cell::Int(i64::try_from(v).unwrap_or(i64::MAX))
    }
}

impl From<u32> for Cell {
    fn from(v: u32) -> Cell {
        Cell::Int(i64::from(v))
    }
}

impl From<i32> for Cell {
    fn from(v: i32) -> Cell {
        Cell::Int(i64::from(v))
    }
}

impl From<u8> for Cell {
    fn from(v: u8) -> Cell {
        Cell::Int(i64::from(v))
    }
}

impl From<usize> for Cell {
    fn from(v: usize) -> Cell {
        Cell::from(v as u64)
    }
}

impl From<f64> for Cell {
    fn from(v: f64) -> Cell {
        Cell::Float(v)
    }
}

impl From<bool> for Cell {
    fn from(v: bool) -> Cell {
        Cell::Bool(v)
    }
}

impl From<String> for Cell {
    fn from(v: String) -> Cell {
        Cell::Text(v)
    }
}

impl From<&str> for Cell {
    fn from(v: &str) -> Cell {
        Cell::Text(v.to_owned())
    }
}

impl From<Vec<String>> for Cell {
    fn from(v: Vec<String>) -> Cell {
        Cell::TextList(v)
    }
}

impl From<Vec<f32>> for Cell {
    fn from(v: Vec<f32>) -> Cell {
        Cell::FloatList(v)
    }
}

impl<T: Into<Cell>> From<Option<T>> for Cell {
    fn from(v: Option<T>) -> Cell {
        v.map_or(Cell::Null, Into::into)
    }
}

/// A list of memory ids (recalled, evidence).
pub fn ids(ids: &[hearsay_runtime::core::MemoryId]) -> Cell {
    Cell::IntList(
        ids.iter()
            .map(|id| i64::try_from(id.0).unwrap_or(i64::MAX))
            .collect(),
    )
}

/// The schema of `tables` as Markdown: one section per table, one row per column.
pub fn markdown(tables: &[TableSpec]) -> String {
    let mut out = String::new();
    for table in tables {
        out.push_str(&format!("### `{}`\n\n{}\n\n", table.name, table.doc));
        out.push_str("| column | type | null | what it holds |\n|---|---|---|---|\n");
        for c in table.columns {
            out.push_str(&format!(
                "| `{}` | {} | {} | {} |\n",
                c.name,
                c.kind.name(),
                if c.nullable { "yes" } else { "" },
                c.doc.replace('|', "\\|")
            ));
        }
        out.push('\n');
    }
    out
}
