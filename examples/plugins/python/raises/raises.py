"""raises: acknowledges every message (echoing it to "output" when set),
except that it raises on a message whose payload or key is the one in its
config. The exception is that message's error: the host retries it under
the pipeline's error policy and, past max_retries, dead-letters it with
the exception as the reason, while this process goes on with the others.
With "exit" set it ends the interpreter there instead (os._exit), a crash
the host supervises: it restarts the handler and retries the batch, and
dead-letters a message that keeps crashing it after max_crashes."""

import os

import streamrun

cfg = {}


def init(info: streamrun.Info) -> None:
    cfg.update(info.config or {})


def handle(m: streamrun.Message):
    if (cfg.get("payload") and m.payload == cfg["payload"].encode()) or (cfg.get("key") and m.key == cfg["key"]):
        if cfg.get("exit"):
            os._exit(3)
        raise RuntimeError(f"raises: told to raise on message {m.id}")
    if cfg.get("output"):
        return streamrun.Output(topic=cfg["output"], key=m.key, payload=m.payload)
    return None


if __name__ == "__main__":
    streamrun.serve(handle, init=init)
