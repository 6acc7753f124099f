"""A snapshot of a name nothing knows is an error, not the empty snapshot: a typo
("sales.ordres") would otherwise hand a job a snapshot that reads nothing."""

from __future__ import annotations

import pytest
from partition_notify.revisions import RevisionManager, Snapshot
from partition_notify.revisions.datasets import SnapshotDatasets
from partition_notify.store import Store

from partition_notify.core.errors import NotFoundError, ValidationError


@pytest.mark.parametrize("name", ["bad name", "no.such", "nodot", "Sales.Orders"])
def test_an_unknown_or_invalid_name_is_refused_naming_it(rm: RevisionManager, name: str) -> None:
    with pytest.raises(NotFoundError) as caught:
        rm.create_snapshot(name)
    message = str(caught.value)
    assert repr(name) in message and "\n" not in message, message
    assert "registered table" in message and "SNAPSHOT dataset" in message, message


def test_surrounding_spaces_stay_a_validation_error(rm: RevisionManager) -> None:
    with pytest.raises(ValidationError, match="surrounding spaces"):
        rm.create_snapshot(" sales.orders")


def test_known_names_without_revisions_have_the_empty_snapshot(
    rm: RevisionManager, store: Store, datasets: SnapshotDatasets
) -> None:
    store.catalog.register_table(
        "sales", "orders", ["ds"], topic="t.sales.orders", retention_seconds=60
    )
    assert rm.create_snapshot("sales.orders") == Snapshot("sales.orders", {}, 0)
    datasets.define("dims.users", "/data/dims/users")
    assert rm.create_snapshot("dims.users") == Snapshot("dims.users", {}, 0)
    # A name a transaction used is known to the revisions whatever the catalog says.
    rm.abort_write_transaction(rm.begin_write_transaction("scratch", ["cf"]))
    assert rm.create_snapshot("scratch").latest_revision == 1


def test_a_registered_table_in_other_case_is_named_as_registered(
    rm: RevisionManager, store: Store
) -> None:
    """Every other command takes ``Sales.ORDERS`` for ``sales.orders`` (names are stored
    lower case); revision names are exact, so the snapshot is refused, but it must
    not call a valid name invalid: it says how the table is spelt."""
    store.catalog.register_table(
        "sales", "orders", ["ds"], topic="t.sales.orders", retention_seconds=60
    )
    with pytest.raises(NotFoundError) as caught:
        rm.create_snapshot("Sales.ORDERS")
    message = str(caught.value)
    assert "not a valid" not in message, message
    assert ("revision names are exact, and the registered table is spelt sales.orders"
            in message), message
