#!/usr/bin/env bash
# HTTP reverse-proxy benchmark: wrk -t1 -c64 keep-alive (CPU 1) → proxy
# (CPU 0, one thread/loop/worker) → one upstream (CPU 1: nginx serving
# static files, one worker, keep-alive). Bodies of 64 B and 16 KiB, and a
# streamed 1 MiB one. The proxies, each started fresh per run:
#
#   veloq         cmd/veloq-proxy -loops 1 -backend uring
#   veloq-epoll   cmd/veloq-proxy -loops 1 -backend epoll
#   nginx         proxy_pass to an upstream {} with keepalive 64,
#                 proxy_http_version 1.1, proxy_set_header Connection "",
#                 worker_processes 1, master_process off
#   haproxy       mode http, http-reuse always, nbthread 1
#   httputil      Go's httputil.ReverseProxy on net/http (peers/stdproxy),
#                 GOMAXPROCS=1, 64 idle upstream connections
#   caddy         Caddy v2.11.9 reverse_proxy (go install'ed into bench/bin;
#                 skipped with the reason when it does not install)
#   cfloor        bench/floor/epoll_proxy.c: the C floor, a minimal epoll
#                 keep-alive proxy (forwards the head verbatim, frames the
#                 response by Content-Length, pools upstream connections)
#   cfloor-uring  bench/floor/uring_proxy.c: the same on io_uring (liburing;
#                 skipped with the reason when it does not build or run)
#
# Reported per proxy and body: req/s, requests per proxy CPU-second (the
# proxy's utime+stime from /proc over wrk's window), its ratio to nginx,
# wrk's p99, and upstream connection reuse: 1 − (connections the upstream
# accepted over the window) / (requests), from the upstream's stub_status,
# the same measure for every proxy. ROUNDS (default 5) interleaved rounds
# run every proxy in turn in an order rotated each round; figures are the
# medians over the rounds, with the range of req per CPU-s.
#
#   [ROUNDS=n] [PROXIES="veloq nginx ..."] [SIZES="64 16384 1048576"] bench/httpproxy.sh [window-seconds] [connections]
#
# Everything listens on 127.0.0.1; every process the script starts is
# stopped on exit, and every load run is bounded by timeout(1).
set -euo pipefail
cd "$(dirname "$0")"
DUR=${1:-10}
CONNS=${2:-64}
ROUNDS=${ROUNDS:-5}
SIZES=${SIZES:-"64 16384 1048576"}
PROXIES=${PROXIES:-"veloq veloq-epoll nginx haproxy httputil caddy cfloor cfloor-uring"}
UP_PORT=19500
OUT=results/httpproxy-latest.md
PATH=$PATH:/usr/sbin

for tool in wrk nginx haproxy taskset curl timeout awk; do
	command -v $tool >/dev/null || { echo "httpproxy.sh: $tool not found (apt-get install wrk nginx haproxy curl)" >&2; exit 1; }
done

