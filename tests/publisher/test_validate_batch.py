"""publisher/validate.py checks a batch of partitions with each key tuple checked once
(spec.normalize_known): every result and every refusal must be what checking each
spec on its own (spec.coerce, check_against, canonical) gives."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from partition_notify.publisher import validate
from partition_notify.store import TableInfo

from partition_notify.contract import spec
from partition_notify.core.errors import InvalidSpecError

INFO = TableInfo(7, "sales", "orders", ("ds", "region"), "hcat.sales.orders", 3600)
KEYS = st.sampled_from(["ds", "region", "DS", "Region", "other", "1bad", "", 3])
VALUES = st.one_of(st.text(max_size=6), st.integers(-5, 5), st.none(), st.booleans(),
                   st.just("x" * 1025), st.just("a/b%"))
SPECS = st.dictionaries(KEYS, VALUES, min_size=0, max_size=3) | st.fixed_dictionaries(
    {"ds": VALUES, "region": VALUES}) | st.fixed_dictionaries({"region": VALUES, "ds": VALUES})


def _one_at_a_time(specs: list[object]) -> tuple[list[spec.Spec], list[str]]:
    """The checks spec by spec, as partitions_canon made them before the batch path."""
    out, canons = [], []
    for i, raw in enumerate(specs):
        try:
            s = spec.coerce(raw)  # type: ignore[arg-type]
            spec.check_against(s, INFO.partition_keys, full=True, table=INFO.qualified)
        except InvalidSpecError as exc:
            raise InvalidSpecError(f"partition #{i}: {exc}") from exc
        canon = validate._bounded(spec.canonical_normal(s))
        if canon in canons:
            raise InvalidSpecError(f"partition #{i} {canon!r} is listed twice")
        out.append(s)
        canons.append(canon)
    return out, canons


def _outcome(check: object, specs: list[object]) -> object:
    try:
        return check(INFO, specs) if check is validate.partitions_canon else check(specs)
    except InvalidSpecError as exc:
        return ("refused", str(exc))


@settings(max_examples=500, deadline=None)
@given(specs=st.lists(SPECS, max_size=8))
def test_batch_checks_equal_one_at_a_time(specs: list[object]) -> None:
    batch = _outcome(validate.partitions_canon, specs)
    alone = _outcome(_one_at_a_time, specs)
    assert batch == alone
    if not isinstance(batch, tuple) or batch[0] != "refused":
        assert [list(s) for s in batch[0]] == [list(s) for s in alone[0]]  # key order too


def test_the_batch_path_is_taken_and_still_checks_each_value() -> None:
    good = [{"region": "eu", "ds": str(i)} for i in range(3)]
    s, canons = validate.partitions_canon(INFO, good)
    assert canons == [f"ds={i}/region=eu" for i in range(3)] and list(s[2]) == ["ds", "region"]
    with pytest.raises(InvalidSpecError, match=r"partition #2: value of partition key 'ds'"):
        validate.partitions_canon(INFO, [*good[:2], {"region": "eu", "ds": ""}])
