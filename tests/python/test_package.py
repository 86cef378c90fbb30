"""The Python package, installed from its wheel, against the run directory's own files.

Every DataFrame is compared with what the run wrote (events.jsonl, llm.jsonl,
memories.db, summary.json, scenario.toml), read here with the standard library alone, so
a column the exporter fills wrongly fails here; the Parquet files are read back with
DuckDB and polars as a user without hearsay would.
"""

import json
import math
import re
import sqlite3
import subprocess
import sys
import tomllib
from pathlib import Path

import pandas as pd
import polars as pl
import pytest

import hearsay


def log_bytes(path: Path) -> bytes:
    """A run's log named as before (``events.jsonl``): the text of ``events.jsonl.zst``,
    decoded by the zstd command."""
    zst = path.with_name(path.name + ".zst")
    return subprocess.run(["zstd", "-dcq", str(zst)], check=True, capture_output=True).stdout


def lines(path: Path):
    text = log_bytes(path).decode("utf-8")
    return [json.loads(l) for l in text.splitlines() if l.strip()]


def clean(value):
    """A DataFrame cell as plain Python: NaN/None → None, numpy scalars and arrays →
    ints, floats, lists."""
    if value is None:
        return None
    if isinstance(value, float) and math.isnan(value):
        return None
    if hasattr(value, "tolist"):
        return clean(value.tolist())
    if isinstance(value, list):
        return [clean(v) for v in value]
    return value


def records(frame: pd.DataFrame):
    return [{k: clean(v) for k, v in row.items()} for row in frame.to_dict("records")]


# -- the package itself ---------------------------------------------------------------


def test_the_binary_is_the_wheels(root):
    where = Path(hearsay.binary()).resolve()
    assert Path(sys.prefix).resolve() in where.parents, f"{where} is not inside {sys.prefix}"
    assert root / "target" not in where.parents
    out = subprocess.run([str(where), "--version"], capture_output=True, text=True, check=True)
    assert out.stdout.startswith("hearsay ")


def test_a_run_from_python_is_a_run_directory(fish_run):
    for name in ("events.jsonl.zst", "llm.jsonl.zst", "memories.db", "summary.json", "scenario.toml"):
        assert (fish_run.dir / name).is_file(), name
    assert fish_run.summary["seed"] == 7
    assert fish_run.summary["ticks"] == 150
    assert "fresh fish" in fish_run.output, "the run's table of knowers is kept"


# -- every table against the files ----------------------------------------------------


def expected_event(seq, e):
    """The row the schema promises for one events.jsonl line (docs/EXPORT.md)."""
    t = e["type"]
    row = {c: None for c in EVENT_COLUMNS}
    row.update(seq=seq, tick=e["tick"], type=t, npc=e.get("npc"))
    if t in ("spawn", "stay"):
        row["x"], row["y"] = e["at"]
    if t == "move":
        row["x"], row["y"] = e["to"]
        row["from_x"], row["from_y"] = e["from"]
        row["target_x"], row["target_y"] = e["target"]
        row["continued"] = e.get("continued", False)
    if t in ("talk", "move", "stay"):
        row["recalled"] = e["recalled"]
        row["recall_failed"] = e.get("recall_failed", False)
        row["wake"] = e.get("wake", [])
    if t == "stay":
        row["brain_failed"] = e.get("brain_failed", False)
        row["continued"] = e.get("continued", False)
    if t == "talk":
        row.update(text=e["text"], listeners=e["listeners"], to=e.get("to"), whisper=e.get("whisper", False))
    if t == "scenario_event":
        row.update(text=e["text"], place=e["place"], witnesses=e["witnesses"])
    if t == "memory":
        row.update(
            memory=e["id"],
            kind=e["kind"],
            importance=e["importance"],
            content=e["content"],
            evidence=e.get("evidence", []),
            **{"from": e.get("from")},
        )
    if t == "forgot":
        row["memory"] = e["id"]
    if t == "reflected":
        row.update(insights=e["insights"], importance=e["importance"], failed=e.get("failed", False))
    if t == "learned":
        row.update(fact=e["fact"], memory=e["memory"], via=e.get("via"), **{"from": e.get("from")})
    if t == "tick":
        row["hash"] = e["hash"]
    return row


