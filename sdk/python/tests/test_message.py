"""Messages, outputs and outcomes, without a host."""

from dataclasses import dataclass

import pytest

import streamrun
from conftest import message
from streamrun._pb import handler_pb2 as pb
from streamrun._server import _Handler
from streamrun.message import _fill_result


def run(handler, msgs, **kw):
    """(results, panic); results None when the handler raised or the
    deadline passed."""
    out = pb.BatchResult()
    panic = _Handler(handler, kw.pop("batch", None), None, None).process(msgs, kw.pop("deadline", None), out)
    return (list(out.results) if len(out.results) == len(msgs) else None), panic


def test_keys_and_properties_that_are_not_utf8_round_trip_as_str():
    m = streamrun.Message(message(0, b"p", key=b"k\xff", props={b"\xc3(": b"\xa0", b"a": "ü".encode()}), 0)
    assert isinstance(m.key, str) and m.key_bytes == b"k\xff"
    assert m.properties["a"] == "ü"
    r = pb.Result()
    _fill_result(r, streamrun.Output(topic="t", key=m.key, properties=m.properties))
    o = r.outputs[0]
    assert o.key == b"k\xff" and {e.key: e.value for e in o.properties} == {b"\xc3(": b"\xa0", b"a": "ü".encode()}


def test_what_a_message_handler_returns_is_its_outcome():
    cases = [
        (None, pb.OUTCOME_ACK, 0),
        (streamrun.Output(topic="t", payload="text"), pb.OUTCOME_ACK, 1),
        ([streamrun.Output(topic="t"), streamrun.Output(topic="u")], pb.OUTCOME_ACK, 2),
        ((o for o in [streamrun.Output(topic="t")]), pb.OUTCOME_ACK, 1),
        (streamrun.Retry("busy", after=0.25), pb.OUTCOME_RETRY, 0),
        (streamrun.DeadLetter("bad"), pb.OUTCOME_DEAD_LETTER, 0),
        (streamrun.Drop("skip"), pb.OUTCOME_DROP, 0),
    ]
    for ret, outcome, outputs in cases:
        r = pb.Result()
        _fill_result(r, ret)
        assert (r.outcome, len(r.outputs)) == (outcome, outputs), ret
    r = pb.Result()
    _fill_result(r, streamrun.Retry("busy", after=0.25))
    assert r.retry_delay_ms == 250 and r.reason == "busy"
    r = pb.Result()
    _fill_result(r, streamrun.Output(topic="t", payload="é"))
    assert r.outputs[0].payload == "é".encode()


def test_raised_outcomes_count_as_returned_and_other_exceptions_fail_their_message():
    def h(m):
        if m.payload == b"dead":
            raise streamrun.DeadLetter("no good")
        if m.payload == b"bug":
            return {"not": "an output"}
        if m.payload == b"half":
            return [streamrun.Output(topic="t"), "not an output"]
        if m.payload == b"raise":
            raise ValueError("bad \udcff byte")  # not UTF-8 as it stands
        if m.payload == b"oom":
            raise MemoryError()
        return None

    res, p = run(h, [message(0, b"ok"), message(1, b"dead")])
    assert p is None and [r.outcome for r in res] == [pb.OUTCOME_ACK, pb.OUTCOME_DEAD_LETTER]
    assert res[1].reason == "no good"
    # What a handler returns wrongly, or raises, is its message's error:
    # a retry with it as reason, nothing of what it half answered kept.
    res, p = run(h, [message(0, b"ok"), message(1, b"bug"), message(2, b"half"), message(3, b"raise")])
    assert p is None and [r.index for r in res] == [0, 1, 2, 3]
    assert [r.outcome for r in res] == [pb.OUTCOME_ACK] + [pb.OUTCOME_RETRY] * 3
    assert res[1].reason.startswith("TypeError: the handler returned a dict")
    assert res[2].reason.startswith("TypeError: the handler returned a str among its outputs") and not res[2].outputs
    assert res[3].reason == "ValueError: bad ? byte"
    # An interpreter out of memory is not to be trusted with the next one.
    res, p = run(h, [message(0, b"ok"), message(1, b"oom")])
    assert res is None and p.index == 1 and p.value == "MemoryError: "


