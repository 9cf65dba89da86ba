#!/usr/bin/env bash
# TCP proxy benchmark: tcpload (CPU 1) → proxy (CPU 0) → echo-server
# (CPU 1), 64 connections, 64 B and 64 KiB messages, one message in flight
# per connection. The proxies, each started fresh and pinned to CPU 0:
#
#   veloq-copy    examples/tcp-proxy -loops 1 -backend uring -splice off
#   veloq-splice  examples/tcp-proxy -loops 1 -backend uring -splice always
#   veloq-large   examples/tcp-proxy -loops 1 -backend uring -splice large
#                 (a direction switches to splice after a large read)
#   veloq-epoll   examples/tcp-proxy -loops 1 -backend epoll -splice off
#   haproxy       mode tcp, nbthread 1 (no splice, as configured by default)
#   nginx         stream module, one worker, master_process off, proxy_pass
#   cfloor        bench/floor/epoll_relay.c: the C floor, a minimal epoll
#                 relay copying through user space (no splice)
#   cfloor-uring  bench/floor/uring_relay.c: the same relay on io_uring
#                 (multishot recv into a buffer ring, send from it; liburing,
#                 skipped with a message where it does not build)
#   cfloor-uring-batch  uring_relay.c -batch-wait 20: with veloq-copy's
#                 default batched waits (20 µs min-wait, Linux 6.12+)
#   cfloor-uring-single uring_relay.c -recv single: single-shot recv into
#                 each side's own buffer instead of multishot (4 SQEs/request)
#
#   veloq-nobatch examples/tcp-proxy -loops 1 -backend uring -splice off -batch-wait -1us
#                 (veloq-copy with io_uring's batched waits off, for comparison)
#
# Reported per proxy and size: req/s, p50/p99 round trip, the proxy's CPU
# seconds over the measured window (utime+stime from /proc, all threads,
# read by tcpload at the window's edges), requests per proxy CPU-second,
# and its RSS. ROUNDS (default 3) rounds run every proxy in turn, in an
# order rotated each round; the row shown is the round with the median
# requests per proxy CPU-second.
#
#   [ROUNDS=n] bench/proxy.sh [window-seconds] [connections]
#
# Everything listens on 127.0.0.1; every process the script starts is
# stopped on exit (trap), and every load run is bounded (tcpload's own
# bound, and timeout(1) around it). Needs haproxy, nginx with the stream
# module (apt-get install haproxy nginx libnginx-mod-stream), taskset, jq.
set -euo pipefail
cd "$(dirname "$0")"
DUR=${1:-5}
CONNS=${2:-64}
SIZES=${SIZES:-"64 65536"}
PROXIES=${PROXIES:-"veloq-copy veloq-nobatch veloq-splice veloq-epoll haproxy nginx"}
BACKEND_PORT=19400
OUT=results/proxy-latest.md

for tool in haproxy nginx taskset jq timeout; do
	command -v $tool >/dev/null || PATH=$PATH:/usr/sbin command -v $tool >/dev/null || {
		echo "proxy.sh: $tool not found (apt-get install haproxy nginx libnginx-mod-stream jq)" >&2
		exit 1
	}
done
PATH=$PATH:/usr/sbin
STREAM_MOD=/usr/lib/nginx/modules/ngx_stream_module.so
[ -f $STREAM_MOD ] || { echo "proxy.sh: $STREAM_MOD missing (apt-get install libnginx-mod-stream)" >&2; exit 1; }

TMP=$(mktemp -d /tmp/veloq-proxy-bench.XXXXXX)
PIDS=""
cleanup() {
	for p in $PIDS; do kill "$p" 2>/dev/null || true; done
	for p in $PIDS; do wait "$p" 2>/dev/null || true; done
	rm -rf "$TMP"
}
trap cleanup EXIT INT TERM

mkdir -p bin results
echo "proxy.sh: building" >&2
GOWORK=off go build -o bin/tcpload ./cmd/tcpload
(cd .. && go build -o bench/bin/echo-server ./cmd/echo-server && go build -o bench/bin/tcp-proxy ./examples/tcp-proxy)
if [[ " $PROXIES " == *" cfloor "* ]]; then
	gcc -O2 -o bin/epoll_relay floor/epoll_relay.c
