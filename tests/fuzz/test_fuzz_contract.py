"""Fuzzing the pure input parsers: partition specs, message decoding, topic names.

Oracle: every input either parses (and then round-trips) or raises the one
specific error of that parser. Any other exception — KeyError, TypeError,
RecursionError, UnicodeError... — fails the test, naming the input.

Each hypothesis example draws a ``Random`` and a few structured values; the
batch of inputs is produced from them by tests/fuzz/gen.py (see budget.py).
"""

from __future__ import annotations

import json
import random

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from partition_notify.contract import (
    AddPartitionMessage,
    SetDoneMessage,
    TopicPolicy,
    decode,
    names,
    spec,
    to_envelope,
    topic_for,
)
from partition_notify.contract.topics import validate_topic
from partition_notify.core.errors import InvalidNameError, InvalidSpecError, MalformedMessageError
from tests.fuzz import gen
from tests.fuzz.budget import Counter, batch, fuzz_settings, run

# A real Random seeded by hypothesis: thousands of calls per example stay cheap (a
# recorded HypothesisRandom would make each call a draw) and replay still works.
rngs = st.randoms(use_true_random=True)


def _fail(target: str, value: object, exc: BaseException) -> AssertionError:
    return AssertionError(f"{target}: {type(exc).__name__} on input {value!r:.300}: {exc}")


# -- partition specs ----------------------------------------------------------------
def check_spec_text(c: Counter, text: str) -> None:
    try:
        parsed = spec.parse(text)
    except InvalidSpecError as exc:
        assert str(exc)
        c.hit("rejected")
        return
    except Exception as exc:
        raise _fail("spec.parse", text, exc) from exc
    c.hit("parsed")
    assert spec.parse(spec.canonical(parsed)) == parsed, f"no round-trip: {text!r}"
    assert list(parsed) == sorted(parsed)


def test_fuzz_spec_parser() -> None:
    def build(c: Counter):  # a hypothesis test bound to its counter
        @fuzz_settings("spec-parser")
        @given(rngs, st.text(max_size=60))
        @example(random.Random(0), "a=" + "x" * 100_000)
        @example(random.Random(1), "/".join(f"k{i}=1" for i in range(1000)))
        @example(random.Random(2), "a=%ZZ/b=%2")
        def t(rng: random.Random, drawn: str) -> None:
            check_spec_text(c, drawn)
            for _ in range(batch("spec-parser") - 1):
                check_spec_text(c, gen.spec_text(rng))
        return t

    run("spec-parser", build)


def test_fuzz_spec_mapping() -> None:
    def build(c: Counter):
        @fuzz_settings("spec-mapping")
        @given(rngs)
        def t(rng: random.Random) -> None:
            for _ in range(batch("spec-mapping")):
                mapping = gen.mapping(rng)
                try:
                    norm = spec.coerce(mapping)  # type: ignore[arg-type]
                except (InvalidSpecError, InvalidNameError) as exc:
                    assert str(exc)
                    c.hit("rejected")
                    continue
                except Exception as exc:
                    raise _fail("spec.coerce", mapping, exc) from exc
                c.hit("accepted")
                assert spec.parse(spec.canonical(norm)) == norm
        return t

    run("spec-mapping", build)


# -- message decoding ---------------------------------------------------------------
def _valid(kind: str) -> dict[str, object]:
    common = {
        "server": "s", "servicePrincipal": "", "db": "sales", "table": "orders",
        "timestamp": 1, "timestampMs": 1000, "messageId": "0" * 32, "eventId": 1,
        "topic": "hcat.sales.orders", "topicSeq": 1, "revision": None,
    }
    if kind == "add":
        return AddPartitionMessage.model_validate({
            **common, "partitions": [{"ds": "1"}], "partitionKeys": ["ds"],
            "locations": [None]}).model_dump(by_alias=True, mode="json")
    return SetDoneMessage.model_validate({
        **common, "partitionSpec": {"ds": "1"}, "partitionSpecString": "ds=1",
        "expiresAt": 2}).model_dump(by_alias=True, mode="json")


CORPUS = [_valid("add"), _valid("done")]


