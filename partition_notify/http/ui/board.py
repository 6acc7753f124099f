"""The partition board: recent values of the first key x values of the other keys.

Each cell is one full spec; its state comes from what the store retains:

- ``late``: an expectation's instance covering it is late and not yet done;
- ``recovered``: it was late and a set-done has covered it since;
- ``done``: a retained set-done covers it (at any level: ``ds=X`` covers
  ``ds=X/region=us``);
- ``announced``: the partition was added, no set-done covers it yet;
- ``expected``: the table has expectations and nothing of this cell exists yet;
- ``withdrawn``: a withdrawal (PARTITION_WITHDRAWN) took it back and nothing
  was announced or marked done for it since;
- ``absent``: nothing at all.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from html import escape
from typing import Any, NamedTuple

from markupsafe import Markup

from partition_notify.contract import spec
from partition_notify.http.ui.reads import CheckLine
from partition_notify.http.ui.render import when

#: Rows (values of the first key) and columns the board shows at most.
ROWS = 14
COLUMNS = 40
#: Rows of each source read to build a board; bounds the work per page.
READ_LIMIT = 5_000
#: Newest withdrawals of a table read for a board (each a stored body to parse).
WITHDRAWN_LIMIT = 200

LABELS = {
    "late": "late", "recovered": "late, then done", "done": "done",
    "announced": "announced", "expected": "expected", "withdrawn": "withdrawn", "absent": "—",
}
#: A withdrawal on the board: its spec and the full partitions it removed.
Withdrawal = tuple[dict[str, str], list[dict[str, str]]]


def withdrawals(rows: list[tuple[str, int]]) -> list[Withdrawal]:
    """The spec and removed partitions of each stored PARTITION_WITHDRAWN body."""
    out: list[Withdrawal] = []
    for body, _ in rows:
        msg = json.loads(body)
        out.append((dict(msg.get("partitionSpec") or {}), list(msg.get("partitions") or [])))
    return out


@dataclass(slots=True)
class Cell:
    values: dict[str, str]
    spec: str = ""
    values_json: str = ""
    state: str = "absent"
    event_id: int | None = None
    revision: int | None = None
    created_at: float | None = None
    done_event_id: int | None = None
    #: the completeness rule that derived the covering set-done, if one did
    done_rule: str = ""

    @property
    def label(self) -> str:
        return LABELS[self.state]


@dataclass(slots=True)
class Board:
    keys: tuple[str, ...]
    rows: list[str] = field(default_factory=list)
    columns: list[dict[str, str]] = field(default_factory=list)
    #: each column's canonical spec: its sort key, here and in ui.js's new columns
    column_specs: list[str] = field(default_factory=list)
    cells: dict[tuple[str, int], Cell] = field(default_factory=dict)

    def column_label(self, i: int) -> str:
        col = self.columns[i]
        return "/".join(f"{k}={v}" for k, v in col.items()) or "(all)"

    def column_json(self, i: int) -> str:
        return json.dumps(self.columns[i], sort_keys=True)

    def row_html(self, row: str) -> Markup:
        """The cells of one row. Built here, not by a loop in the template: 560
        cells of ten attributes each were half the board's render (bench/ui_render.py)."""
        return Markup("".join(_cell_html(self.cells[(row, i)]) for i in range(len(self.columns))))


def _cell_html(c: Cell) -> str:
    # html.escape: the template's autoescape without a Markup object per attribute.
    spec, label = escape(c.spec), escape(c.label)
    time = when(c.created_at) if c.created_at else ""
    revision = "" if c.revision is None else c.revision
    return (f'<td><button type="button" class="cell {c.state}" '
            f'data-values="{escape(c.values_json)}" data-spec="{spec}" data-state="{c.state}" '
            f'data-event="{c.event_id or ""}" data-revision="{revision}" data-time="{time}" '
            f'data-done-event="{c.done_event_id or ""}" data-rule="{escape(c.done_rule)}" '
            f'aria-label="{spec}: {label}{_derived_label(c.done_rule)}">'
            f"{label}{_derived_mark(c.done_rule)}</button></td>")


def _derived_label(rule: str) -> str:
    return f" (derived by rule {escape(rule)})" if rule else ""


def _derived_mark(rule: str) -> str:
    return '<span class="derived" aria-hidden="true"> ⓡ</span>' if rule else ""


