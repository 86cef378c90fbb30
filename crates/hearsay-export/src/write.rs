//! The two file formats, behind one [`Sink`]: rows go in one at a time, in spec order, and
//! a table is held in memory only a row group at a time (Parquet) or not at all (CSV), so
//! a run of millions of events exports in bounded memory.
//!
//! Parquet is written with the `parquet` crate's column writers (no Arrow): flat columns
//! as `OPTIONAL`/`REQUIRED` leaves, lists in the three-level `LIST` layout the format
//! specifies, so DuckDB, polars, pandas (pyarrow) and Spark read them as typed lists.
//! CSV has a header row; a null is an empty field, a list is a JSON array.

use std::io::Write;
use std::sync::Arc;

use parquet::basic::Compression;
use parquet::data_type::{BoolType, ByteArray, ByteArrayType, DoubleType, FloatType, Int64Type};
use parquet::file::properties::WriterProperties;
use parquet::file::writer::SerializedFileWriter;
use parquet::schema::types::Type;

use crate::table::{Cell, ColumnSpec, Kind, TableSpec};

/// Rows a Parquet row group holds at most.
const ROW_GROUP_ROWS: usize = 32_768;
/// The cells' bytes a row group holds at most (vectors fill one long before the rows do).
const ROW_GROUP_BYTES: usize = 16 << 20;

