#!/usr/bin/env bash
# A real Iceberg REST catalog server for tests/lakehouse/test_rest_catalog.py: Lakana's
# (PyPI lakana-server, FastAPI) in its own venv, so its pins (its own pyiceberg, FastAPI,
# SQLAlchemy) cannot move the core venv's. Exact versions: scripts/rest_catalog_requirements.txt.
# Idempotent: reinstalled only when this script or that file changed. The test command
# runs it; the demo does not need it.
#   PYTHON=python3 bash scripts/bootstrap_rest.sh
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
REQ=scripts/rest_catalog_requirements.txt
want=$(cat "$0" "$REQ" | sha256sum | cut -d' ' -f1)
VREST=${PN_REST_VENV:-.venv-rest}
[ -x "$VREST/bin/python" ] || "$PY" -m venv "$VREST"
if [ "$(cat "$VREST/.pn-installed" 2>/dev/null)" != "$want" ]; then
  echo "bootstrap: installing the Iceberg REST catalog server into $VREST" >&2
  "$VREST/bin/python" -m pip install -q --upgrade pip >/dev/null
  "$VREST/bin/python" -m pip install -q -r "$REQ"
  "$VREST/bin/lakana-server" --help >/dev/null  # it starts: fail here, not in the tests
  echo "$want" > "$VREST/.pn-installed"
fi
