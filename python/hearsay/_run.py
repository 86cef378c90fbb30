"""Runs and sweeps as Python objects, their tables as DataFrames.

A table is read from ``hearsay export`` (Parquet, made once per run into a private
temporary directory, again if the run changed), so Python sees exactly the columns the
documented schema lists (``hearsay export --schema``) — no second parser of the run
directory's files lives here.
"""

from __future__ import annotations

import html
import json
import shutil
import tempfile
import weakref
from pathlib import Path
from typing import Any, Dict, Iterable, List, Optional, Union

from ._binary import HearsayError, call, set_args

PathLike = Union[str, "Path"]
#: The largest report inlined in a notebook.
_REPORT_MAX = 64 * 1024 * 1024
_BACKENDS = ("pandas", "polars")


def _frame(table: Any, backend: str) -> Any:
    """A pyarrow table as the backend's DataFrame."""
    if backend == "polars":
        import polars as pl

        return pl.from_arrow(table)
    return table.to_pandas()


def _check_backend(backend: str) -> str:
    if backend not in _BACKENDS:
        raise ValueError(f"backend must be one of {_BACKENDS}, not {backend!r}")
    return backend


class _Bar:
    """A notebook-friendly progress bar (tqdm's ``auto`` picks a widget in Jupyter and
    text elsewhere) fed by the binary's progress lines."""

    def __init__(self, show: bool, unit: str, description: str):
        self._bar = None
        self._show = show
        self._unit = unit
        self._description = description

    def __call__(self, done: int, of: int) -> None:
        if not self._show:
            return
        if self._bar is None:
            from tqdm.auto import tqdm

            self._bar = tqdm(total=of, unit=self._unit, desc=self._description)
        self._bar.n = done
        self._bar.refresh()

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()


class ReplayResult:
    """What ``hearsay replay`` found: ``identical`` (every tick the same), and its text."""

    def __init__(self, identical: bool, output: str):
        self.identical = identical
        self.output = output

    def __bool__(self) -> bool:
        return self.identical

    def __repr__(self) -> str:
        first = self.output.strip().splitlines()[:1]
        return f"ReplayResult(identical={self.identical}, {first[0] if first else ''!r})"


