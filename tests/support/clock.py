"""A clock the test moves by hand."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from partition_notify.app import App


class FakeClock:
    """A clock the test moves by hand: expiry without waiting."""

    def __init__(self, start: float = 1_700_000_000.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


def app_on_clock(store_url: str, clock: FakeClock) -> Iterator[App]:
    """An embedded-transport app whose store runs on ``clock``; as a module's fixture:
    ``app = pytest.fixture(name="app")(app_on_clock)`` (with a ``clock`` fixture)."""
    from partition_notify.app import build_app

    application = build_app(store_url=store_url, transport_url="embedded://", clock=clock)
    yield application
    application.close()