EVENT_COLUMNS = [
    "seq", "tick", "type", "npc", "x", "y", "from_x", "from_y", "target_x", "target_y",
    "text", "listeners", "to", "whisper", "recalled", "recall_failed", "brain_failed",
    "continued", "wake", "memory", "kind", "importance", "content", "from", "evidence",
    "fact", "via", "insights", "failed", "place", "witnesses", "hash",
]


def test_events_are_the_event_log_line_for_line(fish_run):
    log = lines(fish_run.dir / "events.jsonl")
    frame = fish_run.events()
    assert list(frame.columns) == EVENT_COLUMNS
    assert len(frame) == len(log)
    got = records(frame)
    for seq, (row, e) in enumerate(zip(got, log), start=1):
        assert row == expected_event(seq, e), f"line {seq}: {e}"
    # types= keeps only those lines, in log order.
    talks = fish_run.events("talk")
    assert list(talks["seq"]) == [i for i, e in enumerate(log, 1) if e["type"] == "talk"]
    assert len(talks) > 0
    both = fish_run.events(["learned", "memory"])
    assert set(both["type"]) == {"learned", "memory"}


def test_memories_are_the_store_rows(fish_run):
    db = sqlite3.connect(f"file:{fish_run.dir / 'memories.db'}?mode=ro", uri=True)
    rows = db.execute(
        "SELECT m.id, m.npc_name, m.npc, m.tick_created, m.kind, m.importance, m.content, "
        "m.forgotten_tick, COALESCE(r.recall_count, 0), m.embedding_model IS NOT NULL "
        "FROM memories m LEFT JOIN memory_recalls r ON r.id = m.id ORDER BY m.id"
    ).fetchall()
    frame = fish_run.memories(include_archived=True)
    got = [
        (r["id"], r["npc"], r["npc_id"], r["tick"], r["kind"], r["importance"], r["content"],
         r["archived_tick"], r["recalls"], int(r["embedded"]))
        for r in records(frame)
    ]
    assert got == [tuple(r) for r in rows]
    assert len(got) == fish_run.summary["memories"]["total"]
    # One NPC's, and without the archived ones by default.
    bob = fish_run.memories("Bob")
    assert set(bob["npc"]) == {"Bob"}
    assert bob["archived_tick"].isna().all()
    with pytest.raises(KeyError):
        fish_run.memories("Nobody")


def test_calls_are_the_tape(fish_run):
    tape = [c for c in lines(fish_run.dir / "llm.jsonl") if "npc" in c]
    frame = records(fish_run.calls())
    assert len(frame) == len(tape)
    names = [n["name"] for n in tomllib.loads((fish_run.dir / "scenario.toml").read_text())["npcs"]]
    order = sorted(tape, key=lambda c: (c["tick"], names.index(c["npc"])))
    for row, c in zip(frame, order):
        assert (row["tick"], row["npc"], row["brain"], row["provider"]) == (
            c["tick"], c["npc"], c["brain"], c["provider"])
        assert row["outcome"] == c["outcome"]
        assert row["action"] == c["decision"]["action"]
        assert row["recalled"] == c["recalled"]
        # The heuristic brain's calls are taped without the request's digest: null.
        assert row["request"] == c.get("request")
        if c["provider"] == "heuristic":
            assert row["request"] is None
        assert row["recall_query"] == c.get("recall_query", "")
        if c["decision"]["action"] == "move":
            assert [row["to_x"], row["to_y"]] == c["decision"]["to"]
        # The heuristic brain is not timed: its latency is null, never a made-up 0.
        assert row["latency_ms"] is None


