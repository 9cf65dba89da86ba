#!/usr/bin/env bash
# An established TLS connection's latency under a flood of TLS handshakes
# (issue 21): one keep-alive HTTPS client sends GET / one request at a
# time (tcpload -tls -http -conns 1) while 1,000 others connect, make a
# full TLS 1.3 handshake, send one GET / and close, over and over (tcpload
# -tls -http -churn -conns 1000). Reported per server: the ping's p50, p99
# and max round trip, and the flood's handshakes per second and per server
# CPU-second. Servers: veloq (io_uring and epoll) with handshakes on the
# loop (the default) and on goroutines (-tls-handshake-off-loop), and Go's
# net/http (ListenAndServeTLS). Each server on CPU 0 (one loop /
# GOMAXPROCS=1), both load generators on CPU 1; every server in every
# round, in an order rotated each round; figures are medians over the
# rounds with their range (min-max). 127.0.0.1 only; it stops by itself.
#
#   bench/tlsflood.sh            # 5 rounds, 8 s of ping inside 10 s of flood
#   bench/tlsflood.sh --quick    # 1 round, 3 s
#   bench/tlsflood.sh --smoke    # a few seconds: checks it runs; numbers mean nothing
set -euo pipefail
cd "$(dirname "$0")"

rounds=5 secs=8 flood=1000 tag=latest
case "${1:-}" in
--quick) rounds=1 secs=3 tag=quick ;;
--smoke) rounds=1 secs=1 flood=100 tag=smoke ;;
"") ;;
*) echo "usage: bench/tlsflood.sh [--quick|--smoke]" >&2; exit 2 ;;
esac

# shellcheck source=lib.sh
. ./lib.sh
have jq || { echo "tlsflood.sh reads tcpload's JSON with jq: apt-get install jq" >&2; exit 1; }
notes=()
note() { echo "   note: $*"; notes+=("$*"); }

bin=$PWD/bin tmp=$PWD/results/tmp/tlsflood
rm -rf "$tmp"
mkdir -p "$bin" "$tmp" results
echo "== build"
(cd .. && go build -o "$bin/echo-server" ./cmd/echo-server)
go build -o "$bin/" ./cmd/tcpload ./peers/stdhttp
ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)"
server_cpu="taskset -c 0" load_cpu="taskset -c 1"
if ! have taskset || [ "$(nproc)" -lt 2 ]; then
	note "no taskset or fewer than 2 CPUs: nothing pinned; figures not comparable with pinned runs"
	server_cpu="" load_cpu=""
fi

# The ping shares CPU 1 with the flood's 1,000 clients; without a higher
# priority its own wait for CPU 1 (a scheduler slice behind the flood
# process) would be counted as the server's latency.
ping_prio=""
if nice -n -10 true 2>/dev/null; then
	ping_prio="nice -n -10"
else
	note "the ping could not get a higher priority (nice -n -10 needs root): its latency includes waiting behind the flood's clients for CPU 1"
fi

declare -A cmd
names=(veloq-uring veloq-uring-offloop veloq-epoll veloq-epoll-offloop nethttp)
cmd[veloq-uring]="$bin/echo-server -mode http -loops 1 -backend uring -tls-self-signed"
cmd[veloq-uring-offloop]="$bin/echo-server -mode http -loops 1 -backend uring -tls-self-signed -tls-handshake-off-loop"
cmd[veloq-epoll]="$bin/echo-server -mode http -loops 1 -backend epoll -tls-self-signed"
cmd[veloq-epoll-offloop]="$bin/echo-server -mode http -loops 1 -backend epoll -tls-self-signed -tls-handshake-off-loop"
cmd[nethttp]="$bin/stdhttp -tls-self-signed"

