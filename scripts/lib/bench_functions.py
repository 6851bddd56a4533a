"""scripts/lib/bench_functions.py: the reading side of scripts/bench-functions.

  throughput-line WATCH.json KEY=VALUE...   one throughput phase as a JSON line
  latency-line LAT.json LOAD.json KEY=VALUE...  one latency phase as a JSON line
  report RESULTS.jsonl [--json OUT] KEY=VALUE...  the conditions and the tables
                                              (stdout), and the whole result as
                                              JSON (schema streamrun.bench-functions/v1)

WATCH.json, LAT.json and LOAD.json are `streamrun bench --output json`
results (docs/benchmarks/bench-command.md).
"""

import datetime
import json
import re
import statistics
import sys

SCHEMA = "streamrun.bench-functions/v1"

# The issue's targets, streamrun / the Function: the steady rate at least
# RATE_TARGET times, CPU and memory at most these.
RATE_TARGET = 1.3
CPU_TARGET = 0.3
RSS_TARGET = 0.25


def kv(args):
    out = {}
    for a in args:
        k, sep, v = a.partition("=")
        if not sep:
            sys.exit(f"bench_functions.py: want KEY=VALUE, got {a!r}")
        out[k] = v
    return out


def unix_seconds(ts):
    """Go's RFC 3339 time with nanoseconds to seconds since the epoch."""
    m = re.fullmatch(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d+))?(Z|[+-]\d\d:\d\d)", ts)
    if not m:
        raise ValueError(f"not an RFC 3339 time: {ts!r}")
    base, frac, tz = m.groups()
    t = datetime.datetime.strptime(base, "%Y-%m-%dT%H:%M:%S")
    off = 0
    if tz != "Z":
        sign = 1 if tz[0] == "+" else -1
        off = sign * (int(tz[1:3]) * 3600 + int(tz[4:6]) * 60)
    secs = t.replace(tzinfo=datetime.timezone.utc).timestamp() - off
    return secs + (int(frac) / 10 ** len(frac) if frac else 0)


def load(path):
    with open(path) as f:
        return json.load(f)


def throughput_line(watch, args):
    a = kv(args)
    w = load(watch)
    hz = float(a["hz"])
    count = int(a["count"])
    line = {
        "side": a["side"],
        "lang": a["lang"],
        "message_size": int(a["size"]),
        "instances": int(a["instances"]),
        "backlog": count,
        "round": int(a["round"]),
        "order": int(a["order"]),
        "outputs": w["messages"],
        "steady_msg_per_sec": round(w["steady_msg_per_sec"], 1),
        "start_to_last_output_seconds": round(unix_seconds(w["last_message_at"]) - float(a["start"]), 3),
        "cpu_seconds": round(int(a["cpu_ticks"]) / hz, 2),
        "cpu_us_per_message": round(int(a["cpu_ticks"]) / hz / count * 1e6, 2),
        "rss_bytes": int(a["rss_kb"]) * 1024,
        "processes": int(a["processes"]),
        "pulsar_cpu_seconds": round(int(a["pulsar_cpu_ticks"]) / hz, 2),
        "load_average_end": w["conditions"]["load_average_end"],
    }
    print(json.dumps(line))


def latency_line(lat, loadf, args):
    a = kv(args)
    w, ld = load(lat), load(loadf)
    line = {
        "side": a["side"],
        "lang": a["lang"],
        "rate": int(a["rate"]),
        "message_size": int(a["size"]),
        "batch_wait": a["batch_wait"] or None,
        "messages": w["messages"],
        "sent": ld["sent"],
        "latency_from": w["latency_from"],
        "p50_ms": w["latency_ms"]["p50"],
        "p99_ms": w["latency_ms"]["p99"],
        "max_ms": w["latency_ms"]["max"],
        "mean_ms": w["latency_ms"]["mean"],
        "load_average_end": w["conditions"]["load_average_end"],
    }
    print(json.dumps(line))


LABELS = {
    ("function", "java"): "Pulsar Function (Java)",
    ("function", "python"): "Pulsar Function (Python)",
    ("streamrun", "java"): "streamrun (Go handler)",
    ("streamrun", "python"): "streamrun (Python handler)",
}
PAIR = {"java": "Java Function / Go handler", "python": "Python Function / Python handler"}


def median(xs):
    return statistics.median(xs) if xs else None


def ratio(a, b):
    return round(a / b, 2) if a is not None and b else None


