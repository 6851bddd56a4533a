"""Keyed state: the value the host keeps under a message's key.

For a pipeline whose file has ``state: {enabled: true}``, a handler reads
and changes the value under the key of the message it handles through
``message.state`` (``get``, ``put``, ``delete``, ``get_json``,
``put_json``), with the Go SDK's semantics (docs/contract.md §6): the
values of the batch's keys came with the batch and the changes go back
with the answer, so no access is a call. A change counts if and only if
its message is acknowledged: a message whose outcome is anything else has
its change undone before the next message of the batch, and a batch
handler's message that read or changed a key after such a change is
retried, since what it did rests on a change that did not happen.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, Optional

from ._pb import handler_pb2 as pb

if TYPE_CHECKING:
    from .message import Message

__all__ = ["MAX_VALUE_SIZE", "NoState", "State"]

#: The largest value a handler may store under a key (1 MiB), as the Go
#: SDK's plugin.MaxStateValueSize.
MAX_VALUE_SIZE = 1 << 20


class NoState(Exception):
    """Raised by a write when there is no state to write: the pipeline
    keeps none, or the message has no key."""


class State:
    """The value under one message's key (``message.state``). Only good
    while the message is handled."""

    __slots__ = ("_m", "_bs")

    def __init__(self, m: "Message", bs: Optional["_BatchState"]):
        self._m = m
        self._bs = bs

    def get(self) -> Optional[bytes]:
        """The value stored under the message's key, None when it has none."""
        if self._bs is None or not self._m.key_bytes:
            return None
        return self._bs.get(self._m)

    def put(self, value: bytes) -> None:
        """Stores value under the message's key, once the message is
        acknowledged. An empty value is delete()."""
        if self._bs is None or not self._m.key_bytes:
            raise NoState(f"put for message {self._m.id}: no keyed state "
                          "(the pipeline keeps none, or the message has no key)")
        if not isinstance(value, (bytes, bytearray)):
            raise TypeError(f"put: want bytes, got {type(value).__name__} (put_json encodes a value)")
        if len(value) > MAX_VALUE_SIZE:
            raise ValueError(f"put for message {self._m.id}: a value of {len(value)} bytes is over "
                             f"the {MAX_VALUE_SIZE}-byte limit")
        self._bs.put(self._m, bytes(value))

    def delete(self) -> None:
        """Removes the value under the message's key, once the message is
        acknowledged."""
        self.put(b"")

    def get_json(self, default: Any = None) -> Any:
        """The value decoded from JSON, default when there is none."""
        v = self.get()
        return default if v is None else json.loads(v)

    def put_json(self, value: Any) -> None:
        """Stores value encoded as JSON."""
        self.put(json.dumps(value, separators=(",", ":")).encode())


class _BatchState:
    """A batch's view of the keyed state, as the Go SDK's batchState."""

    def __init__(self, entries, n: int):
        self.vals: dict[bytes, bytes] = {e.key: e.value for e in entries}
        self.changed = [False] * n
        self.change: list[Optional[bytes]] = [None] * n  # b"" deletes
        self.before: list[Optional[bytes]] = [None] * n
        self.touched = [False] * n

    def get(self, m: "Message") -> Optional[bytes]:
        self.touched[m.index] = True
        return self.vals.get(m.key_bytes)

    def put(self, m: "Message", v: bytes) -> None:
        i, k = m.index, m.key_bytes
        self.touched[i] = True
        if not self.changed[i]:
            self.before[i] = self.vals.get(k)
            self.changed[i] = True
        if v:
            self.vals[k] = v
        else:
            self.vals.pop(k, None)
        self.change[i] = v

    def undo(self, m: "Message") -> None:
        """Takes back the change of a message that is not acknowledged."""
        i, k = m.index, m.key_bytes
        if not self.changed[i]:
            return
        if self.before[i] is None:
            self.vals.pop(k, None)
        else:
            self.vals[k] = self.before[i]  # type: ignore[assignment]
        self.changed[i] = self.touched[i] = False
        self.change[i] = None

    def settle(self, msgs, results) -> None:
        """Puts each acknowledged message's change in its result; retries a
        message that touched a key after an earlier message's change to it
        was discarded."""
        by_index = {r.index: r for r in results}
        lost: set[bytes] = set()
        for m in msgs:
            r = by_index.get(m.index)
            if r is None:
                continue
            k = m.key_bytes
            if k in lost and self.touched[m.index] and r.outcome == pb.OUTCOME_ACK:
                r.Clear()
                r.index, r.outcome = m.index, pb.OUTCOME_RETRY
                r.reason = f"state: an earlier message of key {k!r} in the batch changed it and was not acknowledged"
            if not self.changed[m.index]:
                continue
            if r.outcome != pb.OUTCOME_ACK:
                lost.add(k)
                continue
            v = self.change[m.index]
            if v:
                r.state.key, r.state.value = k, v
            else:
                r.state.key, r.state.delete = k, True
