"""Fast input generators for the fuzz targets, driven by a ``random.Random``.

Hypothesis draws the Random (``st.randoms()``): it owns the seed, replays and
reports failures, while these plain functions produce a whole batch of inputs
per example at a fraction of hypothesis' per-example cost.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from typing import Any

SPECIAL = [*"=/%\\#:*?[]^{}'\" \t\n\r\x00\x01\x7f.,;-_",
           "é", "\u2028", "😀", "\ud800", "\udfff", "\ufeff", "Ω"]
HEX = "0123456789abcdefABCDEFGZ%"
KEYS = ["ds", "region", "a", "b", "_x", "K", "1a", "a-b", "", " ", "ds ", "é", "a" * 200]


def text(rng: random.Random, max_len: int = 40) -> str:
    n = rng.randint(0, max_len)
    pick = rng.random()
    out = []
    for _ in range(n):
        r = rng.random()
        if r < 0.55:
            out.append(chr(rng.randint(0x20, 0x7E)))
        elif r < 0.85:
            out.append(rng.choice(SPECIAL))
        elif r < 0.95 or pick < 0.5:
            out.append(chr(rng.randint(0x80, 0x2FFFF)))
        else:
            out.append(chr(rng.randint(0, 0x10FFFF)))
    return "".join(out)


def mutate_text(rng: random.Random, s: str) -> str:
    for _ in range(rng.randint(1, 4)):
        op = rng.randrange(6)
        i = rng.randint(0, len(s))
        if op == 0:
            s = s[:i] + rng.choice(SPECIAL) + s[i:]
        elif op == 1 and s:
            s = s[:i] + s[i + 1:]
        elif op == 2:
            s = s[:i] + "%" + "".join(rng.choice(HEX) for _ in range(rng.randint(0, 3))) + s[i:]
        elif op == 3:
            s = s + "/" + s[: rng.randint(0, len(s))]
        elif op == 4:
            s = s.upper() if rng.random() < 0.5 else s.swapcase()
        else:
            s = s[:i] + text(rng, 6) + s[i:]
    return s


def spec_text(rng: random.Random) -> str:
    r = rng.random()
    if r < 0.15:
        return text(rng, 60)
    pairs = [f"{rng.choice(KEYS) if rng.random() < 0.3 else 'k' + str(rng.randint(0, 9))}="
             f"{text(rng, 12)}" for _ in range(rng.randint(1, 6))]
    s = "/".join(pairs)
    return mutate_text(rng, s) if r < 0.6 else s


SCALARS: list[Callable[[random.Random], object]] = [
    lambda r: None, lambda r: r.random() < 0.5, lambda r: r.randint(-(2**70), 2**70),
    lambda r: r.choice([float("nan"), float("inf"), -0.0, 1e308, r.random()]),
    lambda r: text(r, 20), lambda r: text(r, 20).encode("utf-8", "surrogatepass"),
    lambda r: [r.randint(0, 9)], lambda r: {"x": None}, lambda r: object(),
]


def scalar(rng: random.Random) -> object:
    return rng.choice(SCALARS)(rng)


def mapping(rng: random.Random) -> dict[object, object]:
    out: dict[object, object] = {}
    for _ in range(rng.randint(0, 8)):
        k: object = (f"k{rng.randint(0, 9)}" if rng.random() < 0.6 else
                     rng.choice([rng.choice(KEYS), text(rng, 8), rng.randint(-3, 3), None]))
        out[k] = text(rng, 15) if rng.random() < 0.6 else scalar(rng)
    return out


def json_value(rng: random.Random, depth: int = 0) -> Any:
    r = rng.random()
    if depth > 3 or r < 0.5:
        return rng.choice([None, True, False, rng.randint(-(2**70), 2**70), rng.random() * 1e6,
                           text(rng, 20), "", float("nan")])
    if r < 0.75:
        return [json_value(rng, depth + 1) for _ in range(rng.randint(0, 4))]
    return {text(rng, 8): json_value(rng, depth + 1) for _ in range(rng.randint(0, 4))}


def mutate_message(rng: random.Random, valid: dict[str, Any]) -> dict[str, Any]:
    obj = dict(valid)
    for _ in range(rng.randint(0, 4)):
        key = rng.choice(sorted(obj) or ["eventType"])
        op = rng.randrange(6)
        if op == 0:
            obj.pop(key, None)
        elif op == 1:
            obj[key] = json_value(rng)
        elif op == 2:
            obj[text(rng, 12)] = json_value(rng)
        elif op == 3:
            obj[key] = "x" * rng.choice([1000, 70_000])
        elif op == 4:
            obj[key] = {"a": [obj.get(key)]}
        else:
            obj[key] = mutate_text(rng, str(obj.get(key)))
    return obj


def body(rng: random.Random, corpus: list[dict[str, Any]]) -> bytes:
    """A message body: mutated valid JSON, damaged bytes, or noise."""
    r = rng.random()
    if r < 0.55:
        return json.dumps(mutate_message(rng, rng.choice(corpus))).encode()
    if r < 0.75:
        raw = bytearray(json.dumps(rng.choice(corpus)).encode())
        for _ in range(rng.randint(1, 5)):
            if raw:
                raw[rng.randrange(len(raw))] = rng.randrange(256)
        cut = rng.randint(0, len(raw))
        return bytes(raw[:cut] if rng.random() < 0.3 else raw)
    if r < 0.9:
        return json.dumps(json_value(rng)).encode()
    return rng.randbytes(rng.randint(0, 200))


def headers(rng: random.Random) -> dict[str, str] | None:
    if rng.random() < 0.3:
        return None
    keys = ["HCAT_EVENT", "PN_EVENT_ID", "PN_MESSAGE_ID", "PN_TABLE", "x", text(rng, 5)]
    values = ["ADD_PARTITION", "MARK_SET_DONE", "PARTITION_DONE", "", "1", text(rng, 10)]
    return {rng.choice(keys): rng.choice(values) for _ in range(rng.randint(0, 3))}