def summarize(rows):
    """Per language, size and instances: each side's medians over the
    rounds, and streamrun's ratios to the Function."""
    keys = sorted({(r["lang"], r["message_size"], r["instances"]) for r in rows},
                  key=lambda k: (k[0] != "java", k[1], k[2]))
    out = []
    for lang, size, inst in keys:
        sides = {}
        for side in ("function", "streamrun"):
            rs = [r for r in rows if (r["side"], r["lang"], r["message_size"], r["instances"]) == (side, lang, size, inst)]
            if not rs:
                continue
            sides[side] = {
                "rounds": len(rs),
                "steady_msg_per_sec": median([r["steady_msg_per_sec"] for r in rs]),
                "start_to_last_output_seconds": median([r["start_to_last_output_seconds"] for r in rs]),
                "cpu_seconds": median([r["cpu_seconds"] for r in rs]),
                "rss_bytes": median([r["rss_bytes"] for r in rs]),
                "pulsar_cpu_seconds": median([r["pulsar_cpu_seconds"] for r in rs]),
            }
        s = {"lang": lang, "message_size": size, "instances": inst, **sides}
        if len(sides) == 2:
            f, o = sides["function"], sides["streamrun"]
            s["ratios"] = {
                "steady_rate": ratio(o["steady_msg_per_sec"], f["steady_msg_per_sec"]),
                "start_to_last_output": ratio(o["start_to_last_output_seconds"], f["start_to_last_output_seconds"]),
                "cpu": ratio(o["cpu_seconds"], f["cpu_seconds"]),
                "rss": ratio(o["rss_bytes"], f["rss_bytes"]),
            }
            r = s["ratios"]
            s["targets_met"] = {
                "steady_rate": r["steady_rate"] is not None and r["steady_rate"] >= RATE_TARGET,
                "cpu": r["cpu"] is not None and r["cpu"] <= CPU_TARGET,
                "rss": r["rss"] is not None and r["rss"] <= RSS_TARGET,
            }
        out.append(s)
    return out


def fmt_int(v):
    return "n/a" if v is None else f"{v:,.0f}"


def fmt(v, d=2):
    return "n/a" if v is None else f"{v:.{d}f}"


def mib(v):
    return "n/a" if v is None else f"{v / 2**20:.0f}"


def bold(text, met):
    return f"**{text}**" if met else text


