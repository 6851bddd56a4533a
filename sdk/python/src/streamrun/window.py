"""Windows, with the Go SDK's semantics (docs/pipelines.md, "Windows").

For a pipeline with a ``window`` block, the host hands the handler each
closed window as one message: its key is the window's key, its properties
say the window's start and end, and its payload holds the window's
messages as JSON. ``message.window`` reads it::

    def count(m):
        w = m.window
        return streamrun.Output(topic="counts", key=w.key,
                                payload=f"{w.start_ms}:{len(w.messages)}".encode())
"""

import base64
import json
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Optional

_START = "streamrun-window-start"


@dataclass(frozen=True)
class WindowMessage:
    """One message of a window; ``time_ms`` is the time the window placed
    it by, in milliseconds since the epoch."""

    id: str
    topic: str
    key: str
    payload: bytes
    time_ms: int
    properties: dict = field(default_factory=dict)
    event_time_ms: int = 0
    publish_time_ms: int = 0


@dataclass(frozen=True)
class Window:
    """A closed window: one key's messages from ``start_ms`` (included) to
    ``end_ms`` (excluded), in the order of their time. ``fire`` is 1 the
    first time, 2, 3... when allowed lateness brought more since.
    ``replaces_ms`` are the starts of fired sessions this session took in
    (a late message joined them): their results are this one's now."""

    key: str
    start_ms: int
    end_ms: int
    fire: int
    messages: list
    replaces_ms: list = field(default_factory=list)
    #: An incremental window's accumulator (window.mode: incremental): the
    #: bytes the add steps returned so far, None before the first; at a
    #: fire, the window.
    accumulator: Optional[bytes] = None
    #: True for an incremental window's add step, False for a fire.
    add: bool = False

    @property
    def start(self) -> datetime:
        return datetime.fromtimestamp(self.start_ms / 1000, timezone.utc)

    @property
    def end(self) -> datetime:
        return datetime.fromtimestamp(self.end_ms / 1000, timezone.utc)


def read_window(properties: dict, payload: bytes) -> Optional[Window]:
    """The window a message with these properties and payload carries;
    None when it is not a window. A window that does not decode raises
    ValueError."""
    if _START not in properties:
        return None
    try:
        w = json.loads(payload)
        msgs = [WindowMessage(id=m["id"], topic=m["topic"], key=m.get("key", ""),
                              payload=base64.b64decode(m.get("payload") or ""), time_ms=m["time"],
                              properties=m.get("properties") or {}, event_time_ms=m.get("event_time", 0),
                              publish_time_ms=m.get("publish_time", 0))
                for m in w.get("messages") or []]
        return Window(key=w["key"], start_ms=w["start"], end_ms=w["end"], fire=w["fire"], messages=msgs,
                      replaces_ms=list(w.get("replaces") or []),
                      accumulator=base64.b64decode(w["accumulator"]) if w.get("accumulator") else None,
                      add=bool(w.get("add")))
    except (ValueError, KeyError, TypeError) as e:
        raise ValueError(f"not a window: {e}") from e


def incremental_window(add, fire):
    """A handler for a pipeline whose windows are incremental
    (``window.mode: incremental``, docs/pipelines.md "Incremental
    windows"), as the Go SDK's ``plugin.IncrementalWindow``: ``add(w)``
    returns the accumulator (bytes) with ``w.messages`` added to
    ``w.accumulator`` (None before the first add); the host keeps it, and
    acknowledges the messages, once it is in its changelog. ``fire(w)``
    returns what a handler returns (an Output, a list of them, None...)
    for a closed window, whose accumulator is ``w.accumulator``. An
    exception or a Retry/DeadLetter from ``add`` retries or dead-letters
    the step, leaving the accumulator as it was. A message that is not a
    window is dead-lettered::

        streamrun.serve(streamrun.incremental_window(add=count, fire=emit))
    """
    from .message import DeadLetter, Outcome

    def handle(m):
        w = m.window
        if w is None:
            return DeadLetter(f"message {m.id} is not a window: is the pipeline's window block set?")
        if not w.add:
            return fire(w)
        acc = add(w)
        if isinstance(acc, Outcome):
            return acc
        if not isinstance(acc, (bytes, bytearray)):
            return DeadLetter(f"window {w.key} at {w.start_ms}: add returned {type(acc).__name__}, want bytes")
        # The accumulator goes back as the add's keyed state
        # (docs/contract.md §6).
        m.state.put(bytes(acc))
        return None

    return handle