fi
if [[ " $PROXIES " == *" cfloor-uring"* ]] && ! gcc -O2 -o bin/uring_relay floor/uring_relay.c -luring 2>"$TMP/uring-build.log"; then
	echo "proxy.sh: skipping cfloor-uring*: gcc floor/uring_relay.c -luring failed (apt-get install liburing-dev): $(tail -1 "$TMP/uring-build.log")" >&2
	PROXIES=$(for p in $PROXIES; do case $p in cfloor-uring*) ;; *) printf '%s ' "$p" ;; esac; done)
fi

# wait_port PORT: until something accepts on 127.0.0.1:PORT (at most 5 s).
wait_port() {
	i=0
	while ! (exec 3<>/dev/tcp/127.0.0.1/$1) 2>/dev/null; do
		i=$((i + 1))
		[ $i -lt 100 ] || { echo "proxy.sh: nothing listens on port $1" >&2; return 1; }
		sleep 0.05
	done
}
# The echo backend: one loop, on CPU 1 with the load generator.
taskset -c 1 bin/echo-server -addr 127.0.0.1:$BACKEND_PORT -loops 1 >"$TMP/echo.log" 2>&1 &
ECHO_PID=$!
PIDS="$PIDS $ECHO_PID"
wait_port $BACKEND_PORT

cat >"$TMP/haproxy.cfg" <<EOF
global
	nbthread 1
	maxconn 2000
defaults
	mode tcp
	timeout connect 5s
	timeout client 60s
	timeout server 60s
frontend fe
	bind 127.0.0.1:19411
	default_backend be
backend be
	server echo 127.0.0.1:$BACKEND_PORT
EOF

cat >"$TMP/nginx.conf" <<EOF
load_module $STREAM_MOD;
daemon off;
master_process off;
worker_processes 1;
pid $TMP/nginx.pid;
error_log $TMP/nginx-error.log warn;
events { worker_connections 2000; }
stream {
	upstream be { server 127.0.0.1:$BACKEND_PORT; }
	server {
		listen 127.0.0.1:19412;
		proxy_pass be;
		proxy_connect_timeout 5s;
		tcp_nodelay on;
	}
}
EOF

# start NAME PORT CMD...: runs the proxy on CPU 0; sets PROXY_PID.
start() {
	name=$1; port=$2; shift 2
	taskset -c 0 "$@" >"$TMP/$name.log" 2>&1 &
	PROXY_PID=$!
	PIDS="$PIDS $PROXY_PID"
	wait_port "$port" || { cat "$TMP/$name.log" >&2; exit 1; }
}
stop() {
	kill -TERM "$PROXY_PID" 2>/dev/null || true
	wait "$PROXY_PID" 2>/dev/null || true
}

proxy_cmd() { # NAME -> PORT and command line
	case $1 in
	veloq-copy) echo "19401 bin/tcp-proxy -listen 127.0.0.1:19401 -backends 127.0.0.1:$BACKEND_PORT -loops 1 -backend uring -splice off" ;;
	veloq-splice) echo "19402 bin/tcp-proxy -listen 127.0.0.1:19402 -backends 127.0.0.1:$BACKEND_PORT -loops 1 -backend uring -splice always" ;;
	veloq-nobatch) echo "19404 bin/tcp-proxy -listen 127.0.0.1:19404 -backends 127.0.0.1:$BACKEND_PORT -loops 1 -backend uring -splice off -batch-wait -1us" ;;
	veloq-large) echo "19405 bin/tcp-proxy -listen 127.0.0.1:19405 -backends 127.0.0.1:$BACKEND_PORT -loops 1 -backend uring -splice large" ;;
	cfloor) echo "19413 bin/epoll_relay -addr 127.0.0.1:19413 -upstream 127.0.0.1:$BACKEND_PORT" ;;
	cfloor-uring) echo "19414 bin/uring_relay -addr 127.0.0.1:19414 -upstream 127.0.0.1:$BACKEND_PORT" ;;
	cfloor-uring-batch) echo "19415 bin/uring_relay -addr 127.0.0.1:19415 -upstream 127.0.0.1:$BACKEND_PORT -batch-wait 20" ;;
	cfloor-uring-single) echo "19416 bin/uring_relay -addr 127.0.0.1:19416 -upstream 127.0.0.1:$BACKEND_PORT -recv single" ;;
	veloq-epoll) echo "19403 bin/tcp-proxy -listen 127.0.0.1:19403 -backends 127.0.0.1:$BACKEND_PORT -loops 1 -backend epoll -splice off" ;;
	haproxy) echo "19411 haproxy -db -f $TMP/haproxy.cfg" ;;
	nginx) echo "19412 nginx -c $TMP/nginx.conf -p $TMP -e $TMP/nginx-error.log" ;;
	esac
}

