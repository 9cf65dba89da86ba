#!/usr/bin/env bash
# WebSocket benchmark: veloq's websocket package (cmd/echo-server -mode ws,
# io_uring and epoll) against gorilla/websocket on net/http and gobwas/ws
# on cloudwego/netpoll, in the same run:
#   - server memory per idle connection (RSS growth over -idle N upgraded
#     connections, each having echoed one message), target <= 1 KiB for veloq;
#   - echo of 64 B and 4 KiB messages over 64 connections: msg/s and
#     messages per server CPU-second.
# The server is pinned to CPU 0 and wsload to CPU 1 (as bench/run.sh does),
# every server runs one loop / GOMAXPROCS=1, and everything talks to
# 127.0.0.1 only. Results go to results/ws-latest.md (ws-quick.md with --quick).
#
#   bench/ws.sh            # 10,000 idle conns, 10 s windows, 3 repeats (about 6 minutes)
#   bench/ws.sh --quick    # 1,000 idle conns, 2 s windows, 1 repeat (about 1 minute)
#   bench/ws.sh --smoke    # seconds: checks that every server and wsload work
# Needs taskset (util-linux) and jq. A server that cannot start here (veloq
# -backend uring where io_uring is refused) is skipped with its log.
set -euo pipefail
cd "$(dirname "$0")"

idle=10000 duration=10s warmup=2s repeats=3 hold=5s tag=latest
case "${1:-}" in
--quick) idle=1000 duration=2s warmup=500ms repeats=1 hold=2s tag=quick ;;
--smoke) idle=100 duration=300ms warmup=100ms repeats=1 hold=300ms tag=smoke ;; # checks the script works; numbers mean nothing
esac

bin=$PWD/bin
mkdir -p "$bin" results
echo "== build"
(cd .. && go build -o "$bin/echo-server" ./cmd/echo-server)
go build -o "$bin/" ./cmd/wsload ./peers/gorillaws ./peers/gobwasnetpoll

ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)"
server_cpu="taskset -c 0"
load_cpu="taskset -c 1"
if ! command -v taskset >/dev/null || [ "$(nproc)" -lt 2 ]; then
	echo "(no taskset or fewer than 2 CPUs: running unpinned)"
	server_cpu="" load_cpu=""
fi

declare -A cmds=(
	[veloq-uring]="$bin/echo-server -mode ws -loops 1 -backend uring -addr 127.0.0.1:9101"
	[veloq-epoll]="$bin/echo-server -mode ws -loops 1 -backend epoll -addr 127.0.0.1:9102"
	[gorilla-nethttp]="env GOMAXPROCS=1 $bin/gorillaws -addr 127.0.0.1:9103"
	[gobwas-netpoll]="env GOMAXPROCS=1 $bin/gobwasnetpoll -loops 1 -addr 127.0.0.1:9104"
)
servers=(veloq-uring veloq-epoll gorilla-nethttp gobwas-netpoll)

pid=""
start_server() { # name -> sets pid, addr
	local name=$1 log=results/tmp/ws-$1.log
	mkdir -p results/tmp
	# shellcheck disable=SC2086
	$server_cpu ${cmds[$name]} >"$log" 2>&1 &
	pid=$!
	for _ in $(seq 100); do
		if grep -qE "on 127\.0\.0\.1:[0-9]+" "$log"; then
			addr=$(grep -oE "127\.0\.0\.1:[0-9]+" "$log" | head -1)
			return 0
		fi
		kill -0 "$pid" 2>/dev/null || { cat "$log"; return 1; }
		sleep 0.1
	done
	echo "$name did not start"; kill "$pid"; return 1
}
stop_server() {
	kill -TERM "$pid" 2>/dev/null || true
	wait "$pid" 2>/dev/null || true
}
trap stop_server EXIT

out=results/ws-$tag.md
{
	echo "# WebSocket: veloq vs gorilla/websocket vs gobwas/ws"
	echo
	echo "\`bench/ws.sh $*\` on $(nproc) CPUs, $(uname -r), $(go version | cut -d' ' -f3), $(date -u +%F)."
	echo "Server on CPU 0 (one loop / GOMAXPROCS=1), wsload on CPU 1; medians of $repeats interleaved rounds (each round runs every server, in a rotated order)."
	echo
	echo "| server | KiB/idle conn ($idle) | 64 B msg/s | 64 B msg/server CPU-s | 4 KiB msg/s | 4 KiB msg/server CPU-s |"
	echo "|---|---:|---:|---:|---:|---:|"
} >"$out"

median() { sort -g | awk '{a[NR]=$1} END {if (NR==0) print "n/a"; else print a[int((NR+1)/2)]}'; }

# Interleaved rounds: every round measures every server, in an order
# rotated each round, so that a slow spell of the machine falls on all of
# them alike; the medians are taken per server afterwards.
declare -A kib r64 c64 r4k c4k skipped
for rep in $(seq "$repeats"); do
	n=${#servers[@]}
	for k in $(seq 0 $((n - 1))); do
		name=${servers[$(((k + rep - 1) % n))]}
		[ -n "${skipped[$name]:-}" ] && continue
		echo "== round $rep: $name"
		start_server "$name" || { echo "skipping $name"; skipped[$name]=1; continue; }
		# shellcheck disable=SC2086
		j=$($load_cpu "$bin/wsload" -addr "$addr" -idle "$idle" -hold "$hold" -server-pid "$pid" -json)
		kib[$name]+=" $(jq -r .server_kib_per_conn <<<"$j")"
		stop_server
		echo "   idle: $(jq -r .server_kib_per_conn <<<"$j") KiB/conn"
		for size in 64 4096; do
			start_server "$name"
			# shellcheck disable=SC2086
			j=$($load_cpu "$bin/wsload" -addr "$addr" -conns 64 -size "$size" -duration "$duration" -warmup "$warmup" -server-pid "$pid" -json)
			stop_server
			echo "   ${size}B: $(jq -r '"\(.rps|floor) msg/s, \(.req_per_server_cpu_s|floor) msg/CPU-s, errors \(.errors)"' <<<"$j")"
			if [ "$size" = 64 ]; then
				r64[$name]+=" $(jq -r .rps <<<"$j")" c64[$name]+=" $(jq -r .req_per_server_cpu_s <<<"$j")"
			else
				r4k[$name]+=" $(jq -r .rps <<<"$j")" c4k[$name]+=" $(jq -r .req_per_server_cpu_s <<<"$j")"
			fi
		done
	done
done
for name in "${servers[@]}"; do
	[ -n "${skipped[$name]:-}" ] && continue
	# shellcheck disable=SC2086
	printf '| %s | %.2f | %.0f | %.0f | %.0f | %.0f |\n' "$name" \
		"$(printf '%s\n' ${kib[$name]} | median)" "$(printf '%s\n' ${r64[$name]} | median)" "$(printf '%s\n' ${c64[$name]} | median)" \
		"$(printf '%s\n' ${r4k[$name]} | median)" "$(printf '%s\n' ${c4k[$name]} | median)" >>"$out"
done
trap - EXIT
echo
cat "$out"
