#!/usr/bin/env bash
# The main job: set up, then run the end-to-end demo on the embedded defaults
# (SQLite store, no broker) with a local PySpark job writing the table.
set -euo pipefail
cd "$(dirname "$0")/.."
# The demo needs the runtime and PySpark only: not the test tools, drivers or browser.
PN_EXTRAS=spark bash scripts/bootstrap.sh
exec .venv/bin/partition-notify demo "$@"
