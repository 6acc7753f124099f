"""docs/http-api.md states the code's defaults, and every endpoint the docs name exists."""

import re
from pathlib import Path

from partition_notify.app import build_app
from partition_notify.contract.messages import EVENT_TYPES
from partition_notify.http.app import create_http_app
from partition_notify.settings import Settings

DOC = Path(__file__).resolve().parents[2] / "docs" / "http-api.md"


def test_http_settings_table_matches_defaults() -> None:
    rows = dict(re.findall(r"^\| `PN_([A-Z_]+)` \| `([^`]+)` \|", DOC.read_text(), re.M))
    fields = Settings.model_fields
    checked = 0
    for env, shown in rows.items():
        default = fields[env.lower()].default
        expected = str(default).lower() if isinstance(default, bool) else str(default)
        assert shown == expected, f"PN_{env}: docs say {shown}, code says {expected}"
        checked += 1
    assert checked >= 7


ENDPOINT = re.compile(r"`((?:GET|POST|PATCH|DELETE)(?:/(?:GET|POST|PATCH|DELETE))*) ([^`\s?]+)")
API_PREFIXES = ("/v1/", "/healthz", "/readyz", "/metrics", "/openapi.json", ".../", "…/")


def documented_endpoints(text: str) -> set[tuple[str, str]]:
    """(method, path) of every `METHOD /path` of the API a document names.

    A path cut to `.../x` or `…/x` is one of a table's: ``/v1/tables/{table}/x``.
    """
    out = set()
    for methods, path in ENDPOINT.findall(text):
        if path.startswith(API_PREFIXES) and path != "/v1/...":
            path = re.sub(r"^(\.\.\.|…)", "/v1/tables/{table}", path)
            out |= {(m, path) for m in methods.split("/")}
    return out


def missing_endpoints(text: str, spec: dict[str, dict[str, object]]) -> list[str]:
    """Documented endpoints the OpenAPI document lacks."""
    served = [(m.upper(), re.sub(r"\\\{[^}]*\\\}", "[^/]+", re.escape(p)))
              for p, ops in spec.items() for m in ops]
    served.append(("GET", "/openapi\\.json"))
    return [f"{method} {path}" for method, path in sorted(documented_endpoints(text))
            if not any(m == method and re.fullmatch(rx, path) for m, rx in served)]


def test_documented_endpoints_exist(tmp_path: Path) -> None:
    with build_app(store_url=f"sqlite:///{tmp_path}/s.db", transport_url="embedded://") as app:
        spec = create_http_app(app).openapi()["paths"]
    readme = DOC.parents[1] / "README.md"
    docs = [readme, *sorted(p for p in DOC.parent.glob("*.md") if p.name != "benchmarks.md")]
    bad = {d.name: missing_endpoints(d.read_text(), spec) for d in docs}
    assert {name: b for name, b in bad.items() if b} == {}
    assert len(documented_endpoints(DOC.read_text())) >= 25
    assert missing_endpoints("`DELETE /v1/tables/{table}/set-done`, `POST .../partition`",
                             spec) == ["DELETE /v1/tables/{table}/set-done",
                                         "POST /v1/tables/{table}/partition"]


def test_stream_names_every_event_type() -> None:
    # "`event:` = the `HCAT_EVENT` (`ADD_PARTITION`, ...), `data:`": a client that
    # switches on this list must not meet an event type it was never told of.
    text = DOC.read_text()
    listed = text[text.index("`event:`"):text.index("`data:`", text.index("`event:`"))]
    assert set(re.findall(r"`([A-Z_]+)`", listed)) - {"HCAT_EVENT"} == set(EVENT_TYPES)


def test_the_history_page_sizes_are_the_routes() -> None:
    from partition_notify.http.routes_read import HISTORY_PAGE, MAX_HISTORY_PAGE

    text = DOC.read_text()
    assert f"default {HISTORY_PAGE:,}, at most {MAX_HISTORY_PAGE:,}" in text


def test_the_idempotency_key_rule_is_the_checks() -> None:
    # A user reading "printable ASCII" may send `job 42`; the check refuses a space.
    from partition_notify.store.idempotency import (
        MAX_IDEMPOTENCY_KEY_CHARS,
        check_idempotency_key,
    )

    text = DOC.read_text()
    stated = re.search(r"Writes accept `Idempotency-Key: <([^>]*)>`", text)
    assert stated, "docs/http-api.md no longer states the Idempotency-Key rule"
    rule = stated[1]
    assert f"1\u2013{MAX_IDEMPOTENCY_KEY_CHARS}" in rule, rule  # an en dash
    check_idempotency_key("job-42_a.b:c")
    try:
        check_idempotency_key("job 42")
    except ValueError:
        assert "no space" in rule, f"the check refuses a space; the doc says {rule!r}"