def test_knowers_and_hops_are_the_summary(fish_run):
    summary = fish_run.summary
    want = [
        (f["name"], k["npc"], k["tick"], k["from"], k["depth"], k["memory"], k["words"])
        for f in summary["facts"] for k in f["knowers"]
    ]
    got = [
        (r["fact"], r["npc"], r["tick"], r["from"], r["depth"], r["memory"], r["words"])
        for r in records(fish_run.knowers())
    ]
    assert got == want
    assert len(got) > 0
    fish = records(fish_run.knowers("fresh fish"))
    assert {r["fact"] for r in fish} == {"fresh fish"}
    hops = records(fish_run.hops("fresh fish"))
    assert hops == [
        {k: h[k] for k in ("depth", "knowers", "mean_similarity", "min_similarity")}
        for h in summary["facts"][0]["hops"]
    ]
    with pytest.raises(KeyError):
        fish_run.knowers("no such fact")


def test_ticks_are_the_log_closes_and_the_summary_timings(fish_run):
    log = lines(fish_run.dir / "events.jsonl")
    closes = [e for e in log if e["type"] == "tick"]
    frame = records(fish_run.ticks())
    assert [r["tick"] for r in frame] == [e["tick"] for e in closes]
    assert [r["hash"] for r in frame] == [e["hash"] for e in closes]
    for r in frame:
        of_tick = [e for e in log if e["tick"] == r["tick"] and e["type"] != "tick"]
        assert r["events"] == len(of_tick)
        assert r["talks"] == sum(e["type"] == "talk" for e in of_tick)
        assert r["memories"] == sum(e["type"] == "memory" for e in of_tick)
        assert r["calls"] == 4, "fish-market's four NPCs think every tick"
    timing = fish_run.summary["timing"]["per_tick"]
    assert timing["first_tick"] == 0
    assert [r["perceive_ms"] for r in frame] == timing["perceive"]
    assert [r["checkpoint_bytes"] for r in frame] == timing["checkpoint_bytes"]
    # The phases add up to the summary's totals (rounded to the microsecond per tick).
    total = sum(r["think_ms"] for r in frame)
    assert abs(total - fish_run.summary["timing"]["phases_ms"]["think"]) < 0.001 * len(frame) + 1e-6


def test_npcs_are_the_scenarios(fish_run):
    spec = tomllib.loads((fish_run.dir / "scenario.toml").read_text())["npcs"]
    frame = records(fish_run.npcs())
    assert [r["npc"] for r in frame] == [n["name"] for n in spec]
    assert [[r["start_x"], r["start_y"]] for r in frame] == [n["at"] for n in spec]
    log = lines(fish_run.dir / "events.jsonl")
    for r in frame:
        last = [e for e in log if e.get("npc") == r["npc"] and e["type"] in ("spawn", "move", "stay")][-1]
        assert [r["end_x"], r["end_y"]] == (last["to"] if last["type"] == "move" else last["at"])
        assert r["talks"] == sum(e["type"] == "talk" and e["npc"] == r["npc"] for e in log)


def test_polars_frames_equal_pandas_frames(fish_run):
    for name in ("npcs", "events", "memories", "knowers", "calls", "ticks"):
        p = fish_run.table(name)
        q = fish_run.table(name, backend="polars")
        assert isinstance(q, pl.DataFrame)
        assert q.columns == list(p.columns)
        assert records(q.to_pandas()) == records(p), name
    polar = hearsay.open(fish_run.dir, backend="polars")
    assert isinstance(polar.knowers(), pl.DataFrame)


def test_vectors_only_when_asked(fish_run):
    vec = fish_run.vectors()
    assert len(vec) == fish_run.summary["memories"]["total"] - fish_run.summary["memories"]["unembedded"]
    assert len(vec["vector"].iloc[0]) > 0
    # Without the vectors, the export the other tables come from has none.
    assert not (fish_run._tables() / "vectors.parquet").exists()


# -- the export, without hearsay ------------------------------------------------------


