"""Messages, outputs and outcomes: what a handler reads and answers.

Text and bytes. A Pulsar message's key and its property names and values
are bytes, usually UTF-8 but not always. They are handed to a handler as
``str`` decoded with UTF-8 and the ``surrogateescape`` error handler: text
reads as text, and bytes that are not UTF-8 become lone surrogates that
encode back to exactly the same bytes. So a key or property copied from an
input to an output crosses unchanged, whatever it holds; ``key_bytes`` and
``properties_bytes`` give the raw bytes. Where a handler gives a key or a
property, ``str`` and ``bytes`` are both accepted (``str`` is encoded the
same way).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, fields, is_dataclass
from datetime import datetime, timezone
from typing import Any, Iterator, Mapping, Optional, Sequence, Union

from ._pb import handler_pb2 as pb
from .window import Window, read_window
from .state import State, _BatchState

Text = Union[str, bytes]

__all__ = [
    "Message",
    "Output",
    "Outcome",
    "Retry",
    "DeadLetter",
    "Drop",
    "Info",
    "Batch",
]


def _text(b: bytes) -> str:
    return b.decode("utf-8", "surrogateescape")


def _bytes(v: Text) -> bytes:
    if isinstance(v, bytes):
        return v
    if isinstance(v, str):
        return v.encode("utf-8", "surrogateescape")
    if isinstance(v, (bytearray, memoryview)):
        return bytes(v)
    raise TypeError(f"want str or bytes, got {type(v).__name__}")


def _millis(t: Union[datetime, int, float, None]) -> int:
    """Milliseconds since the Unix epoch of a datetime (naive is UTC), or
    of a number of milliseconds; 0 for None."""
    if t is None:
        return 0
    if isinstance(t, datetime):
        if t.tzinfo is None:
            t = t.replace(tzinfo=timezone.utc)
        return int(t.timestamp() * 1000)
    return int(t)


def _time(ms: int) -> Optional[datetime]:
    return datetime.fromtimestamp(ms / 1000, timezone.utc) if ms else None


class Message:
    """One message from a subscription. A handler must not keep it after
    its call returns (the host owns it; keep copies of what you need)."""

    __slots__ = ("_m", "index", "_batch", "_key", "_props")

    def __init__(self, m: pb.Message, index: int, batch: Optional["Batch"] = None):
        self._m = m
        #: The message's position in its batch.
        self.index = index
        self._batch = batch
        self._key: Optional[str] = None
        self._props: Optional[dict] = None

    @property
    def id(self) -> str:
        """The message id, "ledger:entry:partition:batchIndex"."""
        return self._m.id

    @property
    def topic(self) -> str:
        """The full name of the topic it was read from."""
        return self._m.topic

    @property
    def key(self) -> str:
        """The partition key, "" when there is none (see the module doc on
        bytes that are not UTF-8)."""
        if self._key is None:
            k = self._m.key
            self._key = _text(k) if k else ""
        return self._key

    @property
    def key_bytes(self) -> bytes:
        """The partition key as the broker holds it."""
        return self._m.key

    @property
    def state(self) -> State:
        """The value the host keeps under this message's key, for a
        pipeline with keyed state (see ``streamrun.state``)."""
        return State(self, self._batch._state if self._batch is not None else None)

    @property
    def window(self) -> Optional["Window"]:
        """The closed window this message carries, for a pipeline with a
        window block; None otherwise (see ``streamrun.window``)."""
        return read_window(self.properties, self.payload)

    @property
    def ordering_key(self) -> bytes:
        """The ordering key, b"" when there is none."""
        return self._m.ordering_key

    @property
    def properties(self) -> dict[str, str]:
        """The message's properties (a dict of its own; changing it changes
        nothing at the host)."""
        if self._props is None:
            ps = self._m.properties
            self._props = {_text(p.key): _text(p.value) for p in ps} if ps else {}
        return self._props

    @property
    def properties_bytes(self) -> dict[bytes, bytes]:
        """The properties as the broker holds them."""
        return {p.key: p.value for p in self._m.properties}

    @property
    def payload(self) -> bytes:
        """The message's body."""
        return self._m.payload

    @property
    def publish_time_ms(self) -> int:
        """When the broker received it, in milliseconds since the epoch."""
        return self._m.publish_time_ms

    @property
    def publish_time(self) -> Optional[datetime]:
        return _time(self._m.publish_time_ms)

    @property
    def event_time_ms(self) -> int:
        """The time the producer set, 0 when it set none."""
        return self._m.event_time_ms

    @property
    def event_time(self) -> Optional[datetime]:
        """The time the producer set, None when it set none."""
        return _time(self._m.event_time_ms)

    @property
    def redelivery_count(self) -> int:
        """How many times the broker delivered it before."""
        return self._m.redelivery_count

    @property
    def traceparent(self) -> str:
        """W3C trace context of the message's creation, "" when none."""
        return self._m.traceparent

    @property
    def tracestate(self) -> str:
        return self._m.tracestate

    def trace_context(self) -> dict[str, str]:
        """The trace context as a carrier for a W3C propagator, e.g.
        OpenTelemetry's ``TraceContextTextMapPropagator().extract(...)``;
        empty when the message has none."""
        c = {}
        if self._m.traceparent:
            c["traceparent"] = self._m.traceparent
            if self._m.tracestate:
                c["tracestate"] = self._m.tracestate
        return c

    @property
    def batch(self) -> Optional["Batch"]:
        """The batch the message came in (its deadline, its trace
        context)."""
        return self._batch

    def json(self) -> Any:
        """The payload decoded as JSON."""
        return json.loads(self._m.payload)

    def time_left(self) -> Optional[float]:
        """Seconds until the host gives up on this message's batch (it then
        takes the handler for hung), None when there is no limit."""
        if self._batch is None:
            return None
        return self._batch.time_left()

    def __repr__(self) -> str:
        return f"Message(id={self.id!r}, topic={self.topic!r}, key={self.key!r}, payload={self.payload[:64]!r})"


