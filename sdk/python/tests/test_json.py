"""The typed JSON helper."""

import json
from dataclasses import dataclass
from typing import Optional

import streamrun
from conftest import message


@dataclass
class Order:
    id: str
    amount: float
    note: Optional[str] = None


@streamrun.json_handler
def route(o: Order, m: streamrun.Message):
    if o.amount < 0:
        return streamrun.Drop("negative")
    return [streamrun.Emit(topic="big" if o.amount > 10 else "small", key=o.id, value=o)]


def call(h, payload: bytes):
    return h(streamrun.Message(message(0, payload), 0))


def test_payloads_decode_into_the_annotated_dataclass_and_emits_encode():
    [out] = call(route, b'{"id": "o1", "amount": 12.5}')
    assert out.topic == "big" and out.key == "o1"
    assert json.loads(out.payload) == {"id": "o1", "amount": 12.5, "note": None}
    assert isinstance(call(route, b'{"id": "o2", "amount": -1}'), streamrun.Drop)


def test_a_payload_that_does_not_decode_is_dead_lettered_with_the_reason():
    for payload, want in [(b"{not json", "decode payload as Order"),
                          (b'{"id": "o1", "amount": 1, "colour": "red"}', "unknown field 'colour'"),
                          (b'{"id": "o1"}', "amount"),
                          (b'[1, 2]', "want a JSON object")]:
        ret = call(route, payload)
        assert isinstance(ret, streamrun.DeadLetter), payload
        assert want in ret.reason, (payload, ret.reason)


def test_a_value_that_does_not_encode_is_dead_lettered():
    @streamrun.json_handler
    def bad(v: dict, m):
        return streamrun.Emit(topic="t", value={"s": {1, 2}})

    ret = call(bad, b"{}")
    assert isinstance(ret, streamrun.DeadLetter) and "encode output 0 for t" in ret.reason


def test_plain_json_types_are_checked_and_no_annotation_takes_anything():
    @streamrun.json_handler
    def anything(v, m):
        return streamrun.Emit(topic="t", value=v)

    assert json.loads(call(anything, b"[1, 2]")[0].payload) == [1, 2]

    @streamrun.json_handler(input_type=dict)
    def objects(v, m):
        return None

    assert isinstance(call(objects, b'"text"'), streamrun.DeadLetter)
    assert call(objects, b'{"a": 1}') is None
