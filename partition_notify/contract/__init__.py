"""The message contract every side imports: names, specs, topics, messages."""

from partition_notify.contract import names, spec
from partition_notify.contract.messages import (
    ADD_PARTITION,
    COMMITS_MISSED,
    DROP_PARTITION,
    PARTITION_DONE,
    PARTITION_LATE,
    PARTITION_LATE_RECOVERED,
    AddPartitionMessage,
    CommitsMissedMessage,
    DerivedFrom,
    DerivedInput,
    DropPartitionMessage,
    Envelope,
    PartitionLateMessage,
    PartitionLateRecoveredMessage,
    SetDoneMessage,
    decode,
    json_schemas,
    to_envelope,
)
from partition_notify.contract.topics import TopicPolicy, topic_for, validate_topic

AnyMessage = (
    AddPartitionMessage | DropPartitionMessage | SetDoneMessage | PartitionLateMessage
    | PartitionLateRecoveredMessage | CommitsMissedMessage
)

__all__ = [
    "ADD_PARTITION",
    "COMMITS_MISSED",
    "DROP_PARTITION",
    "PARTITION_DONE",
    "PARTITION_LATE",
    "PARTITION_LATE_RECOVERED",
    "AddPartitionMessage",
    "AnyMessage",
    "CommitsMissedMessage",
    "DerivedFrom",
    "DerivedInput",
    "DropPartitionMessage",
    "Envelope",
    "PartitionLateMessage",
    "PartitionLateRecoveredMessage",
    "SetDoneMessage",
    "TopicPolicy",
    "decode",
    "json_schemas",
    "names",
    "spec",
    "to_envelope",
    "topic_for",
    "validate_topic",
]