results=$tmp/results.tsv
: >"$results"
port=19500 pid=""
for ((r = 0; r < rounds; r++)); do
	echo "== round $((r + 1))/$rounds"
	for ((i = 0; i < ${#names[@]}; i++)); do
		name=${names[$(((i + r) % ${#names[@]}))]}
		port=$((port + 1))
		log=$tmp/$name.$r.log
		# shellcheck disable=SC2086
		env GOMAXPROCS=1 $server_cpu ${cmd[$name]} -addr "127.0.0.1:$port" >"$log" 2>&1 &
		pid=$!
		server_ready "$name" "$log" || continue
		# shellcheck disable=SC2086
		$load_cpu "$bin/tcpload" -addr "127.0.0.1:$port" -tls -http -churn -conns "$flood" \
			-warmup 1s -duration "$((secs + 2))s" -server-pid "$pid" -json >"$tmp/flood.json" 2>"$tmp/flood.err" &
		fpid=$!
		sleep 1.5 # the flood's warmup: every worker is handshaking
		# shellcheck disable=SC2086
		$ping_prio $load_cpu "$bin/tcpload" -addr "127.0.0.1:$port" -tls -http -conns 1 \
			-warmup 500ms -duration "${secs}s" -json >"$tmp/ping.json" 2>"$tmp/ping.err" || true
		wait "$fpid" || true
		stop_server
		if ! jq -e .latency.p99_us "$tmp/ping.json" >/dev/null 2>&1; then
			note "$name: the ping produced no result ($(tail -1 "$tmp/ping.err"))"
			continue
		fi
		p=$(jq -r '[.latency.p50_us, .latency.p99_us, .latency.max_us, .errors] | @tsv' "$tmp/ping.json")
		f=$(jq -r '[.rps, .req_per_server_cpu_s // 0, .errors] | @tsv' "$tmp/flood.json" 2>/dev/null || printf '0\t0\t-1')
		printf '%s\t%s\t%s\n' "$name" "$p" "$f" >>"$results"
		echo "   $name: ping p50/p99/max $(cut -f1-3 <<<"$p" | tr '\t' /) µs; flood $(cut -f1 <<<"$f" | cut -d. -f1) handshakes/s"
	done
done

python3 - "$results" "$rounds" "$secs" "$flood" "$(git rev-parse --short HEAD)" "${notes[@]}" >"results/tlsflood-$tag.md" <<'EOF'
import statistics, sys
path, rounds, secs, flood, rev, *notes = sys.argv[1:]
rows = {}
for line in open(path):
    name, p50, p99, pmax, perr, rps, eff, ferr = line.split('\t')
    rows.setdefault(name, []).append([float(x) for x in (p50, p99, pmax, perr, rps, eff, ferr)])
def cell(vals, fmt):
    return f"{fmt(statistics.median(vals))} ({fmt(min(vals))}–{fmt(max(vals))})"
ms = lambda us: f"{us/1000:.2f}"
n0 = lambda v: f"{v:,.0f}"
print("# A TLS connection's latency under a flood of handshakes\n")
print(f"`bench/tlsflood.sh` at {rev}: {rounds} round(s); in each, every server on CPU 0 (one loop, GOMAXPROCS=1) "
      f"while {flood} clients on CPU 1 each make a full TLS 1.3 handshake, one GET / and close, over and over "
      f"(tcpload -tls -http -churn), and one keep-alive HTTPS client on CPU 1 sends GET / one at a time for {secs} s "
      "(tcpload -tls -http -conns 1, at nice -10 so that it does not wait behind the flood's clients for CPU 1). Medians over rounds, range in brackets.\n")
print("| server | ping p50 ms | ping p99 ms | ping max ms | handshakes/s | handshakes per server CPU-s | errors (ping, flood) |")
print("|---|---:|---:|---:|---:|---:|---:|")
for name, rs in rows.items():
    col = lambda i: [r[i] for r in rs]
    print(f"| {name} | {cell(col(0), ms)} | {cell(col(1), ms)} | {cell(col(2), ms)} | {cell(col(4), n0)} | {cell(col(5), n0)} | "
          f"{int(sum(col(3)))}, {int(sum(col(6)))} |")
if notes:
    print("\n## Notes\n")
    for n in notes:
        print(f"- {n}")
EOF
cat "results/tlsflood-$tag.md"
