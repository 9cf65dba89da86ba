#!/usr/bin/env bash
# Idle HTTP/2 memory (issue 22): server RSS growth per idle HTTP/2
# connection (bench/cmd/h2idle: N connections, one GET / each, held), for
# veloq (cmd/echo-server -mode http, one loop) on io_uring and epoll, h2c
# and h2 over TLS, beside Go's net/http (GOMAXPROCS=1). Over TLS with two
# clients: Go's default key shares (X25519MLKEM768 hybrid first, as
# browsers now send: a 1.5 KB ClientHello, whose buffers crypto/tls keeps
# for the connection's life) and X25519 alone (bench/tls.sh's HTTPS/1.1
# client). Servers run pinned to CPU 0, h2idle on CPU 1; every server runs
# once per round, in an order rotated each round; each figure is the
# median over the rounds with its range (min-max). Memory only: no
# timing is taken. 127.0.0.1 only. Results go to results/h2mem-latest.md.
#
#   bench/h2mem.sh                       # 3 rounds, 2,000 connections
#   bench/h2mem.sh --quick               # 1 round, 500 connections
#   bench/h2mem.sh --smoke               # 1 round, 50 connections: checks the script
#   bench/h2mem.sh --base PATH [...]     # also an echo-server binary built
#                                        # from another commit, for before/after
set -euo pipefail
cd "$(dirname "$0")"

rounds=3 idle=2000 hold=2s tag=latest base=""
while [ $# -gt 0 ]; do
	case "$1" in
	--quick) rounds=1 idle=500 tag=quick ;;
	--smoke) rounds=1 idle=50 hold=300ms tag=smoke ;;
	--base)
		base=$(realpath "${2:?--base needs an echo-server binary}")
		shift
		;;
	*) echo "usage: bench/h2mem.sh [--quick|--smoke] [--base ECHO_SERVER_BINARY]" >&2; exit 2 ;;
	esac
	shift
done
# shellcheck source=lib.sh
. ./lib.sh
note() { echo "   note: $*"; }
have python3 || { echo "h2mem.sh needs python3" >&2; exit 1; }
pin0="" pin1=""
if have taskset; then pin0="taskset -c 0" pin1="taskset -c 1"; fi
if [ "$(ulimit -n)" != unlimited ] && [ "$(ulimit -n)" -lt $((idle + 200)) ]; then
	ulimit -n $((idle + 200)) 2>/dev/null || { echo "h2mem.sh needs ulimit -n above $((idle + 200))" >&2; exit 1; }
fi

bin=$PWD/bin tmp=$PWD/results/tmp/h2mem
rm -rf "$tmp"
mkdir -p "$bin" "$tmp" results
echo "== build"
(cd .. && go build -o "$bin/echo-server" ./cmd/echo-server)
go build -o "$bin/stdhttp" ./peers/stdhttp
go build -o "$bin/h2idle" ./cmd/h2idle

# name|h2idle flags|command (PORT is replaced by a fresh port per run)
servers=()
add_veloq() { # LABEL BINARY
	local label=$1 b=$2 be
	for be in uring epoll; do
		servers+=(
			"$label-$be h2c||$b -mode http -loops 1 -backend $be -addr 127.0.0.1:PORT"
			"$label-$be h2 TLS|-tls|$b -mode http -loops 1 -backend $be -tls-self-signed -addr 127.0.0.1:PORT"
			"$label-$be h2 TLS x25519|-tls -curve x25519|$b -mode http -loops 1 -backend $be -tls-self-signed -addr 127.0.0.1:PORT"
		)
	done
}
add_veloq veloq "$bin/echo-server"
[ -n "$base" ] && add_veloq base "$base"
servers+=(
	"net/http h2c||env GOMAXPROCS=1 $bin/stdhttp -h2c -addr 127.0.0.1:PORT"
	"net/http h2 TLS|-tls|env GOMAXPROCS=1 $bin/stdhttp -tls-self-signed -addr 127.0.0.1:PORT"
	"net/http h2 TLS x25519|-tls -curve x25519|env GOMAXPROCS=1 $bin/stdhttp -tls-self-signed -addr 127.0.0.1:PORT"
)

port=19600
pid=""
runs=$tmp/runs.tsv
: >"$runs"
n=${#servers[@]}
echo "== $rounds round(s), $idle idle connections each"
for r in $(seq 0 $((rounds - 1))); do
	for i in $(seq 0 $((n - 1))); do
		IFS='|' read -r name flags cmd <<<"${servers[$(((i + r) % n))]}"
		port=$((port + 1))
		# shellcheck disable=SC2086 # the command and flags split on purpose
		$pin0 ${cmd//PORT/$port} >"$tmp/server.log" 2>&1 &
		pid=$!
		server_ready "$name" "$tmp/server.log" || continue
		# shellcheck disable=SC2086
		if out=$($pin1 "$bin/h2idle" -addr "127.0.0.1:$port" -pid "$pid" -n "$idle" -hold "$hold" $flags 2>&1); then
			b=$(echo "$out" | python3 -c 'import json,sys; print(json.load(sys.stdin)["bytes_per_conn"])')
			printf '%s\t%s\n' "$name" "$b" >>"$runs"
			echo "   round $((r + 1)) $name: $(awk -v b="$b" 'BEGIN { printf "%.1f", b / 1024 }') KiB per connection"
		else
			echo "   $name: $out"
		fi
		stop_server
	done
done

python3 - "$runs" "$rounds" "$idle" >"results/h2mem-$tag.md" <<'PY'
import statistics, sys
runs, rounds, idle = sys.argv[1], sys.argv[2], sys.argv[3]
rows = {}
for line in open(runs):
    name, b = line.rstrip("\n").split("\t")
    rows.setdefault(name, []).append(float(b) / 1024)
print(f"# Idle HTTP/2 connections: server RSS per connection\n")
print(f"{idle} connections, each after one GET /; {rounds} interleaved round(s); server on CPU 0, h2idle on CPU 1; "
      "median and range over the rounds. TLS: Go's default client (X25519MLKEM768 key share) unless marked x25519.\n")
print("| server | KiB per idle connection | range |")
print("|---|---:|---:|")
for name, v in rows.items():
    print(f"| {name} | {statistics.median(v):.1f} | {min(v):.1f}–{max(v):.1f} |")
PY
cat "results/h2mem-$tag.md"
