"""Fixtures for the Python package's suite: the shipped scenarios, and runs made once per
session from Python (through the installed wheel's binary, never a path into target/)."""

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def root() -> Path:
    return ROOT


@pytest.fixture(scope="session")
def scenario() -> Path:
    return ROOT / "scenarios" / "fish-market.toml"


@pytest.fixture(scope="session")
def fish_run(tmp_path_factory, scenario):
    import hearsay

    out = tmp_path_factory.mktemp("runs") / "fish"
    return hearsay.run(scenario, seed=7, ticks=150, out=out, progress=False)


def pytest_configure(config):
    # The suite tests the package as installed: the wheel's binary, not one named here.
    os.environ.pop("HEARSAY_BINARY", None)
