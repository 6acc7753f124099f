"""Fault: an unprivileged client SENDs to a notification topic.

The private broker runs the shipped configuration: ``pn_reader`` may read
``hcat.>`` but not write it. Every SEND (raw frames, no client library) —
including a forged but well-formed notification — must be refused with an
ERROR frame and reach no subscriber; the service principal's own publishes
in the same period are delivered.
"""

from __future__ import annotations

import json

from tests.faults.support import (
    READER_PASSWORD,
    READER_USER,
    Collector,
    PrivateActiveMQ,
    raw_stomp_send,
    stomp_app,
    tally,
)

ATTEMPTS = 20


def test_reader_send_refused_service_send_delivered(
    broker: PrivateActiveMQ, sqlite_url: str, db_name: str
) -> None:
    pub = stomp_app(sqlite_url, broker.url)
    sub_app = stomp_app(sqlite_url, broker.url, user=READER_USER, password=READER_PASSWORD)
    try:
        info = pub.publisher.register_table(db_name, "events", ["ds"])
        collect = Collector()
        subscription = sub_app.subscriber().subscribe(f"{db_name}.events", collect)
        acked = pub.publisher.announce_partitions(db_name, "events", ["ds=1"])

        # A forgery: a real message with a new id, sent by the reader.
        forged = json.loads(acked[0].model_dump_json(by_alias=True))
        forged_ids = set()
        refusals: list[str] = []
        for i in range(ATTEMPTS):
            forged["messageId"] = f"forged{i:026d}"
            forged_ids.add(forged["messageId"])
            command, message = raw_stomp_send(
                broker.stomp_port, READER_USER, READER_PASSWORD, f"/topic/{info.topic}",
                json.dumps(forged).encode(),
                {"HCAT_EVENT": "ADD_PARTITION", "persistent": "true"})
            assert command == "ERROR", f"attempt {i}: broker answered {command!r}"
            refusals.append(message)
            # The service keeps publishing in between, undisturbed.
            acked += pub.publisher.announce_partitions(db_name, "events", [f"ds=s{i}"])
        assert all("not authorized" in m.lower() for m in refusals), refusals[0]

        ids = {m.message_id for m in acked}
        assert collect.wait_for(ids, 15)
        leaked = forged_ids & set(collect.seen)
        tally(
            "unprivileged-send",
            acknowledged=len(ids),
            delivered=collect.delivered(ids),
            duplicates_suppressed=subscription.duplicates,
            reader_sends_refused=len(refusals),
            forged_delivered=len(leaked),
        )
        assert not leaked
        assert pub.store.log.relay_lag()[0] == 0
    finally:
        sub_app.close()
        pub.close()
