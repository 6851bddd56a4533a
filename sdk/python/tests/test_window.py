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


def incremental_message(key, start, end, payloads, acc=None, add=True, fire=0):
    msgs = [{"id": f"1:{i}:-1:-1", "topic": "persistent://public/default/in", "key": key, "time": start + i,
             "payload": base64.b64encode(p).decode()} for i, p in enumerate(payloads)]
    body = {"key": key, "start": start, "end": end, "fire": fire, "messages": msgs, "add": add}
    if acc is not None:
        body["accumulator"] = base64.b64encode(acc).decode()
    props = {"streamrun-window-start": str(start), "streamrun-window-end": str(end)}
    if add:
        props["streamrun-window-add"] = str(len(payloads))
    else:
        props["streamrun-window-fire"] = str(fire)
    # An add's message is keyed <start>|<key>, its accumulator that key's state.
    return message(json.dumps(body), key=f"{start}|{key}" if add else key, properties=props)


def count_add(w):
    n = int(w.accumulator or b"0")
    return str(n + len(w.messages)).encode()


def count_fire(w):
    return streamrun.Output(topic="out", key=w.key, payload=b"%d:%s" % (w.fire, w.accumulator))


def test_an_incremental_window_adds_to_its_accumulator_as_state_and_fires_it():
    h = LocalHandler(streamrun.incremental_window(add=count_add, fire=count_fire), state={})
    a = h.process(incremental_message("k", 0, 60000, [b"a", b"b"]))
    assert [r.outcome for r in a] == ["ack"] and not a.outputs
    assert h.state == {b"0|k": b"2"}
    a = h.process(incremental_message("k", 0, 60000, [b"c"], acc=h.state[b"0|k"]))
    assert h.state == {b"0|k": b"3"}
    a = h.process(incremental_message("k", 0, 60000, [], acc=b"3", add=False, fire=1))
    assert [o.payload for o in a.outputs] == [b"1:3"]


def test_an_incremental_add_that_fails_leaves_the_accumulator():
    def bad(w):
        raise streamrun.DeadLetter("no")
    h = LocalHandler(streamrun.incremental_window(add=bad, fire=count_fire), state={b"0|k": b"5"})
    a = h.process(incremental_message("k", 0, 60000, [b"a"], acc=b"5"))
    assert [r.outcome for r in a] == ["dead_letter"]
    assert h.state == {b"0|k": b"5"}
