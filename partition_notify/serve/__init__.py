"""``partition-notify serve``: one job list (:mod:`.jobs`) and the process running it."""
