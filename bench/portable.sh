#!/usr/bin/env bash
# The portable backend (Go's net under veloq's loop) beside Go's own
# servers, on Linux (issue #35): the same echo-server binary with
# -backend portable against peers/stdecho (net, a goroutine per
# connection) for TCP echo and peers/stdhttp (net/http) for HTTP.
#
#   - echo: tcpload -conns 64 -size 64 (64 B messages, 64 connections);
#   - http: wrkload -conns 64 (wrk -t1 -c64 keep-alive, GET / answered
#     "Hello, World!", checked before each run).
#
# Every server is started fresh, pinned to CPU 0 (one loop; the Go peers
# get GOMAXPROCS=1 from the affinity, and so does the portable backend's
# goroutines' scheduler), the load to CPU 1; 1 s warm-up, then the window.
# The figure is µs of server CPU (utime+stime from /proc over the window,
# as the load generators sample it) per request, and the ratio
# portable / Go in every round, since the servers of a scenario run in
# turn within a round (order rotated each round) and a round's ratio is
# the least touched by drift in background load. SERVERS adds veloq's
# epoll and io_uring backends for reference (names: portable, go, epoll,
# uring).
#
#   [SERVERS="portable go epoll"] bench/portable.sh [rounds] [seconds]
#
# Defaults: 5 rounds of 10 s. Writes results/portable-latest.md. Every
# server listens on 127.0.0.1 and is stopped on exit; every load run is
# bounded (tcpload: window + 5 s; wrkload: wrk killed 30 s past it).
set -euo pipefail
cd "$(dirname "$0")"
ROUNDS=${1:-5}
SECS=${2:-10}
SERVERS=${SERVERS:-"portable go"}
case "$ROUNDS$SECS" in *[!0-9]*)
	echo "usage: [SERVERS=...] bench/portable.sh [rounds] [seconds]" >&2
	exit 2 ;;
esac

# shellcheck source=lib.sh
. ./lib.sh
for tool in jq taskset wrk; do
	have $tool || { echo "portable.sh needs $tool (apt-get install jq util-linux wrk)" >&2; exit 1; }
done
notes=()
note() { echo "   note: $*" >&2; notes+=("$*"); }

bin=$PWD/bin tmp=$PWD/results/tmp/portable
rm -rf "$tmp"
mkdir -p "$bin" "$tmp" results
echo "portable.sh: building" >&2
(cd .. && go build -o "$bin/echo-server" ./cmd/echo-server)
go build -o "$bin/" ./cmd/tcpload ./cmd/wrkload ./peers/stdhttp ./peers/stdecho