TMP=$(mktemp -d /tmp/veloq-httpproxy.XXXXXX)
PIDS=""
cleanup() {
	for p in $PIDS; do kill "$p" 2>/dev/null || true; done
	for p in $PIDS; do wait "$p" 2>/dev/null || true; done
	rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

mkdir -p bin results
echo "httpproxy.sh: building" >&2
GOWORK=off go build -o bin/stdproxy ./peers/stdproxy
(cd .. && go build -o bench/bin/veloq-proxy ./cmd/veloq-proxy)
CADDY=""
if ! [[ " $PROXIES " == *" caddy "* ]]; then
	:
elif [ -x bin/caddy ]; then
	CADDY=bin/caddy
elif GOBIN=$PWD/bin timeout 600 go install github.com/caddyserver/caddy/v2/cmd/caddy@v2.11.9 >"$TMP/caddy-install.log" 2>&1; then
	CADDY=bin/caddy
else
	echo "httpproxy.sh: skipping caddy: go install github.com/caddyserver/caddy/v2/cmd/caddy@v2.11.9 failed: $(tail -1 "$TMP/caddy-install.log")" >&2
	PROXIES=$(echo "$PROXIES" | sed 's/\bcaddy\b//')
fi

if [[ " $PROXIES " == *" cfloor "* ]]; then
	gcc -O2 -o bin/epoll_proxy floor/epoll_proxy.c
fi
if [[ " $PROXIES " == *" cfloor-uring "* ]] && ! gcc -O2 -o bin/uring_proxy floor/uring_proxy.c -luring 2>"$TMP/uring-build.log"; then
	echo "httpproxy.sh: skipping cfloor-uring: gcc floor/uring_proxy.c -luring failed (apt-get install liburing-dev): $(tail -1 "$TMP/uring-build.log")" >&2
	PROXIES=$(echo "$PROXIES" | sed 's/\bcfloor-uring\b//')
fi

# wait_port PORT: until something accepts on 127.0.0.1:PORT (at most 10 s).
wait_port() {
	for _ in $(seq 200); do
		(exec 3<>/dev/tcp/127.0.0.1/$1) 2>/dev/null && return 0
		sleep 0.05
	done
	echo "httpproxy.sh: nothing listens on port $1" >&2
	return 1
}

# The upstream: nginx on CPU 1 serving /64, /16384, /1048576 and its
# stub_status (accepted connections) on /up_status.
mkdir -p "$TMP/up/www" "$TMP/ng"
for s in $SIZES; do head -c "$s" /dev/urandom >"$TMP/up/www/$s"; done
nginx_conf_for() { # DIR BODY
	cat >"$1/nginx.conf" <<NGINX
worker_processes 1;
master_process off;
daemon off;
worker_rlimit_nofile 65536;
pid $1/nginx.pid;
error_log $1/error.log warn;
events { worker_connections 16384; }
http {
    access_log off;
    client_body_temp_path $1/client_body;
    proxy_temp_path $1/proxy;
    fastcgi_temp_path $1/fastcgi;
    uwsgi_temp_path $1/uwsgi;
    scgi_temp_path $1/scgi;
    keepalive_requests 100000000;
    keepalive_timeout 300s;
$2
}
NGINX
}
nginx_conf_for "$TMP/up" "    sendfile on;
    server {
        listen 127.0.0.1:$UP_PORT;
        root $TMP/up/www;
        location = /up_status { stub_status; }
    }"
taskset -c 1 nginx -p "$TMP/up/" -c "$TMP/up/nginx.conf" -e "$TMP/up/error.log" >"$TMP/up.log" 2>&1 &
PIDS="$PIDS $!"
wait_port $UP_PORT
# upstream_accepts: connections the upstream accepted so far, less the
# one this query makes.
upstream_accepts() {
	curl -s "http://127.0.0.1:$UP_PORT/up_status" | awk 'NR == 3 { print $1 - 1 }'
}

nginx_conf_for "$TMP/ng" "    upstream be {
        server 127.0.0.1:$UP_PORT;
        keepalive 64;
    }
    server {
        listen 127.0.0.1:19502;
        location / {
            proxy_pass http://be;
            proxy_http_version 1.1;
            proxy_set_header Connection \"\";
            proxy_buffering on;
        }
    }"
cat >"$TMP/haproxy.cfg" <<HAP
global
	nbthread 1
	maxconn 4000
defaults
	mode http
	timeout connect 5s
	timeout client 60s
	timeout server 60s
	option http-keep-alive
	http-reuse always
frontend fe
	bind 127.0.0.1:19503
	default_backend be
backend be
	server up 127.0.0.1:$UP_PORT maxconn 1000
HAP
cat >"$TMP/Caddyfile" <<CADDY
{
	admin off
	auto_https off
	persist_config off
	log {
		level ERROR
	}
}
http://127.0.0.1:19505 {
	reverse_proxy 127.0.0.1:$UP_PORT
}
CADDY

