"""Finding and calling the ``hearsay`` binary that came with this package.

Every function of the package is one call of the binary: the binary owns the engine,
the run directory and every check; this module only turns its exit codes and messages
into Python values and exceptions.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import sysconfig
import threading
from pathlib import Path
from typing import Callable, List, Optional, Sequence

#: A scenario problem's position, as the binary prints it: ``path:line:col``.
_LOCATION = re.compile(r"(\S+?):(\d+):(\d+)(?::|\s|$)")
#: Progress lines of ``--progress-lines``.
_PROGRESS = re.compile(r"^hearsay-progress (\d+) (\d+)$")
_DIR = re.compile(r"^hearsay-dir (.+)$")
#: The most stderr text kept for an error message (the binary's own messages are short).
_STDERR_KEPT = 64 * 1024


class HearsayError(Exception):
    """The binary refused or failed.

    ``message`` is what it printed on stderr, ``returncode`` its exit code (2: bad input,
    such as an invalid scenario; 1: it failed), ``location`` the first ``path:line:col``
    of the message (a scenario problem's place), ``args_used`` the command line.
    """

    def __init__(self, message: str, returncode: int, args_used: Sequence[str]):
        self.message = message
        self.returncode = returncode
        self.args_used = list(args_used)
        found = _LOCATION.search(message)
        self.location: Optional[str] = (
            f"{found.group(1)}:{found.group(2)}:{found.group(3)}" if found else None
        )
        super().__init__(f"hearsay exited with {returncode}: {message.strip()}")


def binary() -> str:
    """The path of the ``hearsay`` binary: ``$HEARSAY_BINARY`` if set, else the one this
    package's wheel installed beside the interpreter, else the first on ``PATH``."""
    chosen = os.environ.get("HEARSAY_BINARY")
    if chosen:
        return chosen
    exe = "hearsay.exe" if sys.platform == "win32" else "hearsay"
    for scripts in (sysconfig.get_path("scripts"), str(Path(sys.executable).parent)):
        candidate = Path(scripts) / exe
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    found = shutil.which("hearsay")
    if found:
        return found
    raise HearsayError(
        "the hearsay binary was not found: install the package's wheel "
        "(pip install hearsay-*.whl), or set HEARSAY_BINARY to a built binary",
        127,
        [],
    )


class Result:
    """What one call printed, and where it wrote (from ``hearsay-dir``)."""

    def __init__(self, returncode: int, stdout: str, stderr: str, directory: Optional[str]):
        self.returncode = returncode
        self.stdout = stdout
        self.stderr = stderr
        self.directory = directory


def call(
    args: Sequence[str],
    ok: Sequence[int] = (0,),
    progress: Optional[Callable[[int, int], None]] = None,
) -> Result:
    """Runs ``hearsay ARGS``; raises :class:`HearsayError` unless it exits with a code in
    ``ok``. ``progress(done, of)`` is called for each progress line (pass
    ``--progress-lines`` in ``args`` to get them)."""
    command = [binary(), *[str(a) for a in args]]
    proc = subprocess.Popen(
        command,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        encoding="utf-8",
        errors="replace",
    )
    kept: List[str] = []
    size = [0]
    directory: List[str] = []

    def read_stderr() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            text = line.rstrip("\n")
            step = _PROGRESS.match(text)
            if step:
                if progress is not None:
                    progress(int(step.group(1)), int(step.group(2)))
                continue
            where = _DIR.match(text)
            if where and not directory:
                directory.append(where.group(1))
                continue
            if size[0] < _STDERR_KEPT:
                kept.append(line)
                size[0] += len(line)

    reader = threading.Thread(target=read_stderr, daemon=True)
    reader.start()
    assert proc.stdout is not None
    stdout = proc.stdout.read()
    returncode = proc.wait()
    reader.join()
    stderr = "".join(kept)
    if returncode not in ok:
        raise HearsayError(stderr or stdout, returncode, command)
    return Result(returncode, stdout, stderr, directory[0] if directory else None)


def toml_value(value: object) -> str:
    """A Python value as the TOML literal ``--set KEY=VALUE`` takes."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        # A TOML basic string: JSON's escapes are TOML's (\\uXXXX included).
        import json

        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{k} = {toml_value(v)}" for k, v in value.items()) + " }"
    raise TypeError(f"cannot write {value!r} ({type(value).__name__}) as a TOML value")


def set_args(sets: Optional[dict]) -> List[str]:
    """``--set KEY=VALUE`` for each item of ``sets`` (dotted keys, Python values)."""
    out: List[str] = []
    for key, value in (sets or {}).items():
        out += ["--set", f"{key}={toml_value(value)}"]
    return out
