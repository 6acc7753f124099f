"""core/json_keys.py: the first repeated key of a JSON document, with its path."""

from __future__ import annotations

import pytest

from partition_notify.core import json_keys


@pytest.mark.parametrize(("raw", "field", "count"), [
    ('{"a": 1, "a": 2, "a": 3}', "m.a", 3),
    ('[{"x": 1}, {"y": {"k": 1, "k": 2}}, {"z": 1, "z": 2}]', "m.1.y.k", 2),
    # Document order: the outer object's repeat comes before its children's.
    ('{"o": {"i": 1, "i": 2}, "o": 3}', "m.o", 2),
    ('{"' + "k" * 500 + '": 1, "' + "k" * 500 + '": 2}', "m." + "k" * 119 + "… (500 characters)",
     2),
])
def test_the_first_repeat_and_its_path(raw: str, field: str, count: int) -> None:
    _, repeated = json_keys.loads(raw)
    assert repeated is not None and repeated.field("m") == field and repeated.count == count
    assert f"appears {count} times" in repeated.what


def test_documents_without_repeats_and_deep_ones() -> None:
    assert json_keys.loads('{"a": {"b": 1}, "b": [{"a": 1}, {"a": 2}]}') == (
        {"a": {"b": 1}, "b": [{"a": 1}, {"a": 2}]}, None)
    deep = '{"a": ' * 900 + '{"k": 1, "k": 2}' + "}" * 900
    _, repeated = json_keys.loads(deep)
    assert repeated is not None and len(repeated.path) == 900 and repeated.key == "k"
    with pytest.raises(ValueError):
        json_keys.loads('{"a": ')