def test_wrong_outputs_are_errors():
    with pytest.raises(ValueError):
        _fill_result(pb.Result(), streamrun.Output(topic=""))
    with pytest.raises(TypeError):
        _fill_result(pb.Result(), "a string")
    with pytest.raises(ValueError):
        streamrun.Retry("x", after=-1)


def test_a_batch_handler_answers_per_message_and_an_outcome_raised_covers_the_batch():
    def h(batch):
        for m in batch:
            if m.payload == b"retry":
                batch.retry(m, "later", after=2)
            else:
                batch.output(m, streamrun.Output(topic="t", payload=m.payload))

    res, p = run(h, [message(0, b"a"), message(1, b"retry")], batch=True)
    assert p is None and res[0].outcome == pb.OUTCOME_ACK and res[0].outputs[0].payload == b"a"
    assert res[1].outcome == pb.OUTCOME_RETRY and res[1].retry_delay_ms == 2000 and not res[1].outputs

    def whole(batch):
        raise streamrun.Retry("database down", after=1)

    res, p = run(whole, [message(0, b"a"), message(1, b"b")], batch=True)
    assert [r.outcome for r in res] == [pb.OUTCOME_RETRY] * 2 and res[0].reason == "database down"

    def stranger(batch):
        other = streamrun.Message(message(9, b"x"), 0)
        batch.ack(other)

    res, p = run(stranger, [message(0, b"a"), message(1, b"b")], batch=True)
    assert p is None and [r.outcome for r in res] == [pb.OUTCOME_RETRY] * 2
    assert "not a message of this batch" in res[0].reason


def test_an_exception_in_a_batch_handler_retries_the_batch_and_a_crash_names_the_message_being_iterated():
    def h(batch):
        for m in batch:
            batch.output(m, streamrun.Output(topic="t"))
            if m.index == 2:
                raise RuntimeError("boom")

    res, p = run(h, [message(i, b"x") for i in range(4)], batch=True)
    assert p is None and [(r.outcome, r.reason, len(r.outputs)) for r in res] == [(pb.OUTCOME_RETRY, "RuntimeError: boom", 0)] * 4

    def crash(batch):
        for m in batch:
            if m.index == 2:
                raise SystemExit(1)

    res, p = run(crash, [message(i, b"x") for i in range(4)], batch=True)
    assert res is None and p.index == 2 and p.value == "SystemExit: 1"


def test_a_handler_object_with_init_and_close():
    @dataclass
    class Cfg:
        output: str
        upper: bool = False

    class H:
        def init(self, info):
            self.cfg = info.config_as(Cfg)

        def handle(self, m):
            p = m.payload.upper() if self.cfg.upper else m.payload
            return streamrun.Output(topic=self.cfg.output, payload=p)

    obj = H()
    h = _Handler(obj, None, None, None)
    h.init(streamrun.Info("p", "0", {"output": "o", "upper": True}))
    res, _ = run(obj, [message(0, b"a")])
    assert res[0].outputs[0].payload == b"A"
    with pytest.raises(TypeError, match="unknown field 'uppr'"):
        streamrun.Info("p", "0", {"output": "o", "uppr": True}).config_as(Cfg)


def test_the_deadline_stops_a_message_handler_between_messages():
    import time
    seen = []

    def h(m):
        seen.append(m.index)
        time.sleep(0.05)

    res, p = run(h, [message(i, b"x") for i in range(10)], deadline=time.monotonic() + 0.12)
    assert res is None and p is None and len(seen) < 10


def test_trace_context_is_a_carrier():
    m = streamrun.Message(message(0, b"p", traceparent="00-aa-bb-01", tracestate="k=v"), 0)
    assert m.trace_context() == {"traceparent": "00-aa-bb-01", "tracestate": "k=v"}
    assert streamrun.Message(message(0, b"p"), 0).trace_context() == {}


def test_a_handler_reaches_the_batchs_deadline_and_trace_context():
    seen = {}

    def h(m):
        seen["carrier"] = m.batch.trace_context()
        seen["left"] = m.time_left()

    out = pb.BatchResult()
    _Handler(h, None, None, None).process([message(0, b"x")], None, out, "00-cc-dd-01", "a=b")
    assert seen == {"carrier": {"traceparent": "00-cc-dd-01", "tracestate": "a=b"}, "left": None}
