"""The README's scheduler examples build: every python block of its Schedulers section runs."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[2] / "README.md"


def _blocks() -> list[str]:
    text = README.read_text()
    section = text.split("## Schedulers: Airflow and Dagster", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```python\n(.*?)```", section, re.S)


def test_there_is_an_example_per_way_in() -> None:
    blocks = _blocks()
    assert any("PartitionSetDoneSensor" in b for b in blocks)
    assert any("MessageQueueTrigger" in b for b in blocks)
    assert any("PartitionedAssetTimetable" in b for b in blocks)
    assert any("partition_set_done_sensor" in b for b in blocks)


@pytest.mark.parametrize("index", range(4))
def test_example_builds(index: int, airflow_home: Path, dagster_available: None) -> None:
    exec(compile(_blocks()[index], f"README.md[schedulers #{index}]", "exec"), {})
