#!/bin/sh
# Where a TCP echo server's CPU goes, per request, by kernel and runtime path.
#
#   bench/profile/profile.sh [servers] [conns] [size] [seconds]
#   bench/profile/profile.sh veloq-uring,veloq-epoll,stdlib 64 64 4
#
# Each server runs pinned to CPU 0 with tcpload on CPU 1 (loopback only,
# bounded). After a second of warmup, perf samples the server's CPU clock
# with call stacks for the window; each sample is put into one category by
# its stack (classify.awk), and the category's share of the server's CPU
# time is divided by the requests echoed in the same window. Needs perf
# (apt-get install linux-perf); software cpu-clock sampling works in VMs
# without hardware counters. KEEP=DIR keeps each server's perf.data there
# for `perf report -i DIR/SERVER.data`.
set -eu
cd "$(dirname "$0")/.."
SERVERS=${1:-veloq-uring,veloq-epoll,stdlib}
CONNS=${2:-64}
SIZE=${3:-64}
SECS=${4:-4}
command -v perf >/dev/null || { echo "profile.sh: perf not found (apt-get install linux-perf)" >&2; exit 1; }
BIN=bin/profile
mkdir -p $BIN
export GOWORK=off
go build -o $BIN/ ./cmd/tcpload ./peers/stdecho ./peers/netpollecho
(cd .. && go build -o bench/$BIN/echo-server ./cmd/echo-server)
TMP=$(mktemp -d)
PID=""
cleanup() { [ -n "$PID" ] && kill "$PID" 2>/dev/null; rm -rf "$TMP"; }
trap cleanup EXIT INT TERM
PORT=19411
echo "# server CPU per request, TCP echo, $CONNS connections, $SIZE B, ${SECS}s window"
echo
for s in $(echo "$SERVERS" | tr , ' '); do
	PORT=$((PORT + 1))
	case $s in
	veloq-uring) set -- $BIN/echo-server -loops 1 -backend uring -addr 127.0.0.1:$PORT ;;
	veloq-epoll) set -- $BIN/echo-server -loops 1 -backend epoll -addr 127.0.0.1:$PORT ;;
	stdlib) set -- $BIN/stdecho -addr 127.0.0.1:$PORT ;;
	netpoll) set -- $BIN/netpollecho -addr 127.0.0.1:$PORT ;;
	*) echo "profile.sh: unknown server $s" >&2; exit 2 ;;
	esac
	taskset -c 0 "$@" >"$TMP/$s.log" 2>&1 &
	PID=$!
	sleep 0.5
	taskset -c 1 $BIN/tcpload -addr 127.0.0.1:$PORT -conns "$CONNS" -size "$SIZE" \
		-warmup 1s -duration "${SECS}s" -json -server-pid $PID >"$TMP/$s.json" &
	LOAD=$!
	sleep 1
	perf record -q -e cpu-clock -F 4999 -g -p $PID -o "$TMP/$s.data" -- sleep "$SECS" >/dev/null 2>&1
	wait $LOAD
	kill $PID; wait $PID 2>/dev/null || true
	PID=""
	# CPU per request from /proc over the load window; the shares from the
	# perf samples taken inside it (both steady state).
	rps=$(sed -n 's/.*"rps":\([0-9.]*\).*/\1/p' "$TMP/$s.json")
	percpu=$(sed -n 's/.*"req_per_server_cpu_s":\([0-9.]*\).*/\1/p' "$TMP/$s.json")
	perf script -i "$TMP/$s.data" -F ip,sym,dso 2>/dev/null | awk -f profile/classify.awk >"$TMP/$s.cat"
	[ -n "${KEEP:-}" ] && mkdir -p "$KEEP" && cp "$TMP/$s.data" "$KEEP/"
	echo "## $s: $(printf '%.0f' "$rps") req/s, $(printf '%.0f' "$percpu") req per server CPU-s"
	echo
	echo "| path | share of server CPU | µs per request |"
	echo "|---|--:|--:|"
	sort -t"$(printf '\t')" -k2 -rn "$TMP/$s.cat" | awk -F'\t' -v percpu="$percpu" '
		{ printf "| %s | %.1f%% | %.2f |\n", $1, $2, $2 / 100 * 1e6 / percpu }
		END { printf "| **total** | 100%% | **%.2f** |\n", 1e6 / percpu }'
	echo
done
