"""Topic compaction with the official Python client: after the admin
trigger (STREAMRUN_ADMIN_URL), a reader with is_read_compacted sees the
last value of each key, keys whose last message is empty deleted, and
messages without a key left out; the same answers on both brokers."""

import json
import os
import time
import urllib.request
import uuid

import pulsar
import pytest

TIMEOUT_MS = 30_000


@pytest.fixture
def client():
    url = os.environ.get("STREAMRUN_SERVICE_URL")
    if not url:
        pytest.skip("STREAMRUN_SERVICE_URL is not set")
    c = pulsar.Client(url, operation_timeout_seconds=30, logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Warn))
    yield c
    c.close()


def admin(method, path):
    base = os.environ.get("STREAMRUN_ADMIN_URL")
    if not base:
        pytest.skip("STREAMRUN_ADMIN_URL is not set")
    req = urllib.request.Request(base + path, method=method)
    with urllib.request.urlopen(req, timeout=30) as resp:
        return resp.read()


def test_read_compacted_sees_the_last_value_of_each_key(client):
    name = f"python-compact-{uuid.uuid4().hex[:8]}"
    topic = f"persistent://public/default/{name}"
    producer = client.create_producer(topic, batching_enabled=False)
    for key, value in [("k1", "a"), ("k2", "b"), ("k1", "c"), (None, "no key"), ("k2", ""), ("k3", "e")]:
        if key is None:
            producer.send(value.encode())
        else:
            producer.send(value.encode(), partition_key=key)
    batched = client.create_producer(topic, batching_enabled=True, batching_max_messages=4,
                                     batching_max_publish_delay_ms=1000)
    for key, value in [("k4", "x"), ("k5", "y"), ("k4", "z"), ("k3", "")]:
        batched.send_async(value.encode(), None, partition_key=key)
    batched.flush()
    producer.send(b"kept", partition_key="k7")

    path = f"/admin/v2/persistent/public/default/{name}/compaction"
    admin("PUT", path)
    deadline = time.time() + 60
    while True:
        status = json.loads(admin("GET", path))["status"]
        if status == "SUCCESS":
            break
        assert status != "ERROR"
        assert time.time() < deadline, f"compaction still {status}"
        time.sleep(0.05)

    reader = client.create_reader(topic, pulsar.MessageId.earliest, is_read_compacted=True)
    got = []
    while reader.has_message_available():
        msg = reader.read_next(timeout_millis=TIMEOUT_MS)
        if msg.data():
            got.append(f"{msg.partition_key()}={msg.data().decode()}")
    assert got == ["k1=c", "k5=y", "k4=z", "k7=kept"]
    reader.close()
    producer.close()
    batched.close()
