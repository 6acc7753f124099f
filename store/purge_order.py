"""A purge batch's ``n`` oldest rows, read in order from the order column's index.

Without statistics (a new store, autovacuum off) PostgreSQL underestimates a
table's rows from its width, takes ``expires_at <= now`` for a third of them
(a two-sided range: 0.5%) and costs the index as random reads: it answered
``ORDER BY expires_at LIMIT n`` by reading every row the condition matched (a
sequential scan and a top-N sort, or a bitmap scan and a sort), then deleted
the ids with a hash join over another scan of the table. Every batch read the
whole table. On PostgreSQL the batch's transaction (one statement: the purge
runs one unit of work per batch) is planned with ``enable_sort = off``, so the
order comes from the index, which stops after ``n`` matches, and the ids are
matched as an array (``= ANY``: the primary key). The rows are the same ones:
only the plan changes. SQLite already walks the index; it keeps ``IN``.
"""

from __future__ import annotations

from sqlalchemy import ColumnElement, any_, func, select, text
from sqlalchemy.orm import Session


def oldest_first(session: Session, pk: ColumnElement[object], order: ColumnElement[float],
                 where: ColumnElement[bool], n: int) -> ColumnElement[bool]:
    """``pk`` is one of the ``n`` rows matching ``where`` with the smallest ``order``.

    PostgreSQL: also sets ``enable_sort = off`` until the end of the transaction
    (``SET LOCAL``): call it in the purge batch's own unit of work, not a shared one.
    """
    batch = select(pk).where(where).order_by(order).limit(n).scalar_subquery()
    if session.get_bind().dialect.name != "postgresql":
        return pk.in_(batch)
    session.execute(text("SET LOCAL enable_sort = off"))
    return pk == any_(func.array(batch))
