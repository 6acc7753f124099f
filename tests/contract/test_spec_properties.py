"""Property tests of the canonical partition-spec form (hypothesis).

The reference escaper below is written from Hive's ``FileUtils.charToEscape``
(every char below ' ', then ``"#%'*/:=?\\{[]^`` and DEL; ``%02X``), not from
our module, so the two are checked against each other.
"""

from __future__ import annotations

import itertools
import re

import pytest
from hypothesis import assume, example, given, settings
from hypothesis import strategies as st

from partition_notify.contract import spec
from partition_notify.core.errors import InvalidSpecError

HIVE_ESCAPED = {chr(c) for c in range(0x20)} | set("\"#%'*/:=?\\{[]^") | {"\x7f"}


def hive_escape(value: str) -> str:
    return "".join(f"%{ord(c):02X}" if c in HIVE_ESCAPED else c for c in value)


keys = st.from_regex(r"[a-z_][a-z0-9_]{0,20}", fullmatch=True)
# Bias towards the characters that matter, but allow any encodable code point.
nasty = st.sampled_from([*sorted(HIVE_ESCAPED), "%2F", "%", "=", "/", " ", "é", "\u2028", "😀"])
chars = st.one_of(nasty, st.characters(codec="utf-8"))
values = st.lists(chars, min_size=1, max_size=30).map("".join).filter(
    lambda v: 0 < len(v) <= spec.MAX_VALUE_LENGTH
)
specs = st.dictionaries(keys, values, min_size=1, max_size=6)


@given(specs)
@example({"a": "/"})
@example({"a": "="})
@example({"a": "%"})
@example({"a": "%25"})
@example({"a": "x=y/z=w", "b": "\x00\x01\n\x7f"})
def test_round_trip(s: dict[str, str]) -> None:
    text = spec.canonical(s)
    assert spec.parse(text) == spec.normalize(s)
    # And the canonical form is a fixed point.
    assert spec.canonical(spec.parse(text)) == text


@given(specs, st.randoms(use_true_random=False))
def test_order_independent(s: dict[str, str], rnd) -> None:
    items = list(s.items())
    rnd.shuffle(items)
    assert spec.canonical(dict(items)) == spec.canonical(s)
    # A string with its segments in any order parses to the same spec.
    segments = spec.canonical(s).split("/")
    rnd.shuffle(segments)
    assert spec.parse("/".join(segments)) == spec.normalize(s)


@given(specs)
def test_keys_sorted_and_values_hive_escaped(s: dict[str, str]) -> None:
    text = spec.canonical(s)
    segments = text.split("/")
    # No unescaped '/' inside a value: exactly one segment per key.
    assert len(segments) == len(s)
    parsed_keys = []
    for seg in segments:
        # No unescaped '=' inside a value: exactly one '=' per segment.
        assert seg.count("=") == 1, seg
        key, escaped = seg.split("=")
        parsed_keys.append(key)
        assert escaped == hive_escape(s[key])
        assert not (set(escaped) & (HIVE_ESCAPED - {"%"}))
        # Every '%' starts an upper-case two-digit escape.
        assert re.fullmatch(r"(?:[^%]|%[0-9A-F]{2})+", escaped), escaped
    assert parsed_keys == sorted(s)


@given(values)
def test_escape_matches_hive_and_unescapes(v: str) -> None:
    assert spec.escape_value(v) == hive_escape(v)
    assert spec.unescape_value(spec.escape_value(v)) == v


@given(specs, specs)
def test_canonical_is_injective(a: dict[str, str], b: dict[str, str]) -> None:
    assume(spec.normalize(a) != spec.normalize(b))
    assert spec.canonical(a) != spec.canonical(b)


def test_hive_escape_set_exactly() -> None:
    for code in range(0x80):
        c = chr(code)
        expected = f"%{code:02X}" if c in HIVE_ESCAPED else c
        assert spec.escape_value(c) == expected, repr(c)
    # Non-ASCII is left alone, as in Hive (its BitSet covers 0..127 only).
    assert spec.escape_value("é😀\u0085") == "é😀\u0085"


def test_parse_accepts_lower_case_hex_and_canonicalises() -> None:
    assert spec.parse("a=x%2fy") == {"a": "x/y"}
    assert spec.canonical(spec.parse("b=%41/a=x%2fy")) == "a=x%2Fy/b=A"


def test_keys_lower_cased_ints_and_null() -> None:
    assert spec.canonical({"Region": "us", "DS": 20110228}) == "ds=20110228/region=us"
    assert spec.canonical({"ds": None}) == f"ds={spec.HIVE_DEFAULT_PARTITION}"


