"""The subscriber inbox's bound, as the docs state it, is the code's default."""

from __future__ import annotations

import inspect
from pathlib import Path

from partition_notify.subscriber import Subscriber
from partition_notify.subscriber.inbox_queue import MAX_INBOX

ROOT = Path(__file__).resolve().parents[2]


def test_the_documented_inbox_bound_is_the_default() -> None:
    default = inspect.signature(Subscriber).parameters["max_inbox"].default
    assert default == MAX_INBOX
    stated = f"{MAX_INBOX:,}"
    reliability = (ROOT / "docs" / "reliability.md").read_text()
    assert f"`Subscriber(max_inbox=…)`, default {stated}" in reliability
    assert f"at most `max_inbox` items ({stated}, `MAX_INBOX`)" in reliability
    readme = (ROOT / "README.md").read_text()
    assert f"at most {stated} items wait for the dispatcher\n(`Subscriber(max_inbox=…)`)" in readme
