"""Loading our trigger classes must not hold the triggerer's event loop.

Airflow 3.3.2's trigger runner imports a trigger's classpath on its event loop
(``TriggerRunner.get_trigger_by_classpath`` inside ``create_triggers``), so
everything the module imports at load time stalls every trigger of that
triggerer. bench/e2e_airflow.py saw "Triggerer's async thread was blocked for
1.26 / 1.43 seconds" just before our first trigger started: the store,
subscriber and shared-connection modules (~1.2 s under load). Those belong in
the worker-thread hop that arms the trigger.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.support.ci import require

#: Our modules that open or drive connections: loaded by the arming thread, not on the loop.
HEAVY = ("partition_notify.store", "partition_notify.subscriber", "partition_notify.transports",
         "partition_notify.integrations.shared", "partition_notify.integrations.follow",
         "partition_notify.app", "partition_notify.settings")

PROBE = """
import json, sys
import airflow.triggers.base  # loaded by the trigger runner before any classpath
before = set(sys.modules)
from airflow._shared.module_loading import import_string
for name in ("PartitionSetDoneTrigger", "PartitionSetDoneEventTrigger"):
    import_string("partition_notify.integrations.airflow.triggers." + name)
print(json.dumps(sorted(set(sys.modules) - before)))
"""


@pytest.mark.timeout(120)
def test_importing_the_trigger_classes_loads_no_store_subscriber_or_settings_module() -> None:
    probe = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True,
                           timeout=110)
    require("No module named 'airflow'" not in probe.stderr,
            f"apache-airflow is not installed in {sys.executable}")
    assert probe.returncode == 0, probe.stderr[-3000:]
    loaded = json.loads(probe.stdout.strip().splitlines()[-1])
    heavy = sorted(m for m in loaded if m.startswith(HEAVY))
    assert heavy == [], f"loaded on the triggerer's event loop: {heavy}"
