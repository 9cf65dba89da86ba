#!/usr/bin/env bash
# UDP echo benchmark (issue 24): veloq's datagram sockets (cmd/echo-server
# -mode udp, io_uring and epoll, with the kernel's GSO/GRO offloads and
# without) against Go's net.UDPConn (bench/peers/stdudp, one goroutine per
# socket) and gnet's UDP (bench/peers/gnetudp), with 64 B and 1,200 B
# datagrams: echoes per second, echoes per server CPU-second, and loss.
#
# The load is bench/cmd/udpload: -ports source sockets (each a separate
# peer to the server) keep -window datagrams in flight each, batched with
# sendmmsg/recvmmsg on one thread; a port whose echoes stop for 200 ms
# counts its datagrams in flight as lost. Every server runs pinned to CPU 0
# (one loop / GOMAXPROCS=1) and udpload on CPU 1; cfloor is the C floor
# (bench/floor/udp_echo.c: one recvmmsg and one sendmmsg per wake-up) and
# cfloor-uring the io_uring one (bench/floor/uring_udp_echo.c: multishot
# recvmsg into a buffer ring, each echo an SQE sent from the buffer it
# arrived in; needs liburing-dev, skipped without; cfloor-uring-batch adds
# -batch-wait 20, veloq's default batched waits); server CPU is utime+stime
# from /proc over the window; every server runs in every round, in an
# order rotated each round; each figure is the median over the rounds,
# with its range (min-max). Everything talks to 127.0.0.1 only. Results go
# to results/udp-latest.md (udp-quick.md with --quick, udp-smoke.md with
# --smoke).
#
#   bench/udp.sh            # 5 rounds, 2 s warmup + 10 s windows (about 10 minutes)
#   bench/udp.sh --quick    # 1 round, 2 s windows (about 1 minute)
#   bench/udp.sh --smoke    # seconds: checks every server and the load generator work; numbers mean nothing
#
# Needs jq (to read udpload's JSON). Optional: taskset (without it nothing
# is pinned). A server that cannot start here (veloq -backend uring where
# io_uring is refused) is skipped with its log.
set -euo pipefail
cd "$(dirname "$0")"

rounds=5 duration=10s warmup=2s tag=latest
case "${1:-}" in
--quick) rounds=1 duration=2s warmup=500ms tag=quick ;;
--smoke) rounds=1 duration=500ms warmup=200ms tag=smoke ;;
"") ;;
*) echo "usage: bench/udp.sh [--quick|--smoke]" >&2; exit 2 ;;
esac
ports=${UDP_PORTS:-64} window=${UDP_WINDOW:-8}

# shellcheck source=lib.sh
. ./lib.sh
if ! have jq; then
	echo "udp.sh reads udpload's JSON with jq: apt-get install jq" >&2
	exit 1
fi
notes=()
note() { echo "   note: $*"; notes+=("$*"); }

bin=$PWD/bin tmp=$PWD/results/tmp/udp
rm -rf "$tmp"
mkdir -p "$bin" "$tmp" results
echo "== build"
(cd .. && go build -o "$bin/echo-server" ./cmd/echo-server)
go build -o "$bin/" ./cmd/udpload ./peers/stdudp ./peers/gnetudp
gcc -O2 -o "$bin/udp_echo" floor/udp_echo.c
uring_floor=1
if ! gcc -O2 -o "$bin/uring_udp_echo" floor/uring_udp_echo.c -luring 2>"$tmp/uring-build.log"; then
	uring_floor=0
fi

server_cpu="taskset -c 0"
load_cpu="taskset -c 1"
if ! have taskset || [ "$(nproc)" -lt 2 ]; then
	note "no taskset or fewer than 2 CPUs: servers and the load generator ran unpinned, sharing CPUs; the figures are not comparable with pinned runs"
	server_cpu="" load_cpu=""
fi
rmem_max=$(cat /proc/sys/net/core/rmem_max 2>/dev/null || echo unknown)
wmem_max=$(cat /proc/sys/net/core/wmem_max 2>/dev/null || echo unknown)

