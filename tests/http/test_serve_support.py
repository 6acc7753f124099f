"""The tests' own serve helper: a serve that never became ready is not left running.

A leaked serve (seen under load: "serve did not answer /readyz within 60 s", eight
of them left at full CPU) makes every later test on the machine slower, and so
more of them time out.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.http.support import HttpServe


def test_a_serve_that_is_not_ready_in_time_is_stopped(tmp_path: Path) -> None:
    serve = HttpServe(f"sqlite:///{tmp_path}/store.db", tmp_path / "serve.log")
    with pytest.raises(AssertionError, match="readyz"):
        serve.start(timeout=0.01)  # far less than a serve needs to start
    assert serve.proc is not None
    assert serve.proc.poll() is not None, "the serve that was not ready is still running"
