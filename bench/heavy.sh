#!/usr/bin/env bash
# Uneven CPU-heavy echo: one connection in ten is 100x heavier than the rest.
# Compares, on veloq's cmd/echo-server with -work N per message:
#
#   inline-1loop    the hashing runs on the loop (-loops 1)
#   inline-2loops   the same with two loops, so the server can use both CPUs
#   offload-steal   -loops 1 -offload -workers 2 (work-stealing pool)
#   offload-nosteal the same with -steal=false
#
# tcpload: 64 connections, one 64 B message in flight each (closed loop);
# echo-server -heavy-every 10 -heavy-factor 100 makes connections 10, 20, ...
# 60 heavy (and a second scenario, -heavy-every 32, only two). Reported per run: req/s, p50/p99/p99.9 round trip over all
# requests, the server's CPU over the window (utime+stime, all threads), and
# for the pool what it stole. Writes results/heavy-latest.md.
#
#   bench/heavy.sh [window-seconds] [repeats]
#
# CPU placement (the machine has 2 CPUs): the server may use both (taskset
# -c 0,1) and tcpload is pinned to CPU 1, so the load generator takes part
# of one CPU in every mode alike. The server runs with GOMAXPROCS=3 (env
# SERVER_PROCS): the loop's goroutine and the two workers then each have a
# processor of the Go scheduler, and the kernel shares the two CPUs among
# their threads; with GOMAXPROCS=2 the loop must wait for a worker to
# yield its processor before it can do any I/O (one trial, 3 s x 3: 31k
# against 35k req/s, p99 4.3 against 3.7 ms with stealing).
#
# Everything listens on 127.0.0.1; every process the script starts is
# stopped on exit (trap), and every load run is bounded (tcpload's own
# bound, and timeout(1) around it). Needs taskset, jq, timeout.
set -euo pipefail
cd "$(dirname "$0")"
DUR=${1:-5}
REPEATS=${2:-3}
CONNS=${CONNS:-64}
WORK=${WORK:-40}
# Scenarios: every K-th connection is heavy, for each K here. 10 is the
# uneven load asked for (6 heavy connections of 64, which keep both workers
# busy all the time); 32 (2 heavy connections) leaves the pool spare time,
# which is when stealing can help.
HEAVY_EVERY_LIST=${HEAVY_EVERY_LIST:-"10 32"}
HEAVY_FACTOR=${HEAVY_FACTOR:-100}
SERVER_PROCS=${SERVER_PROCS:-3}
MODES=${MODES:-"inline-1loop inline-2loops offload-steal offload-nosteal"}
PORT=19500
OUT=${OUT:-results/heavy-latest.md}

for tool in taskset jq timeout; do
	command -v $tool >/dev/null || { echo "heavy.sh: $tool not found" >&2; exit 1; }
done

TMP=$(mktemp -d /tmp/veloq-heavy-bench.XXXXXX)
SERVER_PID=""
cleanup() {
	if [ -n "$SERVER_PID" ]; then
		kill "$SERVER_PID" 2>/dev/null || true
		wait "$SERVER_PID" 2>/dev/null || true
	fi
	rm -rf "$TMP"
}
trap cleanup EXIT INT TERM

echo "heavy.sh: building" >&2
GOWORK=off go build -o "$TMP/tcpload" ./cmd/tcpload
(cd .. && go build -o "$TMP/echo-server" ./cmd/echo-server)

# wait_port PORT: until something accepts on 127.0.0.1:PORT (at most 5 s).
wait_port() {
	i=0
	while ! (exec 3<>/dev/tcp/127.0.0.1/$1) 2>/dev/null; do
		i=$((i + 1))
		[ $i -lt 100 ] || { echo "heavy.sh: nothing listens on port $1" >&2; return 1; }
		sleep 0.05
	done
}

mode_args() { # MODE HEAVY_EVERY
	common="-addr 127.0.0.1:$PORT -backend auto -work $WORK -heavy-every $2 -heavy-factor $HEAVY_FACTOR"
	case $1 in
	inline-1loop) echo "$common -loops 1" ;;
	inline-2loops) echo "$common -loops 2" ;;
	offload-steal) echo "$common -loops 1 -offload -workers 2 -steal=true" ;;
	offload-nosteal) echo "$common -loops 1 -offload -workers 2 -steal=false" ;;
	*) echo "heavy.sh: unknown mode $1" >&2; exit 1 ;;
	esac
}