def test_path_is_in_table_key_order() -> None:
    s = spec.normalize({"region": "u/s", "ds": "1"})
    assert spec.path(s, ["region", "ds"]) == "region=u%2Fs/ds=1"
    assert spec.canonical(s) == "ds=1/region=u%2Fs"


# -- coverage ---------------------------------------------------------------
small_keys = st.sampled_from(["a", "b", "c", "d"])
small_values = st.sampled_from(["1", "2", "x/y", "="])
small_specs = st.dictionaries(small_keys, small_values, min_size=1, max_size=4)


@given(small_specs, small_specs)
@settings(max_examples=500)
def test_covers_iff_subset_iff_in_covering_specs(wanted: dict[str, str],
                                                 done: dict[str, str]) -> None:
    w, d = spec.normalize(wanted), spec.normalize(done)
    is_subset = d.items() <= w.items()
    assert spec.covers(d, w) is is_subset
    assert (spec.canonical(d) in spec.covering_specs(w)) is is_subset


@given(small_specs)
def test_covering_specs_are_exactly_the_subsets(wanted: dict[str, str]) -> None:
    w = spec.normalize(wanted)
    got = spec.covering_specs(w)
    assert len(got) == len(set(got)) == 2 ** len(w) - 1
    expected = {
        spec.canonical(dict(combo))
        for n in range(1, len(w) + 1)
        for combo in itertools.combinations(w.items(), n)
    }
    assert set(got) == expected
    # Every string is canonical (parses and re-renders identically) and covers w.
    for text in got:
        assert spec.canonical(spec.parse(text)) == text
        assert spec.covers(spec.parse(text), w)
    assert spec.canonical(w) in got


def test_empty_spec_covers_nothing() -> None:
    assert not spec.covers({}, {"a": "1"})


# -- bad specs name the offending part ------------------------------------------
@pytest.mark.parametrize(
    ("raw", "needle"),
    [
        ({}, "at least one key"),
        ("", "at least one key"),
        ("   ", "at least one key"),
        ({"ds": ""}, "'ds' is empty"),
        ("ds=", "'ds' is empty"),
        ("region=us/ds=", "'ds' is empty"),
        ({"ds": "1", "DS": "2"}, "'ds' appears twice"),
        ("ds=1/DS=2", "'ds' appears twice"),
        ("ds=1/ds=1", "'ds' appears twice"),
        ("ds", "'ds' in 'ds' is not key=value"),
        ("ds=1//region=us", "'' in 'ds=1//region=us' is not key=value"),
        ("1ds=x", "'1ds'"),
        ({"d-s": "x"}, "'d-s'"),
        ("=x", "partition key is empty"),
        ("ds=%zz", "'ds'"),
        ("ds=abc%2", "'ds'"),
        ({"ds": True}, "'ds' must be a string or integer"),
        ({"ds": 1.5}, "'ds' must be a string or integer"),
        ({"ds": "x" * (spec.MAX_VALUE_LENGTH + 1)}, "'ds' is 1025 characters"),
        ({f"k{i}": "v" for i in range(spec.MAX_SPEC_KEYS + 1)}, "at most 12 keys"),
        (["ds=1"], "must be a mapping"),
    ],
)
def test_bad_specs(raw: object, needle: str) -> None:
    with pytest.raises(InvalidSpecError) as info:
        spec.coerce(raw)  # type: ignore[arg-type]
    assert needle in str(info.value)


def test_check_against_names_unknown_and_missing_keys() -> None:
    s = spec.coerce("ds=1/colour=red")
    with pytest.raises(InvalidSpecError, match=r"unknown key\(s\) \['colour'\]"):
        spec.check_against(s, ["ds", "region"], full=False, table="db.t")
    with pytest.raises(InvalidSpecError, match=r"missing \['region'\]"):
        spec.check_against(spec.coerce("ds=1"), ["ds", "region"], full=True, table="db.t")
    spec.check_against(spec.coerce("ds=1"), ["ds", "region"], full=False, table="db.t")


@pytest.mark.parametrize("raw", [{"ds": "a\ud800b"}, "ds=a\udfffb"])
def test_values_that_cannot_be_utf8_are_rejected_up_front(raw: object) -> None:
    # Found by this suite: a lone surrogate used to pass validation and then
    # fail deep in JSON encoding with a pydantic serialisation error.
    with pytest.raises(InvalidSpecError, match=r"value of partition key 'ds'.*UTF-8"):
        spec.coerce(raw)  # type: ignore[arg-type]
