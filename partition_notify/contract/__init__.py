"""The message contract every side imports: names, specs, topics, messages."""

from partition_notify.contract import names, spec
from partition_notify.contract.messages import (
    ADD_PARTITION,
    COMMITS_MISSED,
    DROP_PARTITION,
    PARTITION_DONE,
    PARTITION_DONE_RETRACTED,
    PARTITION_LATE,
    PARTITION_LATE_RECOVERED,
    PARTITION_WITHDRAWN,
    AddPartitionMessage,
    CommitsMissedMessage,
    DerivedFrom,
    DerivedInput,
    DropPartitionMessage,
    Envelope,
    PartitionDoneRetractedMessage,
    PartitionLateMessage,
    PartitionLateRecoveredMessage,
    PartitionWithdrawnMessage,
    SetDoneMessage,
    WithdrawnSetDone,
    decode,
    json_schemas,
    to_envelope,
)
from partition_notify.contract.topics import TopicPolicy, topic_for, validate_topic

AnyMessage = (
    AddPartitionMessage | DropPartitionMessage | SetDoneMessage | PartitionLateMessage
    | PartitionLateRecoveredMessage | CommitsMissedMessage | PartitionWithdrawnMessage
    | PartitionDoneRetractedMessage
)

__all__ = [
    "ADD_PARTITION",
    "COMMITS_MISSED",
    "DROP_PARTITION",
    "PARTITION_DONE",
    "PARTITION_DONE_RETRACTED",
    "PARTITION_LATE",
    "PARTITION_LATE_RECOVERED",
    "PARTITION_WITHDRAWN",
    "AddPartitionMessage",
    "AnyMessage",
    "CommitsMissedMessage",
    "DerivedFrom",
    "DerivedInput",
    "DropPartitionMessage",
    "Envelope",
    "PartitionDoneRetractedMessage",
    "PartitionLateMessage",
    "PartitionLateRecoveredMessage",
    "PartitionWithdrawnMessage",
    "SetDoneMessage",
    "TopicPolicy",
    "WithdrawnSetDone",
    "decode",
    "json_schemas",
    "names",
    "spec",
    "to_envelope",
    "topic_for",
    "validate_topic",
]
