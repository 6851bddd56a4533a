#!/usr/bin/env bash
# interop/java/run.sh: drive a broker with Apache Pulsar's own Java tools.
#
# The embedded broker must serve the official clients unchanged (docs/contract.md §5),
# and the same script run against Apache Pulsar standalone shows the
# expectations are Pulsar's, not ours. Exits non-zero on the first failure.
set -euo pipefail

usage() {
  cat <<'EOF'
Usage: interop/java/run.sh [SERVICE_URL [ADMIN_URL]]

Runs, against the broker at SERVICE_URL (admin REST at ADMIN_URL):
  1. pulsar-client produce 10 x "hello", then pulsar-client consume them from
     Earliest on a fresh subscription, checking all 10 arrive;
  2. pulsar-perf produce a bounded count, then pulsar-perf consume it from
     Earliest, checking every message sent is received.

Arguments default to $STREAMRUN_PULSAR_URL and $STREAMRUN_PULSAR_HTTP.
Environment:
  STREAMRUN_PULSAR_HOME   unpacked Apache Pulsar (scripts/pulsar home); required
  JAVA_INTEROP_PERF_MESSAGES  messages for the pulsar-perf step (default 2000)
  JAVA_INTEROP_TIMEOUT    seconds allowed per tool run (default 120)
  JAVA_INTEROP_KEEP       keep the work dir with every tool's output if set
EOF
}

case ${1:-} in -h | --help) usage; exit 0 ;; esac

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
# shellcheck source-path=SCRIPTDIR source=../../scripts/lib/perf.sh
source "$ROOT/scripts/lib/perf.sh"

SERVICE_URL=${1:-${STREAMRUN_PULSAR_URL:-}}
ADMIN_URL=${2:-${STREAMRUN_PULSAR_HTTP:-}}
: "${STREAMRUN_PULSAR_HOME:?set STREAMRUN_PULSAR_HOME to an unpacked Apache Pulsar (scripts/pulsar home)}"
[[ -n $SERVICE_URL ]] || { usage >&2; echo "run.sh: no service URL" >&2; exit 2; }
[[ -n $ADMIN_URL ]] || { usage >&2; echo "run.sh: no admin URL" >&2; exit 2; }
[[ -x $STREAMRUN_PULSAR_HOME/bin/pulsar-client ]] || { echo "run.sh: no bin/pulsar-client in $STREAMRUN_PULSAR_HOME" >&2; exit 2; }
PERF_MESSAGES=${JAVA_INTEROP_PERF_MESSAGES:-2000}
TOOL_TIMEOUT=${JAVA_INTEROP_TIMEOUT:-120}

WORK=$(mktemp -d "${TMPDIR:-/tmp}/streamrun-java-interop.XXXXXX")
cleanup() {
  if [[ -n ${JAVA_INTEROP_KEEP:-} ]]; then echo "run.sh: outputs kept in $WORK" >&2; else rm -rf "$WORK"; fi
}
trap cleanup EXIT

# The tools read conf/client.conf by default, which points at localhost:8080
# and :6650: a stray Apache Pulsar there would silently answer instead of
# the broker under test. Give them a conf naming only our broker.
cat >"$WORK/client.conf" <<EOF
webServiceUrl=$ADMIN_URL
brokerServiceUrl=$SERVICE_URL
EOF
export PULSAR_CLIENT_CONF=$WORK/client.conf
export PULSAR_LOG_DIR=$WORK PERF_LOG_DIR=$WORK
# The broker's JVM sizing must not leak into the tools' JVMs.
unset PULSAR_MEM PULSAR_GC PULSAR_EXTRA_OPTS

# Unique names: the broker may be shared with other suites, and a rerun
# must never read an earlier run's messages.
RUN_ID=$(date +%s)-$$-$RANDOM
TOPIC=persistent://public/default/streamrun-java-interop-$RUN_ID
PERF_TOPIC=persistent://public/default/streamrun-java-perf-$RUN_ID

step() { echo "== $*" >&2; }
fail() {
  local out=$1
  shift
  echo "FAIL: $*" >&2
  [[ -f $out ]] && { echo "--- last lines of $(basename "$out")" >&2; tail -n 40 "$out" >&2; }
  exit 1
}

client() { timeout "$TOOL_TIMEOUT" "$STREAMRUN_PULSAR_HOME/bin/pulsar-client" --url "$SERVICE_URL" "$@"; }

step "pulsar-client produce 10 x hello -> $TOPIC ($SERVICE_URL)"
out=$WORK/client-produce.out
client produce -m hello -n 10 "$TOPIC" >"$out" 2>&1 || fail "$out" "pulsar-client produce exited $?"
grep -q '10 messages successfully produced' "$out" || fail "$out" "pulsar-client did not report 10 messages produced"

step "pulsar-client consume 10 from Earliest"
out=$WORK/client-consume.out
client consume -s "sub-$RUN_ID" -n 10 -p Earliest "$TOPIC" >"$out" 2>&1 \
  || fail "$out" "pulsar-client consume exited $? (timeout ${TOOL_TIMEOUT}s?)"
got=$(grep -c 'content:hello$' "$out" || true)
[[ $got == 10 ]] || fail "$out" "consumed $got messages with content hello, want 10"
grep -q '10 messages successfully consumed' "$out" || fail "$out" "pulsar-client did not report 10 messages consumed"
echo "ok: 10 produced, 10 consumed" >&2

step "pulsar-perf produce $PERF_MESSAGES x 256 B -> $PERF_TOPIC"
out=$WORK/perf-produce.out
perf_run "$out" "$TOOL_TIMEOUT" produce -u "$SERVICE_URL" -au "$ADMIN_URL" \
  -m "$PERF_MESSAGES" -r "$PERF_UNLIMITED_RATE" -o 1000 -s 256 --warmup-time 0 "$PERF_TOPIC" \
  || fail "$out" "pulsar-perf produce did not finish"
sent=$(perf_count "$out")
# pulsar-perf overshoots -m (see scripts/lib/perf.sh), so at least N.
((${sent:-0} >= PERF_MESSAGES)) || fail "$out" "pulsar-perf sent ${sent:-0} messages, want at least $PERF_MESSAGES"
if grep -q 'Failed to publish' "$out"; then fail "$out" "pulsar-perf reported publish failures"; fi

step "pulsar-perf consume $sent from Earliest"
out=$WORK/perf-consume.out
perf_run "$out" "$TOOL_TIMEOUT" consume -u "$SERVICE_URL" -ss "perf-$RUN_ID" -sp Earliest \
  -m "$sent" -time "$TOOL_TIMEOUT" "$PERF_TOPIC" \
  || fail "$out" "pulsar-perf consume did not finish"
received=$(perf_count "$out")
[[ $received == "$sent" ]] || fail "$out" "pulsar-perf received ${received:-0} messages, want all $sent sent"
echo "ok: pulsar-perf sent $sent, received $received (publish p50 $(perf_latency "$WORK/perf-produce.out" med) ms, p99 $(perf_latency "$WORK/perf-produce.out" 99pct) ms)" >&2

echo "PASS: Java tools against $SERVICE_URL" >&2
