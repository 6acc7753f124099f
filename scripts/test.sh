#!/usr/bin/env bash
# The whole test suite: set up .venv, start ActiveMQ, the Kafka-protocol
# broker (tansu), RabbitMQ's STOMP plugin and PostgreSQL if they are not
# running, run lint, types and pytest, then stop what this script started.
#   bash scripts/test.sh [ARGS...]    ARGS go to the core venv's pytest run
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh
started=0
TMPD=$(mktemp -d -t pn-test.XXXXXX)  # the set-up's logs
# What runs in the background stops with this script (a CI time-out, Ctrl-C) rather than
# running on against stopped services.
kill_tree() { local c kids; kids=$(pgrep -P "$1" || true); kill "$1" 2>/dev/null || true
  for c in $kids; do kill_tree "$c"; done; }  # the parent first: it starts no other child
cleanup() { for p in ${venvs:-} ${rest:-}; do kill_tree "$p"; done
  [ "$started" = 1 ] && bash scripts/services.sh down || true; rm -rf "$TMPD"; }
trap cleanup EXIT
trap 'exit 130' INT; trap 'exit 143' TERM
# The other venvs and the services are independent of each other: set up at once.
# The two editable installs share this tree's build files, so they run one after
# the other; the REST catalog's venv installs from a requirements file.
# Output of what runs at once, each line tagged with what it is.
tagged() { local tag=$1; shift; "$@" 2>&1 | sed -u "s/^/[$tag] /" | tee -a "$TMPD/$tag.log"; }
tagged sched bash -c 'bash scripts/bootstrap_sched.sh && bash scripts/bootstrap_spark35.sh' &
venvs=$!
tagged rest bash scripts/bootstrap_rest.sh & rest=$!
started=1
PN_PYTHON="$PWD/.venv/bin/python" bash scripts/services.sh up
wait "$venvs"; wait "$rest"
eval "$(bash scripts/services.sh env)"
echo "== ruff" && .venv/bin/ruff check .
echo "== mypy --strict" && .venv/bin/python scripts/typecheck_tree.py && .venv/bin/mypy
# Four pytest runs, one after the other; each runs even if an earlier one failed,
# and the script fails if any did. The Spark commit protocol needs its jar and
# settings when the JVM starts, so it gets its own process (its own SparkSession),
# once on PySpark 4 and once on PySpark 3.5 (the same jar); Airflow and Dagster
# live in their own venv. Not in two lanes at once: on 2 cores the core suite
# split in two ran each test ~2.4x slower, and the run took longer than one after
# the other (a fresh-clone run, 2026-12-01).
run() { local name=$1; shift; echo "== pytest: $name"; local t0=$SECONDS rc=0
  "$@" || rc=1
  echo "== pytest: $name: $([ $rc = 0 ] && echo passed || echo FAILED) in $((SECONDS - t0)) s"
  echo "$name: $([ $rc = 0 ] && echo passed || echo FAILED) in $((SECONDS - t0)) s" \
    >> "$TMPD/summary"
  return $rc; }
rc=0
run "core venv" .venv/bin/python -m pytest --ignore=tests/integrations \
  --ignore=tests/spark_protocol "$@" || rc=1
run "Spark commit protocol (its own Spark session)" \
  .venv/bin/python -m pytest tests/spark_protocol || rc=1
run "Spark commit protocol on PySpark 3.5 (its own venv)" \
  "${PN_SPARK35_VENV:-.venv-spark35}/bin/python" -m pytest tests/spark_protocol || rc=1
run "Airflow and Dagster (their own venv)" \
  "${PN_SCHED_VENV:-.venv-sched}/bin/python" -m pytest tests/integrations || rc=1
echo "== summary"; cat "$TMPD/summary"
exit "$rc"
