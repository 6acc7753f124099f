"""``partition_notify`` is the one import a user needs, and importing it is cheap."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import partition_notify

ROOT = Path(__file__).resolve().parents[2]
#: Nothing a plain ``import partition_notify`` may load: the database layer,
#: the broker drivers, Spark, the HTTP stack, the settings machinery.
HEAVY = ("sqlalchemy", "pyspark", "py4j", "stomp", "kafka", "fastapi", "starlette",
         "pydantic", "pydantic_settings", "store", "publisher", "subscriber", "writers",
         "transports")


def _modules_after(code: str) -> set[str]:
    out = subprocess.run(
        [sys.executable, "-c",
         f"import json, sys\n{code}\nprint(json.dumps(sorted(sys.modules)))"],
        cwd=ROOT, capture_output=True, text=True, check=True,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
    )
    return set(json.loads(out.stdout.splitlines()[-1]))


def _top_level(modules: set[str]) -> set[str]:
    return {m.split(".", 1)[0] for m in modules}


def test_importing_the_package_loads_nothing_heavy() -> None:
    loaded = _top_level(_modules_after("import partition_notify"))
    assert "partition_notify" in loaded
    assert loaded.isdisjoint(HEAVY), sorted(loaded & set(HEAVY))


def test_a_name_is_imported_on_first_use_only() -> None:
    modules = _modules_after(
        "import partition_notify\nassert partition_notify.Publisher.__name__ == 'Publisher'")
    assert "partition_notify.publisher" in modules
    loaded = _top_level(modules)
    assert "sqlalchemy" in loaded
    assert "publisher" not in loaded  # only ever under partition_notify
    assert "pyspark" not in loaded  # the writer's PySpark import waits for a write


def test_every_public_name_resolves_to_its_home() -> None:
    from partition_notify.publisher import Publisher
    from partition_notify.subscriber import Subscriber
    from partition_notify.writers import NotifyingWriter

    from partition_notify.app import App, build_app

    for name in partition_notify.__all__:
        assert getattr(partition_notify, name) is not None, name
    assert partition_notify.build_app is build_app
    assert partition_notify.App is App
    assert partition_notify.Publisher is Publisher
    assert partition_notify.Subscriber is Subscriber
    assert partition_notify.NotifyingWriter is NotifyingWriter
    assert set(partition_notify.__all__) <= set(dir(partition_notify))


def test_an_unknown_name_is_an_attribute_error() -> None:
    try:
        partition_notify.NoSuchThing  # noqa: B018
    except AttributeError as exc:
        assert "NoSuchThing" in str(exc)
    else:
        raise AssertionError("expected AttributeError")


def test_every_public_name_loads_outside_the_checkout(tmp_path: Path) -> None:
    """Not from the repository's folders: only the installed ``partition_notify``."""
    out = subprocess.run(
        [sys.executable, "-c",
         "import partition_notify as p\n"
         "for n in p.__all__: print(n, getattr(p, n).__module__)"],
        cwd=tmp_path, capture_output=True, text=True, timeout=120,
        env={"PATH": "/usr/bin:/bin"},
    )
    assert out.returncode == 0, out.stderr[-2000:]
    modules = dict(line.split() for line in out.stdout.splitlines())
    assert set(modules) == set(partition_notify.__all__)


def test_public_names_report_the_package_as_their_module() -> None:
    """Moves inside the package stay invisible to users (reprs, docs, pickles)."""
    import pickle

    wrong = {name: getattr(partition_notify, name).__module__
             for name in partition_notify.__all__
             if getattr(partition_notify, name).__module__ != "partition_notify"}
    assert not wrong, wrong
    assert repr(partition_notify.Publisher) == "<class 'partition_notify.Publisher'>"
    err = pickle.loads(pickle.dumps(partition_notify.WaitTimeout("late")))
    assert type(err) is partition_notify.WaitTimeout and str(err) == "late"
