# shellcheck shell=bash
# scripts/lib/perf.sh: run Apache Pulsar's pulsar-perf and read its summary.
# Sourced by scripts/bench-perf and interop/java/run.sh; needs
# STREAMRUN_PULSAR_HOME (an unpacked Apache Pulsar) in the environment.
#
# Quirks of pulsar-perf 4.0 that this file exists for:
# - It exits 0 even when every send failed, so callers must check counts.
# - `produce -r 0` is rejected ("rate must be positive"), so "unlimited"
#   has to be spelt as a huge rate.
# - After `produce` reaches its -time/-m limit it prints DONE, then its
#   main thread sleeps out a 10 s reporting tick before the shutdown hook
#   prints the aggregated stats; and the aggregated msg/s divides by that
#   padded time. We send TERM once DONE is printed (the hook still runs) and
#   compute rates ourselves from the log's timestamps.
# - `produce -m N` overshoots: the broker really receives somewhat more than
#   N. Check "everything sent was received", not "exactly N".
# - Latency is not recorded during --warmup-time (default 1 s).

# shellcheck disable=SC2034 # used by the scripts that source this file
PERF_UNLIMITED_RATE=100000000

# fresh_pages: the state of the machine's memory every produce phase starts
# from, whichever target ran before. Dirty pages are written out (sync), so
# no target pays for the writeback of what the one before it wrote; and with
# PERF_DROP_CACHES=1 the clean page cache is dropped too, so every target
# writes into memory just freed. On a virtual machine whose balloon reports
# free memory back to its host, a page free for long costs a fault on the
# host when it is next written, and a target that writes after another kept
# its GBs cached (Apache Pulsar standalone: 2.5 of 2.7 GB a minute after its
# topic was deleted) pays it for every page it writes (docs/benchmarks/design.md,
# "Page cache dropped before every produce phase").
fresh_pages() {
  sync
  if [[ ${PERF_DROP_CACHES:-0} == 1 ]]; then
    echo 1 >/proc/sys/vm/drop_caches
  fi
}

# drop_caches_setting KEEP: PERF_DROP_CACHES for a run, 1 unless KEEP is set
# or this process cannot drop the page cache (not root, or /proc/sys
# read-only in a container): it tries once.
drop_caches_setting() {
  if [[ -n $1 ]]; then
    echo 0
  elif (echo 1 >/proc/sys/vm/drop_caches) 2>/dev/null; then
    echo 1
  else
    echo "page cache: cannot write /proc/sys/vm/drop_caches here (not root?), so it is kept between phases" >&2
    echo 0
  fi
}

# drop_caches_label: how produce phases start, for a run's conditions.
drop_caches_label() {
  if [[ ${PERF_DROP_CACHES:-0} == 1 ]]; then
    echo "before every produce phase: sync, then the page cache dropped (echo 1 > /proc/sys/vm/drop_caches)"
  else
    echo "before every produce phase: sync; the page cache kept"
  fi
}

