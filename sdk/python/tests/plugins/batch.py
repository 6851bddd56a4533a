"""A batch handler for the SDK's tests: even messages are acked with their
payload twice, odd ones dead-lettered, the last dropped; a payload
"raise" makes it raise for the whole batch."""

import streamrun


@streamrun.batch_handler
def handle(batch: streamrun.Batch) -> None:
    for m in batch:
        if m.payload == b"raise":
            raise ConnectionError("database down")
        if m.index == len(batch) - 1:
            batch.output(m, streamrun.Output(topic="out", payload=m.payload))
            batch.drop(m, "last")
        elif m.index % 2:
            batch.dead_letter(m, "odd")
        else:
            batch.output(m, streamrun.Output(topic="out", payload=m.payload))
            batch.output(m, streamrun.Output(topic="out", payload=m.payload))


streamrun.serve(handle)