# Per-request counts, robust where CPU seconds are noisy: perf stat
# counts the proxy's system calls, io_uring submissions (SQEs) and context
# switches (all threads) over the measured window, from 0.2 s after it
# opens to 0.2 s before it closes, divided by req/s times that span.
# PERFSTAT=0 (or no working perf) leaves the columns empty.
PERF_EVENTS='raw_syscalls:sys_enter,io_uring:io_uring_submit_req,context-switches'
PERFSTAT=${PERFSTAT:-1}
if [ "$PERFSTAT" = 1 ] && ! perf stat -e "$PERF_EVENTS" -- true >/dev/null 2>&1; then
	echo "proxy.sh: perf stat cannot count $PERF_EVENTS here: no per-request counts" >&2
	PERFSTAT=0
fi
PERF_SPAN=$(awk -v d="$DUR" 'BEGIN { print (d > 0.6 ? d - 0.4 : d) }')
PERF_PID=""
perf_start() { # OUT: counts the proxy's events over the window into OUT
	[ "$PERFSTAT" = 1 ] || return 0
	(sleep 1.2 && exec perf stat -x, -o "$1" -e "$PERF_EVENTS" -p "$PROXY_PID" -- sleep "$PERF_SPAN") >/dev/null 2>&1 &
	PERF_PID=$!
}
perf_wait() {
	[ -n "$PERF_PID" ] || return 0
	wait "$PERF_PID" 2>/dev/null || true
	PERF_PID=""
}
per_request() { # JSON PERF-FILE: JSON with syscalls_per_req, sqes_per_req, cs_per_req
	local sc=null sq=null cs=null
	if [ -s "$2" ]; then
		read -r sc sq cs < <(awk -F, '
			$1 ~ /^[0-9]+$/ && $3 == "raw_syscalls:sys_enter" { sc = $1 }
			$1 ~ /^[0-9]+$/ && $3 == "io_uring:io_uring_submit_req" { sq = $1 }
			$1 ~ /^[0-9]+$/ && $3 == "context-switches" { cs = $1 }
			END { printf "%s %s %s\n", (sc == "" ? "null" : sc), (sq == "" ? "null" : sq), (cs == "" ? "null" : cs) }' "$2")
	fi
	echo "$1" | jq -c --argjson sc "$sc" --argjson sq "$sq" --argjson cs "$cs" --argjson span "$PERF_SPAN" '
		(.rps // 0) as $r | def per(x): if x == null or $r <= 0 then null else x / ($r * $span) end;
		.syscalls_per_req = per($sc) | .sqes_per_req = per($sq) | .cs_per_req = per($cs)' 2>/dev/null || echo "$1"
}

ROUNDS=${ROUNDS:-3}
ROWS="$TMP/rows"
: >"$ROWS"
for round in $(seq "$ROUNDS"); do
	# Rotate the order each round, so no proxy always runs first or last.
	set -- $PROXIES
	order=""
	for _ in $(seq $(( (round - 1) % $# ))); do set -- "$@" "$1"; shift; done
	order="$*"
	for size in $SIZES; do
		for name in $order; do
			set -- $(proxy_cmd $name)
			port=$1; shift
			start "$name" "$port" "$@"
			echo "proxy.sh: round $round/$ROUNDS, $name, ${size} B, $CONNS conns, ${DUR}s" >&2
			perf_start "$TMP/$name-$size-$round.perf"
			json=$(timeout $((DUR + 60)) taskset -c 1 bin/tcpload -addr 127.0.0.1:$port -conns "$CONNS" -size "$size" \
				-duration "${DUR}s" -warmup 1s -json -server-pid "$PROXY_PID") || json='{}'
			perf_wait
			stop
			per_request "$json" "$TMP/$name-$size-$round.perf" >"$TMP/$name-$size-$round.json"
		done
	done
done
# One row per proxy and size: the round with the median req per proxy CPU-s.
for size in $SIZES; do
	for name in $PROXIES; do
		jq -s -r --arg n "$name" --arg s "$size" '
			sort_by(.req_per_server_cpu_s // 0) | ([.[] | .req_per_server_cpu_s // 0 | floor | tostring] | join(", ")) as $all |
			.[(length - 1) / 2 | floor] |
			def r2: if . == null then "" else . * 100 | round / 100 | tostring end;
			"| \($n) | \($s) | \(.rps // 0 | floor) | \(.latency.p50_us // 0) | \(.latency.p99_us // 0) | \(.server_cpu_s // 0 | . * 100 | round / 100) | \(.req_per_server_cpu_s // 0 | floor) | \($all) | \(if (.requests // 0) > 0 and .server_sys_s != null then .server_sys_s * 1e6 / .requests | r2 else "" end) | \(.syscalls_per_req | r2) | \(.sqes_per_req | r2) | \(.cs_per_req | r2) | \((.server_rss_kib // 0) / 1024 | floor) | \(.errors // "run failed") |"' \
			"$TMP/$name-$size-"*.json >>"$ROWS"
	done
done

{
	echo "# TCP proxy benchmark"
	echo
	echo "\`ROUNDS=$ROUNDS bench/proxy.sh $DUR $CONNS\` on $(date -u +%Y-%m-%d), $(uname -r), $(nproc) CPUs,"
	echo "load average before the run: $(cut -d' ' -f1-3 /proc/loadavg) (the machine is shared: expect noise)."
	echo
	echo "tcpload (CPU 1) → proxy (CPU 0, one thread/loop/worker) → echo-server -loops 1 (CPU 1),"
	echo "$CONNS connections, one message in flight each, ${DUR} s window after 1 s warmup."
	echo "Proxy CPU = utime+stime of the proxy process (all threads) over the window."
	echo "$ROUNDS interleaved rounds; each row is the round with the median req per proxy CPU-s."
	echo "syscalls, io_uring SQEs and context switches per request: perf stat on the proxy (all threads) over the"
	echo "window less 0.2 s at each end, divided by req/s times that span (io_uring_enter is a syscall; an SQE is not)."
	echo "kernel µs/req: the proxy's stime over the window (of its CPU s) per request: what no user-space change removes."
	echo
	echo "| proxy | msg B | req/s | p50 µs | p99 µs | proxy CPU s | req per proxy CPU-s | every round, sorted | kernel µs/req | syscalls/req | io_uring SQEs/req | ctx switches/req | RSS MiB | errors |"
	echo "|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|"
	cat "$ROWS"
	echo
	echo "veloq-copy/-epoll: \`examples/tcp-proxy -loops 1 -backend uring|epoll\`; veloq-nobatch: veloq-copy with"
	echo "\`-batch-wait -1us\` (io_uring's batched waits off); veloq-splice: the same as veloq-copy with"
	echo "\`-splice always\` (splice(2) both ways from the connect). haproxy $(haproxy -v | head -1 | awk '{print $3}'):"
	echo "mode tcp, nbthread 1. nginx $(nginx -v 2>&1 | sed 's|.*/||'): stream proxy_pass, worker_processes 1,"
	echo "master_process off, tcp_nodelay on. veloq-large: veloq-copy with \`-splice large\`. cfloor: bench/floor/epoll_relay.c,"
	echo "a minimal C relay (level-triggered epoll, one 64 KiB buffer per direction, copies through user space)."
	echo "cfloor-uring: bench/floor/uring_relay.c, the same relay on io_uring (SINGLE_ISSUER + DEFER_TASKRUN, multishot"
	echo "recv into a provided buffer ring, each chunk sent from the buffer it arrived in, one io_uring_enter per batch);"
	echo "cfloor-uring-batch: the same with \`-batch-wait 20\`, veloq-copy's default batched waits (20 µs min-wait);"
	echo "cfloor-uring-single: with \`-recv single\`, a single-shot recv into each side's own 64 KiB buffer."
} >"$OUT"
cat "$OUT"
