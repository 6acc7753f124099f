"""Required services: skipped on a laptop, a failure in CI (``CI=true``)."""

from __future__ import annotations

import os

import pytest

IN_CI = os.environ.get("CI", "").lower() == "true"


def require(ok: bool, reason: str) -> None:
    """Skip on a laptop, fail in CI."""
    if not ok:
        if IN_CI:
            pytest.fail(f"required service missing in CI: {reason}", pytrace=False)
        pytest.skip(reason)
