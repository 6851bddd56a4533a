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
                      replaces_ms=list(w.get("replaces") or []))
    except (ValueError, KeyError, TypeError) as e:
        raise ValueError(f"not a window: {e}") from e