@dataclass(slots=True)
class Output:
    """A message for the host to publish on behalf of an input. The host
    acknowledges the input only once every output of it has its send
    receipt (at-least-once)."""

    #: The topic to publish to (required).
    topic: str
    #: The body; a str is encoded as UTF-8.
    payload: Union[bytes, str] = b""
    #: The partition key, None or "" for none.
    key: Optional[Text] = None
    #: The ordering key, None for none.
    ordering_key: Optional[bytes] = None
    #: Properties of the new message.
    properties: Optional[Mapping[Text, Text]] = None
    #: The event time: a datetime (naive means UTC) or milliseconds.
    event_time: Union[datetime, int, None] = None

    def _fill(self, o: pb.Output) -> None:
        if not self.topic:
            raise ValueError("an Output needs a topic")
        o.topic = self.topic
        p = self.payload
        o.payload = p.encode("utf-8") if isinstance(p, str) else p
        if self.key:
            o.key = _bytes(self.key)
        if self.ordering_key:
            o.ordering_key = _bytes(self.ordering_key)
        if self.properties:
            for k, v in self.properties.items():
                e = o.properties.add()
                e.key = _bytes(k)
                e.value = _bytes(v)
        if self.event_time is not None:
            o.event_time_ms = _millis(self.event_time)


class Outcome(Exception):
    """Base of the outcomes other than ack. A handler returns one, or
    raises it, to say what becomes of a message (or, from a batch handler,
    of the whole batch)."""

    outcome: int = pb.OUTCOME_UNSPECIFIED

    def __init__(self, reason: str = ""):
        super().__init__(reason)
        self.reason = str(reason)

    def _fill(self, r: pb.Result) -> None:
        r.outcome = self.outcome
        r.reason = self.reason


class Retry(Outcome):
    """Deliver the message again: after ``after`` seconds when given, else
    after the pipeline's error policy."""

    outcome = pb.OUTCOME_RETRY

    def __init__(self, reason: str = "", after: float = 0):
        super().__init__(reason)
        if after < 0:
            raise ValueError(f"Retry after {after}s: want a delay of 0 or more")
        self.after = after

    def _fill(self, r: pb.Result) -> None:
        super()._fill(r)
        r.retry_delay_ms = int(self.after * 1000)


class DeadLetter(Outcome):
    """Send the message to the pipeline's dead-letter topic with reason:
    for a message no retry would change, such as one that does not parse."""

    outcome = pb.OUTCOME_DEAD_LETTER


class Drop(Outcome):
    """Acknowledge the message without publishing anything."""

    outcome = pb.OUTCOME_DROP


@dataclass
class Info:
    """What the host tells a handler when it starts it."""

    #: The pipeline's name.
    pipeline: str
    #: Tells this process from the pipeline's other instances.
    instance_id: str
    #: The handler config from the pipeline file, decoded from JSON; None
    #: when the pipeline gives none.
    config: Any = None
    #: The same config as the JSON the host sent.
    config_json: bytes = b""

    def config_as(self, cls: type) -> Any:
        """The config as an instance of dataclass ``cls``, strictly: a field
        the class does not have is an error naming it, so a typo in the
        pipeline file fails the start instead of being ignored. No config
        gives ``cls()``."""
        return from_json_value(cls, self.config if self.config is not None else {}, "config")


def from_json_value(cls: Any, v: Any, what: str) -> Any:
    """Builds a ``cls`` from decoded JSON: a dataclass from an object,
    strictly (unknown or missing fields are errors), else the value itself
    after a type check for the plain JSON types."""
    if cls is None or cls is Any:
        return v
    if is_dataclass(cls):
        if not isinstance(v, dict):
            raise TypeError(f"{what}: want a JSON object for {cls.__name__}, got {type(v).__name__}")
        names = {f.name for f in fields(cls)}
        unknown = sorted(k for k in v if k not in names)
        if unknown:
            raise TypeError(f"{what}: unknown field {unknown[0]!r} for {cls.__name__}")
        try:
            return cls(**v)
        except TypeError as e:
            raise TypeError(f"{what}: {e}") from None
    if cls in (dict, list, str, int, float, bool) and not isinstance(v, cls):
        raise TypeError(f"{what}: want {cls.__name__}, got {type(v).__name__}")
    return v


