"""The official Python client (pulsar-client) against the broker named by
STREAMRUN_SERVICE_URL: what it publishes comes back intact.

Run by interop/python_test.go (TestPythonClient); by hand:
    STREAMRUN_SERVICE_URL=pulsar://127.0.0.1:6650 python -m pytest -q interop/python
"""

import os
import uuid

import pulsar
import pytest

N = 100
TIMEOUT_MS = 30_000


@pytest.fixture
def client():
    url = os.environ.get("STREAMRUN_SERVICE_URL")
    if not url:
        pytest.skip("STREAMRUN_SERVICE_URL is not set")
    c = pulsar.Client(
        url,
        operation_timeout_seconds=30,
        logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Warn),
    )
    yield c
    c.close()


def topic_name(what):
    return f"persistent://public/default/python-{what}-{uuid.uuid4().hex[:8]}"


@pytest.mark.parametrize("batching", [True, False], ids=["batched", "unbatched"])
def test_produce_consume_keys_and_properties(client, batching):
    topic = topic_name("roundtrip")
    consumer = client.subscribe(
        topic,
        "python-sub",
        consumer_type=pulsar.ConsumerType.Exclusive,
        initial_position=pulsar.InitialPosition.Earliest,
    )
    producer = client.create_producer(
        topic,
        batching_enabled=batching,
        batching_max_publish_delay_ms=10,
        compression_type=pulsar.CompressionType.LZ4,
    )
    ids = []
    for i in range(N):
        ids.append(
            producer.send(
                f"python-{i:04d}".encode(),
                partition_key=f"key-{i % 7}",
                properties={"seq": str(i), "client": "python"},
                event_timestamp=1_700_000_000_000 + i,
            )
        )
    producer.flush()

    for i in range(N):
        msg = consumer.receive(timeout_millis=TIMEOUT_MS)
        assert msg.data() == f"python-{i:04d}".encode()
        assert msg.partition_key() == f"key-{i % 7}"
        assert msg.properties() == {"seq": str(i), "client": "python"}
        assert msg.event_timestamp() == 1_700_000_000_000 + i
        assert msg.publish_timestamp() > 0
        assert msg.redelivery_count() == 0
        assert str(msg.message_id()) == str(ids[i])
        consumer.acknowledge(msg)

    # Everything acked: a restarted consumer gets only what comes next.
    consumer.close()
    consumer = client.subscribe(topic, "python-sub", consumer_type=pulsar.ConsumerType.Exclusive)
    producer.send(b"after-restart")
    msg = consumer.receive(timeout_millis=TIMEOUT_MS)
    assert msg.data() == b"after-restart"
    consumer.acknowledge(msg)
    producer.close()
    consumer.close()


def test_shared_negative_ack_redelivers(client):
    topic = topic_name("nack")
    consumer = client.subscribe(
        topic,
        "python-nack",
        consumer_type=pulsar.ConsumerType.Shared,
        negative_ack_redelivery_delay_ms=100,
    )
    producer = client.create_producer(topic, batching_enabled=False)
    producer.send(b"retry-me", properties={"k": "v"})
    for want in range(3):
        msg = consumer.receive(timeout_millis=TIMEOUT_MS)
        assert msg.data() == b"retry-me"
        assert msg.properties() == {"k": "v"}
        assert msg.redelivery_count() == want
        if want < 2:
            consumer.negative_acknowledge(msg)
        else:
            consumer.acknowledge(msg)
    producer.close()
    consumer.close()


def test_reader_from_earliest(client):
    topic = topic_name("reader")
    producer = client.create_producer(topic, batching_enabled=False)
    for i in range(10):
        producer.send(f"r-{i}".encode())
    reader = client.create_reader(topic, pulsar.MessageId.earliest)
    for i in range(10):
        msg = reader.read_next(timeout_millis=TIMEOUT_MS)
        assert msg.data() == f"r-{i}".encode()
    assert not reader.has_message_available()
    reader.close()
    producer.close()