# Servers: name -> command. Every server asks for 4 MiB socket buffers,
# which the kernel caps at net.core.rmem_max / wmem_max.
declare -A cmd
cmd[veloq-uring]="env GOMAXPROCS=1 $bin/echo-server -mode udp -loops 1 -backend uring -addr 127.0.0.1:19301"
cmd[veloq-epoll]="env GOMAXPROCS=1 $bin/echo-server -mode udp -loops 1 -backend epoll -addr 127.0.0.1:19302"
cmd[veloq-uring-nooffload]="env GOMAXPROCS=1 $bin/echo-server -mode udp -loops 1 -backend uring -gso=false -gro=false -addr 127.0.0.1:19303"
cmd[netudpconn]="env GOMAXPROCS=1 $bin/stdudp -addr 127.0.0.1:19304"
cmd[gnet]="env GOMAXPROCS=1 $bin/gnetudp -loops 1 -addr 127.0.0.1:19305"
cmd[cfloor]="$bin/udp_echo -addr 127.0.0.1:19306"
cmd[cfloor-uring]="$bin/uring_udp_echo -addr 127.0.0.1:19307"
cmd[cfloor-uring-batch]="$bin/uring_udp_echo -addr 127.0.0.1:19308 -batch-wait 20"
# UDP_SERVERS and UDP_SIZES (space-separated) run a subset.
read -r -a servers <<<"${UDP_SERVERS:-veloq-uring veloq-epoll veloq-uring-nooffload netudpconn gnet cfloor cfloor-uring}"
if [ "$uring_floor" = 0 ] && [[ " ${servers[*]} " == *" cfloor-uring"* ]]; then
	note "cfloor-uring skipped: gcc floor/uring_udp_echo.c -luring failed (apt-get install liburing-dev): $(tail -1 "$tmp/uring-build.log")"
	read -r -a servers <<<"$(printf '%s\n' "${servers[@]}" | grep -v '^cfloor-uring' | tr '\n' ' ')"
fi
read -r -a sizes <<<"${UDP_SIZES:-64 1200}"

