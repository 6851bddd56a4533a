"""The Python examples (examples/plugins/python) as the host runs them."""

import json
from pathlib import Path

import grpc
import pytest

from conftest import init, message
from streamrun._pb import handler_pb2 as pb

EXAMPLES = Path(__file__).resolve().parents[3] / "examples" / "plugins" / "python"


def test_uppercase(plugin):
    p = plugin(str(EXAMPLES / "uppercase" / "uppercase.py"))
    init(p, b'{"output": "persistent://public/default/up"}')
    [res] = p.batches([pb.Batch(seq=1, messages=[message(0, b"hello", key=b"k\xff", props={b"a": b"b"})])])
    [o] = res.results[0].outputs
    assert (o.topic, o.payload, o.key) == ("persistent://public/default/up", b"HELLO", b"k\xff")
    assert [(e.key, e.value) for e in o.properties] == [(b"a", b"b")]


def test_enrich_routes_by_amount_and_dead_letters_what_does_not_decode(plugin):
    p = plugin(str(EXAMPLES / "enrich" / "enrich.py"))
    with pytest.raises(grpc.RpcError) as e:
        init(p, b'{"large": "L", "small": "S", "treshold": 5}')
    assert "unknown field 'treshold'" in e.value.details()
    init(p, b'{"large": "L", "small": "S", "threshold": 100}')
    [res] = p.batches([pb.Batch(seq=1, messages=[
        message(0, b'{"id": "o-1", "amount": 150}', publish_time_ms=7),
        message(1, b'{"id": "o-2", "amount": 5, "customer": "c"}'),
        message(2, b'{"id": "", "amount": 5}'),
        message(3, b'{"amount": 5}'),
    ])])
    r = {x.index: x for x in res.results}
    big, small = r[0].outputs[0], r[1].outputs[0]
    assert (big.topic, big.key, small.topic) == ("L", b"o-1", "S")
    assert json.loads(big.payload) == {"id": "o-1", "amount": 150, "currency": "EUR", "customer": None,
                                       "size": "large", "source": "streamrun-enrich", "received_ms": 7}
    assert [(e.key, e.value) for e in big.properties] == [(b"size", b"large")]
    assert r[2].outcome == pb.OUTCOME_DEAD_LETTER and r[2].reason == "order without id"
    assert r[3].outcome == pb.OUTCOME_DEAD_LETTER and "decode payload as Order" in r[3].reason


def test_raises_fails_the_message_and_goes_on(plugin):
    p = plugin(str(EXAMPLES / "raises" / "raises.py"))
    init(p, b'{"key": "bad", "output": "echo"}')
    [res] = p.batches([pb.Batch(seq=1, messages=[message(0, b"a"), message(1, b"b", key=b"bad")])])
    r = {x.index: x for x in res.results}
    assert r[0].outcome == pb.OUTCOME_ACK and r[0].outputs[0].topic == "echo"
    assert r[1].outcome == pb.OUTCOME_RETRY and r[1].reason == "RuntimeError: raises: told to raise on message 1:1:-1:-1"
    assert p.proc.poll() is None


def test_raises_with_exit_ends_the_interpreter(plugin):
    p = plugin(str(EXAMPLES / "raises" / "raises.py"))
    init(p, b'{"key": "bad", "exit": true}')
    with pytest.raises(grpc.RpcError):
        p.batches([pb.Batch(seq=1, messages=[message(0, b"a"), message(1, b"b", key=b"bad")])])
    assert p.wait() == 3
