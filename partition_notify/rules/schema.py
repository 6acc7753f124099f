"""Tables of completeness rules (migration 0011): rules, the inputs seen, the firings.

On the store's ``Base`` metadata (one migration chain); repositories in
:mod:`partition_notify.rules.repositories`.
"""

from __future__ import annotations

from sqlalchemy import JSON, BigInteger, Float, ForeignKey, Index, Integer, String
from sqlalchemy.orm import Mapped, mapped_column

from partition_notify.rules.kinds import MAX_LABEL_CHARS
from partition_notify.store.schema import MAX_SPEC_CHARS, Base, BigId


class RuleRow(Base):
    """A rule of a (target) table; ``cursor_event_id`` is the last event it has read."""

    __tablename__ = "pn_rules"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    table_id: Mapped[int] = mapped_column(ForeignKey("pn_tables.id", ondelete="CASCADE"))
    name: Mapped[str] = mapped_column(String(128))
    kind: Mapped[str] = mapped_column(String(16))
    params: Mapped[dict[str, object]] = mapped_column(JSON)
    cursor_event_id: Mapped[int] = mapped_column(BigInteger)
    created_at: Mapped[float] = mapped_column(Float)
    __table_args__ = (Index("ux_pn_rules_table_name", "table_id", "name", unique=True),)


class RuleInputRow(Base):
    """One label counted towards a derived spec not yet fired (deleted when it fires)."""

    __tablename__ = "pn_rule_inputs"
    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    rule_id: Mapped[int] = mapped_column(ForeignKey("pn_rules.id", ondelete="CASCADE"))
    spec: Mapped[str] = mapped_column(String(MAX_SPEC_CHARS))
    label: Mapped[str] = mapped_column(String(MAX_LABEL_CHARS))
    input_table: Mapped[str] = mapped_column(String(260))
    event_id: Mapped[int] = mapped_column(BigInteger)
    created_at: Mapped[float] = mapped_column(Float)
    __table_args__ = (
        Index("ux_pn_rule_inputs_label", "rule_id", "spec", "label", unique=True),
        Index("ix_pn_rule_inputs_created", "created_at"),
    )


class RuleFiringRow(Base):
    """That a rule fired for a spec: at most one per (rule, spec), across processes.

    Inserted in the transaction that appends the derived set-done (``event_id``),
    or alone when a set-done already covered the spec (``event_id`` NULL).
    """

    __tablename__ = "pn_rule_firings"
    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    rule_id: Mapped[int] = mapped_column(ForeignKey("pn_rules.id", ondelete="CASCADE"))
    spec: Mapped[str] = mapped_column(String(MAX_SPEC_CHARS))
    event_id: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    fired_at: Mapped[float] = mapped_column(Float)
    __table_args__ = (
        Index("ux_pn_rule_firings_spec", "rule_id", "spec", unique=True),
        Index("ix_pn_rule_firings_fired", "fired_at"),
    )
