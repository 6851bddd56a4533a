"""A typed JSON helper, as the Go SDK's plugin.JSON: payloads decoded into
a type of yours, outputs encoded from values."""

from __future__ import annotations

import dataclasses
import functools
import inspect
import json
import typing
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Callable, Mapping, Optional, Union

from .message import DeadLetter, Message, Outcome, Output, Text, from_json_value

__all__ = ["Emit", "json_handler"]


@dataclass
class Emit:
    """One output of a JSON handler: value is encoded as JSON into the
    payload of a message published to topic."""

    #: The topic to publish to (required).
    topic: str
    #: Becomes the payload: anything json.dumps takes, and dataclasses.
    value: Any
    #: The partition key, None for none (it is not copied from the input).
    key: Optional[Text] = None
    ordering_key: Optional[bytes] = None
    properties: Optional[Mapping[Text, Text]] = None
    event_time: Union[datetime, int, None] = None


def _default(v: Any) -> Any:
    if dataclasses.is_dataclass(v) and not isinstance(v, type):
        return dataclasses.asdict(v)
    raise TypeError(f"{type(v).__name__} is not JSON serializable")


def json_handler(fn: Optional[Callable] = None, *, input_type: Any = None) -> Callable:
    """Makes a message handler of fn(value, message), where value is the
    payload decoded from JSON into fn's first parameter's annotation (or
    input_type): a dataclass is built strictly (unknown or missing fields
    are errors); dict, list, str, int, float and bool are checked; none
    or Any takes whatever the JSON holds.

    fn returns None, an Emit or a list of Emits (each encoded into an
    Output), or an outcome (Retry, DeadLetter, Drop), which it may also
    raise. A payload that does not decode as the type, and a value that
    does not encode, are dead-lettered with the error as the reason: no
    retry would change them. Use it as a decorator, with or without
    input_type."""
    if fn is None:
        return lambda f: json_handler(f, input_type=input_type)
    typ = input_type
    if typ is None:
        params = list(inspect.signature(fn).parameters.values())
        if params:
            try:
                hints = typing.get_type_hints(fn)
            except Exception:  # noqa: BLE001 - unresolvable hints: take the JSON as it is
                hints = {}
            typ = hints.get(params[0].name)
    typ = typing.get_origin(typ) or typ
    name = getattr(typ, "__name__", "JSON")

    @functools.wraps(fn)
    def handle(m: Message) -> Any:
        try:
            value = from_json_value(typ, json.loads(m.payload), "payload")
        except (ValueError, TypeError) as e:
            return DeadLetter(f"decode payload as {name}: {e}")
        ret = fn(value, m)
        if ret is None or isinstance(ret, Outcome):
            return ret
        emits = [ret] if isinstance(ret, Emit) else list(ret)
        outs = []
        for i, e in enumerate(emits):
            if not isinstance(e, Emit):
                raise TypeError(f"the JSON handler returned a {type(e).__name__}; want Emits")
            try:
                payload = json.dumps(e.value, default=_default, separators=(",", ":")).encode()
            except (TypeError, ValueError) as err:
                return DeadLetter(f"encode output {i} for {e.topic}: {err}")
            outs.append(Output(topic=e.topic, payload=payload, key=e.key, ordering_key=e.ordering_key,
                               properties=e.properties, event_time=e.event_time))
        return outs

    return handle
