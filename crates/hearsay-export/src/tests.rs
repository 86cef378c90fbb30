use parquet::file::reader::{FileReader, SerializedFileReader};
use parquet::record::Field;

use super::table::Kind::{Bool, Float, FloatList, Int, IntList, Text, TextList};
use super::table::{Cell, TableSpec, col, opt};
use super::write::{CsvSink, ParquetSink, Sink};

const SPEC: TableSpec = TableSpec {
    name: "sample",
    doc: "A table of every kind.",
    columns: &[
        col("n", Int, "an int"),
        opt("f", Float, "a float"),
        opt("b", Bool, "a bool"),
        opt("s", Text, "a text"),
        opt("ids", IntList, "ints"),
        opt("names", TextList, "texts"),
        opt("v", FloatList, "floats"),
    ],
};

fn rows() -> Vec<Vec<Cell>> {
    vec![
        vec![
            Cell::Int(1),
            Cell::Float(0.5),
            Cell::Bool(true),
            Cell::Text("héllo, \"world\"".into()),
            Cell::IntList(vec![3, 4]),
            Cell::TextList(vec!["a".into()]),
            Cell::FloatList(vec![0.25, -1.0]),
        ],
        vec![
            Cell::Int(-2),
            Cell::Null,
            Cell::Null,
            Cell::Null,
            Cell::Null,
            Cell::Null,
            Cell::Null,
        ],
        vec![
            Cell::Int(3),
            Cell::Float(1e-3),
            Cell::Bool(false),
            Cell::Text(String::new()),
            Cell::IntList(Vec::new()),
            Cell::TextList(Vec::new()),
            Cell::FloatList(Vec::new()),
        ],
    ]
}

#[test]
fn parquet_keeps_every_kind_null_and_empty_list_apart() {
    let mut bytes = Vec::new();
    let mut sink = Box::new(ParquetSink::new(SPEC, &mut bytes).expect("schema"));
    for r in rows() {
        sink.row(r).expect("row");
    }
    assert_eq!(sink.finish().expect("finish"), 3);
    let mut file = tempfile::tempfile().expect("a temporary file");
    std::io::Write::write_all(&mut file, &bytes).expect("written");
    let reader = SerializedFileReader::new(file).expect("a parquet file");
    let got: Vec<String> = reader
        .get_row_iter(None)
        .expect("rows")
        .map(|r| r.expect("row").to_string())
        .collect();
    assert_eq!(
        got,
        [
            r#"{n: 1, f: 0.5, b: true, s: "héllo, "world"", ids: [3, 4], names: ["a"], v: [0.25, -1E0]}"#,
            "{n: -2, f: null, b: null, s: null, ids: null, names: null, v: null}",
            r#"{n: 3, f: 0.001, b: false, s: "", ids: [], names: [], v: []}"#,
        ]
    );
    // The list columns are Parquet LISTs, not repeated leaves: readers see typed lists.
    let row = reader
        .get_row_iter(None)
        .expect("rows")
        .next()
        .expect("a row")
        .expect("row");
    assert!(matches!(
        row.get_column_iter().nth(4),
        Some((_, Field::ListInternal(_)))
    ));
}

#[test]
fn csv_writes_a_header_empty_nulls_and_lists_as_json() {
    let mut bytes = Vec::new();
    let mut sink = Box::new(CsvSink::new(SPEC, &mut bytes).expect("header"));
    for r in rows() {
        sink.row(r).expect("row");
    }
    assert_eq!(sink.finish().expect("finish"), 3);
    let text = String::from_utf8(bytes).expect("utf-8");
    assert_eq!(
        text,
        "n,f,b,s,ids,names,v\n\
         1,0.5,true,\"héllo, \"\"world\"\"\",\"[3,4]\",\"[\"\"a\"\"]\",\"[0.25,-1.0]\"\n\
         -2,,,,,,\n\
         3,0.001,false,,[],[],[]\n"
    );
    // CSV has one spelling for an empty text and a null (an empty field); Parquet keeps
    // them apart (the test above).
}

#[test]
fn a_row_that_does_not_fit_is_refused() {
    let mut sink = Box::new(CsvSink::new(SPEC, Vec::new()).expect("header"));
    let mut bad = rows().remove(0);
    bad[0] = Cell::Null;
    assert!(sink.row(bad).is_err(), "null in a column every row fills");
    assert!(sink.row(vec![Cell::Int(1)]).is_err(), "too few cells");
    let mut wrong = rows().remove(0);
    wrong[1] = Cell::Text("x".into());
    assert!(sink.row(wrong).is_err(), "text in a float column");
}

#[test]
fn the_run_directory_module_knows_every_table_file() {
    let names: Vec<&str> = super::tables::TABLES.iter().map(|t| t.name).collect();
    assert_eq!(names, hearsay_runtime::rundir::EXPORT_TABLES);
    for t in super::tables::TABLES {
        let mut seen = std::collections::BTreeSet::new();
        for c in t.columns {
            assert!(seen.insert(c.name), "{}: column {} twice", t.name, c.name);
            assert!(!c.doc.is_empty(), "{}.{} has no doc", t.name, c.name);
        }
    }
}

#[test]
fn docs_export_md_holds_the_schema_this_build_writes() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/EXPORT.md");
    let doc = std::fs::read_to_string(path).expect("docs/EXPORT.md");
    let block = doc
        .split_once("<!-- schema:begin -->\n")
        .and_then(|(_, rest)| rest.split_once("<!-- schema:end -->"))
        .map(|(block, _)| block)
        .expect("docs/EXPORT.md has the schema markers");
    assert_eq!(
        block.trim_end(),
        super::schema_markdown().trim_end(),
        "docs/EXPORT.md is out of date: replace its schema block with `hearsay export --schema`"
    );
}