LOAD_BEFORE=$(cut -d' ' -f1-3 /proc/loadavg)
ROWS="$TMP/rows"
: >"$ROWS"
for every in $HEAVY_EVERY_LIST; do
	for rep in $(seq "$REPEATS"); do
		for mode in $MODES; do
			echo "heavy.sh: heavy every $every, $mode, run $rep/$REPEATS, ${DUR}s" >&2
			# shellcheck disable=SC2046
			GOMAXPROCS=$SERVER_PROCS taskset -c 0,1 "$TMP/echo-server" $(mode_args "$mode" "$every") >"$TMP/server.log" 2>&1 &
			SERVER_PID=$!
			wait_port $PORT || { cat "$TMP/server.log" >&2; exit 1; }
			json=$(timeout $((DUR + 60)) taskset -c 1 "$TMP/tcpload" -addr 127.0.0.1:$PORT -conns "$CONNS" -size 64 \
				-duration "${DUR}s" -warmup 1s -json -server-pid "$SERVER_PID") || json='{}'
			kill -TERM "$SERVER_PID" 2>/dev/null || true
			wait "$SERVER_PID" 2>/dev/null || true
			SERVER_PID=""
			stolen=$(sed -n 's/.*pool: .* \([0-9]*\) executed, \([0-9]*\) stolen.*/\2 of \1/p' "$TMP/server.log")
			echo "$json" | jq -c --arg m "$mode" --arg r "$rep" --arg e "$every" --arg st "${stolen:--}" \
				'{every: ($e|tonumber), mode: $m, rep: ($r|tonumber), rps: (.rps // 0), p50: (.latency.p50_us // 0),
				  p99: (.latency.p99_us // 0), p999: (.latency.p999_us // 0), cpu: (.server_cpu_util // 0),
				  errors: (.errors // -1), stolen: $st}' >>"$ROWS"
		done
	done
done

{
	echo "# Uneven CPU-heavy echo: stealing on/off, inline vs offloaded"
	echo
	echo "\`bench/heavy.sh $DUR $REPEATS\` on $(date -u +%Y-%m-%d), $(uname -r), $(nproc) CPUs,"
	echo "load average before: $LOAD_BEFORE, after: $(cut -d' ' -f1-3 /proc/loadavg)."
	echo "The machine is shared with other work: expect noise; the runs are interleaved"
	echo "(every mode once, then again) so that a noisy stretch does not hit one mode only."
	echo
	echo "Load: tcpload, $CONNS connections, one 64 B message in flight each (closed loop), ${DUR} s window"
	echo "after 1 s warmup. Server: \`cmd/echo-server -work $WORK -heavy-every K -heavy-factor $HEAVY_FACTOR\`:"
	echo "every message costs $WORK rounds of FNV-1a over its 64 bytes (about 3.5 µs here), and on every"
	echo "K-th connection $HEAVY_FACTOR times that (about 0.35 ms). CPUs: the server may use both CPUs"
	echo "(taskset -c 0,1, GOMAXPROCS=$SERVER_PROCS), tcpload is pinned to CPU 1. Latency percentiles are"
	echo "over all requests, light and heavy. Modes: inline-1loop and inline-2loops hash on the loop(s);"
	echo "offload-steal and offload-nosteal use one loop and a pool of two workers, with stealing on or off."
	echo
	echo "How to read it: the load is a closed loop, so the server is always saturated and the median"
	echo "is about connections / req/s (Little's law); the modes differ in throughput and in the tail."
	echo "A loop runs each ready connection's message once per iteration, so inline hashing is fair"
	echo "round robin (a narrow distribution) at the price of stalling every connection of that loop"
	echo "for each heavy message; inline-2loops also depends on how SO_REUSEPORT spreads the heavy"
	echo "connections over the two loops (see its spread between runs). Offloaded, a light task can"
	echo "wait behind a heavy one on the worker it was placed on: that wait is what stealing removes."
	for every in $HEAVY_EVERY_LIST; do
		echo
		echo "## One connection in $every is heavy ($((CONNS / every)) of $CONNS)"
		echo
		echo "Medians over the $REPEATS runs of each mode:"
		echo
		echo "| mode | req/s | p50 µs | p99 µs | p99.9 µs | server CPU | stolen (of executed), last run |"
		echo "|---|--:|--:|--:|--:|--:|--:|"
		for mode in $MODES; do
			jq -rs --arg m "$mode" --argjson e "$every" 'def med: sort | .[(length-1)/2|floor];
				map(select(.mode == $m and .every == $e)) | select(length > 0) |
				"| \($m) | \(map(.rps)|med|floor) | \(map(.p50)|med|round) | \(map(.p99)|med|round) | \(map(.p999)|med|round) | \(map(.cpu)|med*100|round)% | \(.[-1].stolen) |"' "$ROWS"
		done
		echo
		echo "<details><summary>every run</summary>"
		echo
		echo "| mode | run | req/s | p50 µs | p99 µs | p99.9 µs | server CPU | errors |"
		echo "|---|--:|--:|--:|--:|--:|--:|--:|"
		jq -r --argjson e "$every" 'select(.every == $e) |
			"| \(.mode) | \(.rep) | \(.rps|floor) | \(.p50|round) | \(.p99|round) | \(.p999|round) | \(.cpu*100|round)% | \(.errors) |"' "$ROWS"
		echo
		echo "</details>"
	done
} >"$OUT"
cat "$OUT"
