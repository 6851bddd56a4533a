"""The Python twin of runtime's Go window handler (window_handler_test.go):
for each window, one output to "output", keyed by the window's key, whose
payload is the window as windowResult says (key, start, end, fire, the
payloads and times of its messages). With "crash", its interpreter dies
(a crash, as a Go panic) the first time (across processes, by marker
files in "marker_dir") it is handed a key's window whose start, in whole
seconds, is a multiple of 3, once a key in each minute of starts, as the
Go handler does (window_handler_test.go says why)."""

import json
import os

import streamrun

cfg = {}


def init(info: streamrun.Info) -> None:
    cfg.update(info.config or {})


def handle(m: streamrun.Message):
    w = m.window
    if w is None:
        return streamrun.DeadLetter("not a window")
    if cfg.get("crash") and (w.start_ms // 1000) % 3 == 0 and w.fire == 1:
        try:
            fd = os.open(os.path.join(cfg["marker_dir"], f"crash-{w.key}-{w.start_ms // 60000}"),
                         os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
            os.close(fd)
            os._exit(3)
        except FileExistsError:
            pass
    r = {"key": w.key, "start": w.start_ms, "end": w.end_ms, "fire": w.fire,
         "payloads": [x.payload.decode() for x in w.messages], "times": [x.time_ms for x in w.messages],
         "replaces": w.replaces_ms}
    return streamrun.Output(topic=cfg["output"], key=w.key, payload=json.dumps(r).encode())


streamrun.serve(handle, init=init)