class Batch(Sequence[Message]):
    """A batch of messages for a batch handler, and where it says what
    becomes of each: a message it says nothing about is acknowledged once
    its outputs are published. The last outcome set for a message wins;
    outputs accumulate and are published only with an ack. Iterating over
    the batch tells the SDK which message is being handled, so an
    exception names it."""

    def __init__(self, msgs: list[pb.Message], deadline: Optional[float], traceparent: str = "",
                 tracestate: str = "", state: Any = None):
        self.deadline = deadline
        # The batch's keyed state: its keys' values (StateEntry list) when
        # the pipeline keeps state, else None.
        self._state: Optional[_BatchState] = _BatchState(state, len(msgs)) if state is not None else None
        #: W3C trace context of the host's span for this batch, the parent
        #: for the handler's own spans; "" when the batch is not traced (or
        #: the host does not send it).
        self.traceparent = traceparent
        self.tracestate = tracestate
        self._msgs = [Message(m, i, self) for i, m in enumerate(msgs)]
        self._outcomes: list[Optional[Outcome]] = [None] * len(msgs)
        self._outputs: list[Optional[list[Output]]] = [None] * len(msgs)
        #: The message being handled, -1 when unknown.
        self.current = -1

    def __len__(self) -> int:
        return len(self._msgs)

    def __getitem__(self, i):  # type: ignore[override]
        return self._msgs[i]

    def __iter__(self) -> Iterator[Message]:
        for m in self._msgs:
            self.current = m.index
            yield m
        self.current = -1

    def trace_context(self) -> dict[str, str]:
        """The batch's trace context as a carrier for a W3C propagator;
        empty when there is none."""
        c = {}
        if self.traceparent:
            c["traceparent"] = self.traceparent
            if self.tracestate:
                c["tracestate"] = self.tracestate
        return c

    def time_left(self) -> Optional[float]:
        """Seconds until the host gives up on the batch (it then takes the
        handler for hung), None when there is no limit."""
        if self.deadline is None:
            return None
        return self.deadline - time.monotonic()

    def _slot(self, m: Message) -> int:
        if not isinstance(m, Message) or m._batch is not self:
            raise ValueError(f"{m!r} is not a message of this batch")
        return m.index

    def output(self, m: Message, out: Output) -> None:
        """Adds a message for the host to publish on behalf of m."""
        i = self._slot(m)
        if not isinstance(out, Output):
            raise TypeError(f"want an Output, got {type(out).__name__}")
        if self._outputs[i] is None:
            self._outputs[i] = []
        self._outputs[i].append(out)  # type: ignore[union-attr]

    def ack(self, m: Message) -> None:
        """Acknowledges m after its outputs are published (the default)."""
        self._outcomes[self._slot(m)] = None

    def retry(self, m: Message, reason: str = "", after: float = 0) -> None:
        self._outcomes[self._slot(m)] = Retry(reason, after)

    def dead_letter(self, m: Message, reason: str) -> None:
        self._outcomes[self._slot(m)] = DeadLetter(reason)

    def drop(self, m: Message, reason: str = "") -> None:
        self._outcomes[self._slot(m)] = Drop(reason)

    def set(self, m: Message, outcome: Optional[Outcome]) -> None:
        """Sets m's outcome: an Outcome, or None for ack."""
        if outcome is not None and not isinstance(outcome, Outcome):
            raise TypeError(f"want an Outcome or None, got {type(outcome).__name__}")
        self._outcomes[self._slot(m)] = outcome


_ACK = pb.OUTCOME_ACK


def _fill_result(r: pb.Result, ret: Any) -> None:
    """Fills r from what a message handler returned: None (ack), an Output
    or an iterable of them (ack with them), or an Outcome."""
    if type(ret) is Output:  # the common case first
        r.outcome = _ACK
        ret._fill(r.outputs.add())
        return
    if ret is None:
        r.outcome = _ACK
        return
    if isinstance(ret, Outcome):
        ret._fill(r)
        return
    r.outcome = _ACK
    if isinstance(ret, Output):
        ret._fill(r.outputs.add())
        return
    if isinstance(ret, (str, bytes, dict)) or not hasattr(ret, "__iter__"):
        raise TypeError(
            f"the handler returned a {type(ret).__name__}; want None, an Output, a list of Outputs, "
            "or Retry, DeadLetter or Drop")
    for o in ret:
        if not isinstance(o, Output):
            raise TypeError(f"the handler returned a {type(o).__name__} among its outputs; want Outputs")
        o._fill(r.outputs.add())
