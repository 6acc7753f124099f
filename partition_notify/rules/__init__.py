"""Completeness rules: "done" declared by the consumer, evaluated once by ``serve``.

A rule of a table derives a ``PARTITION_DONE`` (marked ``derivedFrom``) when
its inputs are complete: every value of a key (``all-of``), every hour of a
local day or day of a month (``calendar``), a set-done on every input table
(``cross-table``). Kinds: :mod:`partition_notify.rules.kinds`; the evaluator
(exactly once per rule and spec): :mod:`partition_notify.rules.evaluator`;
the Python API: ``app.rules`` (:class:`partition_notify.rules.api.Rules`).
Nothing heavy is imported here.
"""
