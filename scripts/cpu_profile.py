#!/usr/bin/env python3
"""Folds `perf script` output of a `hearsay run` into CPU milliseconds per tick: by thread,
by the stages the engine's work is made of, and by the functions the samples landed in.

`scripts/bench-profile.sh` records the runs and writes the profile section of
docs/BENCHMARKS.md with it; the fold is here so that a test can hold it to a perf
transcript it knows the answer of (tests/bench.rs).

    perf script -F comm,tid,ip,sym --no-inline -i perf.data \
        | scripts/cpu_profile.py fold --ticks T --hz HZ > profile.json

A sample is one stack: a line naming the thread (its `comm`, then its tid), then one
indented line per frame, innermost first, and a blank line. A sample counts toward a
stage when a frame of its stack is the stage's function (inclusive time: the stage and
everything it calls, so a stage may hold another: Act holds the sealing of the tick);
toward a function's own time when it is the innermost frame.
`perf record -F HZ` takes HZ samples per second of CPU a thread uses, so a count divided
by HZ is CPU seconds, and divided again by the run's ticks is CPU per tick, the work
before tick 0 and after the last (the run's summary and report) spread over the ticks.

What shows the fold measured something: every stage must have samples (a renamed
function would otherwise read as a stage that costs nothing, and the fold refuses), and
the share of stacks unwound to their thread's start is printed beside the figures (perf
unwinds from a copy of each stack, and a deep stack it cannot finish is attributed to
no stage).
"""

import argparse
import json
import re
import sys

# (label, the function a frame must name, or a tuple of functions any of which will do).
# Substrings of perf's demangled names, hashes stripped; each names one function of the
# engine.
STAGES = [
    ("Think: recall's search", "hearsay_memory::index::VectorIndex::search_counted"),
    ("Think: the request's digest", "hearsay_brain::request::digest_of"),
    # In its NPC's turn for an embedder that computes in this process (the hashing
    # embedder, since the thirty-ninth round), in batches before the turns for any other.
    ("Think: the recall queries' embedding", ("hearsay_runtime::run::think::embed_now", "hearsay_runtime::run::think::embed_queries")),
    ("Think: the heuristic decision", "hearsay_brain::heuristic::HeuristicBrain::decide_now"),
    ("Think: the tape's line", "hearsay_brain::tape::BrainCall::into_line"),
    ("Backfill: embedding new memories", "hearsay_memory::backfill::work"),
    ("Act, all of it", "hearsay_core::sim::Sim::act"),
    ("Act: sealing the tick (its event lines, the rolling hash)", "hearsay_core::systems::record::seal_tick"),
    ("Persist: the checkpoint", "hearsay_runtime::run::runner::Chain::save"),
    ("After the last tick: summary and report", "hearsay_runtime::run::runner::finish"),
]

# Stages the profiled towns no longer pass through, kept so that the profiles taken while
# they did still show them: their samples are folded, never required. The heuristic
# brain's calls take no request digest since the thirty-ninth round (docs/BENCHMARKS.md).
RETIRED = {"Think: the request's digest"}

# What the threads are, by `comm` (perf keeps the first 15 bytes of a thread's name).
THREADS = [
    ("the tick thread", re.compile(r"^hearsay$")),
    ("Perceive's threads (towns of 2,048 NPCs or more)", re.compile(r"^hearsay-observe")),
    ("the async workers (Think, backfill)", re.compile(r"^hearsay-async")),
    ("SQLite's writer", re.compile(r"^sqlx-sqlite")),
    ("the log writer", re.compile(r"^hearsay-log")),
    ("the event log read back after the last tick", re.compile(r"^hearsay-story")),
]

# A stack unwound all the way names its thread's first function.
ROOTS = ("start_thread", "__libc_start_main", "_start", "clone3")

HASH = re.compile(r"::h[0-9a-f]{16}")
OFFSET = re.compile(r"\+0x[0-9a-f]+$")


def samples(lines):
    """(comm, [frame symbol, innermost first]) for each sample of a `perf script` text."""
    comm, frames = None, []
    for line in lines:
        line = line.rstrip("\n")
        if not line.strip():
            if comm is not None:
                yield comm, frames
            comm, frames = None, []
        elif not line[0].isspace():
            if comm is not None:
                yield comm, frames
            comm, frames = line.split()[0], []
        else:
            parts = line.strip().split(None, 1)
            symbol = parts[1] if len(parts) > 1 else parts[0]
            frames.append(HASH.sub("", OFFSET.sub("", symbol)))
    if comm is not None:
        yield comm, frames