proxy_cmd() { # NAME -> "PORT command..."
	case $1 in
	veloq) echo "19501 bin/veloq-proxy -listen 127.0.0.1:19501 -upstream 127.0.0.1:$UP_PORT -loops 1 -backend uring" ;;
	veloq-epoll) echo "19506 bin/veloq-proxy -listen 127.0.0.1:19506 -upstream 127.0.0.1:$UP_PORT -loops 1 -backend epoll" ;;
	nginx) echo "19502 nginx -p $TMP/ng/ -c $TMP/ng/nginx.conf -e $TMP/ng/error.log" ;;
	haproxy) echo "19503 haproxy -db -f $TMP/haproxy.cfg" ;;
	httputil) echo "19504 env GOMAXPROCS=1 bin/stdproxy -addr 127.0.0.1:19504 -upstream http://127.0.0.1:$UP_PORT" ;;
	cfloor) echo "19507 bin/epoll_proxy -addr 127.0.0.1:19507 -upstream 127.0.0.1:$UP_PORT" ;;
	cfloor-uring) echo "19508 bin/uring_proxy -addr 127.0.0.1:19508 -upstream 127.0.0.1:$UP_PORT" ;;
	caddy) echo "19505 env GOMAXPROCS=1 $CADDY run --adapter caddyfile --config $TMP/Caddyfile" ;;
	esac
}

cpu_s() { # PID: utime+stime in seconds
	awk -v t="$(getconf CLK_TCK)" '{ sub(/.*\) /, ""); split($0, f, " "); print (f[12] + f[13]) / t }' "/proc/$1/stat"
}

# wrk_requests LOG / wrk_p99_ms LOG: from wrk --latency's output.
wrk_requests() { awk '/requests in/ { print $1 }' "$1"; }
wrk_p99_ms() {
	awk '$1 == "99%" { v = $2; u = v; sub(/[0-9.]+/, "", u); sub(/[a-z]+$/, "", v);
		print (u == "us" ? v / 1000 : (u == "s" ? v * 1000 : v)) }' "$1"
}

