"""``partition-notify rule ...`` and ``serve --once`` as real processes, on SQLite and PostgreSQL.

Bad input is one line and exit 1 (the API's checks) or 2 (argparse); a
``serve`` restarted between a rule's inputs derives the set-done once.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator

import pytest

from partition_notify.app import App, build_app
from tests.rules.test_evaluator import derived
from tests.support.accounts import ROOT


@pytest.fixture
def app(store_url: str) -> Iterator[App]:
    application = build_app(store_url=store_url, transport_url="embedded://")
    yield application
    application.close()


def cli(store_url: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PN_TRANSPORT_URL": "embedded://"}
    return subprocess.run(
        [sys.executable, "-m", "partition_notify.cli", "--store-url", store_url, *args],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120, check=False)


def one_line_error(done: subprocess.CompletedProcess[str], code: int, *fragments: str) -> None:
    assert done.returncode == code, (done.stdout, done.stderr)
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr, done.stderr
    for f in fragments:
        assert f in done.stderr, done.stderr


def test_add_list_dry_run_remove(app: App, store_url: str) -> None:
    app.publisher.register_table("sales", "orders", ["datestamp", "region"])
    for r in ("us", "eu"):
        app.publisher.announce_partitions("sales", "orders", [{"datestamp": "20260101",
                                                               "region": r}])
    added = cli(store_url, "rule", "add", "sales.orders", "--name", "regions", "--kind",
                "all-of", "--key", "region", "--values", "us,eu", "--by", "datestamp")
    assert added.returncode == 0, added.stderr
    assert json.loads(added.stdout)["params"] == {
        "inputs": ["sales.orders"], "key": "region", "values": ["us", "eu"], "by": ["datestamp"]}
    listed = cli(store_url, "rule", "list")
    assert [json.loads(line)["name"] for line in listed.stdout.splitlines()] == ["regions"]
    dry = json.loads(cli(store_url, "rule", "dry-run", "sales.orders", "regions").stdout)
    assert [d["spec"] for d in dry["wouldDerive"]] == ["datestamp=20260101"]
    assert derived(app) == []  # a dry run writes nothing
    removed = cli(store_url, "rule", "remove", "sales.orders", "regions")
    assert removed.returncode == 0 and "removed" in removed.stdout
    assert app.rules.rules() == []


def test_bad_input_is_one_line(app: App, store_url: str) -> None:
    app.publisher.register_table("web", "hits", ["datestamp", "hour"])
    base = ["rule", "add", "web.hits", "--name", "daily", "--kind", "calendar", "--key", "hour",
            "--key-format", "YYYYMMDDHH", "--into", "datestamp"]
    one_line_error(cli(store_url, *base, "--into-format", "YYYY-MM"), 1,
                   "rule intoFormat 'YYYY-MM'", "expected a day format for hour keys")
    one_line_error(cli(store_url, *base, "--into-format", "YYYYMMDD", "--timezone", "Mars/Base"),
                   1, "rule timezone 'Mars/Base'", "expected an IANA time zone")
    one_line_error(cli(store_url, "rule", "add", "web.hits", "--name", "x", "--kind", "all-of",
                       "--key", "region", "--values", "us", "--by", "datestamp"), 1,
                   "rule key", "partition keys of web.hits", "region is not one")
    one_line_error(cli(store_url, "rule", "add", "web.hits", "--name", "x", "--kind", "some"),
                   2, "invalid choice: 'some'")
    one_line_error(cli(store_url, "rule", "remove", "web.hits", "nope"), 1,
                   "no rule named 'nope'")
    # The derived month would land in the key the days are counted in.
    one_line_error(cli(store_url, "rule", "add", "web.hits", "--name", "x", "--kind", "calendar",
                       "--key", "datestamp", "--key-format", "YYYYMMDD", "--into", "DateStamp",
                       "--into-format", "YYYYMM"), 1,
                   "rule into 'DateStamp'", "other than key 'datestamp'")
    assert app.rules.rules() == []


def test_a_missing_parameter_is_named_missing(app: App, store_url: str) -> None:
    # Before: "rule by None: expected a non-empty list of partition keys".
    app.publisher.register_table("web", "clicks", ["datestamp", "region"])
    for args, name in ((["--kind", "quiet", "--quiet-seconds", "10"], "by"),
                       (["--kind", "quiet", "--by", "datestamp"], "quietSeconds"),
                       (["--kind", "all-of", "--key", "region", "--by", "datestamp"],
                        "values")):
        done = cli(store_url, "rule", "add", "web.clicks", "--name", "x", *args)
        one_line_error(done, 1, f"rule {name} is missing: expected")
        assert "None" not in done.stderr, done.stderr
    assert app.rules.rules() == []


def test_a_misspelt_key_or_by_key_is_named_as_the_option_given(app: App, store_url: str) -> None:
    # Before: --by keys were quoted as the counted key ("rule key ['regon', 'datestamp']").
    app.publisher.register_table("web", "clicks", ["datestamp", "region"])
    base = ["--kind", "all-of", "--values", "us,eu"]
    for args, line in (
            (["--key", "regon", "--by", "datestamp"], "rule key ['regon']: expected"),
            (["--key", "region", "--by", "datestmp"], "rule by ['datestmp']: expected")):
        done = cli(store_url, "rule", "add", "web.clicks", "--name", "x", *base, *args)
        one_line_error(done, 1, line)
    assert app.rules.rules() == []


#: An error quotes at most this much of one input, plus its count (defect: 20,000 echoed).
MAX_QUOTED = 120


def test_a_long_bad_list_is_quoted_as_an_excerpt_with_its_count(app: App, store_url: str) -> None:
    # Before: the error line echoed all 20,000 values (169,013 characters).
    app.publisher.register_table("web", "hits", ["datestamp", "region"])
    values = ",".join(str(i) for i in range(20_000))
    done = cli(store_url, "rule", "add", "web.hits", "--name", "x", "--kind", "all-of",
               "--key", "region", "--values", values, "--by", "datestamp")
    assert len(done.stderr) < MAX_QUOTED + 200, f"{len(done.stderr)}: {done.stderr[:300]}"
    one_line_error(done, 1, "rule values ['0', '1', '2',", "…", "(20000 items)",
                   "expected 1 to 1000 distinct values")
    assert app.rules.rules() == []


def test_a_serve_restarted_between_inputs_derives_once(app: App, store_url: str) -> None:
    app.publisher.register_table("sales", "orders", ["datestamp", "region"])
    app.rules.add("sales.orders", name="regions", kind="all-of",
                  params={"key": "region", "values": ["us", "eu", "apac"], "by": ["datestamp"]})
    for region, expected in (("us", 0), ("eu", 0), ("apac", 1), ("eu", 1)):
        app.publisher.announce_partitions("sales", "orders", [{"datestamp": "20260101",
                                                               "region": region}],
                                          replace=True)
        once = cli(store_url, "serve", "--once")  # a fresh process each time: a restart
        assert once.returncode == 0, once.stderr[-2000:]
        assert len(derived(app)) == expected, region
    [msg] = derived(app)
    assert msg.derived_from is not None
    assert sorted(i.value for i in msg.derived_from.inputs) == ["apac", "eu", "us"]


def test_the_cli_choices_are_the_rule_kinds_and_formats() -> None:
    from partition_notify.cli import rules as cli_rules
    from partition_notify.rules import kinds

    assert cli_rules.KINDS == kinds.KINDS
    units = {f: u for f, (u, _, _) in kinds.FORMATS.items()}
    assert {units[f] for f in cli_rules.KEY_FORMATS} == {"hour", "day"}
    assert {units[f] for f in cli_rules.INTO_FORMATS} == {"day", "month"}
    assert set(cli_rules.KEY_FORMATS) | set(cli_rules.INTO_FORMATS) == set(kinds.FORMATS)


def test_quiet_rule_from_the_command_line(app: App, store_url: str) -> None:
    app.publisher.register_table("web", "clicks", ["datestamp", "hour"])
    base = ["rule", "add", "web.clicks", "--name", "settled", "--kind", "quiet", "--by",
            "datestamp"]
    one_line_error(cli(store_url, *base, "--quiet-seconds", "0"), 1,
                   "rule quietSeconds 0", "expected whole seconds from 1")
    one_line_error(cli(store_url, *base, "--quiet-seconds", "soon"), 2,
                   "--quiet-seconds", "invalid int value")
    added = cli(store_url, *base, "--quiet-seconds", "1800")
    assert added.returncode == 0, added.stderr
    assert json.loads(added.stdout)["params"] == {
        "inputs": ["web.clicks"], "by": ["datestamp"], "quietSeconds": 1800}
    app.publisher.announce_partitions("web", "clicks", [{"datestamp": "20260301", "hour": "00"}])
    dry = json.loads(cli(store_url, "rule", "dry-run", "web.clicks", "settled").stdout)
    assert dry["wouldDerive"] == [] and [p["spec"] for p in dry["pending"]] == [
        "datestamp=20260301"]


def test_keys_do_not_change_under_a_rule(app: App, store_url: str) -> None:
    # Before: alter --keys succeeded (no partition, no set-done yet) and both rules then
    # failed at every evaluation ("region, ds is not one"), for ever, holding the log.
    for table, keys in (("a.t", "ds,region"), ("r.out", "ds"), ("b.t", "ds"), ("c.t", "ds")):
        assert cli(store_url, "register", table, "--keys", keys).returncode == 0
    assert cli(store_url, "rule", "add", "a.t", "--name", "regions", "--kind", "all-of",
               "--key", "region", "--values", "us,eu", "--by", "ds").returncode == 0
    assert cli(store_url, "rule", "add", "r.out", "--name", "inputs", "--kind", "cross-table",
               "--input", "b.t", "--input", "c.t", "--by", "ds").returncode == 0

    one_line_error(cli(store_url, "alter", "a.t", "--keys", "day,zone"), 1,
                   "a.t", "a.t:regions")
    one_line_error(cli(store_url, "alter", "b.t", "--keys", "day"), 1, "r.out:inputs")
    assert app.publisher.table("a", "t").partition_keys == ("ds", "region")
    assert app.publisher.table("b", "t").partition_keys == ("ds",)
    # The same keys, or another change, are no key change.
    assert cli(store_url, "alter", "a.t", "--keys", "ds,region",
               "--retention-seconds", "60").returncode == 0
    assert cli(store_url, "rule", "remove", "a.t", "regions").returncode == 0
    assert cli(store_url, "alter", "a.t", "--keys", "day,zone").returncode == 0
