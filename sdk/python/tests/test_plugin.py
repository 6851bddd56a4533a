"""The SDK as a streamrun host sees it: a real plugin process, driven over
the handshake, mTLS and gRPC exactly as the Go host drives one."""

import json
import subprocess
import sys

import grpc
import pytest

from conftest import PLUGINS, WAIT, init, message
from streamrun._pb import handler_pb2 as pb


def test_the_handshake_line_health_and_init(plugin):
    p = plugin()
    # grpc.health.v1.Health/Check for go-plugin's "plugin" service: SERVING.
    assert p.raw("/grpc.health.v1.Health/Check", b"\x0a\x06plugin") == b"\x08\x01"
    assert init(p).contract_version == 1


def test_a_batch_is_answered_with_outputs_and_outcomes(plugin):
    p = plugin()
    init(p)
    batch = pb.Batch(seq=41, messages=[
        message(0, b"a", key=b"k\xff\xfe", props={b"n\xc3(": b"v\xa0", b"plain": b"x"}, event_time_ms=5),
        message(1, b"retry"),
    ])
    [res] = p.batches([batch])
    assert res.seq == 41 and not res.HasField("panic")
    r0, r1 = sorted(res.results, key=lambda r: r.index)
    assert r0.outcome == pb.OUTCOME_ACK and len(r0.outputs) == 1
    o = r0.outputs[0]
    # Bytes that are not UTF-8 cross unchanged.
    assert o.topic == "persistent://public/default/out" and o.key == b"k\xff\xfe" and o.payload == b"a"
    assert {e.key: e.value for e in o.properties} == {b"n\xc3(": b"v\xa0", b"plain": b"x"}
    assert o.event_time_ms == 5
    assert r1.outcome == pb.OUTCOME_RETRY and r1.retry_delay_ms == 1500 and r1.reason == "later"


def test_a_batch_handler_gets_the_batch(plugin):
    p = plugin("batch.py")
    init(p)
    [res] = p.batches([pb.Batch(seq=1, messages=[message(i, b"m%d" % i) for i in range(5)])])
    by = {r.index: r for r in res.results}
    assert sorted(by) == [0, 1, 2, 3, 4]
    assert by[0].outcome == pb.OUTCOME_ACK and [o.payload for o in by[0].outputs] == [b"m0", b"m0"]
    assert by[1].outcome == pb.OUTCOME_DEAD_LETTER and by[1].reason == "odd"
    assert by[2].outcome == pb.OUTCOME_ACK and by[3].outcome == pb.OUTCOME_DEAD_LETTER
    assert by[4].outcome == pb.OUTCOME_DROP and list(by[4].outputs) == []


def test_an_exception_is_the_messages_error_and_the_plugin_goes_on(plugin):
    p = plugin()
    init(p)
    batch = [message(0, b"fine"), message(1, b"raise"), message(2, b"x"), message(3, b"raise")]
    first, second = p.batches([pb.Batch(seq=3, messages=batch), pb.Batch(seq=4, messages=[message(0, b"after")])])
    # The messages that raised are retried with the exception as reason,
    # as an error a Go MessageFunc returns; the others are answered.
    assert first.seq == 3 and not first.HasField("panic")
    r = {x.index: x for x in first.results}
    assert sorted(r) == [0, 1, 2, 3]
    assert r[0].outcome == pb.OUTCOME_ACK and [o.payload for o in r[0].outputs] == [b"fine"]
    assert r[2].outcome == pb.OUTCOME_ACK and [o.payload for o in r[2].outputs] == [b"x"]
    for i in (1, 3):
        assert r[i].outcome == pb.OUTCOME_RETRY and r[i].reason == "KeyError: 'told to raise'" and not r[i].outputs
        assert r[i].retry_delay_ms == 0  # the pipeline's backoff
    # The process goes on.
    assert second.seq == 4 and second.results[0].outcome == pb.OUTCOME_ACK
    assert p.proc.poll() is None
    # One WARN record for the batch: the first exception's traceback, and
    # how many raised.
    p.records("handler raised; the message will be retried")
    p.raw("/plugin.GRPCController/Shutdown")
    assert p.wait() == 0
    recs = [json.loads(l) for l in p.stderr if l.startswith("{")]
    raised = [r for r in recs if r["msg"] == "handler raised; the message will be retried"]
    assert len(raised) == 1, recs
    assert raised[0]["level"] == "WARN" and raised[0]["index"] == 1 and raised[0]["message_id"] == "1:1:-1:-1"
    assert raised[0]["raised"] == 2 and raised[0]["messages"] == 4
    assert raised[0]["error"] == "KeyError: 'told to raise'" and "raise KeyError" in raised[0]["stack"]
    assert not [r for r in recs if r["level"] == "ERROR"], recs