pid="" addr=""
start_server() { # name -> pid, addr
	local name=$1 log=$tmp/$1.log
	# shellcheck disable=SC2086
	$server_cpu ${cmd[$name]} >"$log" 2>&1 &
	pid=$!
	server_ready "$name" "$log" || return 1
	addr=$(grep -m1 -oE "on 127\.0\.0\.1:[0-9]+" "$log")
	addr=${addr#on }
}

# Per "size|server": space-separated values, one per round.
declare -A rate eff ksys loss scpu lcpu errs firsterr
run_one() { # size server
	local size=$1 name=$2 j k="$1|$2" log=$tmp/$1-$2.load.log
	start_server "$name" || { note "$name did not start: skipped in that round (log: results/tmp/udp/$name.log)"; return 0; }
	j=$($load_cpu "$bin/udpload" -addr "$addr" -ports "$ports" -window "$window" -size "$size" \
		-duration "$duration" -warmup "$warmup" -server-pid "$pid" -json 2>"$log") || j=""
	stop_server
	if [ -z "$j" ] || ! jq -e . >/dev/null 2>&1 <<<"$j"; then
		note "$name ($size B): udpload failed: $(tail -2 "$log" | tr '\n' ' ')"
		return 0
	fi
	errs[$k]=$((${errs[$k]:-0} + $(jq -r '.errors' <<<"$j")))
	local fe
	fe=$(jq -r '.first_error // empty' <<<"$j")
	[ -n "$fe" ] && [ -z "${firsterr[$k]:-}" ] && firsterr[$k]=$fe
	rate[$k]+=" $(jq -r .rps <<<"$j")" eff[$k]+=" $(jq -r .req_per_server_cpu_s <<<"$j")"
	loss[$k]+=" $(jq -r .loss <<<"$j")"
	ksys[$k]+=" $(jq -r 'if .received > 0 then .server_sys_s * 1e6 / .received else 0 end' <<<"$j")"
	scpu[$k]+=" $(jq -r .server_cpu_util <<<"$j")" lcpu[$k]+=" $(jq -r .client_cpu_util <<<"$j")"
	echo "   $(jq -r '"\(.rps|floor)/s, \(.req_per_server_cpu_s|floor) per server CPU-s, loss \(.loss*100)% (\(.lost) lost, \(.late) late), server CPU \(.server_cpu_util*100|floor)%, load \(.client_cpu_util*100|floor)%, errors \(.errors)"' <<<"$j")"
}

start_date=$(date -u '+%F %H:%M UTC') load_start=$(cut -d' ' -f1-3 /proc/loadavg)
for round in $(seq "$rounds"); do
	for size in "${sizes[@]}"; do
		n=${#servers[@]}
		for i in $(seq 0 $((n - 1))); do
			name=${servers[$(((i + round - 1) % n))]}
			echo "== round $round/$rounds: $size B: $name"
			run_one "$size" "$name"
		done
	done
done
load_end=$(cut -d' ' -f1-3 /proc/loadavg)

out=results/udp-$tag.md
cpu_model=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')
commit=$(git -C .. rev-parse --short HEAD 2>/dev/null || echo unknown)
git -C .. diff --quiet HEAD -- 2>/dev/null || commit+=" (work tree with uncommitted changes)"
{
	echo "# UDP echo: veloq vs net.UDPConn and gnet"
	echo
	echo "\`bench/udp.sh $*\` on $(nproc) CPUs ($cpu_model), Linux $(uname -r), $(go version | cut -d' ' -f3), veloq $commit, gnet v2.9.7, $start_date."
	echo "Load average $load_start at the start, $load_end at the end (on a busy machine the figures are for smoke-testing only). net.core.rmem_max $rmem_max, wmem_max $wmem_max."
	echo
	echo "Server on CPU 0 (one loop / GOMAXPROCS=1), udpload on CPU 1 ($ports source ports × $window datagrams in flight, sendmmsg/recvmmsg); $rounds interleaved round(s), each running every server in a rotated order; each figure the median over the rounds with its range (min–max); $warmup warmup + $duration window. \"per server CPU-s\" is echoes ÷ the server's utime+stime from /proc over the window; \"kernel µs/echo\" its stime alone per echo; loss is datagrams given up (no echo within 200 ms) ÷ (echoed + given up); \"vs\" columns divide medians."
} >"$out"
for size in "${sizes[@]}"; do
	{
		echo
		echo "## $size B datagrams"
		echo
		echo "| server | echoes/s | range | echoes per server CPU-s | range | vs netudpconn | vs gnet | kernel µs/echo | loss (median, max) | server CPU | load CPU | errors |"
		echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
		for name in "${servers[@]}"; do
			k="$size|$name"
			[ -n "${rate[$k]:-}" ] || continue
			# shellcheck disable=SC2086
			read -r rm rl rh <<<"$(stats ${rate[$k]})"
			# shellcheck disable=SC2086
			read -r em el eh <<<"$(stats ${eff[$k]})"
			# shellcheck disable=SC2086
			read -r lm _ lh <<<"$(stats ${loss[$k]})"
			echo "| $name | $(fmt %.0f "$rm") | $(fmt %.0f "$rl")–$(fmt %.0f "$rh") | $(fmt %.0f "$em") | $(fmt %.0f "$el")–$(fmt %.0f "$eh") | $(ratio "$em" "$(median_of eff "$size|netudpconn")") | $(ratio "$em" "$(median_of eff "$size|gnet")") | $(fmt %.2f "$(median_of ksys "$k")") | $(pct "$lm" 3), $(pct "$lh" 3) | $(pct "$(median_of scpu "$k")") | $(pct "$(median_of lcpu "$k")") | ${errs[$k]:-0} |"
		done
		for name in "${servers[@]}"; do
			k="$size|$name"
			if [ -n "${firsterr[$k]:-}" ]; then printf '\n%s\n' "$name's first error: \`${firsterr[$k]}\`"; fi
		done
	} >>"$out"
done
{
	echo
	echo "## Notes"
	echo
	echo "- veloq-uring-nooffload is veloq on io_uring with UDP_SEGMENT and UDP_GRO off: the difference to veloq-uring is what GSO saves. On loopback GSO applies when a batch of echoes holds several same-size datagrams to one port (udpload's windows), and GRO does not apply (loopback has no GRO engine; a GSO sender's buffer reaches a GRO socket whole, which udpload is not)."
	echo "- The target (issue 24): at least 2× net.UDPConn's echoes per server CPU-s, and ahead of gnet's."
	for n in "${notes[@]}"; do echo "- $n"; done
} >>"$out"

trap - EXIT
echo
cat "$out"