# perf_run OUT TIMEOUT ARGS...: run `pulsar-perf ARGS...` with output in OUT,
# cut the post-DONE sleep short, and give up (non-zero) after TIMEOUT s.
#
# With PERF_START_RE set (the log line that starts the measured window,
# e.g. 'Created [0-9]+ producers'), the phase's CPU is sampled from /proc
# (phase_sample) into OUT.start when that line appears and into OUT.end at
# each poll (every 0.5 s) until DONE is logged, so the window ends within
# 0.5 s of DONE and before any thread ends; PERF_BROKER_PID names the broker
# process to sample with it. One jstack of pulsar-perf, half a second into the
# window, goes to OUT.jstack: it names the threads (/proc keeps 15
# characters, and pulsar-client-io and pulsar-client-internal look alike).
# phase_cpu OUT reads the three files.
perf_run() {
  local out=$1 limit=$2 pid start=$SECONDS done_at= started= ended= named= dt
  shift 2
  rm -f "$out.start" "$out.end" "$out.jstack"
  # pulsar-perf's logs go to the console (captured in OUT); keep any file
  # it writes out of the shared tarball.
  PULSAR_LOG_DIR=${PERF_LOG_DIR:-${TMPDIR:-/tmp}} \
    "$STREAMRUN_PULSAR_HOME/bin/pulsar-perf" "$@" >"$out" 2>&1 </dev/null &
  pid=$!
  while kill -0 "$pid" 2>/dev/null; do
    if [[ -n ${PERF_START_RE:-} && -z $ended ]]; then
      if [[ -z $started ]] && grep -qsE -- "$PERF_START_RE" "$out"; then
        phase_sample "$pid" "${PERF_BROKER_PID:-}" >"$out.start" && started=$(now_s)
      elif [[ -n $started ]] && grep -qs -- '- DONE' "$out"; then
        ended=1
      elif [[ -n $started ]]; then
        # The last sample before DONE ends the window: `consume -m` exits
        # at DONE, and a sample of its threads while they end is not one.
        # Kept only if pulsar-perf was alive for the whole sample.
        phase_sample "$pid" "${PERF_BROKER_PID:-}" >"$out.tmp" && mv "$out.tmp" "$out.end"
        dt=$(awk -v a="$started" -v b="$(now_s)" 'BEGIN { print (b - a >= 0.5) ? 1 : 0 }')
        if [[ -z $named && $dt == 1 ]]; then
          named=1
          perf_thread_names "$pid" >"$out.jstack"
        fi
      fi
    fi
    if [[ -z $done_at ]] && grep -qs -- '- DONE' "$out"; then
      done_at=$SECONDS
    fi
    # Give it time to close its client (TERM earlier interrupts the close),
    # then skip the idle tick.
    if [[ -n $done_at ]] && ((SECONDS - done_at >= 3)); then
      kill -TERM "$pid" 2>/dev/null || true
      done_at=$((SECONDS + 3600))
    fi
    if ((SECONDS - start >= limit)); then
      echo "pulsar-perf $1: no result after ${limit}s, stopping it" >&2
      kill -TERM "$pid" 2>/dev/null || true
      sleep 5
      kill -KILL "$pid" 2>/dev/null || true
      wait "$pid" 2>/dev/null || true
      return 1
    fi
    # Watch closely for the start line; then sample every 0.5 s (a sample
    # of pulsar-perf's ~45 threads costs about 20 ms of CPU).
    if [[ -n ${PERF_START_RE:-} && -z $started ]]; then sleep 0.2; else sleep 0.5; fi
  done
  wait "$pid" 2>/dev/null || true
  rm -f "$out.tmp"
  grep -qs 'Aggregated throughput stats' "$out"
}

# perf_ts OUT REGEX: seconds-of-day (with ms) of the first log line matching
# REGEX, from pulsar-perf's "2026-01-02T03:04:05,678+0000" prefix.
perf_ts() {
  grep -m1 -E -- "$2" "$1" | awk '{
    split(substr($1, 12, 12), t, /[:,]/)
    printf "%.3f\n", t[1] * 3600 + t[2] * 60 + t[3] + t[4] / 1000
  }'
}

# perf_window OUT START_REGEX END_REGEX: seconds between two log lines
# (midnight-safe).
perf_window() {
  local a b
  a=$(perf_ts "$1" "$2")
  b=$(perf_ts "$1" "$3")
  [[ -n $a && -n $b ]] || return 1
  awk -v a="$a" -v b="$b" 'BEGIN { d = b - a; if (d < 0) d += 86400; printf "%.3f\n", d }'
}

# perf_count OUT: messages the run completed ("N records sent/received").
perf_count() {
  grep -m1 -oE 'Aggregated throughput stats --- [0-9]+ records (sent|received)' "$1" \
    | grep -oE '[0-9]+' | head -1
}

# perf_latency OUT FIELD: publish latency (ms) from the aggregated latency
# line; FIELD is med, 95pct, 99pct, 99.9pct, mean or Max.
perf_latency() {
  grep -m1 'Aggregated latency stats' "$1" \
    | grep -oE -- "(^| )$2: +[0-9.]+" | grep -oE '[0-9.]+$'
}

# perf_rate COUNT SECONDS: msg/s, rounded.
perf_rate() {
  awk -v n="$1" -v s="$2" 'BEGIN { if (s <= 0) { print "n/a"; exit } printf "%.0f\n", n / s }'
}

# --- broker CPU accounting (Linux /proc) ---------------------------------

# cpu_ticks PID: utime+stime of a process, in clock ticks (fields 14 and 15
# of /proc/PID/stat, counted after the ")" that ends the command name,
# which may itself hold spaces).
cpu_ticks() {
  local stat
  { read -r stat <"/proc/$1/stat"; } 2>/dev/null || return 1
  stat=${stat##*) }
  awk '{ print $12 + $13 }' <<<"$stat"
}

# now_s: wall clock in seconds with ns.
now_s() { date +%s.%N; }

# listen_pid PORT: pid of the process listening on 127.0.0.1:PORT or any
# address (needs ss; root sees every process's pid).
listen_pid() {
  ss -Htlnp "sport = :$1" 2>/dev/null | grep -oE 'pid=[0-9]+' | head -1 | cut -d= -f2
}

# cpu_per_million TICKS WALL IDLE_PER_S MSGS: broker CPU seconds per million
# messages: the ticks spent over WALL seconds, less the idle cost
# (IDLE_PER_S CPU seconds per wall second) over the same wall time.
cpu_per_million() {
  awk -v t="$1" -v w="$2" -v i="$3" -v n="$4" -v hz="$(getconf CLK_TCK)" 'BEGIN {
    if (n <= 0) { print "n/a"; exit }
    c = t / hz - i * w
    if (c < 0) c = 0
    printf "%.2f\n", c / n * 1e6
  }'
}

