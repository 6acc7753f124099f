"""``python -m partition_notify.cli``: the same as the ``partition-notify`` script."""

import sys

from partition_notify.cli import main

sys.exit(main())
