"""Log records in the shape the host parses (slog's JSON handler)."""

import io
import json
import logging

from streamrun import _log


def test_records_are_slog_json_lines_with_their_attributes():
    buf = io.StringIO()
    _log.setup(buf, "DEBUG")
    try:
        logging.getLogger("shop").info("order %s routed", "o-1", extra={"topic": "big", "n": 3, "raw": b"\xff"})
        try:
            raise ValueError("bad")
        except ValueError:
            logging.getLogger().exception("failed")
        logging.getLogger().debug("fine detail")
    finally:
        _log.setup(io.StringIO(), "INFO")
    lines = buf.getvalue().splitlines()
    recs = [json.loads(l) for l in lines]
    assert recs[0]["level"] == "INFO" and recs[0]["msg"] == "order o-1 routed"
    assert recs[0]["topic"] == "big" and recs[0]["n"] == 3 and recs[0]["logger"] == "shop" and "time" in recs[0]
    assert recs[1]["level"] == "ERROR" and recs[1]["error"] == "ValueError: bad" and "Traceback" in recs[1]["stack"]
    assert recs[2]["level"] == "DEBUG"


def test_levels_map_both_ways():
    assert [_log.slog_level(l) for l in (10, 20, 30, 40, 50)] == ["DEBUG", "INFO", "WARN", "ERROR", "ERROR+4"]
    assert [_log.python_level(n) for n in ("DEBUG", "INFO", "WARN", "ERROR", "ERROR+4", "nonsense")] == \
        [10, 20, 30, 40, 50, 20]


def test_the_hosts_level_filters():
    buf = io.StringIO()
    _log.setup(buf, "WARN")
    try:
        logging.getLogger().info("dropped")
        logging.getLogger().warning("kept")
    finally:
        _log.setup(io.StringIO(), "INFO")
    assert [json.loads(l)["msg"] for l in buf.getvalue().splitlines()] == ["kept"]
