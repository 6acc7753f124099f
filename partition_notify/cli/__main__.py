"""``python -m partition_notify.cli``: the same as the ``partition-notify`` script."""

import sys

from partition_notify.cli import main

if __name__ == "__main__":  # importing it (as the namespace test does) runs nothing
    sys.exit(main())