class Announced(NamedTuple):
    """A partition of the board's rows, as ``StatusReadRepository.board_partitions``
    sends it: the stored canonical spec and values (JSON text), which a found cell
    reuses, and each key's value in the table's key order (no JSON decoded here)."""

    spec: str
    values_json: str
    event_id: int
    revision: int | None
    created_at: float
    values: tuple[str, ...]

    @classmethod
    def of(cls, row: Sequence[Any]) -> Announced:
        return cls(row[0], row[1], row[2], row[3], row[4], tuple(row[5:]))


def pick_rows(first: str, values: Iterable[str], done: list[tuple[str, int, float]],
              checks: list[CheckLine], withdrawn: Sequence[Withdrawal] = ()) -> list[str]:
    """The board's rows: the greatest ``ROWS`` values of the first key among the
    newest partitions (``values``), the retained set-done, the late checks and the
    withdrawals."""
    rows = set(values)
    rows |= {s[first] for s, _ in withdrawn if first in s}
    rows |= {s[first] for s in (spec.coerce(d[0]) for d in done) if first in s}
    rows |= {s[first] for s in (spec.coerce(c.spec) for c in checks if c.outcome != "on_time")
             if first in s}
    return sorted(rows, reverse=True)[:ROWS]


def build(keys: tuple[str, ...], rows: list[str], parts: list[Announced],
          done: list[tuple[str, int, float]], checks: list[CheckLine], expected: bool,
          derived: dict[int, str] | None = None, withdrawn: Sequence[Withdrawal] = ()) -> Board:
    """The grid of ``rows`` (:func:`pick_rows`) x the columns ``parts`` (the
    partitions of those rows) and the withdrawn partitions have.
    ``derived``: event id -> rule, for the set-dones a completeness rule derived."""
    board = Board(keys)
    first, rest = keys[0], keys[1:]
    gone = [s for s, _ in withdrawn]
    done_specs = [(spec.coerce(s), eid) for s, eid, _ in done]
    rules = derived or {}
    late_specs = [(spec.coerce(c.spec), c) for c in checks if c.outcome != "on_time"]
    board.rows = rows
    # Distinct tuples first: canonical strings only for the few distinct columns.
    distinct = {p.values[1:] for p in parts}
    distinct |= {tuple(p.get(k, "") for k in rest) for _, removed in withdrawn for p in removed}
    cols = {spec.canonical(c) if c else "": c
            for c in (dict(zip(rest, t, strict=True)) for t in distinct)}
    board.column_specs = sorted(cols)[:COLUMNS] or [""]
    board.columns = [cols[k] if k else {} for k in board.column_specs]
    # Keyed by the values in key order: no canonical strings per partition.
    by_values = {p.values: p for p in parts}
    for row in board.rows:
        # Only the specs that can cover this row: each cell tries a few, not all 5,000.
        row_done = [d for d in done_specs if d[0].get(first, row) == row]
        row_late = [c for c in late_specs if c[0].get(first, row) == row]
        for i, col in enumerate(board.columns):
            values = {first: row, **col}
            found = by_values.get(tuple(values.get(k, "") for k in keys))
            cell = _cell(values, found, row_done, row_late, expected)
            if cell.done_event_id is not None:
                cell.done_rule = rules.get(cell.done_event_id, "")
            if cell.state in ("absent", "expected") and any(spec.covers(g, values)
                                                              for g in gone):
                cell.state = "withdrawn"  # nothing announced or done since it was taken back
            board.cells[(row, i)] = cell
    return board


def _cell(values: dict[str, str], found: Announced | None,
          done_specs: list[tuple[dict[str, str], int]],
          late_specs: list[tuple[dict[str, str], CheckLine]], expected: bool) -> Cell:
    # Computed once here, not per use in the template (560 cells a page); a found
    # cell takes the stored canonical spec and JSON instead of computing them.
    if found is not None:
        cell = Cell(values, found.spec, found.values_json)
        cell.state, cell.event_id = "announced", found.event_id
        cell.revision, cell.created_at = found.revision, found.created_at
    else:
        cell = Cell(values, spec.canonical(values), json.dumps(values, sort_keys=True))
        if expected:
            cell.state = "expected"
    for s, eid in done_specs:
        if spec.covers(s, values):
            cell.state, cell.done_event_id = "done", eid
            break
    for s, check in late_specs:
        if spec.covers(s, values):
            if check.outcome == "late" and check.recovered_at is None:
                cell.state = "late" if cell.state != "done" else "recovered"
            else:
                cell.state = "recovered"
            break
    return cell