def check_decode(c: Counter, body: bytes | str, hdrs: dict[str, str] | None) -> bool:
    """Decode once; True when it decoded. Only MalformedMessageError may escape decode."""
    try:
        msg = decode(body, hdrs)
    except MalformedMessageError as exc:
        assert str(exc)
        c.hit("malformed")
        return False
    except Exception as exc:
        raise _fail("decode", (body, hdrs), exc) from exc
    env = to_envelope(msg)
    c.hit("decoded")
    assert decode(env.body, env.headers) == msg, f"no round-trip: {body!r:.300}"
    return True


@pytest.mark.parametrize("field", ["server", "db", "topic", "messageId"])
def test_lone_surrogates_are_malformed(field: str) -> None:
    """Found by the mutation fuzzer: such messages decoded but could not be re-encoded."""
    body = dict(CORPUS[1])
    body[field] = "a\ud800b" if field != "messageId" else "0" * 30 + "\ud800"
    with pytest.raises(MalformedMessageError):
        decode(json.dumps(body).encode())  # json.dumps writes the \\ud800 escape


def test_fuzz_decode_bytes() -> None:
    def build(c: Counter):
        @fuzz_settings("message-decode-bytes")
        @given(rngs, st.binary(max_size=200))
        @example(random.Random(0), b"\xff\xfe{}")
        @example(random.Random(1), b'{"eventType": "ADD_PARTITION"' + b" " * (1 << 20) + b"}")
        @example(random.Random(2), b"[" * 500 + b"]" * 500)
        @example(random.Random(3), b'{"eventType": "\\ud800"}')
        @example(random.Random(4), b'{"eventType": "ADD_PARTITION", "eventId": 1e999}')
        def t(rng: random.Random, drawn: bytes) -> None:
            check_decode(c, drawn, None)
            for _ in range(batch("message-decode-bytes") - 1):
                r = rng.random()
                raw: bytes | str = (rng.randbytes(rng.randint(0, 300)) if r < 0.4 else
                                    gen.text(rng, 200) if r < 0.6 else
                                    json.dumps(gen.json_value(rng)).encode())
                check_decode(c, raw, gen.headers(rng))
        return t

    run("message-decode-bytes", build)


def test_deeply_nested_json_is_malformed() -> None:
    """Found by this fuzzer: json.loads' RecursionError escaped decode (fixed in 9f4f04e)."""
    with pytest.raises(MalformedMessageError):
        decode(b"[" * 100_000)


def test_fuzz_decode_mutated() -> None:
    def build(c: Counter):
        @fuzz_settings("message-decode-mutated")
        @given(rngs)
        def t(rng: random.Random) -> None:
            for _ in range(batch("message-decode-mutated")):
                check_decode(c, gen.body(rng, CORPUS), gen.headers(rng))
        return t

    run("message-decode-mutated", build)


# -- topic naming ---------------------------------------------------------------------
def _name(rng: random.Random) -> str:
    r = rng.random()
    if r < 0.4:
        return "".join(rng.choice("abcXYZ_019 ") for _ in range(rng.randint(0, 12)))
    if r < 0.5:
        return "a" * rng.choice([127, 128, 129, 200])
    return gen.text(rng, 30)


def test_fuzz_topic_naming() -> None:
    def build(c: Counter):
        @fuzz_settings("topic-naming")
        @given(rngs, st.sampled_from(list(TopicPolicy)))
        def t(rng: random.Random, policy: TopicPolicy) -> None:
            for _ in range(batch("topic-naming")):
                db, table = _name(rng), _name(rng)
                prefix = rng.choice(["hcat", "", "a.b", gen.text(rng, 10), "x" * 120])
                override = rng.choice([None, None, "", _name(rng), "." , "..", "t" * 250])
                try:
                    d, tb = names.db_name(db), names.table_name(table)
                    topic = topic_for(d, tb, prefix=prefix, policy=policy, override=override)
                except InvalidNameError as exc:
                    assert str(exc)
                    c.hit("rejected")
                    continue
                except Exception as exc:
                    raise _fail("topic_for", (db, table, prefix, policy, override), exc) from exc
                c.hit("named")
                assert validate_topic(topic) == topic
                assert len(topic) <= 249 and topic.isascii()
                assert names.db_name(d) == d and names.table_name(tb) == tb
        return t

    run("topic-naming", build)
