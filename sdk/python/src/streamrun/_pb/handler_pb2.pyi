from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Outcome(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    OUTCOME_UNSPECIFIED: _ClassVar[Outcome]
    OUTCOME_ACK: _ClassVar[Outcome]
    OUTCOME_RETRY: _ClassVar[Outcome]
    OUTCOME_DEAD_LETTER: _ClassVar[Outcome]
    OUTCOME_DROP: _ClassVar[Outcome]
OUTCOME_UNSPECIFIED: Outcome
OUTCOME_ACK: Outcome
OUTCOME_RETRY: Outcome
OUTCOME_DEAD_LETTER: Outcome
OUTCOME_DROP: Outcome

class InitRequest(_message.Message):
    __slots__ = ("config", "pipeline", "instance_id", "contract_version", "keyed_state")
    CONFIG_FIELD_NUMBER: _ClassVar[int]
    PIPELINE_FIELD_NUMBER: _ClassVar[int]
    INSTANCE_ID_FIELD_NUMBER: _ClassVar[int]
    CONTRACT_VERSION_FIELD_NUMBER: _ClassVar[int]
    KEYED_STATE_FIELD_NUMBER: _ClassVar[int]
    config: bytes
    pipeline: str
    instance_id: str
    contract_version: int
    keyed_state: bool
    def __init__(self, config: _Optional[bytes] = ..., pipeline: _Optional[str] = ..., instance_id: _Optional[str] = ..., contract_version: _Optional[int] = ..., keyed_state: _Optional[bool] = ...) -> None: ...

class InitResponse(_message.Message):
    __slots__ = ("contract_version", "keyed_state")
    CONTRACT_VERSION_FIELD_NUMBER: _ClassVar[int]
    KEYED_STATE_FIELD_NUMBER: _ClassVar[int]
    contract_version: int
    keyed_state: bool
    def __init__(self, contract_version: _Optional[int] = ..., keyed_state: _Optional[bool] = ...) -> None: ...

class Message(_message.Message):
    __slots__ = ("id", "topic", "key", "ordering_key", "properties", "payload", "publish_time_ms", "event_time_ms", "redelivery_count", "traceparent", "tracestate")
    ID_FIELD_NUMBER: _ClassVar[int]
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    ORDERING_KEY_FIELD_NUMBER: _ClassVar[int]
    PROPERTIES_FIELD_NUMBER: _ClassVar[int]
    PAYLOAD_FIELD_NUMBER: _ClassVar[int]
    PUBLISH_TIME_MS_FIELD_NUMBER: _ClassVar[int]
    EVENT_TIME_MS_FIELD_NUMBER: _ClassVar[int]
    REDELIVERY_COUNT_FIELD_NUMBER: _ClassVar[int]
    TRACEPARENT_FIELD_NUMBER: _ClassVar[int]
    TRACESTATE_FIELD_NUMBER: _ClassVar[int]
    id: str
    topic: str
    key: bytes
    ordering_key: bytes
    properties: _containers.RepeatedCompositeFieldContainer[Property]
    payload: bytes
    publish_time_ms: int
    event_time_ms: int
    redelivery_count: int
    traceparent: str
    tracestate: str
    def __init__(self, id: _Optional[str] = ..., topic: _Optional[str] = ..., key: _Optional[bytes] = ..., ordering_key: _Optional[bytes] = ..., properties: _Optional[_Iterable[_Union[Property, _Mapping]]] = ..., payload: _Optional[bytes] = ..., publish_time_ms: _Optional[int] = ..., event_time_ms: _Optional[int] = ..., redelivery_count: _Optional[int] = ..., traceparent: _Optional[str] = ..., tracestate: _Optional[str] = ...) -> None: ...

class Batch(_message.Message):
    __slots__ = ("messages", "seq", "timeout_ms", "traceparent", "tracestate", "state")
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    SEQ_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    TRACEPARENT_FIELD_NUMBER: _ClassVar[int]
    TRACESTATE_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    messages: _containers.RepeatedCompositeFieldContainer[Message]
    seq: int
    timeout_ms: int
    traceparent: str
    tracestate: str
    state: _containers.RepeatedCompositeFieldContainer[StateEntry]
    def __init__(self, messages: _Optional[_Iterable[_Union[Message, _Mapping]]] = ..., seq: _Optional[int] = ..., timeout_ms: _Optional[int] = ..., traceparent: _Optional[str] = ..., tracestate: _Optional[str] = ..., state: _Optional[_Iterable[_Union[StateEntry, _Mapping]]] = ...) -> None: ...

class StateEntry(_message.Message):
    __slots__ = ("key", "value")
    KEY_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    key: bytes
    value: bytes
    def __init__(self, key: _Optional[bytes] = ..., value: _Optional[bytes] = ...) -> None: ...

class StateChange(_message.Message):
    __slots__ = ("key", "value", "delete")
    KEY_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    DELETE_FIELD_NUMBER: _ClassVar[int]
    key: bytes
    value: bytes
    delete: bool
    def __init__(self, key: _Optional[bytes] = ..., value: _Optional[bytes] = ..., delete: _Optional[bool] = ...) -> None: ...

class Property(_message.Message):
    __slots__ = ("key", "value")
    KEY_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    key: bytes
    value: bytes
    def __init__(self, key: _Optional[bytes] = ..., value: _Optional[bytes] = ...) -> None: ...

class Output(_message.Message):
    __slots__ = ("topic", "key", "ordering_key", "properties", "payload", "event_time_ms", "traceparent", "tracestate")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    ORDERING_KEY_FIELD_NUMBER: _ClassVar[int]
    PROPERTIES_FIELD_NUMBER: _ClassVar[int]
    PAYLOAD_FIELD_NUMBER: _ClassVar[int]
    EVENT_TIME_MS_FIELD_NUMBER: _ClassVar[int]
    TRACEPARENT_FIELD_NUMBER: _ClassVar[int]
    TRACESTATE_FIELD_NUMBER: _ClassVar[int]
    topic: str
    key: bytes
    ordering_key: bytes
    properties: _containers.RepeatedCompositeFieldContainer[Property]
    payload: bytes
    event_time_ms: int
    traceparent: str
    tracestate: str
    def __init__(self, topic: _Optional[str] = ..., key: _Optional[bytes] = ..., ordering_key: _Optional[bytes] = ..., properties: _Optional[_Iterable[_Union[Property, _Mapping]]] = ..., payload: _Optional[bytes] = ..., event_time_ms: _Optional[int] = ..., traceparent: _Optional[str] = ..., tracestate: _Optional[str] = ...) -> None: ...

class Result(_message.Message):
    __slots__ = ("index", "outcome", "retry_delay_ms", "reason", "outputs", "state")
    INDEX_FIELD_NUMBER: _ClassVar[int]
    OUTCOME_FIELD_NUMBER: _ClassVar[int]
    RETRY_DELAY_MS_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    OUTPUTS_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    index: int
    outcome: Outcome
    retry_delay_ms: int
    reason: str
    outputs: _containers.RepeatedCompositeFieldContainer[Output]
    state: StateChange
    def __init__(self, index: _Optional[int] = ..., outcome: _Optional[_Union[Outcome, str]] = ..., retry_delay_ms: _Optional[int] = ..., reason: _Optional[str] = ..., outputs: _Optional[_Iterable[_Union[Output, _Mapping]]] = ..., state: _Optional[_Union[StateChange, _Mapping]] = ...) -> None: ...

class BatchResult(_message.Message):
    __slots__ = ("results", "seq", "panic", "outcomes", "echo_topic", "payloads", "states")
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    SEQ_FIELD_NUMBER: _ClassVar[int]
    PANIC_FIELD_NUMBER: _ClassVar[int]
    OUTCOMES_FIELD_NUMBER: _ClassVar[int]
    ECHO_TOPIC_FIELD_NUMBER: _ClassVar[int]
    PAYLOADS_FIELD_NUMBER: _ClassVar[int]
    STATES_FIELD_NUMBER: _ClassVar[int]
    results: _containers.RepeatedCompositeFieldContainer[Result]
    seq: int
    panic: Panic
    outcomes: bytes
    echo_topic: str
    payloads: _containers.RepeatedScalarFieldContainer[bytes]
    states: _containers.RepeatedScalarFieldContainer[bytes]
    def __init__(self, results: _Optional[_Iterable[_Union[Result, _Mapping]]] = ..., seq: _Optional[int] = ..., panic: _Optional[_Union[Panic, _Mapping]] = ..., outcomes: _Optional[bytes] = ..., echo_topic: _Optional[str] = ..., payloads: _Optional[_Iterable[bytes]] = ..., states: _Optional[_Iterable[bytes]] = ...) -> None: ...

class CloseRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class CloseResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class Panic(_message.Message):
    __slots__ = ("index", "value", "stack")
    INDEX_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    STACK_FIELD_NUMBER: _ClassVar[int]
    index: int
    value: str
    stack: str
    def __init__(self, index: _Optional[int] = ..., value: _Optional[str] = ..., stack: _Optional[str] = ...) -> None: ...
