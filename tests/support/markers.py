"""Markers that mean what they say: ``broker``, ``postgres``, ``spark``.

A fixture that reaches a service says so with :func:`uses`; the root
conftest marks every test whose fixture closure contains such a fixture, so
``-m "not broker"`` deselects exactly the tests that would start or touch a
broker and a new test cannot forget its marker. Tests that reach a service
without a fixture carry the marker explicitly.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

import pytest

SERVICES = ("broker", "postgres", "spark")

F = TypeVar("F", bound=Callable[..., object])
Predicate = Callable[[object], bool]
_ATTR = "__pn_services__"


def uses(service: str, *, when: Predicate | None = None) -> Callable[[F], F]:
    """Declare that a fixture reaches ``service``; put it under ``@pytest.fixture``.

    ``when`` restricts it to some params of a parametrized fixture, e.g. the
    PostgreSQL variant of ``store_url``. The declaration sits on the fixture
    function itself, so fixtures that share a name (``bus``, ``transport``) in
    different modules are told apart.
    """
    assert service in SERVICES, f"unknown service {service!r}"

    def declare(func: F) -> F:
        declared: list[tuple[str, Predicate | None]] = [*getattr(func, _ATTR, ()),
                                                        (service, when)]
        setattr(func, _ATTR, declared)
        return func
    return declare


def services_of(item: pytest.Item) -> set[str]:
    """The services a collected test reaches through the fixtures of its closure."""
    if not isinstance(item, pytest.Function):
        return set()
    params = dict(item.callspec.params) if hasattr(item, "callspec") else {}
    found: set[str] = set()
    for name, defs in item._fixtureinfo.name2fixturedefs.items():
        if name not in item.fixturenames or not defs:
            continue
        declared: list[tuple[str, Predicate | None]] = getattr(defs[-1].func, _ATTR, [])
        for service, when in declared:
            if when is None or (name in params and when(params[name])):
                found.add(service)
    return found


def mark_by_fixtures(items: list[pytest.Item]) -> None:
    """Add the service markers to every test by its fixtures (root conftest's hook)."""
    for item in items:
        for service in services_of(item) - {m.name for m in item.iter_markers()}:
            item.add_marker(getattr(pytest.mark, service))
