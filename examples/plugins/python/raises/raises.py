"""raises: acknowledges every message (echoing it to "output" when set),
except that it raises on a message whose payload or key is the one in its
config. The exception ends the process; the host is told the message and
the traceback, restarts the handler and retries the batch; a message
that keeps raising is dead-lettered after the pipeline's max_crashes."""

import streamrun

cfg = {}


def init(info: streamrun.Info) -> None:
    cfg.update(info.config or {})


def handle(m: streamrun.Message):
    if (cfg.get("payload") and m.payload == cfg["payload"].encode()) or (cfg.get("key") and m.key == cfg["key"]):
        raise RuntimeError(f"raises: told to raise on message {m.id}")
    if cfg.get("output"):
        return streamrun.Output(topic=cfg["output"], key=m.key, payload=m.payload)
    return None


if __name__ == "__main__":
    streamrun.serve(handle, init=init)