def test_parquet_export_reads_back_in_duckdb_and_polars(fish_run, tmp_path):
    import duckdb

    out = tmp_path / "export"
    subprocess.run(
        [hearsay.binary(), "export", str(fish_run.dir), "--out", str(out)],
        check=True, capture_output=True,
    )
    log = lines(fish_run.dir / "events.jsonl")
    n = duckdb.sql(f"SELECT count(*) FROM '{out / 'events.parquet'}'").fetchall()[0][0]
    assert n == len(log)
    talks = duckdb.sql(
        f"SELECT npc, text, listeners FROM '{out / 'events.parquet'}' WHERE type = 'talk' ORDER BY seq"
    ).fetchall()
    assert [(a, b, list(c)) for a, b, c in talks] == [
        (e["npc"], e["text"], e["listeners"]) for e in log if e["type"] == "talk"
    ]
    # The spread curve from the export, by SQL alone, is summary.json's.
    curve = duckdb.sql(
        f"SELECT tick, count(*) OVER (ORDER BY tick ROWS UNBOUNDED PRECEDING) "
        f"FROM '{out / 'knowers.parquet'}' WHERE fact = 'fresh fish' ORDER BY tick"
    ).fetchall()
    last = {}
    for tick, count in curve:
        last[tick] = count
    assert sorted(last.items()) == [tuple(p) for p in fish_run.summary["facts"][0]["curve"]]
    mem = pl.read_parquet(out / "memories.parquet")
    assert mem.height == fish_run.summary["memories"]["total"]
    assert mem.schema["evidence"] == pl.List(pl.Int64)


def test_csv_export_reads_back_in_pandas(fish_run, tmp_path):
    out = tmp_path / "csv"
    subprocess.run(
        [hearsay.binary(), "export", str(fish_run.dir), "--format", "csv", "--out", str(out)],
        check=True, capture_output=True,
    )
    frame = pd.read_csv(out / "events.csv")
    log = lines(fish_run.dir / "events.jsonl")
    assert list(frame["type"]) == [e["type"] for e in log]
    talks = frame[frame["type"] == "talk"]
    assert [json.loads(v) for v in talks["listeners"]] == [e["listeners"] for e in log if e["type"] == "talk"]


# -- what the binary does, from Python ------------------------------------------------