# server_cmd SCENARIO NAME: the command line, listening on 127.0.0.1:19601.
addr=127.0.0.1:19601
server_cmd() {
	local mode=tcp
	[ "$1" = http ] && mode=http
	case $2 in
	portable | epoll | uring) echo "$bin/echo-server -mode $mode -loops 1 -backend $2 -addr $addr" ;;
	go) if [ "$1" = http ]; then echo "$bin/stdhttp -addr $addr"; else echo "$bin/stdecho -addr $addr"; fi ;;
	*) echo "portable.sh: unknown server $2 (portable, go, epoll, uring)" >&2; return 1 ;;
	esac
}
# load SCENARIO: the load generator's command, JSON on stdout.
load() {
	case $1 in
	echo) taskset -c 1 "$bin/tcpload" -addr "$addr" -conns 64 -size 64 -warmup 1s -duration "${SECS}s" -server-pid "$pid" -json ;;
	http) taskset -c 1 "$bin/wrkload" -addr "$addr" -conns 64 -warmup 1s -duration "${SECS}s" -server-pid "$pid" -json ;;
	esac
}
# rotated ROUND NAMES...: NAMES rotated by ROUND - 1.
rotated() {
	local r=$1; shift
	for _ in $(seq $(( (r - 1) % $# ))); do set -- "$@" "$1"; shift; done
	echo "$*"
}

declare -A US RPS ERRS
for round in $(seq "$ROUNDS"); do
	for scen in echo http; do
		for name in $(rotated "$round" $SERVERS); do
			k="$scen/$name"
			log=$tmp/$scen-$name-$round.log
			# shellcheck disable=SC2046 # the command's words
			taskset -c 0 $(server_cmd "$scen" "$name") >"$log" 2>&1 &
			pid=$!
			if ! server_ready "$name" "$log"; then
				note "round $round: $name ($scen) did not start"
				continue
			fi
			echo "portable.sh: round $round/$ROUNDS, $scen, $name, ${SECS}s" >&2
			out=$(load "$scen" 2>"$tmp/load.err" | grep '^{' || true)
			stop_server
			if [ -z "$out" ]; then
				note "round $round: $scen $name: no result: $(tail -1 "$tmp/load.err")"
				US[$k]+=" n/a"
				continue
			fi
			US[$k]+=" $(jq -r 'if .requests > 0 and .server_cpu_s > 0 then .server_cpu_s / .requests * 1e6 * 1000 | round / 1000 else "n/a" end' <<<"$out")"
			RPS[$k]+=" $(jq -r '.rps | round' <<<"$out")"
			e=$(jq -r 'select(.errors > 0) | "\(.errors) (\(.first_error // ""))"' <<<"$out")
			[ -z "$e" ] || ERRS[$k]+="r$round: $e; "
		done
	done
done

# nth N VALUES...: the Nth of the values (1-based).
nth() { local n=$1; shift; eval "echo \${$n}"; }
{
	echo "# The portable backend beside Go's net and net/http"
	echo
	echo "\`SERVERS=\"$SERVERS\" bench/portable.sh $ROUNDS $SECS\` on $(date -u +%Y-%m-%d), $(uname -r), $(nproc) CPUs,"
	echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)."
	echo
	echo "echo: tcpload -conns 64 -size 64; http: wrk -t1 -c64 keep-alive, GET /. Server on CPU 0 (one loop;"
	echo "GOMAXPROCS=1), load on CPU 1, 1 s warm-up + ${SECS} s; µs of server CPU (utime+stime) per request."
	echo "go = peers/stdecho (net, goroutine per connection) for echo, peers/stdhttp (net/http) for http."
	echo
	echo "## Per round"
	echo
	hdr="| scenario | round |"
	sep="|---|--:|"
	for name in $SERVERS; do hdr+=" $name µs/req |"; sep+="--:|"; done
	echo "$hdr portable / go |"
	echo "$sep--:|"
	declare -A RATIOS
	for scen in echo http; do
		for round in $(seq "$ROUNDS"); do
			row="| $scen | $round |"
			for name in $SERVERS; do
				# shellcheck disable=SC2086
				row+=" $(nth "$round" ${US[$scen/$name]:-}) |"
			done
			# shellcheck disable=SC2086
			r=$(ratio "$(nth "$round" ${US[$scen/portable]:-n/a})" "$(nth "$round" ${US[$scen/go]:-n/a})")
			RATIOS[$scen]+=" ${r%×}"
			echo "$row $r |"
		done
	done
	echo
	echo "## Medians over the rounds"
	echo
	echo "| scenario | server | req/s | µs server CPU per request | range | portable / go per round: median | range |"
	echo "|---|---|--:|--:|--:|--:|--:|"
	for scen in echo http; do
		for name in $SERVERS; do
			k="$scen/$name"
			# shellcheck disable=SC2086
			read -r m lo hi <<<"$(stats $(printf '%s\n' ${US[$k]:-} | grep -v n/a))"
			# shellcheck disable=SC2086
			read -r rm rlo rhi <<<"$(stats $(printf '%s\n' ${RATIOS[$scen]:-} | grep -v n/a))"
			r="" rr=""
			[ "$name" != portable ] || { r="$rm×"; rr="$rlo–$rhi"; }
			echo "| $scen | $name | $(median_of RPS "$k") | $m | $lo–$hi | $r | $rr |"
		done
	done
	echo
	for k in "${!ERRS[@]}"; do echo "- errors, $k: ${ERRS[$k]}"; done
	for n in "${notes[@]}"; do echo "- $n"; done
	echo
	echo "$(go version | awk '{ print $3 }'), veloq $(git rev-parse --short HEAD)$(git diff --quiet HEAD -- .. 2>/dev/null || echo ' (work tree modified)')."
} >results/portable-latest.md
cat results/portable-latest.md
