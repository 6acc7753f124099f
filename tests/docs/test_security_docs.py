"""docs/security.md says what the read-only PostgreSQL role may do; the SQL that makes the
role (store/sql/readonly_role.sql) is the truth. Every table the SQL grants the role
something on is named in the doc's paragraph on the role, with each privilege granted."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
GRANT = re.compile(r"^GRANT (?P<privileges>[A-Z, ]+) ON (?P<tables>[a-z_, ]+) TO pn_reader;",
                   re.MULTILINE)


def _grants() -> dict[str, set[str]]:
    sql = (ROOT / "store" / "sql" / "readonly_role.sql").read_text()
    grants: dict[str, set[str]] = {}
    for match in GRANT.finditer(sql):
        privileges = {p.strip() for p in match["privileges"].split(",")}
        for table in (t.strip() for t in match["tables"].split(",")):
            grants.setdefault(table, set()).update(privileges)
    return grants


def _role_paragraph() -> str:
    doc = (ROOT / "docs" / "security.md").read_text()
    store = doc.split("## The store", 1)[1]
    paragraph = store.strip().split("\n\n", 1)[0]
    return " ".join(paragraph.split())


def test_the_sql_grants_what_this_test_reads() -> None:
    grants = _grants()
    assert grants["pn_events"] == {"SELECT"}, grants  # the parse found the GRANT lines


def test_every_grant_of_the_read_only_role_is_documented() -> None:
    paragraph = _role_paragraph()
    missing = []
    for table, privileges in sorted(_grants().items()):
        if f"`{table}`" not in paragraph:
            missing.append(f"{table} ({', '.join(sorted(privileges))}) is not named")
            continue
        # The privileges are written next to the table they are granted on.
        sentence = next(s for s in re.split(r"(?<=[;.])\s", paragraph) if f"`{table}`" in s)
        missing += [f"{table}: {p} is not said" for p in sorted(privileges)
                    if p not in sentence]
    assert not missing, (missing, paragraph)
