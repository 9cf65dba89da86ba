#!/usr/bin/env bash
# HTTP/2 benchmark (issue 22): veloq (cmd/echo-server -mode http, one loop,
# io_uring and epoll) against Go's net/http (GOMAXPROCS=1) and nginx (one
# worker), h2 over TLS and h2c with prior knowledge, in the same run:
#   - h2load -c64 -m16 (64 connections, 16 streams each), GET / answering
#     "Hello, World!": requests per second, requests per server CPU-second
#     (utime+stime from /proc over the window) and p99 latency (from
#     h2load's per-request log);
#   - idle memory: server RSS growth per idle HTTP/2 connection, over N
#     connections that each made one request and are held (bench/cmd/h2idle).
# Every server runs pinned to CPU 0, h2load on CPU 1; every server runs in
# every round, in an order rotated each round; each figure is the median
# over the rounds with its range (min-max). 127.0.0.1 only. TLS is 1.3 with
# TLS_AES_128_GCM_SHA256 for everyone (h2load --tls13-ciphers; nginx's
# ssl_conf_command). Results go to results/h2-latest.md (h2-quick.md,
# h2-smoke.md).
#
#   bench/h2.sh            # 3 rounds, 2 s warmup + 8 s windows, 2,000 idle connections
#   bench/h2.sh --quick    # 1 round, 3 s windows, 500 idle
#   bench/h2.sh --smoke    # checks that every server answers; numbers mean nothing
#
# Needs h2load (apt-get install nghttp2-client) and python3; nginx and
# openssl are optional (nginx is skipped without them).
set -euo pipefail
cd "$(dirname "$0")"

rounds=3 secs=8 warm=2 idle=2000 tag=latest
case "${1:-}" in
--quick) rounds=1 secs=3 warm=1 idle=500 tag=quick ;;
--smoke) rounds=1 secs=1 warm=1 idle=50 tag=smoke ;;
"") ;;
*) echo "usage: bench/h2.sh [--quick|--smoke]" >&2; exit 2 ;;
esac
# shellcheck source=lib.sh
. ./lib.sh
note() { echo "   note: $*"; }
have h2load || { echo "h2.sh needs h2load: apt-get install nghttp2-client" >&2; exit 1; }
have python3 || { echo "h2.sh needs python3" >&2; exit 1; }
pin0="" pin1=""
if have taskset; then pin0="taskset -c 0" pin1="taskset -c 1"; fi

bin=$PWD/bin tmp=$PWD/results/tmp/h2
rm -rf "$tmp"
mkdir -p "$bin" "$tmp" results
echo "== build"
(cd .. && go build -o "$bin/echo-server" ./cmd/echo-server)
go build -o "$bin/stdhttp" ./peers/stdhttp
go build -o "$bin/h2idle" ./cmd/h2idle

# nginx: one process in the foreground (its CPU is all in the sampled
# PID), h2 over TLS on one port and h2c on another.
nginx_dir=$tmp/nginx nginx_ok=""
if [ -n "$nginx_bin" ] && have openssl; then
	mkdir -p "$nginx_dir"
	nginx_cert "$nginx_dir" || true # a missing certificate fails the check below
	nginx_conf "$nginx_dir" h2.sh "    http2_max_requests 100000000;
    server {
        listen 127.0.0.1:NGINX_TLS_PORT ssl http2;
        listen 127.0.0.1:NGINX_C_PORT http2;
        ssl_certificate $nginx_dir/cert.pem;
        ssl_certificate_key $nginx_dir/key.pem;
        ssl_protocols TLSv1.3;
        ssl_conf_command Ciphersuites TLS_AES_128_GCM_SHA256;
        location = / {
            default_type text/plain;
            return 200 \"Hello, World!\";
        }
    }"
	sed -e "s/NGINX_TLS_PORT/19398/; s/NGINX_C_PORT/19399/" "$nginx_dir/nginx.conf" >"$nginx_dir/check.conf"
	if nginx_check "$nginx_dir" "$nginx_dir/check.conf"; then
		nginx_ok=1
	else
		echo "   note: nginx refused the config: $(tail -1 "$nginx_dir/check.log")"
	fi
else
	echo "   note: nginx or openssl missing: nginx is skipped"
fi

# name|scheme|command (PORT is replaced by a fresh port per run)
servers=(
	"veloq-uring h2c|http|$bin/echo-server -mode http -loops 1 -backend uring -addr 127.0.0.1:PORT"
	"veloq-epoll h2c|http|$bin/echo-server -mode http -loops 1 -backend epoll -addr 127.0.0.1:PORT"
	"net/http h2c|http|env GOMAXPROCS=1 $bin/stdhttp -h2c -addr 127.0.0.1:PORT"
	"veloq-uring h2|https|$bin/echo-server -mode http -loops 1 -backend uring -tls-self-signed -addr 127.0.0.1:PORT"
	"veloq-epoll h2|https|$bin/echo-server -mode http -loops 1 -backend epoll -tls-self-signed -addr 127.0.0.1:PORT"
	"net/http h2|https|env GOMAXPROCS=1 $bin/stdhttp -tls-self-signed -addr 127.0.0.1:PORT"
)
if [ -n "$nginx_ok" ]; then
	servers+=("nginx h2c|http|NGINX c" "nginx h2|https|NGINX tls")
fi

