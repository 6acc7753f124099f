"""The publisher's Python API names the argument whose type is wrong (session 18).

Before: ``announce_partitions(..., replace="no")`` re-announced as an overwrite
(any non-empty string is truthy); ``register_table(db, t, None)``,
``announce_partitions(db, t, None)`` and ``idempotency_key=5`` raised bare TypeErrors.
"""

from __future__ import annotations

from typing import Any

import pytest

from partition_notify import build_app
from partition_notify.core.errors import ValidationError


@pytest.fixture
def pub(sqlite_url: str) -> Any:
    with build_app(store_url=sqlite_url) as app:
        app.publisher.register_table("db", "t", ["ds"])
        yield app.publisher


@pytest.mark.parametrize("replace", ["no", "false", 1, 0, None])
def test_replace_must_be_a_bool(pub: Any, replace: object) -> None:
    pub.announce_partitions("db", "t", ["ds=1"])
    with pytest.raises(ValidationError, match="replace must be True or False"):
        pub.announce_partitions("db", "t", ["ds=1"], replace=replace)
    with pytest.raises(ValidationError, match="replace must be True or False"):
        pub.announce_commit("db", "t", ["ds=2"], locations=[None], replace=replace)
    assert [m.replace for m in pub.announce_partitions("db", "t", ["ds=1"], replace=True)] \
        == [True]


@pytest.mark.parametrize("partitions", [None, 5])
def test_partitions_must_be_a_list(pub: Any, partitions: object) -> None:
    with pytest.raises(ValidationError, match="partitions must be a list of specs"):
        pub.announce_partitions("db", "t", partitions)


@pytest.mark.parametrize("keys", [None, 5])
def test_partition_keys_must_be_a_list(pub: Any, keys: object) -> None:
    with pytest.raises(ValidationError, match="partition keys must be a list of names"):
        pub.register_table("db", "u", keys)


def test_an_idempotency_key_must_be_a_string(pub: Any) -> None:
    with pytest.raises(ValidationError, match="idempotency key must be a string"):
        pub.send_mark_set_done("db", "t", "ds=1", idempotency_key=5)
    assert pub.store.log.events_after(0, 10) == []
