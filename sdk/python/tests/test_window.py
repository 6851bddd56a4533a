"""Windows, as the host hands them over (docs/pipelines.md, "Windows")."""

import base64
import json

import pytest

import streamrun
from streamrun.testing import LocalHandler, message


def window_message(key, start, end, payloads):
    msgs = [{"id": f"1:{i}:-1:-1", "topic": "persistent://public/default/in", "key": key, "time": start + i,
             "payload": base64.b64encode(p).decode()} for i, p in enumerate(payloads)]
    body = json.dumps({"key": key, "start": start, "end": end, "fire": 1, "messages": msgs})
    return message(body, key=key, properties={"streamrun-window-start": str(start), "streamrun-window-end": str(end),
                                              "streamrun-window-fire": "1"})


def count(m):
    w = m.window
    return streamrun.Output(topic="out", key=w.key,
                            payload=f"{w.start_ms}-{w.end_ms}:{b','.join(x.payload for x in w.messages).decode()}".encode())


def test_a_window_is_read_whole():
    h = LocalHandler(count)
    a = h.process(window_message("k", 60000, 120000, [b"a", b"b"]))
    assert [o.payload for o in a.outputs] == [b"60000-120000:a,b"]


def test_a_message_that_is_not_a_window_has_none():
    h = LocalHandler(lambda m: streamrun.Output(topic="out", payload=b"none" if m.window is None else b"window"))
    assert [o.payload for o in h.process(message("x")).outputs] == [b"none"]


def test_a_window_that_does_not_decode_is_an_error():
    bad = message("{", properties={"streamrun-window-start": "0"})
    h = LocalHandler(count)
    assert [r.outcome for r in h.process(bad)] == ["retry"]