class Run:
    """A run directory. Tables come back as pandas DataFrames, or polars ones with
    ``backend="polars"`` (here, or per call)."""

    def __init__(
        self,
        directory: PathLike,
        backend: str = "pandas",
        database_url: Optional[str] = None,
        output: str = "",
    ):
        self.dir = Path(directory)
        self.backend = _check_backend(backend)
        self.database_url = database_url
        #: What the command that made it printed (``hearsay run``'s table of knowers).
        self.output = output
        self._exports: Dict[bool, tuple] = {}
        self._tmp: Optional[str] = None
        # events.jsonl.zst; events.jsonl in run directories written before (format 1).
        if not any((self.dir / n).is_file() for n in ("events.jsonl.zst", "events.jsonl")):
            raise HearsayError(
                f"{self.dir}: not a hearsay run directory (no events.jsonl.zst)", 2, []
            )

    def __repr__(self) -> str:
        return f"hearsay.Run({str(self.dir)!r})"

    # -- what the run says about itself --------------------------------------------

    @property
    def summary(self) -> Dict[str, Any]:
        """``summary.json``: knowers and curves per fact, memories, degradations, timing."""
        return json.loads((self.dir / "summary.json").read_text(encoding="utf-8"))

    def _db_args(self) -> List[str]:
        return ["--database-url", self.database_url] if self.database_url else []

    def _tables(self, vectors: bool = False) -> Path:
        """The run's export (with ``vectors`` only when asked: they are most of a big
        run's bytes), made again when the run's files changed (a resume)."""
        key = tuple(
            (p.name, p.stat().st_mtime_ns, p.stat().st_size)
            for p in sorted(self.dir.iterdir())
            if p.is_file()
            and p.name
            in ("events.jsonl.zst", "llm.jsonl.zst", "events.jsonl", "llm.jsonl", "summary.json")
        )
        made = self._exports.get(vectors)
        if made is None or made[1] != key:
            if self._tmp is None:
                # Private to this object, removed with it (or at exit).
                self._tmp = tempfile.mkdtemp(prefix="hearsay-py-")
                weakref.finalize(self, shutil.rmtree, self._tmp, True)
            out = Path(self._tmp) / ("tables-vectors" if vectors else "tables")
            args = ["export", str(self.dir), "--out", str(out), *self._db_args()]
            if vectors:
                args.append("--vectors")
            if out.exists():
                args.append("--force")
            call(args)
            made = self._exports[vectors] = (out, key)
        return made[0]

    def table(self, name: str, backend: Optional[str] = None) -> Any:
        """One exported table by name (``npcs``, ``events``, ``memories``, ``vectors``,
        ``knowers``, ``calls``, ``ticks``), whole."""
        import pyarrow.parquet as pq

        path = self._tables(vectors=name == "vectors") / f"{name}.parquet"
        if not path.is_file():
            raise KeyError(f"no table {name!r}; see `hearsay export --schema`")
        return _frame(pq.read_table(path), _check_backend(backend or self.backend))

    def npcs(self, backend: Optional[str] = None) -> Any:
        """One row per NPC: brain, where it started and ended, memories, talks."""
        return self.table("npcs", backend)

    def events(self, types: Union[str, Iterable[str], None] = None, backend: Optional[str] = None) -> Any:
        """``events.jsonl`` as rows, in order; ``types`` keeps only those line types
        (``"talk"``, ``["learned", "memory"]``)."""
        import pyarrow.compute as pc
        import pyarrow.parquet as pq

        table = pq.read_table(self._tables() / "events.parquet")
        if types is not None:
            wanted = [types] if isinstance(types, str) else list(types)
            table = table.filter(pc.is_in(table["type"], value_set=_array(wanted)))
        return _frame(table, _check_backend(backend or self.backend))

    def memories(
        self,
        npc: Optional[str] = None,
        include_archived: bool = False,
        backend: Optional[str] = None,
    ) -> Any:
        """The store's memories, by id: of one NPC (by name) or everyone; archived
        (forgotten) ones only with ``include_archived``."""
        import pyarrow.compute as pc
        import pyarrow.parquet as pq

        table = pq.read_table(self._tables() / "memories.parquet")
        if npc is not None:
            if npc not in set(pq.read_table(self._tables() / "npcs.parquet")["npc"].to_pylist()):
                raise KeyError(f"no NPC named {npc!r} in {self.dir}")
            table = table.filter(pc.equal(table["npc"], npc))
        if not include_archived:
            table = table.filter(pc.is_null(table["archived_tick"]))
        return _frame(table, _check_backend(backend or self.backend))

    def vectors(self, backend: Optional[str] = None) -> Any:
        """Every embedded memory chunk's vector (``memory``, ``chunk``, ``model``, ``vector``)."""
        return self.table("vectors", backend)

    def knowers(self, fact: Optional[str] = None, backend: Optional[str] = None) -> Any:
        """Who came to know each tracked fact, when, from whom, at what hop depth and
        similarity; of one fact with ``fact``."""
        import pyarrow.compute as pc
        import pyarrow.parquet as pq

        table = pq.read_table(self._tables() / "knowers.parquet")
        if fact is not None:
            self._fact(fact)
            table = table.filter(pc.equal(table["fact"], fact))
        return _frame(table, _check_backend(backend or self.backend))

    def calls(self, backend: Optional[str] = None) -> Any:
        """The tape: one row per brain decision, with what it was given and cost."""
        return self.table("calls", backend)

    def ticks(self, backend: Optional[str] = None) -> Any:
        """One row per tick: what happened (event counts, calls) and its phases' times."""
        return self.table("ticks", backend)

    def _fact(self, fact: str) -> Dict[str, Any]:
        for f in self.summary.get("facts", []):
            if f.get("name") == fact:
                return f
        names = [f.get("name") for f in self.summary.get("facts", [])]
        raise KeyError(f"no tracked fact {fact!r} in {self.dir} (facts: {names})")

    def hops(self, fact: str, backend: Optional[str] = None) -> Any:
        """A fact's knowers by hop depth: how many, and how similar their words stayed
        (``depth``, ``knowers``, ``mean_similarity``, ``min_similarity``)."""
        import pyarrow as pa

        rows = self._fact(fact).get("hops", [])
        columns = ["depth", "knowers", "mean_similarity", "min_similarity"]
        table = pa.table({c: [r.get(c) for r in rows] for c in columns})
        return _frame(table, _check_backend(backend or self.backend))

    # -- what the binary does with it ----------------------------------------------

    def ask(self, npc: str, question: str, at_tick: Optional[int] = None) -> Dict[str, Any]:
        """Interviews ``npc`` with its own brain and its memories as they were at the
        start of ``at_tick`` (default: the end); changes nothing. The answer and the
        memories it drew on, as ``hearsay ask --json`` gives them."""
        args = ["ask", str(self.dir), "--npc", npc, "--json", *self._db_args()]
        if at_tick is not None:
            args += ["--at-tick", str(at_tick)]
        args.append(question)
        return json.loads(call(args).stdout)

    def replay(self) -> ReplayResult:
        """Re-runs the run offline from its tape and compares every tick."""
        result = call(["replay", str(self.dir)], ok=(0, 1))
        return ReplayResult(result.returncode == 0, result.stdout)

    def fork(
        self,
        at_tick: int,
        out: PathLike,
        seed: Optional[int] = None,
        set: Optional[Dict[str, Any]] = None,
        force: bool = False,
        progress: bool = True,
    ) -> "Run":
        """A new run identical to this one before ``at_tick``, then free to differ (with
        another ``seed`` or scenario edits ``set``)."""
        args = ["fork", str(self.dir)]
        args += _options(at_tick=at_tick, out=out, seed=seed, force=force, database_url=self.database_url)
        result = _drive(args + set_args(set), progress, "tick", f"fork of {self.dir.name}")
        return Run(result.directory, backend=self.backend, database_url=self.database_url, output=result.stdout)

    def report_html(self) -> str:
        """``report.html`` (written first if the run has none)."""
        path = self.dir / "report.html"
        if not path.is_file():
            call(["report", str(self.dir)])
        if path.stat().st_size > _REPORT_MAX:
            raise HearsayError(f"{path} is larger than {_REPORT_MAX} bytes", 1, [])
        return path.read_text(encoding="utf-8")

    def _repr_html_(self) -> str:
        """The report, inline in Jupyter (in a sandboxed frame, so its script and styles
        stay its own)."""
        page = html.escape(self.report_html(), quote=True)
        return (
            f'<iframe srcdoc="{page}" sandbox="allow-scripts" '
            'style="width:100%;height:640px;border:1px solid #ddd"></iframe>'
        )


