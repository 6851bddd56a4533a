"""Test a handler in the test's own process: init it with a config, hand
it batches of messages made in a line, and read back what it answered,
each message's outcome and reason and the outputs the host would publish.

The handler is called exactly as the plugin process calls it: a message
it says nothing about is acknowledged, outputs go only with an ack, an
exception raised for a message is that message's retry (the exception as
the reason), one raised by a batch handler retries the whole batch, and
MemoryError or SystemExit is a crash (``Answer.crash``), which in a
plugin process ends the process.

With pytest, the ``streamrun_handler`` fixture (registered when the SDK is
installed) makes one and closes it at the end of the test::

    import streamrun
    from streamrun.testing import message

    def upper(m):
        return streamrun.Output(topic="out", key=m.key, payload=m.payload.upper())

    def test_upper(streamrun_handler):
        h = streamrun_handler(upper)
        answer = h.process(message("hello", key="k1"))
        assert answer[0].outcome == "ack"
        assert answer.outputs[0].payload == b"HELLO"

Without pytest, ``LocalHandler(handler, config=...)`` is the same thing
(call ``close()`` when done).
"""

from __future__ import annotations

import json as _json
import time
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Callable, Iterator, Mapping, Optional, Union

from ._pb import handler_pb2 as pb
from ._server import _Handler
from .message import Info, Output, Text, _bytes, _millis, _text

__all__ = ["DEFAULT_TOPIC", "Answer", "Crash", "LocalHandler", "Result", "StateChange", "json_message", "message"]

#: The topic of messages that name none.
DEFAULT_TOPIC = "persistent://public/default/in"

_OUTCOMES = {
    pb.OUTCOME_ACK: "ack",
    pb.OUTCOME_RETRY: "retry",
    pb.OUTCOME_DEAD_LETTER: "dead_letter",
    pb.OUTCOME_DROP: "drop",
}


def message(payload: Union[bytes, str] = b"", *, key: Text = "", properties: Optional[Mapping[Text, Text]] = None,
            ordering_key: bytes = b"", event_time: Union[datetime, int, None] = None, id: str = "",
            topic: str = "", redelivery_count: int = 0) -> pb.Message:
    """A message for ``LocalHandler.process``: payload (a str is encoded as
    UTF-8), key, properties, ordering key, event time (a datetime, naive
    is UTC, or milliseconds), and optionally its id, topic and redelivery
    count. An id or topic left out is given by ``process``."""
    m = pb.Message(id=id, topic=topic, payload=payload.encode("utf-8") if isinstance(payload, str) else bytes(payload),
                   ordering_key=ordering_key, redelivery_count=redelivery_count,
                   event_time_ms=_millis(event_time))
    if key:
        m.key = _bytes(key)
    for k, v in (properties or {}).items():
        p = m.properties.add()
        p.key, p.value = _bytes(k), _bytes(v)
    return m


def json_message(value: Any, **kw: Any) -> pb.Message:
    """A message whose payload is ``value`` as JSON; the other arguments
    are ``message``'s."""
    return message(_json.dumps(value, separators=(",", ":")).encode(), **kw)


@dataclass
class StateChange:
    """A message's change to the keyed state of its key."""

    #: The message's key (``str``, decoded as keys are).
    key: str
    #: The new value; None with a delete.
    value: Optional[bytes] = None
    #: The key's value was removed.
    delete: bool = False


@dataclass
class Result:
    """What the handler answered for one message."""

    #: The message's position in the batch, and its id.
    index: int
    id: str
    #: "ack", "retry", "dead_letter" or "drop".
    outcome: str
    #: The reason given with a retry, dead letter or drop ("" for an ack).
    reason: str = ""
    #: The delay a retry asked for, in seconds (0: the pipeline's policy).
    retry_after: float = 0
    #: The outputs the host would publish (an ack's only).
    outputs: list[Output] = field(default_factory=list)
    #: The message's change to the keyed state (an ack's only), None when
    #: it made none or the handler is tested without state.
    state: Optional[StateChange] = None


@dataclass
class Crash:
    """The handler crashed (MemoryError, SystemExit, ...): in a plugin
    process, the process ends and the host retries the batch on a fresh
    one."""

    #: The exception, as "Type: text".
    value: str
    #: Its traceback.
    traceback: str
    #: The message being handled, -1 when unknown.
    index: int


class Answer(list):
    """The handler's answer for a batch: a list of ``Result``, one per
    message in the batch's order (empty after a crash)."""

    def __init__(self, results: list[Result], crash: Optional[Crash] = None):
        super().__init__(results)
        #: The crash, None when there was none.
        self.crash = crash

    @property
    def outputs(self) -> list[Output]:
        """Every output, message by message in the batch's order."""
        return [o for r in self for o in r.outputs]

    def outputs_to(self, topic: str) -> list[Output]:
        """The outputs to topic, in the order of ``outputs``."""
        return [o for o in self.outputs if o.topic == topic]