def test_a_bad_scenario_raises_with_its_place(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text('name = "bad"\nseed = 1\nticks = "ten"\n', encoding="utf-8")
    with pytest.raises(hearsay.HearsayError) as caught:
        hearsay.run(bad, out=tmp_path / "never", progress=False)
    err = caught.value
    assert err.returncode == 2
    assert err.location == f"{bad}:3:9"
    assert "invalid type" in err.message
    assert not (tmp_path / "never").exists(), "nothing was written"


def test_set_edits_the_scenario_before_it_runs(scenario, tmp_path):
    r = hearsay.run(scenario, ticks=20, set={"memory.recall_k": 2}, out=tmp_path / "k2", progress=False)
    edited = tomllib.loads((r.dir / "scenario.toml").read_text())
    assert edited["memory"]["recall_k"] == 2
    assert max(len(x) for x in r.events("move")["recalled"]) <= 2


def test_sweep_from_python_equals_the_clis(scenario, tmp_path):
    s = hearsay.sweep(scenario, seeds=range(1, 5), ticks=40, jobs=2, out=tmp_path / "py", progress=False)
    subprocess.run(
        [hearsay.binary(), "sweep", str(scenario), "--seeds", "1..4", "--ticks", "40", "--jobs", "2",
         "--out", str(tmp_path / "cli"), "--no-progress"],
        check=True, capture_output=True,
    )
    # sweep.json holds nothing of the clock or of where it was written: byte for byte.
    assert (tmp_path / "py" / "sweep.json").read_bytes() == (tmp_path / "cli" / "sweep.json").read_bytes()
    cli = json.loads((tmp_path / "cli" / "sweep.json").read_text())
    assert [x["seed"] for x in s.shards[0]["runs"]] == [1, 2, 3, 4]
    assert sorted(s.runs) == [1, 2, 3, 4]
    table = records(s.table())
    assert [r["seed"] for r in table] == [1, 2, 3, 4]
    assert [r["fresh fish half_tick"] for r in table] == [
        r["facts"][0]["half_tick"] for r in cli["runs"]
    ]
    k = s.knowers("fresh fish")
    assert set(k["seed"]) <= {1, 2, 3, 4} and len(k) > 0


def test_replay_fork_and_ask(fish_run, tmp_path):
    assert fish_run.replay().identical
    fork = fish_run.fork(60, tmp_path / "fork", seed=99, progress=False)
    before = lambda r: [l for l in lines(r.dir / "events.jsonl") if l["tick"] < 60]
    assert before(fork) == before(fish_run)
    assert fork.summary["ticks"] == 150
    answer = fish_run.ask("Bob", "What is for sale at the market?")
    assert answer["npc"] == "Bob" and answer["answer"]
    early = fish_run.ask("Bob", "What do you know?", at_tick=1)
    assert early["tick"] == 1


def test_the_report_renders_inline(fish_run):
    shown = fish_run._repr_html_()
    assert shown.startswith("<iframe srcdoc=") and 'sandbox="allow-scripts"' in shown
    page = fish_run.report_html()
    assert "<html" in page.lower()
    # The report sits escaped in the attribute: no raw quote ends it early.
    inner = re.match(r'<iframe srcdoc="([^"]*)"', shown)
    assert inner and len(inner.group(1)) > len(page) * 0.9


# -- the README's example works as printed ---------------------------------------------


def test_the_readme_example_runs(root, tmp_path, monkeypatch):
    text = (root / "README.md").read_text(encoding="utf-8")
    section = text.split("## From Python", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```python\n(.*?)```", section, re.S)
    assert blocks, "the README's From Python section has a python block"
    import matplotlib

    matplotlib.use("Agg")
    monkeypatch.chdir(tmp_path)
    (tmp_path / "scenarios").symlink_to(root / "scenarios")
    namespace = {}
    for block in blocks:
        exec(compile(block, "README.md", "exec"), namespace)
    assert (tmp_path / "spread.png").is_file(), "the example saves its plot"


# -- a run kept in PostgreSQL -----------------------------------------------------------


def test_a_postgres_run_reads_the_same_tables_as_sqlite(scenario, tmp_path):
    """The same scenario and seed on both stores: every table but the store-side columns
    is equal, and the PostgreSQL one's memories come from the database."""
    import os

    url = os.environ.get("DATABASE_URL")
    if not url:
        if os.environ.get("CI") == "true":
            pytest.fail("CI=true and no DATABASE_URL: scripts/test.sh provisions PostgreSQL")
        pytest.skip("no DATABASE_URL (scripts/test.sh provisions one)")
    lite = hearsay.run(scenario, seed=3, ticks=40, out=tmp_path / "lite", progress=False)
    pg = hearsay.run(
        scenario, seed=3, ticks=40, out=tmp_path / "pg", progress=False,
        set={"memory.store": "postgres"}, database_url=url,
    )
    assert pg.summary["store"]["backend"] == "postgres"
    assert log_bytes(pg.dir / "events.jsonl") == log_bytes(lite.dir / "events.jsonl")
    for name in ("events", "knowers", "npcs"):
        assert records(pg.table(name)) == records(lite.table(name)), name
    keep = ["id", "npc", "npc_id", "tick", "kind", "importance", "content", "from", "core", "evidence"]
    assert records(pg.memories(include_archived=True)[keep]) == records(
        lite.memories(include_archived=True)[keep]
    )
    # Without the URL the store cannot be reached: the binary's refusal, as an exception.
    with pytest.raises(hearsay.HearsayError) as caught:
        hearsay.open(pg.dir).memories()
    assert caught.value.returncode == 2