def report(path, args):
    jpath = None
    if args and args[0] == "--json":
        jpath, args = args[1], args[2:]
    c = kv(args)
    rows = []
    with open(path) as f:
        for line in f:
            if line.strip():
                rows.append(json.loads(line))
    tput = [r for r in rows if "steady_msg_per_sec" in r]
    lat = [r for r in rows if "p50_ms" in r]
    summary = summarize(tput)

    start = c.get("standalone_start_seconds", "null")
    conditions = {
        "started_at": c["started_at"],
        "load_average_before": [float(x) for x in c["load_before"].split()],
        "load_average_after": [float(x) for x in c["load_after"].split()],
        "cores": int(c["cores"]),
        "cpu_model": c["cpu_model"],
        "memory_gib": float(c["memory_gib"]),
        "kernel": c["kernel"],
        "go_version": c["go_version"],
        "java_version": c["java_version"],
        "python_version": c["python_version"],
        "python_client": c["python_client"] or None,
        "streamrun_version": c["streamrun_version"],
        "pulsar": c["pulsar_version"],
        "pulsar_url": c["pulsar_url"],
        "pulsar_conf": c["pulsar_conf"],
        "journal_sync_data": c["journal_sync"] == "true",
        "pulsar_jvm_memory": c["pulsar_mem"],
        "standalone_start_seconds": None if start == "null" else int(start),
        "page_cache": c["page_cache"],
        "backlog": {"java": int(c["count"]), "python": int(c["python_count"])},
        "message_sizes": [int(x) for x in c["sizes"].split()],
        "instances": [int(x) for x in c["instances"].split()],
        "langs": c["langs"].split(),
        "rounds": int(c["rounds"]),
        "function": {
            "runtime": "process",
            "processing_guarantees": "ATLEAST_ONCE",
            "subscription_position": "Earliest",
            "output_compression": "NONE",
            "java_class": "streamrun.bench.UppercaseFunction (byte[] in and out)",
            "python_class": "uppercase_function.UppercaseFunction (default serde)",
        },
        "streamrun": {
            "subscription_type": "shared",
            "initial_position": "earliest",
            "batch_size": 100,
            "batch_wait": "10ms",
            "go_handler": "examples/plugins/uppercase",
            "python_handler": "examples/plugins/python/uppercase",
        },
        "latency": {
            "rates": [int(x) for x in c["latency_rates"].split()],
            "seconds": int(c["latency_seconds"]),
            "message_size": int(c["latency_size"]),
            "batch_waits": c["batch_waits"].split(),
            "load": "streamrun bench produce --no-batching --rate RATE",
        },
    }
    result = {
        "schema": SCHEMA,
        "conditions": conditions,
        "throughput": tput,
        "summary": summary,
        "latency": lat,
        "complete": c["failed"] == "0",
    }
    if jpath:
        with open(jpath, "w") as f:
            json.dump(result, f, indent=2)
            f.write("\n")

    w = sys.stdout.write
    w(f"Conditions: {conditions['started_at']}, {conditions['cores']} cores ({conditions['cpu_model']}), "
      f"{conditions['memory_gib']} GiB, kernel {conditions['kernel']}; load average before "
      f"{c['load_before']}, after {c['load_after']}\n")
    w(f"- Apache {conditions['pulsar']} standalone with the functions worker ({conditions['pulsar_url']}, "
      f"{conditions['pulsar_conf']}: journalSyncData={c['journal_sync']}; JVM {conditions['pulsar_jvm_memory']}"
      + (f"; started in {start} s" if start != "null" else "; already running") + f"); {conditions['java_version']}; "
      f"{conditions['python_version']}" + (f", pulsar-client {c['python_client']}" if c["python_client"] else "") + "\n")
    w("- Function: process runtime, ATLEAST_ONCE, subscription position Earliest, output compression NONE, "
      "the worker's other defaults\n")
    w(f"- streamrun: {conditions['streamrun_version']}, {conditions['go_version']}; Shared subscription from "
      "earliest, batch_size 100, batch_wait 10ms\n")
    w(f"- Backlog: {int(c['count']):,} messages (Java, Go), {int(c['python_count']):,} (Python); "
      f"rounds: {c['rounds']}; {conditions['page_cache']}\n")

    if summary:
        w("\nThroughput, streamrun / the Function (each side's median over the rounds in brackets: "
          "streamrun / Function). Rate: outputs between the 10 % and the 90 % ones a second; "
          "to the last output: from the start, start included; CPU: the processing processes "
          "(the Function's instance processes; streamrun's host and handlers) since they started; "
          "RSS: their peak RSS together; Pulsar CPU: its JVM's from the start to the last output.\n\n")
        w("| pair | size | instances | steady rate | to the last output | CPU | peak RSS | Pulsar CPU s |\n")
        w("|---|---:|---:|---:|---:|---:|---:|---:|\n")
        for s in summary:
            f, o, r = s.get("function"), s.get("streamrun"), s.get("ratios")
            if not (f and o and r):
                continue
            m = s["targets_met"]
            w(f"| {PAIR[s['lang']]} | {s['message_size']} B | {s['instances']} "
              f"| {bold(fmt(r['steady_rate']) + 'x', m['steady_rate'])} ({fmt_int(o['steady_msg_per_sec'])} / {fmt_int(f['steady_msg_per_sec'])} msg/s) "
              f"| {fmt(r['start_to_last_output'])}x ({fmt(o['start_to_last_output_seconds'], 1)} / {fmt(f['start_to_last_output_seconds'], 1)} s) "
              f"| {bold(fmt(r['cpu']) + 'x', m['cpu'])} ({fmt(o['cpu_seconds'])} / {fmt(f['cpu_seconds'])} s) "
              f"| {bold(fmt(r['rss']) + 'x', m['rss'])} ({mib(o['rss_bytes'])} / {mib(f['rss_bytes'])} MiB) "
              f"| {fmt(o['pulsar_cpu_seconds'])} / {fmt(f['pulsar_cpu_seconds'])} |\n")
        w(f"\nBold: the target met (rate at least {RATE_TARGET}x, CPU at most {CPU_TARGET}x, "
          f"memory at most {RSS_TARGET}x).\n")
        w("\nEach phase:\n\n| round | order | side | size | instances | outputs | steady msg/s | to the last output s "
          "| CPU s | CPU µs/msg | peak RSS MiB | processes | Pulsar CPU s |\n|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
        for r in tput:
            w(f"| {r['round']} | {r['order']} | {LABELS[(r['side'], r['lang'])]} | {r['message_size']} | {r['instances']} "
              f"| {r['outputs']:,} | {fmt_int(r['steady_msg_per_sec'])} | {fmt(r['start_to_last_output_seconds'])} "
              f"| {fmt(r['cpu_seconds'])} | {fmt(r['cpu_us_per_message'])} | {mib(r['rss_bytes'])} | {r['processes']} "
              f"| {fmt(r['pulsar_cpu_seconds'])} |\n")
    if lat:
        w(f"\nLatency, publish time to the output's arrival, one instance, {c['latency_size']} B, "
          f"{c['latency_seconds']} s at each rate after a warm-up (load: streamrun bench produce --no-batching):\n\n")
        w("| side | rate msg/s | batch_wait | p50 ms | p99 ms | max ms | outputs |\n|---|---:|---|---:|---:|---:|---:|\n")
        for r in lat:
            w(f"| {LABELS[(r['side'], r['lang'])]} | {r['rate']:,} | {r['batch_wait'] or '—'} | {fmt(r['p50_ms'])} "
              f"| {fmt(r['p99_ms'])} | {fmt(r['max_ms'])} | {r['messages']:,} |\n")
    if c["failed"] != "0":
        w("\nSome phases did not see all their outputs (see stderr); they are not in the tables.\n")


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    cmd, rest = sys.argv[1], sys.argv[2:]
    if cmd == "throughput-line":
        throughput_line(rest[0], rest[1:])
    elif cmd == "latency-line":
        latency_line(rest[0], rest[1], rest[2:])
    elif cmd == "report":
        report(rest[0], rest[1:])
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
