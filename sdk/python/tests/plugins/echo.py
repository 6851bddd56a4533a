"""A plugin for the SDK's tests: echoes each message to "output" with its
key and properties; payload "raise" raises, "oom" raises MemoryError,
"exit" calls sys.exit, "sleep:S" sleeps S seconds, "print" prints to
stdout, "log" logs a record with attributes."""

import logging
import sys
import time

import streamrun

# A print between the import and serve() must not break the handshake.
print("echo: loading")

cfg = {}


def init(info: streamrun.Info) -> None:
    if info.config and info.config.get("refuse"):
        raise ValueError("refused: " + info.config["refuse"])
    cfg.update(info.config or {})
    cfg["pipeline"], cfg["instance"] = info.pipeline, info.instance_id


def close() -> None:
    logging.getLogger("echo").info("closing", extra={"pipeline": cfg.get("pipeline")})


def handle(m: streamrun.Message):
    p = m.payload
    if p == b"raise":
        raise KeyError("told to raise")
    if p == b"oom":
        raise MemoryError("told to run out")
    if p == b"exit":
        sys.exit(3)
    if p.startswith(b"sleep:"):
        time.sleep(float(p[6:]))
    if p == b"print":
        print("printed by the handler")
    if p == b"log":
        logging.getLogger("echo").warning("a record", extra={"n": 7, "trace": m.traceparent})
    if p == b"retry":
        return streamrun.Retry("later", after=1.5)
    return streamrun.Output(topic=cfg.get("output", "out"), key=m.key, properties=m.properties,
                            payload=p, event_time=m.event_time_ms)


if __name__ == "__main__":
    streamrun.serve(handle, init=init, close=close, batch="--batch" in sys.argv or None)