port=19400
pid=""
# start CMD SCHEME: starts a server on a fresh port; sets pid and url.
start() {
	local cmd=$1 scheme=$2
	port=$((port + 1))
	if [[ $cmd == NGINX* ]]; then
		local p2=$((port + 1000))
		sed -e "s/NGINX_TLS_PORT/$port/; s/NGINX_C_PORT/$p2/" "$nginx_dir/nginx.conf" >"$nginx_dir/run.conf"
		[ "$cmd" = "NGINX c" ] && url_port=$p2 || url_port=$port
		$pin0 "$nginx_bin" -p "$nginx_dir/" -c "$nginx_dir/run.conf" >"$tmp/server.log" 2>&1 &
	else
		url_port=$port
		$pin0 ${cmd//PORT/$port} >"$tmp/server.log" 2>&1 &
	fi
	pid=$!
	url="$scheme://127.0.0.1:$url_port/"
	server_ready "$cmd" "$tmp/server.log" "$url_port"
}
cpu() { awk '{print $14 + $15}' "/proc/$1/stat"; }
load() {
	$pin1 h2load -c64 -m16 --tls13-ciphers=TLS_AES_128_GCM_SHA256 "$@" "$url"
}

echo "== h2load -c64 -m16, $rounds round(s) of ${secs} s"
results=$tmp/runs.tsv
: >"$results"
n=${#servers[@]}
for r in $(seq 0 $((rounds - 1))); do
	for i in $(seq 0 $((n - 1))); do
		IFS='|' read -r name scheme cmd <<<"${servers[$(((i + r) % n))]}"
		start "$cmd" "$scheme" || continue
		load -D "$warm" >/dev/null 2>&1 || true
		c0=$(cpu "$pid")
		t0=$(date +%s.%N)
		rm -f "$tmp/req.log" # h2load appends to its log
		load -D "$secs" --log-file="$tmp/req.log" >"$tmp/h2load.out" 2>&1 || true
		t1=$(date +%s.%N)
		c1=$(cpu "$pid")
		stop_server
		ok=$(awk '/^requests:/ {for (i = 1; i <= NF; i++) if ($(i+1) == "succeeded,") print $i}' "$tmp/h2load.out")
		p99=$(python3 -c '
import sys
v = sorted(int(l.split()[2]) for l in open(sys.argv[1]) if l.strip())
print(v[int(len(v) * 0.99)] if v else 0)' "$tmp/req.log")
		ticks=$((c1 - c0))
		wall=$(awk -v a="$t0" -v b="$t1" 'BEGIN { print b - a }')
		printf '%s\t%s\t%s\t%s\t%s\n' "$name" "${ok:-0}" "$ticks" "$wall" "$p99" >>"$results"
		echo "   round $((r + 1)) $name: ${ok:-0} requests, $ticks CPU ticks, p99 ${p99} µs"
	done
done

echo "== idle memory: $idle connections held"
idles=$tmp/idle.tsv
: >"$idles"
for s in "${servers[@]}"; do
	IFS='|' read -r name scheme cmd <<<"$s"
	[[ $name == *epoll* ]] && continue # the memory is the same code's
	start "$cmd" "$scheme" || continue
	flag=""
	[ "$scheme" = https ] && flag=-tls
	if out=$($pin1 "$bin/h2idle" -addr "127.0.0.1:$url_port" -pid "$pid" -n "$idle" -hold 2s $flag 2>&1); then
		printf '%s\t%s\n' "$name" "$(echo "$out" | python3 -c 'import json,sys; print(json.load(sys.stdin)["bytes_per_conn"])')" >>"$idles"
	else
		echo "   $name: $out"
	fi
	stop_server
done

python3 - "$results" "$idles" "$(getconf CLK_TCK)" "$rounds" "$secs" "$idle" >"results/h2-$tag.md" <<'EOF'
import statistics, sys
runs, idles, tck, rounds, secs, idle = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5], sys.argv[6]
rows = {}
for line in open(runs):
    name, ok, ticks, wall, p99 = line.rstrip("\n").split("\t")
    ok, cpu, wall = int(ok), float(ticks) / tck, float(wall)
    rows.setdefault(name, []).append((ok / wall, ok / cpu if cpu else 0, int(p99)))
def rng(v):
    return f"{min(v):,.0f}–{max(v):,.0f}"
print(f"# HTTP/2: h2load -c64 -m16, GET / (Hello, World!)\n")
print(f"{rounds} interleaved round(s) of {secs} s; server on CPU 0, h2load on CPU 1; medians, ranges over rounds.\n")
print("| server | req/s | req per server CPU-s | range | µs CPU/req | p99 (µs) |")
print("|---|---:|---:|---:|---:|---:|")
med = {}
for name, v in rows.items():
    per = [x[1] for x in v]
    med[name] = statistics.median(per)
    print(f"| {name} | {statistics.median(x[0] for x in v):,.0f} | {med[name]:,.0f} | {rng(per)} | "
          f"{1e6 / med[name]:.2f} | {statistics.median(x[2] for x in v):,.0f} |")
print()
for proto in ("h2c", "h2"):
    for v in ("veloq-uring", "veloq-epoll"):
        k = f"{v} {proto}"
        for peer in ("net/http", "nginx"):
            p = f"{peer} {proto}"
            if k in med and p in med and med[p]:
                print(f"- {k} / {p}: {med[k] / med[p]:.2f}× requests per server CPU-s")
print(f"\n## Idle HTTP/2 connections ({idle} held after one request each)\n")
print("| server | server RSS per connection |")
print("|---|---:|")
for line in open(idles):
    name, b = line.rstrip("\n").split("\t")
    print(f"| {name} | {float(b) / 1024:.1f} KiB |")
EOF
cat "results/h2-$tag.md"
