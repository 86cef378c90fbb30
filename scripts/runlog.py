"""A run's logs for the scripts' Python: ``log_lines("RUN/events.jsonl")`` is the text of
``RUN/events.jsonl.zst`` (decoded by the zstd command, which ``scripts/zstd-cli.sh``
installs), or of the plain ``RUN/events.jsonl`` of a run directory written before."""

import os
import subprocess


def log_bytes(path: str) -> bytes:
    zst = path + ".zst"
    if not os.path.isfile(zst) and os.path.isfile(path):
        with open(path, "rb") as f:
            return f.read()
    return subprocess.run(["zstd", "-dcq", zst], check=True, capture_output=True).stdout


def log_lines(path: str) -> list:
    return log_bytes(path).decode("utf-8").splitlines(keepends=True)


def model_calls(calls: list) -> list:
    """The brain calls a model answered or was asked and failed (not the fallbacks)."""
    return [c for c in calls if c["provider"] == "openai" and c["outcome"] != "fallback"]


def valid_decision(call: dict) -> bool:
    """Whether a tape line's raw response is a decision hearsay can act on: a JSON object
    whose action is talk, move or stay."""
    import json

    try:
        d = json.loads(call.get("response") or "")
    except ValueError:
        return False
    return isinstance(d, dict) and d.get("action") in ("talk", "move", "stay")