def _output(o: pb.Output) -> Output:
    return Output(topic=o.topic, payload=o.payload, key=_text(o.key) if o.key else None,
                  ordering_key=o.ordering_key or None,
                  properties={_text(p.key): _text(p.value) for p in o.properties} or None,
                  event_time=o.event_time_ms or None)


class LocalHandler:
    """A handler under test, initialised: ``handler`` is what
    ``streamrun.serve`` takes (a function of a message, a batch function
    with ``batch=True``, or an object with ``handle``/``handle_batch`` and
    optionally ``init`` and ``close``), and ``init``/``close`` as there.
    ``config`` is the pipeline's handler config: it reaches ``init`` as
    the host hands it, through JSON. An exception from ``init`` is raised
    here, as the host would refuse the start."""

    def __init__(self, handler: Any, *, config: Any = None, batch: Optional[bool] = None,
                 init: Optional[Callable[[Info], None]] = None, close: Optional[Callable[[], None]] = None,
                 pipeline: str = "test", instance_id: str = "0", topic: str = DEFAULT_TOPIC,
                 timeout: float = 30.0, state: Optional[dict] = None):
        self._h = _Handler(handler, batch, init, close)
        #: The keyed state, key bytes to value bytes, when the handler is
        #: tested as in a pipeline with ``state: {enabled: true}`` (pass
        #: ``state={}`` or initial values): each batch is given its keys'
        #: values, and the changes of acknowledged messages are kept here,
        #: as the host keeps them. None: no state.
        self.state = None if state is None else {_bytes(k): _bytes(v) for k, v in state.items()}
        self._topic = topic
        self._timeout = timeout
        self._entry = 0
        self._closed = False
        raw = b"" if config is None else _json.dumps(config).encode()
        if self._h.init is not None:
            self._h.init(Info(pipeline=pipeline, instance_id=instance_id,
                              config=_json.loads(raw) if raw else None, config_json=raw))

    def process(self, *messages: pb.Message) -> Answer:
        """Hands ``messages`` (made with ``message`` or ``json_message``)
        to the handler as one batch and returns its answer. A message
        without an id or topic is given one: ids "1:N:-1:-1", N counting up
        from 0 across calls, and the handler's topic; the publish time is
        now."""
        now = int(time.time() * 1000)
        batch = []
        for m in messages:
            if not isinstance(m, pb.Message):
                raise TypeError(f"want a message made with streamrun.testing.message, got {type(m).__name__}")
            c = pb.Message()
            c.CopyFrom(m)
            if not c.id:
                c.id = f"1:{self._entry}:-1:-1"
            self._entry += 1
            if not c.topic:
                c.topic = self._topic
            if not c.publish_time_ms:
                c.publish_time_ms = now
            batch.append(c)
        out = pb.BatchResult()
        entries = None
        if self.state is not None:
            keys = dict.fromkeys(m.key for m in batch if m.key)
            entries = [pb.StateEntry(key=k, value=self.state[k]) for k in keys if k in self.state]
        p = self._h.process(batch, time.monotonic() + self._timeout, out, state=entries)
        if p is not None:
            return Answer([], Crash(value=p.value, traceback=p.stack, index=p.index))
        if len(out.results) != len(batch):
            raise TimeoutError(f"the handler took longer than its timeout ({self._timeout}s): "
                               "the host would take it for hung and retry the batch on a fresh process")
        results = []
        for r in sorted(out.results, key=lambda r: r.index):
            change = None
            if self.state is not None and r.outcome == pb.OUTCOME_ACK and r.HasField("state"):
                if r.state.delete or not r.state.value:
                    self.state.pop(r.state.key, None)
                    change = StateChange(key=_text(r.state.key), delete=True)
                else:
                    self.state[r.state.key] = r.state.value
                    change = StateChange(key=_text(r.state.key), value=r.state.value)
            results.append(Result(index=r.index, id=batch[r.index].id, outcome=_OUTCOMES.get(r.outcome, str(r.outcome)),
                                  reason=r.reason, retry_after=r.retry_delay_ms / 1000,
                                  outputs=[_output(o) for o in r.outputs], state=change))
        return Answer(results)

    def close(self) -> None:
        """Runs the handler's ``close``, as the host does at a graceful
        stop, once."""
        if self._closed:
            return
        self._closed = True
        if self._h.close is not None:
            self._h.close()

    def __enter__(self) -> "LocalHandler":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def handlers() -> Iterator[Callable[..., LocalHandler]]:
    """The factory behind the pytest fixture: makes LocalHandlers and
    closes them all when the generator ends."""
    made: list[LocalHandler] = []

    def make(handler: Any, **kw: Any) -> LocalHandler:
        h = LocalHandler(handler, **kw)
        made.append(h)
        return h

    try:
        yield make
    finally:
        for h in made:
            h.close()