def test_an_exception_of_a_batch_handler_retries_the_whole_batch(plugin):
    p = plugin("batch.py")
    init(p)
    first, second = p.batches([pb.Batch(seq=1, messages=[message(0, b"a"), message(1, b"raise"), message(2, b"c")]),
                               pb.Batch(seq=2, messages=[message(0, b"a"), message(1, b"b")])])
    assert not first.HasField("panic")
    assert [(r.index, r.outcome, r.reason, len(r.outputs)) for r in first.results] == [
        (i, pb.OUTCOME_RETRY, "ConnectionError: database down", 0) for i in range(3)]
    assert [r.outcome for r in second.results] == [pb.OUTCOME_ACK, pb.OUTCOME_DROP]
    assert p.proc.poll() is None


@pytest.mark.parametrize("payload, value", [(b"oom", "MemoryError: told to run out"), (b"exit", "SystemExit: 3")])
def test_running_out_of_memory_or_exiting_is_a_crash(plugin, payload, value):
    p = plugin()
    init(p)
    res, after = p.batches([pb.Batch(seq=3, messages=[message(0, b"fine"), message(1, payload), message(2, b"x")]),
                            pb.Batch(seq=4, messages=[message(0, b"a"), message(1, b"b")])])
    assert res.seq == 3 and len(res.results) == 0
    assert res.panic.index == 1 and res.panic.value == value
    assert "Traceback" in res.panic.stack
    # The batch after gets the same crash, naming no message of its own.
    assert after.seq == 4 and len(after.results) == 0 and after.panic.value == value and after.panic.index == -1
    assert p.wait() == 2
    # The host's log gets one ERROR record naming the message.
    recs = [json.loads(l) for l in p.stderr if l.startswith("{")]
    crash = [r for r in recs if r["level"] == "ERROR"]
    assert crash and crash[0]["index"] == 1 and crash[0]["message_id"] == "1:1:-1:-1", recs


def test_a_batch_past_its_deadline_gets_no_answer(plugin):
    p = plugin()
    init(p)
    answers = p.batches([pb.Batch(seq=1, timeout_ms=200, messages=[message(0, b"sleep:0.5"), message(1, b"b")]),
                         pb.Batch(seq=2, timeout_ms=5000, messages=[message(0, b"c")])])
    assert [a.seq for a in answers] == [2]


def test_init_refusal_names_the_error(plugin):
    p = plugin()
    with pytest.raises(grpc.RpcError) as e:
        init(p, b'{"refuse": "no such topic"}')
    assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "ValueError: refused: no such topic" in e.value.details()


def test_another_contract_version_is_refused(plugin):
    p = plugin()
    with pytest.raises(grpc.RpcError) as e:
        p.stub.Init(pb.InitRequest(contract_version=2), timeout=WAIT)
    assert e.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert "version 2" in e.value.details() and "speaks 1" in e.value.details()


def test_logs_and_prints_reach_stderr_as_the_host_reads_them(plugin):
    p = plugin()
    init(p)
    p.batches([pb.Batch(seq=1, messages=[message(0, b"log", traceparent="00-" + "1" * 32 + "-" + "2" * 16 + "-01"),
                                         message(1, b"print")])])
    p.raw("/plugin.GRPCController/Shutdown")
    assert p.wait() == 0
    recs = [json.loads(l) for l in p.stderr if l.startswith("{")]
    rec = next(r for r in recs if r.get("msg") == "a record")
    assert rec["level"] == "WARN" and rec["n"] == 7 and rec["logger"] == "echo" and rec["trace"].startswith("00-1")
    assert "printed by the handler" in p.stderr and "echo: loading" in p.stderr


def test_close_then_shutdown_ends_the_process_cleanly(plugin):
    p = plugin()
    init(p)
    p.stub.Close(pb.CloseRequest(), timeout=WAIT)
    p.raw("/plugin.GRPCController/Shutdown")
    assert p.wait() == 0
    assert any('"closing"' in l for l in p.stderr)


def test_a_stranger_without_the_hosts_certificate_is_refused(plugin):
    p = plugin()
    path = p.line.split("|")[3]
    # Trusts the plugin's certificate but presents none of its own.
    ch = grpc.secure_channel("unix:" + path, grpc.ssl_channel_credentials(root_certificates=p.server_pem),
                             options=[("grpc.ssl_target_name_override", "localhost")])
    with pytest.raises(grpc.RpcError):
        ch.unary_unary("/grpc.health.v1.Health/Check")(b"", timeout=5)
    ch.close()


def test_run_by_hand_it_says_it_is_a_plugin():
    out = subprocess.run([sys.executable, str(PLUGINS / "echo.py")], capture_output=True, text=True, timeout=WAIT,
                         env={"PATH": "/usr/bin:/bin"})
    assert out.returncode == 1
    assert "streamrun handler plugin" in out.stderr and "|" not in out.stdout
