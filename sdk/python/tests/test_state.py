"""Keyed state, with the Go SDK's semantics (docs/contract.md §6)."""

import pytest

import streamrun
from streamrun.testing import LocalHandler, StateChange, message


def count(m):
    n = m.state.get_json(0) + 1
    m.state.put_json(n)
    if m.payload == b"fail":
        raise RuntimeError("failed after its change")
    return streamrun.Output(topic="out", key=m.key, payload=str(n).encode())


def test_a_message_sees_the_earlier_changes_of_its_key_and_a_failed_one_is_undone():
    h = LocalHandler(count, state={"a": b"10"})
    a = h.process(message("ok", key="a"), message("ok", key="a"), message("ok", key="b"),
                  message("fail", key="a"), message("ok", key="a"))
    assert [r.outcome for r in a] == ["ack", "ack", "ack", "retry", "ack"]
    assert [o.payload for o in a.outputs] == [b"11", b"12", b"1", b"13"]
    assert h.state == {b"a": b"13", b"b": b"1"}
    # Each acknowledged message's change is in its result; the retried
    # one's is not.
    assert [r.state for r in a] == [StateChange("a", b"11"), StateChange("a", b"12"), StateChange("b", b"1"),
                                    None, StateChange("a", b"13")]
    # The next batch starts from what was kept.
    h.process(message("ok", key="b"))
    assert h.state[b"b"] == b"2"


def test_a_batch_handler_cannot_keep_a_change_built_on_a_discarded_one():
    @streamrun.batch_handler
    def h(batch):
        for m in batch:
            m.state.put((m.state.get() or b"") + b"x")
            if m.payload == b"fail":
                batch.retry(m, "no")

    lh = LocalHandler(h, state={})
    a = lh.process(message("fail", key="a"), message("ok", key="a"), message("ok", key="b"))
    assert [r.outcome for r in a] == ["retry", "retry", "ack"]
    assert "state" in a[1].reason
    assert lh.state == {b"b": b"x"}


def test_without_state_or_a_key_there_is_nothing_to_write():
    def put(m):
        m.state.put(b"v")

    a = LocalHandler(put).process(message("x", key="k"))
    assert a[0].outcome == "retry" and "no keyed state" in a[0].reason
    a = LocalHandler(put, state={}).process(message("x"))
    assert a[0].outcome == "retry" and "no keyed state" in a[0].reason

    def big(m):
        m.state.put(b"x" * (streamrun.state.MAX_VALUE_SIZE + 1))

    a = LocalHandler(big, state={}).process(message("x", key="k"))
    assert a[0].outcome == "retry" and "limit" in a[0].reason


def test_delete_removes_the_key():
    h = LocalHandler(lambda m: m.state.delete(), state={"k": b"v", "j": b"w"})
    a = h.process(message("x", key="k"))
    assert a[0].state == StateChange("k", delete=True)
    assert h.state == {b"j": b"w"}


def test_the_fixture_seeds_state_and_reads_it_back(streamrun_handler):
    h = streamrun_handler(count, state={"a": b"1"})
    a = h.process(message("ok", key="a"))
    assert a[0].state == StateChange("a", b"2") and h.state == {b"a": b"2"}
