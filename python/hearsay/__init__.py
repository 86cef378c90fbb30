"""hearsay from Python: run scenarios, open runs, and read them as DataFrames.

    import hearsay
    run = hearsay.run("scenarios/fish-market.toml", seed=7)
    run.knowers("fresh fish")        # a pandas DataFrame (backend="polars" for polars)
    run                              # in Jupyter: the run's report, inline

Every call is one call of the ``hearsay`` binary this package installed; tables come
from ``hearsay export`` (``hearsay export --schema`` documents every column).
"""

from ._binary import HearsayError, binary
from ._run import ReplayResult, Run, Sweep, open, run, sweep

__all__ = ["HearsayError", "ReplayResult", "Run", "Sweep", "binary", "open", "run", "sweep"]
__version__ = "0.1.0"
