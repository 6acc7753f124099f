#!/usr/bin/env bash
# The main job: set up, then run the end-to-end demo on the embedded defaults
# (SQLite store, no broker) with a local PySpark job writing the table.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh
exec .venv/bin/partition-notify demo "$@"
