"""The Python twin of runtime's Go test handler (handler_test.go), for the
tests that run pipelines on a Python handler. Its config is testConfig's.

By default it echoes every message to "output", keeping its key and
properties. A payload's prefix picks another outcome:

    dead:...   dead-lettered with reason "asked to"
    boom:...   the handler raises, every time: the message's error, retried

With "count", it keeps a count per key in the pipeline's keyed state:
each message adds one and its output's payload is "key=count"; a message
whose payload starts "undo:" is retried, the first time, after its change.

With "panic_every" N, its interpreter dies (os._exit) once per message
(across processes, by marker files in "marker_dir") on messages whose
payload's trailing number is a multiple of N: a crash, as a Go handler's
panic is (an exception in Python is the message's error, not a crash).
"""

import os

import streamrun

cfg = {}


def init(info: streamrun.Info) -> None:
    if not info.config or not info.config.get("output"):
        raise ValueError('"output" is required')
    cfg.update(info.config)


def once(name: str) -> bool:
    try:
        fd = os.open(os.path.join(cfg["marker_dir"], name), os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
    except FileExistsError:
        return False
    os.close(fd)
    return True


def handle(m: streamrun.Message):
    p = m.payload
    if p.startswith(b"dead:"):
        return streamrun.DeadLetter("asked to")
    if p.startswith(b"boom:"):
        raise RuntimeError(f"boom on {p!r}")
    every = cfg.get("panic_every", 0)
    if every:
        head, _, num = p.rpartition(b"-")
        if head and num.isdigit() and int(num) % every == 0 and once(p.decode()):
            os._exit(3)
    if cfg.get("upper"):
        p = p.upper()
    if cfg.get("count"):
        n = m.state.get_json(0) + 1
        m.state.put_json(n)
        if p.startswith(b"undo:") and once(p.decode()):
            return streamrun.Retry("undo", after=0.01)
        p = f"{m.key}={n}".encode()
    return streamrun.Output(topic=cfg["output"], key=m.key, properties=m.properties, payload=p)


streamrun.serve(handle, init=init)