def fold(lines, ticks, hz, top=12):
    """The profile of one run: counts turned into CPU ms per tick."""
    if ticks <= 0 or hz <= 0:
        raise ValueError("ticks and hz must be positive")
    total = unwound = 0
    threads = {label: 0 for label, _ in THREADS}
    other_threads = 0
    stages = {label: 0 for label, _ in STAGES}
    own = {}
    for comm, frames in samples(lines):
        total += 1
        for label, pattern in THREADS:
            if pattern.search(comm):
                threads[label] += 1
                break
        else:
            other_threads += 1
        if any(f in ROOTS for f in frames):
            unwound += 1
        for label, function in STAGES:
            alternatives = (function,) if isinstance(function, str) else function
            if any(a in f for a in alternatives for f in frames):
                stages[label] += 1
        if frames:
            own[frames[0]] = own.get(frames[0], 0) + 1
    if total == 0:
        raise ValueError("perf recorded no samples")
    missing = [label for label, n in stages.items() if n == 0 and label not in RETIRED]
    if missing:
        raise ValueError(
            "no sample in " + ", ".join(missing) + ": was a stage's function renamed? (STAGES in scripts/cpu_profile.py)"
        )
    ms = lambda n: round(n / hz * 1000 / ticks, 2)
    threads["other threads"] = other_threads
    return {
        "ticks": ticks,
        "hz": hz,
        "samples": total,
        "unwound_share": round(unwound / total, 3),
        "cpu_ms_per_tick": ms(total),
        "threads": {label: ms(n) for label, n in threads.items()},
        "stages": {label: ms(n) for label, n in stages.items()},
        "own": [[symbol, ms(n)] for symbol, n in sorted(own.items(), key=lambda kv: (-kv[1], kv[0]))[:top]],
    }


def table(profiles):
    """Markdown: one column per profile (`title` and the figures `fold` gave)."""
    head = "| CPU ms per tick | " + " | ".join(p["title"] for p in profiles) + " |"
    rows = [head, "|---" * (len(profiles) + 1) + "|"]

    def row(label, values):
        rows.append(f"| {label} | " + " | ".join(values) + " |")

    row("**the process, as perf sampled it**", [f"**{p['cpu_ms_per_tick']:.1f}**" for p in profiles])
    row("the process, as the run measured it (`summary.json`)", [f"{p['run_cpu_ms_per_tick']:.1f}" for p in profiles])
    # A profile kept from before a thread or stage was told apart has no figure for it.
    figure = lambda value: "–" if value is None else f"{value:.1f}"
    for label, _ in THREADS:
        row(label, [figure(p["threads"].get(label)) for p in profiles])
    for label, _ in STAGES:
        row(label, [figure(p["stages"].get(label)) for p in profiles])
    row("ticks per second under perf", [f"{p['ticks_per_second']:.2f}" for p in profiles])
    row("samples (stacks unwound to their thread's start)", [f"{p['samples']:,} ({p['unwound_share']:.0%})" for p in profiles])
    return "\n".join(rows)


def own_table(profile):
    rows = ["| function (its own time, not what it calls) | CPU ms per tick |", "|---|---|"]
    rows += [f"| `{symbol[:110]}` | {ms:.1f} |" for symbol, ms in profile["own"]]
    return "\n".join(rows)


def keep(kept, label, commit, hz, towns):
    """`kept` (the labelled profiles so far, newest first) with `towns` (one profile per
    town) as LABEL's: a label measured again replaces its old profile."""
    entry = {"label": label, "commit": commit, "hz": hz, "towns": towns}
    return [entry] + [p for p in kept if p["label"] != label]


def render(kept, script="scripts/bench-profile.sh"):
    """The section: every labelled profile, newest first, each with its commit; where
    the samples landed for the newest alone."""
    text = [
        f"Generated by `{script}` (each profile at the commit it names); do not edit by hand.",
        "",
        "`perf record --call-graph dwarf` of `hearsay run` of each town (`bench town N TICKS`), "
        "folded by `scripts/cpu_profile.py`. A stage's figure is inclusive (the function and all it "
        "calls); per tick means over the run's ticks, its start and end included. perf slows what it "
        "samples, so read the shares, not the speed.",
    ]
    for i, entry in enumerate(kept):
        text += ["", f"### {entry['label']}", "", f"At commit {entry['commit']}, {entry['hz']} samples per second of CPU.", ""]
        text.append(table(entry["towns"]))
        if i == 0:
            for town in entry["towns"]:
                text += ["", f"Where the samples landed, {town['title']}:", "", own_table(town)]
    return "\n".join(text)


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    f = sub.add_parser("fold", help="perf script text on stdin, the profile as JSON on stdout")
    f.add_argument("--ticks", type=int, required=True)
    f.add_argument("--hz", type=float, required=True)
    args = parser.parse_args(argv)
    if args.command == "fold":
        try:
            json.dump(fold(sys.stdin, args.ticks, args.hz), sys.stdout, indent=1)
        except ValueError as e:
            raise SystemExit(f"profile: {e}")
        print()


if __name__ == "__main__":
    main(sys.argv[1:])