declare -A RPS CPUREQ P99 REUSE ERR
for round in $(seq "$ROUNDS"); do
	set -- $PROXIES
	for _ in $(seq $(( (round - 1) % $# ))); do set -- "$@" "$1"; shift; done
	order="$*"
	for size in $SIZES; do
		for name in $order; do
			set -- $(proxy_cmd "$name")
			port=$1; shift
			taskset -c 0 "$@" >"$TMP/$name.log" 2>&1 &
			pid=$!
			PIDS="$PIDS $pid"
			wait_port "$port" || { cat "$TMP/$name.log" >&2; exit 1; }
			url="http://127.0.0.1:$port/$size"
			echo "httpproxy.sh: round $round/$ROUNDS, $name, ${size} B, $CONNS conns, ${DUR}s" >&2
			code=$(curl -s -o /dev/null -w '%{http_code}' "$url" || true)
			[ "$code" = 200 ] || echo "httpproxy.sh: $name answered $code to GET /$size" >&2
			timeout 30 taskset -c 1 wrk -t1 -c"$CONNS" -d1s "$url" >/dev/null 2>&1 || true # warm-up
			acc0=$(upstream_accepts)
			c0=$(cpu_s "$pid")
			timeout $((DUR + 30)) taskset -c 1 wrk -t1 -c"$CONNS" -d"${DUR}s" --latency "$url" >"$TMP/wrk.log" 2>&1 || true
			c1=$(cpu_s "$pid")
			acc1=$(upstream_accepts)
			kill -TERM "$pid" 2>/dev/null || true
			wait "$pid" 2>/dev/null || true
			req=$(wrk_requests "$TMP/wrk.log")
			req=${req:-0}
			k="$name/$size"
			RPS[$k]+=" $(awk -v r="$req" -v d="$DUR" 'BEGIN { printf "%.0f", r / d }')"
			CPUREQ[$k]+=" $(awk -v r="$req" -v a="$c0" -v b="$c1" 'BEGIN { if (b - a > 0) printf "%.0f", r / (b - a); else print "n/a" }')"
			P99[$k]+=" $(wrk_p99_ms "$TMP/wrk.log")"
			REUSE[$k]+=" $(awk -v r="$req" -v a="$acc0" -v b="$acc1" 'BEGIN { if (r > 0) printf "%.5f", 1 - (b - a) / r; else print "n/a" }')"
			e=$(awk '/Non-2xx|Socket errors/ { printf "%s ", $0 }' "$TMP/wrk.log")
			[ -z "$e" ] || ERR[$k]+="r$round: $e; "
			if [ "$name" = veloq ] || [ "$name" = veloq-epoll ]; then
				grep "client:" "$TMP/$name.log" | tail -1 >"$TMP/$name-$size.client" || true
			fi
		done
	done
done

# median VALUES... / range VALUES... (n/a when none is a number: a proxy
# left out of PROXIES, e.g. nginx or cfloor as the ratio's base)
median() { printf '%s\n' "$@" | { grep -v n/a || true; } | sort -g | awk '{ a[NR] = $1 } END { if (NR == 0) print "n/a"; else print a[int((NR + 1) / 2)] }'; }
range() { printf '%s\n' "$@" | { grep -v n/a || true; } | sort -g | awk '{ a[NR] = $1 } END { if (NR == 0) print "n/a"; else print a[1] "–" a[NR] }'; }

{
	echo "# HTTP reverse-proxy benchmark"
	echo
	echo "\`ROUNDS=$ROUNDS bench/httpproxy.sh $DUR $CONNS\` on $(date -u +%Y-%m-%d), $(uname -r), $(nproc) CPUs,"
	echo "load average before the run's end: $(cut -d' ' -f1-3 /proc/loadavg)."
	echo
	echo "wrk -t1 -c$CONNS keep-alive (CPU 1) → proxy (CPU 0, one thread/loop/worker) → nginx serving static"
	echo "files (CPU 1, one worker). ${DUR} s window after a 1 s warm-up; $ROUNDS interleaved rounds, medians."
	echo "Proxy CPU = utime+stime of the proxy process over the window. Reuse = 1 − upstream accepts / requests."
	echo
	echo "| proxy | body B | req/s | req per proxy CPU-s | range | vs nginx | vs cfloor | p99 ms | upstream reuse |"
	echo "|---|--:|--:|--:|--:|--:|--:|--:|--:|"
	ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a == "n/a" || b == "n/a" || b + 0 == 0) print "n/a"; else printf "%.2f×", a / b }'; }
	for size in $SIZES; do
		base=$(median ${CPUREQ[nginx/$size]:-n/a})
		floor=$(median ${CPUREQ[cfloor/$size]:-n/a})
		for name in $PROXIES; do
			k="$name/$size"
			m=$(median ${CPUREQ[$k]:-n/a})
			echo "| $name | $size | $(median ${RPS[$k]:-n/a}) | $m | $(range ${CPUREQ[$k]:-n/a}) | $(ratio "$m" "$base") | $(ratio "$m" "$floor") | $(median ${P99[$k]:-n/a}) | $(median ${REUSE[$k]:-n/a}) |"
		done
	done
	echo
	for k in "${!ERR[@]}"; do echo "- wrk reported errors for $k: ${ERR[$k]}"; done
	for f in "$TMP"/veloq*.client; do [ -s "$f" ] && echo "- $(basename "$f" .client) $(cat "$f")"; done
	echo
	echo "nginx $(nginx -v 2>&1 | sed 's|.*/||'), haproxy $(haproxy -v | head -1 | awk '{ print $3 }'), $(go version | awk '{ print $3 }')${CADDY:+, caddy v2.11.9}."
} >"$OUT"
cat "$OUT"