/// A writer failed, or a row did not fit its table.
#[derive(Debug, thiserror::Error)]
pub enum WriteError {
    /// Writing the file failed.
    #[error("{0}")]
    Io(#[from] std::io::Error),
    /// The Parquet encoder refused.
    #[error("Parquet: {0}")]
    Parquet(#[from] parquet::errors::ParquetError),
    /// The CSV encoder refused.
    #[error("CSV: {0}")]
    Csv(#[from] csv::Error),
    /// The store could not be read.
    #[error("the store: {0}")]
    Store(#[from] hearsay_memory::StoreError),
    /// The run's files could not be read (the refusal says which and why).
    #[error("{0}")]
    Read(#[from] hearsay_runtime::RunError),
    /// A row that does not fit the table's spec: a bug in the exporter, never the run's
    /// fault.
    #[error("table {table}: {problem}")]
    Row {
        /// The table.
        table: &'static str,
        /// What did not fit.
        problem: String,
    },
}

/// Where a table's rows go.
pub trait Sink: Send {
    /// One row, a cell per column in spec order.
    fn row(&mut self, cells: Vec<Cell>) -> Result<(), WriteError>;
    /// Writes what is buffered and closes the file; the rows written, in all.
    fn finish(self: Box<Self>) -> Result<u64, WriteError>;
}

fn check(spec: &TableSpec, cells: &[Cell]) -> Result<(), WriteError> {
    let row = |problem: String| WriteError::Row {
        table: spec.name,
        problem,
    };
    if cells.len() != spec.columns.len() {
        return Err(row(format!(
            "a row of {} cells for {} columns",
            cells.len(),
            spec.columns.len()
        )));
    }
    for (cell, c) in cells.iter().zip(spec.columns) {
        if !cell.fits(c) {
            return Err(row(format!(
                "column {}: {cell:?} is not a {}",
                c.name,
                c.kind.name()
            )));
        }
    }
    Ok(())
}

/// The Parquet schema of `spec`.
fn schema(spec: &TableSpec) -> Result<Type, parquet::errors::ParquetError> {
    let mut message = format!("message {} {{\n", spec.name);
    for c in spec.columns {
        let repetition = if c.nullable { "OPTIONAL" } else { "REQUIRED" };
        // `(UTF8)` after a name annotates it as text (Parquet's STRING logical type).
        let leaf = |ty: &str, note: &str| format!("  {repetition} {ty} {}{note};\n", c.name);
        let list = |ty: &str, note: &str| {
            format!(
                "  OPTIONAL group {} (LIST) {{ REPEATED group list {{ REQUIRED {ty} element{note}; }} }}\n",
                c.name
            )
        };
        message.push_str(&match c.kind {
            Kind::Int => leaf("INT64", ""),
            Kind::Float => leaf("DOUBLE", ""),
            Kind::Bool => leaf("BOOLEAN", ""),
            Kind::Text => leaf("BYTE_ARRAY", " (UTF8)"),
            Kind::IntList => list("INT64", ""),
            Kind::TextList => list("BYTE_ARRAY", " (UTF8)"),
            Kind::FloatList => list("FLOAT", ""),
        });
    }
    message.push('}');
    parquet::schema::parser::parse_message_type(&message)
}

/// A table as one Parquet file, a row group per `ROW_GROUP_ROWS` rows.
pub struct ParquetSink<W: Write + Send> {
    spec: TableSpec,
    writer: SerializedFileWriter<W>,
    rows: Vec<Vec<Cell>>,
    /// The buffered rows' cells, bytes (about).
    buffered: usize,
    written: u64,
}

impl<W: Write + Send> ParquetSink<W> {
    /// Starts `spec`'s file on `out`.
    pub fn new(spec: TableSpec, out: W) -> Result<Self, WriteError> {
        let props = WriterProperties::builder()
            .set_compression(Compression::SNAPPY)
            .set_created_by(format!("hearsay {}", env!("CARGO_PKG_VERSION")))
            .build();
        let writer = SerializedFileWriter::new(out, Arc::new(schema(&spec)?), Arc::new(props))?;
        Ok(Self {
            spec,
            writer,
            rows: Vec::new(),
            buffered: 0,
            written: 0,
        })
    }

    fn flush_group(&mut self) -> Result<(), WriteError> {
        if self.rows.is_empty() {
            return Ok(());
        }
        let mut group = self.writer.next_row_group()?;
        for (i, spec) in self.spec.columns.iter().enumerate() {
            let Some(mut column) = group.next_column()? else {
                return Err(WriteError::Row {
                    table: self.spec.name,
                    problem: format!("the schema has no leaf for column {}", spec.name),
                });
            };
            let cells = self.rows.iter().map(|r| &r[i]);
            write_column(column.untyped(), spec, cells)?;
            column.close()?;
        }
        group.close()?;
        self.written += self.rows.len() as u64;
        self.rows.clear();
        self.buffered = 0;
        Ok(())
    }
}

/// Definition levels of a flat column (`None` for a required one) and its values.
fn flat<'a, T>(
    spec: &ColumnSpec,
    cells: impl Iterator<Item = &'a Cell>,
    value: impl Fn(&'a Cell) -> Option<T>,
) -> (Vec<T>, Option<Vec<i16>>) {
    let mut values = Vec::new();
    let mut defs = Vec::new();
    for cell in cells {
        match value(cell) {
            Some(v) => {
                values.push(v);
                defs.push(1);
            }
            None => defs.push(0),
        }
    }
    (values, spec.nullable.then_some(defs))
}

/// Values and (definition, repetition) levels of a list column: a null list is (0, 0), an
/// empty one (1, 0), each element (2, 0 for the first and 1 after).
fn nested<'a, T>(
    cells: impl Iterator<Item = &'a Cell>,
    items: impl Fn(&'a Cell) -> Option<Vec<T>>,
) -> (Vec<T>, Vec<i16>, Vec<i16>) {
    let (mut values, mut defs, mut reps) = (Vec::new(), Vec::new(), Vec::new());
    for cell in cells {
        match items(cell) {
            None => {
                defs.push(0);
                reps.push(0);
            }
            Some(list) if list.is_empty() => {
                defs.push(1);
                reps.push(0);
            }
            Some(list) => {
                for (j, v) in list.into_iter().enumerate() {
                    values.push(v);
                    defs.push(2);
                    reps.push(i16::from(j > 0));
                }
            }
        }
    }
    (values, defs, reps)
}

fn write_column<'a>(
    column: &mut parquet::column::writer::ColumnWriter<'_>,
    spec: &ColumnSpec,
    cells: impl Iterator<Item = &'a Cell>,
) -> Result<(), WriteError> {
    use parquet::column::writer::get_typed_column_writer_mut as typed;
    let text = |s: &str| ByteArray::from(s.as_bytes().to_vec());
    match spec.kind {
        Kind::Int => {
            let (v, d) = flat(spec, cells, |c| match c {
                Cell::Int(x) => Some(*x),
                _ => None,
            });
            typed::<Int64Type>(column).write_batch(&v, d.as_deref(), None)?;
        }
        Kind::Float => {
            let (v, d) = flat(spec, cells, |c| match c {
                Cell::Float(x) => Some(*x),
                _ => None,
            });
            typed::<DoubleType>(column).write_batch(&v, d.as_deref(), None)?;
        }
        Kind::Bool => {
            let (v, d) = flat(spec, cells, |c| match c {
                Cell::Bool(x) => Some(*x),
                _ => None,
            });
            typed::<BoolType>(column).write_batch(&v, d.as_deref(), None)?;
        }
        Kind::Text => {
            let (v, d) = flat(spec, cells, |c| match c {
                Cell::Text(s) => Some(text(s)),
                _ => None,
            });
            typed::<ByteArrayType>(column).write_batch(&v, d.as_deref(), None)?;
        }
        Kind::IntList => {
            let (v, d, r) = nested(cells, |c| match c {
                Cell::IntList(x) => Some(x.clone()),
                _ => None,
            });
            typed::<Int64Type>(column).write_batch(&v, Some(&d), Some(&r))?;
        }
        Kind::TextList => {
            let (v, d, r) = nested(cells, |c| match c {
                Cell::TextList(x) => Some(x.iter().map(|s| text(s)).collect()),
                _ => None,
            });
            typed::<ByteArrayType>(column).write_batch(&v, Some(&d), Some(&r))?;
        }
        Kind::FloatList => {
            let (v, d, r) = nested(cells, |c| match c {
                Cell::FloatList(x) => Some(x.clone()),
                _ => None,
            });
            typed::<FloatType>(column).write_batch(&v, Some(&d), Some(&r))?;
        }
    }
    Ok(())
}

impl<W: Write + Send> Sink for ParquetSink<W> {
    fn row(&mut self, cells: Vec<Cell>) -> Result<(), WriteError> {
        check(&self.spec, &cells)?;
        self.buffered += cells.iter().map(Cell::bytes).sum::<usize>();
        self.rows.push(cells);
        if self.rows.len() >= ROW_GROUP_ROWS || self.buffered >= ROW_GROUP_BYTES {
            self.flush_group()?;
        }
        Ok(())
    }

    fn finish(mut self: Box<Self>) -> Result<u64, WriteError> {
        self.flush_group()?;
        let mut out = self.writer.into_inner()?;
        out.flush()?;
        Ok(self.written)
    }
}

/// A table as one CSV file with a header row.
pub struct CsvSink<W: Write> {
    spec: TableSpec,
    writer: csv::Writer<W>,
    written: u64,
}

impl<W: Write> CsvSink<W> {
    /// Starts `spec`'s file on `out` with its header.
    pub fn new(spec: TableSpec, out: W) -> Result<Self, WriteError> {
        let mut writer = csv::Writer::from_writer(out);
        writer.write_record(spec.columns.iter().map(|c| c.name))?;
        Ok(Self {
            spec,
            writer,
            written: 0,
        })
    }
}

/// A cell as CSV text: empty for null, `true`/`false`, the shortest text that reads back
/// as the same float, lists as JSON arrays.
fn csv_field(cell: &Cell) -> String {
    let json = |v: serde_json::Value| v.to_string();
    match cell {
        Cell::Null => String::new(),
        Cell::Int(x) => x.to_string(),
        Cell::Float(x) => x.to_string(),
        Cell::Bool(x) => x.to_string(),
        Cell::Text(s) => s.clone(),
        Cell::IntList(v) => json(serde_json::json!(v)),
        Cell::TextList(v) => json(serde_json::json!(v)),
        Cell::FloatList(v) => json(serde_json::json!(v)),
    }
}

impl<W: Write + Send> Sink for CsvSink<W> {
    fn row(&mut self, cells: Vec<Cell>) -> Result<(), WriteError> {
        check(&self.spec, &cells)?;
        self.writer.write_record(cells.iter().map(csv_field))?;
        self.written += 1;
        Ok(())
    }

    fn finish(mut self: Box<Self>) -> Result<u64, WriteError> {
        self.writer.flush()?;
        Ok(self.written)
    }
}
