"""streamrun.testing and its pytest fixture: a handler called in-process
answers as it does in a plugin process."""

import pytest

import streamrun
from streamrun.testing import LocalHandler, json_message, message


def upper(m: streamrun.Message):
    if not m.payload:
        return streamrun.Drop("empty")
    return streamrun.Output(topic="out", key=m.key, properties=m.properties, payload=m.payload.upper())


def test_the_fixture_answers_outcomes_and_outputs(streamrun_handler):
    h = streamrun_handler(upper)
    a = h.process(message("hello", key="k1", properties={"p": "v"}), message(b""))
    assert [r.outcome for r in a] == ["ack", "drop"]
    assert a[1].reason == "empty"
    [o] = a.outputs
    assert (o.topic, o.key, o.payload, o.properties) == ("out", "k1", b"HELLO", {"p": "v"})
    assert a.outputs_to("elsewhere") == []
    assert [r.id for r in a] == ["1:0:-1:-1", "1:1:-1:-1"]
    assert [r.id for r in h.process(message("x"))] == ["1:2:-1:-1"]


class Configured:
    def __init__(self):
        self.info = None
        self.closed = 0

    def init(self, info: streamrun.Info):
        if "output" not in (info.config or {}):
            raise ValueError("output is required")
        self.info = info

    def handle(self, m: streamrun.Message):
        if m.json().get("id") is None:
            return streamrun.DeadLetter("order without id")
        if m.json().get("later"):
            return streamrun.Retry("not yet", after=2)
        return streamrun.Output(topic=self.info.config["output"], payload=m.payload)

    def close(self):
        self.closed += 1


def test_init_gets_the_config_through_json_and_close_runs_once():
    c = Configured()
    with LocalHandler(c, config={"output": "checked"}, pipeline="orders") as h:
        assert c.info.pipeline == "orders" and c.info.config_json == b'{"output": "checked"}'
        a = h.process(json_message({"id": "o1"}), json_message({"amount": 1}), json_message({"id": 2, "later": True}))
        assert [(r.outcome, r.reason) for r in a] == [("ack", ""), ("dead_letter", "order without id"),
                                                     ("retry", "not yet")]
        assert a[2].retry_after == 2 and a[0].outputs[0].topic == "checked"
        h.close()
    assert c.closed == 1


def test_an_init_that_refuses_raises():
    with pytest.raises(ValueError, match="output is required"):
        LocalHandler(Configured(), config={})


def test_an_exception_is_the_messages_retry_and_a_crash_is_a_crash(streamrun_handler):
    def handler(m: streamrun.Message):
        if m.payload == b"bad":
            raise KeyError("id")
        if m.payload == b"exit":
            raise SystemExit(3)
        return None

    h = streamrun_handler(handler)
    a = h.process(message("ok"), message("bad"))
    assert [(r.outcome, r.reason) for r in a] == [("ack", ""), ("retry", "KeyError: 'id'")]
    crashed = h.process(message("ok"), message("exit"))
    assert list(crashed) == [] and crashed.crash.index == 1 and crashed.crash.value.startswith("SystemExit")


def test_a_batch_handler_answers_on_the_batch(streamrun_handler):
    @streamrun.batch_handler
    def every_other(batch: streamrun.Batch):
        for m in batch:
            if m.index % 2:
                batch.drop(m, "odd")
            else:
                batch.output(m, streamrun.Output(topic="even", payload=m.payload))

    a = streamrun_handler(every_other).process(message("a"), message("b"), message("c"))
    assert [r.outcome for r in a] == ["ack", "drop", "ack"]
    assert [o.payload for o in a.outputs_to("even")] == [b"a", b"c"]
