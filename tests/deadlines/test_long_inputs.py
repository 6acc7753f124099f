"""An expectation's refused input is quoted as an excerpt, as a rule's is: a 100,000
character spec template, cron, time zone or deadline made a 200 KB problem body and
error line (quoted whole, the template twice: itself and what it rendered to)."""

from __future__ import annotations

import pytest

from partition_notify.app import App
from partition_notify.core.errors import ValidationError
from partition_notify.core.limits import MAX_QUOTED_CHARS

GOOD = {"spec_template": "datestamp={{ ds_nodash }}", "cron": "0 0 * * *",
        "timezone": "UTC", "deadline": "06:00"}
LONG = 100_000


@pytest.mark.parametrize(("field", "value", "says"), [
    ("spec_template", "datestamp={{ ds_nodash }}" + "x" * LONG, "spec template"),
    ("spec_template", "datestamp={{ nope }}" + "x" * 900, "unknown variable"),
    ("spec_template", "datestamp={{ ds_nodash }" + "x" * 900, "not a {{ variable }}"),
    ("cron", "1," * LONG + "1 * * * *", "schedule"),
    ("cron", "1 " * LONG, "5-field crontab"),
    ("timezone", "x" * LONG, "time zone"),
    ("deadline", "x" * LONG, "deadline"),
])
def test_a_long_refused_input_is_quoted_as_an_excerpt(
        app: App, field: str, value: str, says: str) -> None:
    app.publisher.register_table("sales", "orders", ["datestamp", "region"])
    with pytest.raises(ValidationError) as err:
        app.deadlines.add("sales", "orders", name="daily", **{**GOOD, field: value})
    message = str(err.value)
    assert says in message, message[:300]
    assert len(message) < 2 * MAX_QUOTED_CHARS + 250, (len(message), message[:300])
    assert app.deadlines.expectations("sales", "orders") == []


def test_a_template_with_braces_around_no_variable_says_so(app: App) -> None:
    app.publisher.register_table("sales", "orders", ["datestamp", "region"])
    with pytest.raises(ValidationError) as err:  # was: "has an unbalanced '{{' or '}}'"
        app.deadlines.add("sales", "orders", name="daily",
                          **{**GOOD, "spec_template": "datestamp={{ ''.__class__ }}"})
    assert "not a {{ variable }}" in str(err.value), str(err.value)


@pytest.mark.parametrize(("field", "value", "says"), [
    # Valid, and within the 1,024 characters of a spec value, but longer than the
    # column: PostgreSQL refused it as a store failure (503), SQLite kept it.
    ("spec_template", "datestamp={{ ds_nodash }}" + "x" * 990, "at most 1000 characters"),
    ("cron", "1," * 100 + "1 * * * *", "at most 128 characters"),
])
def test_a_valid_input_longer_than_its_column_is_refused_by_name(
        app: App, field: str, value: str, says: str) -> None:
    app.publisher.register_table("sales", "orders", ["datestamp", "region"])
    with pytest.raises(ValidationError) as err:
        app.deadlines.add("sales", "orders", name="daily", **{**GOOD, field: value})
    assert says in str(err.value), str(err.value)[:300]
    assert app.deadlines.expectations("sales", "orders") == []
