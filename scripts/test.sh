#!/usr/bin/env bash
# The whole test suite: set up .venv, start ActiveMQ, the Kafka-protocol
# broker (tansu), RabbitMQ's STOMP plugin and PostgreSQL if they are not
# running, run lint, types and pytest, then stop what this script started.
#   bash scripts/test.sh              everything, in two lanes at once (below)
#   bash scripts/test.sh ARGS...      the core venv's pytest with ARGS, then the other runs
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh
started=0
TMPD=$(mktemp -d -t pn-test.XXXXXX)  # the lanes' logs and pytest's temporary folders
# What runs in the background stops with this script (a CI time-out, Ctrl-C) rather than
# running on against stopped services.
kill_tree() { local c kids; kids=$(pgrep -P "$1" || true); kill "$1" 2>/dev/null || true
  for c in $kids; do kill_tree "$c"; done; }  # the parent first: it starts no other child
cleanup() { for p in ${venvs:-} ${rest:-} ${a:-} ${b:-}; do kill_tree "$p"; done
  [ "$started" = 1 ] && bash scripts/services.sh down || true; rm -rf "$TMPD"; }
trap cleanup EXIT
trap 'exit 130' INT; trap 'exit 143' TERM
# The other venvs and the services are independent of each other: set up at once.
# The two editable installs share this tree's build files, so they run one after
# the other; the REST catalog's venv installs from a requirements file.
# Output of what runs at once, each line tagged with its lane (and kept for the summary).
lane() { local tag=$1; shift; "$@" 2>&1 | sed -u "s/^/[$tag] /" | tee -a "$TMPD/$tag.log"; }
lane sched bash -c 'bash scripts/bootstrap_sched.sh && bash scripts/bootstrap_spark35.sh' & venvs=$!
lane rest bash scripts/bootstrap_rest.sh & rest=$!
started=1
PN_PYTHON="$PWD/.venv/bin/python" bash scripts/services.sh up
wait "$venvs"; wait "$rest"
eval "$(bash scripts/services.sh env)"
echo "== ruff" && .venv/bin/ruff check .
echo "== mypy --strict" && .venv/bin/python scripts/typecheck_tree.py && .venv/bin/mypy
# Five pytest runs; each runs even if another failed, and the script fails if
# any did. The Spark commit protocol needs its jar and settings when the JVM
# starts, so it gets its own process (its own SparkSession), once on PySpark 4
# and once on PySpark 3.5 (the same jar); Airflow and Dagster live in their
# own venv. Without ARGS the core suite is split in two lanes that run at once,
# each with its own temporary directory: every test that reaches a broker or
# PostgreSQL names its own topics and databases, so the lanes cannot see each
# other's messages. Lane B holds the broker-heavy folders and the lakehouse; lane A the rest (a
# new folder lands there), then the commit protocol on PySpark 4 and the
# schedulers; lane B ends with PySpark 3.5.
SPARK35="${PN_SPARK35_VENV:-.venv-spark35}/bin/python"
SCHED="${PN_SCHED_VENV:-.venv-sched}/bin/python"
LANE_B=(cli http transports subscriber contract serve publisher security ui faults lakehouse)
run() { local name=$1; shift; echo "== pytest: $name"; local t0=$SECONDS rc=0
  "$@" || rc=1
  echo "== pytest: $name: $([ $rc = 0 ] && echo passed || echo FAILED) in $((SECONDS - t0)) s"
  return $rc; }
lane_a() { local rc=0 skip=(--ignore=tests/integrations --ignore=tests/spark_protocol)
  for d in "${LANE_B[@]}"; do skip+=("--ignore=tests/$d"); done
  run "core, lane A" .venv/bin/python -m pytest --basetemp="$TMPD/a" "${skip[@]}" || rc=1
  run "Spark commit protocol (its own Spark session)" \
    .venv/bin/python -m pytest --basetemp="$TMPD/sp4" tests/spark_protocol || rc=1
  run "Airflow and Dagster (their own venv)" \
    "$SCHED" -m pytest --basetemp="$TMPD/sched" tests/integrations || rc=1
  return $rc; }
lane_b() { local rc=0
  run "core, lane B" .venv/bin/python -m pytest --basetemp="$TMPD/b" "${LANE_B[@]/#/tests/}" || rc=1
  run "Spark commit protocol on PySpark 3.5 (its own venv)" \
    "$SPARK35" -m pytest --basetemp="$TMPD/sp35" tests/spark_protocol || rc=1
  return $rc; }
rc=0
if [ "$#" -gt 0 ]; then
  run "core venv: $*" .venv/bin/python -m pytest --ignore=tests/integrations \
    --ignore=tests/spark_protocol "$@" || rc=1
  run "Spark commit protocol" .venv/bin/python -m pytest tests/spark_protocol || rc=1
  run "Spark commit protocol on PySpark 3.5" "$SPARK35" -m pytest tests/spark_protocol || rc=1
  run "Airflow and Dagster" "$SCHED" -m pytest tests/integrations || rc=1
  exit "$rc"
fi
lane A lane_a & a=$!
lane B lane_b & b=$!
wait "$a" || rc=1
wait "$b" || rc=1
echo "== summary"; grep -h "== pytest: .*: \(passed\|FAILED\) in" "$TMPD/A.log" "$TMPD/B.log" || true
exit "$rc"
