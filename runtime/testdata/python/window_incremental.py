"""The Python twin of runtime's Go incremental window handler
(window_handler_test.go, newIncrementalHandler), on
streamrun.incremental_window: the accumulator counts the messages and
sums a hash of their payloads (FNV-1a, 32 bits, as messageSum); each fire
outputs windowResult's key, start, end, fire, count and sum. With
"crash", its interpreter dies the first time (across processes, by
marker files in "marker_dir") it adds to each key's window whose start in
seconds is 1 more than a multiple of 3, and fires one at a multiple of 3,
MAX_CRASHES times of each kind at most (as the Go handler's maxCrashes)."""

import glob
import json
import os

import streamrun

cfg = {}

MAX_CRASHES = 12


def init(info: streamrun.Info) -> None:
    cfg.update(info.config or {})


def crash_once(name):
    kind = name.split("-", 1)[0]
    if len(glob.glob(os.path.join(cfg["marker_dir"], kind + "-*"))) >= MAX_CRASHES:
        return
    try:
        fd = os.open(os.path.join(cfg["marker_dir"], name), os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        os.close(fd)
        os._exit(3)
    except FileExistsError:
        pass


def fnv32a(b):
    h = 0x811C9DC5
    for x in b:
        h = ((h ^ x) * 0x01000193) & 0xFFFFFFFF
    return h


def add(w):
    if cfg.get("crash") and (w.start_ms // 1000) % 3 == 1:
        crash_once(f"add-{w.key}-{w.start_ms}")
    a = json.loads(w.accumulator) if w.accumulator else {"count": 0, "sum": 0}
    for m in w.messages:
        a["count"] += 1
        a["sum"] += fnv32a(m.payload)
    return json.dumps(a).encode()


def fire(w):
    if cfg.get("crash") and (w.start_ms // 1000) % 3 == 0 and w.fire == 1:
        crash_once(f"fire-{w.key}-{w.start_ms}")
    a = json.loads(w.accumulator)
    r = {"key": w.key, "start": w.start_ms, "end": w.end_ms, "fire": w.fire, "count": a["count"], "sum": a["sum"]}
    return streamrun.Output(topic=cfg["output"], key=w.key, payload=json.dumps(r).encode())


streamrun.serve(streamrun.incremental_window(add=add, fire=fire), init=init)
