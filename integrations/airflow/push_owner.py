"""Who holds the push sink's lease, and whether that process is gone.

A lease owner is ``host:pid:process:nonce``; ``process`` is a stamp drawn once
per process, so a previous process that had our pid (a container's pid 1
after a restart) is told from us, and two sinks of one process are not.
"""

from __future__ import annotations

import os
import socket
import uuid

#: This process, in lease owners.
_PROCESS = uuid.uuid4().hex[:8]


def lease_owner() -> str:
    """A new owner name for one sink of this process."""
    return f"{socket.gethostname()}:{os.getpid()}:{_PROCESS}:{uuid.uuid4().hex[:8]}"


def owner_is_gone(owner: str) -> bool:
    """Is the ``host:pid:process:nonce`` lease owner a process of this host that is gone?

    Our own pid with another process stamp is a previous incarnation (a
    container's pid 1 after a restart). A pid reused by another process reads
    as alive: then the lease simply expires.
    """
    host, pid_text, process = [*owner.split(":"), "", ""][:3]
    if host != socket.gethostname() or not pid_text.isdigit():
        return False
    if int(pid_text) == os.getpid():
        return process != _PROCESS
    try:
        os.kill(int(pid_text), 0)
    except ProcessLookupError:
        return True
    except OSError:
        return False  # exists, owned by another user
    return False