def _array(values: List[str]) -> Any:
    import pyarrow as pa

    return pa.array(values, type=pa.string())


def _options(**values: Any) -> List[str]:
    """``--name VALUE`` for each value given (``None`` leaves it out; ``True`` is a bare
    flag), in the order given."""
    out: List[str] = []
    for name, value in values.items():
        flag = "--" + name.replace("_", "-")
        if value is True:
            out.append(flag)
        elif value is not None and value is not False:
            out += [flag, str(value)]
    return out


def _drive(args: List[str], progress: bool, unit: str, description: str) -> Any:
    """Runs a command that writes a run or a sweep, with a bar fed by its progress
    lines; what it printed and the directory it wrote."""
    bar = _Bar(progress, unit, description)
    try:
        result = call([*args, "--progress-lines"], ok=(0, 3), progress=bar)
    finally:
        bar.close()
    if result.directory is None:
        raise HearsayError("the binary did not say where it wrote", 1, args)
    return result


def run(
    scenario: PathLike,
    seed: Optional[int] = None,
    ticks: Optional[int] = None,
    set: Optional[Dict[str, Any]] = None,
    out: Optional[PathLike] = None,
    force: bool = False,
    progress: bool = True,
    backend: str = "pandas",
    database_url: Optional[str] = None,
) -> Run:
    """Runs a scenario file headless (``hearsay run``) and returns the run.

    ``set`` edits the scenario first (``{"memory.recall_k": 3}``); ``out`` is the run
    directory (default ``runs/<name>-seed<seed>``). Unmet expectations are in
    ``run.summary["expectations"]``, not an exception; an invalid scenario raises
    :class:`HearsayError` with the problem's ``location`` (``file:line:col``).
    """
    _check_backend(backend)
    args = ["run", str(scenario)]
    args += _options(seed=seed, ticks=ticks, out=out, force=force, database_url=database_url)
    result = _drive(args + set_args(set), progress, "tick", Path(str(scenario)).stem)
    return Run(result.directory, backend=backend, database_url=database_url, output=result.stdout)


def open(run_dir: PathLike, backend: str = "pandas", database_url: Optional[str] = None) -> Run:  # noqa: A001
    """A run directory written earlier (by hearsay, from Python or not)."""
    return Run(run_dir, backend=backend, database_url=database_url)


