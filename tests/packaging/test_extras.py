"""The drivers are extras, named the same in pyproject.toml, the registry and the README."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

from partition_notify.transports.registry import DRIVER_EXTRAS

ROOT = Path(__file__).resolve().parents[2]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
EXTRAS = PROJECT["optional-dependencies"]
DRIVERS = {"stomp": "stomp.py", "kafka": "kafka-python", "postgres": "psycopg"}


def _names(requirements: list[str]) -> set[str]:
    return {re.split(r"[\[<>=;! ]", r, maxsplit=1)[0].lower() for r in requirements}


def test_each_driver_is_its_own_extra_and_not_a_core_dependency() -> None:
    core = _names(PROJECT["dependencies"])
    for extra, dist in DRIVERS.items():
        assert _names(EXTRAS[extra]) == {dist}, extra
        assert dist not in core, dist
    assert set(DRIVER_EXTRAS.values()) <= set(EXTRAS)


def test_dev_installs_every_driver_so_the_tests_have_them() -> None:
    (dev_self,) = [r for r in EXTRAS["dev"] if r.startswith("partition-notify[")]
    assert set(DRIVERS) <= set(dev_self.split("[", 1)[1].rstrip("]").split(","))


def test_every_extra_the_docs_name_exists() -> None:
    docs = [ROOT / "README.md", ROOT / "Dockerfile", *sorted((ROOT / "docs").glob("*.md"))]
    named = {extra.strip() for doc in docs
             for group in re.findall(r"partition-notify\[([\w, -]+)\]", doc.read_text())
             for extra in group.split(",")}
    assert {"stomp", "kafka", "postgres"} <= named
    assert named <= set(EXTRAS), named - set(EXTRAS)