# --- where the CPU goes during a pulsar-perf phase (Linux /proc) ----------

# phase_sample PERF_PID [BROKER_PID]: one snapshot, as lines
#   time S             wall clock
#   idle TICKS         the machine's idle+iowait ticks, all CPUs (/proc/stat)
#   perf TICKS         pulsar-perf's utime+stime
#   broker TICKS       the broker's (when given)
#   task TID TICKS COMM  each pulsar-perf thread's utime+stime and its
#                        name as /proc keeps it (15 characters)
# Fails (non-zero) when pulsar-perf is gone, so a half-taken snapshot is
# never used.
phase_sample() {
  local pid=$1 broker=${2:-} f stat t comm fields
  echo "time $(now_s)"
  awk '/^cpu / { print "idle " $5 + $6; exit }' /proc/stat
  t=$(cpu_ticks "$pid") || return 1
  echo "perf $t"
  if [[ -n $broker ]]; then
    t=$(cpu_ticks "$broker") || return 1
    echo "broker $t"
  fi
  for f in /proc/"$pid"/task/*/stat; do
    # A thread may end between the glob and the read. (Not $(<file): in
    # bash 5.2 its failure ends the script under set -e even after ||.)
    { read -r stat <"$f"; } 2>/dev/null || continue
    f=${f%/stat}
    comm=${stat#*(}
    comm=${comm%)*}
    # No process per thread here: this runs five times a second beside the
    # benchmark. Fields 14 and 15 are the 12th and 13th after the ")".
    read -r -a fields <<<"${stat##*) }"
    echo "task ${f##*/} $((fields[11] + fields[12])) ${comm// /_}"
  done
  kill -0 "$pid" 2>/dev/null
}

# perf_thread_names PID: "TID NAME" for each Java thread of PID, from jstack
# (its nid is the Linux tid in hex); spaces in names become "_".
perf_thread_names() {
  local line name nid
  timeout 20 jstack "$1" 2>/dev/null | while IFS= read -r line; do
    [[ $line == '"'*nid=0x* ]] || continue
    name=${line#\"}
    name=${name%%\"*}
    nid=${line##*nid=0x}
    nid=${nid%% *}
    echo "$((16#$nid)) ${name// /_}"
  done
}

# phase_cpu OUT: cores used over the window between OUT.start and OUT.end
# (perf_run), as one line
#   WALL PERF BROKER IDLE THREADS
# PERF is pulsar-perf's JVM, BROKER the broker's process, IDLE the machine's
# idle cores (of nproc); THREADS the three busiest pulsar-perf threads as
# name=cores,... (names from OUT.jstack, perf_thread_names; else the 15
# characters /proc keeps).
# All "n/a" when the window was not sampled.
phase_cpu() {
  local out=$1 na="n/a n/a n/a n/a n/a"
  [[ -s $out.start && -s $out.end ]] || { echo "$na"; return; }
  [[ -e $out.jstack ]] || : >"$out.jstack"
  awk -v hz="$(getconf CLK_TCK)" -v na="$na" '
    FILENAME ~ /\.jstack$/ { name[$1] = $2; next }
    FILENAME ~ /\.start$/ { if ($1 == "task") a[$2] = $3; else s[$1] = $2; next }
    { if ($1 == "task") { b[$2] = $3; comm[$2] = $4 } else e[$1] = $2 }
    END {
      w = e["time"] - s["time"]
      if (w <= 0) { print na; exit }
      for (t in b) d[t] = b[t] - ((t in a) ? a[t] : 0)
      top = ""
      for (k = 0; k < 3; k++) {
        best = ""
        for (t in d) if (best == "" || d[t] > d[best]) best = t
        if (best == "") break
        top = top (k ? "," : "") ((best in name) ? name[best] : comm[best]) "=" sprintf("%.2f", d[best] / hz / w)
        delete d[best]
      }
      br = ("broker" in e) ? sprintf("%.2f", (e["broker"] - s["broker"]) / hz / w) : "n/a"
      printf "%.1f %.2f %s %.2f %s\n", w, (e["perf"] - s["perf"]) / hz / w, br, (e["idle"] - s["idle"]) / hz / w, top
    }' "$out.jstack" "$out.start" "$out.end" 2>/dev/null || echo "$na"
}