class Sweep:
    """A sweep directory: ``summary`` is ``sweep.json``; ``shards`` is ``shards.json``
    (where each shard ran, how long it took); ``runs`` its runs, by seed — for a sweep
    collected from shards (``hearsay sweep --collect``), in the shards' directories."""

    def __init__(self, directory: PathLike, backend: str = "pandas", output: str = ""):
        self.dir = Path(directory)
        self.backend = _check_backend(backend)
        self.output = output
        self.summary: Dict[str, Any] = json.loads((self.dir / "sweep.json").read_text(encoding="utf-8"))
        shards_file = self.dir / "shards.json"
        self.shards: List[Dict[str, Any]] = (
            json.loads(shards_file.read_text(encoding="utf-8")).get("shards", []) if shards_file.exists() else []
        )
        # A run's directory is named in sweep.json relative to the directory that holds
        # it: this one, or for a collected sweep its shard's (shards.json).
        where: Dict[int, Path] = {}
        for shard in self.shards:
            for r in shard.get("runs", []):
                where[r["seed"]] = Path(r["dir"])
        self.runs: Dict[int, Run] = {}
        for r in self.summary.get("runs", []):
            if r.get("error") is not None:
                continue
            here = self.dir / r["run_dir"]
            self.runs[r["seed"]] = Run(here if here.exists() else where.get(r["seed"], here), backend=backend)

    def __repr__(self) -> str:
        return f"hearsay.Sweep({str(self.dir)!r}, {len(self.summary.get('seeds', []))} seeds)"

    def table(self, backend: Optional[str] = None) -> Any:
        """One row per seed: each fact's half tick and final share, the expectations'
        verdicts, the run's error if it failed."""
        import pyarrow as pa

        rows = self.summary.get("runs", [])
        columns: Dict[str, list] = {"seed": [r["seed"] for r in rows]}
        for i, fact in enumerate(self.summary.get("facts", [])):
            name = fact["name"]
            columns[f"{name} half_tick"] = [r["facts"][i]["half_tick"] if r.get("facts") else None for r in rows]
            columns[f"{name} share"] = [r["facts"][i]["share"] if r.get("facts") else None for r in rows]
        for i, e in enumerate(self.summary.get("expectations", [])):
            columns[e["expect"]] = [
                r["expectations"][i] if i < len(r.get("expectations") or []) else None for r in rows
            ]
        columns["error"] = [r.get("error") for r in rows]
        return _frame(pa.table(columns), _check_backend(backend or self.backend))

    def knowers(self, fact: Optional[str] = None, backend: Optional[str] = None) -> Any:
        """Every run's knowers, with a ``seed`` column first."""
        import pyarrow as pa

        parts = []
        for seed, r in sorted(self.runs.items()):
            t = r.knowers(fact, backend="polars").to_arrow()
            parts.append(t.add_column(0, "seed", pa.array([seed] * t.num_rows, type=pa.int64())))
        if not parts:
            raise HearsayError(f"{self.dir}: no run of the sweep finished", 1, [])
        return _frame(pa.concat_tables(parts), _check_backend(backend or self.backend))


def _seeds(seeds: Iterable[int]) -> str:
    if isinstance(seeds, range) and seeds.step == 1 and len(seeds) > 0:
        return f"{seeds.start}..{seeds.stop - 1}"
    listed = [int(s) for s in seeds]
    if not listed:
        raise ValueError("a sweep needs at least one seed")
    return ",".join(str(s) for s in listed)


def sweep(
    scenario: PathLike,
    seeds: Iterable[int] = range(1, 21),
    set: Optional[Dict[str, Any]] = None,
    jobs: Optional[int] = None,
    ticks: Optional[int] = None,
    out: Optional[PathLike] = None,
    force: bool = False,
    progress: bool = True,
    backend: str = "pandas",
) -> Sweep:
    """Runs the scenario over ``seeds`` (``hearsay sweep``), ``jobs`` at once (default:
    one per core), and returns the sweep."""
    _check_backend(backend)
    args = ["sweep", str(scenario), "--seeds", _seeds(seeds)]
    args += _options(jobs=jobs, ticks=ticks, out=out, force=force)
    result = _drive(args + set_args(set), progress, "run", f"sweep {Path(str(scenario)).stem}")
    return Sweep(result.directory, backend=backend, output=result.stdout)
