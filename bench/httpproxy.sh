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
# MODE=h2: HTTP/2 clients to the same HTTP/1.1 upstream. h2load
# -c$H2CONNS -m$H2STREAMS (default 16 × 4: 64 requests in flight, as
# wrk's 64 connections) on CPU 1 → the proxy over h2c with prior
# knowledge (veloq-proxy's listener, nginx "listen ... http2", haproxy
# "bind ... proto h2") or over TLS with ALPN h2 (the *-tls proxies: an
# ECDSA P-256 certificate, TLS_AES_128_GCM_SHA256) → the upstream over
# HTTP/1.1 keep-alive. Proxies veloq veloq-epoll nginx haproxy veloq-tls
# nginx-tls haproxy-tls, bodies 64 B and 16 KiB; the same table, p99 from
# h2load's request log, the *-tls rows set against nginx-tls.
#
#   MODE=h2 [ROUNDS=n] [PROXIES=...] [SIZES=...] [H2CONNS=16] [H2STREAMS=4] bench/httpproxy.sh [window-seconds]
#
# MODE=idle: memory per idle client. For each N in IDLE (default "2000
# 5000") the proxy, started fresh, gets N keep-alive clients (cmd/tcpload
# -http -idle N: 128 connects at a time, one GET / answered "Hello,
# World!" by the upstream on each, then idle for HOLD, default 2s); the
# proxy's VmRSS growth over that (read before the first connect and at the
# end of the hold) / N is its KiB per idle client, the upstream
# connections it pooled for their requests included (every proxy here is
# one process: nginx runs master_process off, haproxy nbthread 1, so VmRSS
# of that PID is the whole proxy). The upstream connections open while
# the clients are held are reported (from stub_status), since the pools
# keep far fewer upstream connections than clients.
#
#   MODE=idle [ROUNDS=n] [PROXIES="veloq veloq-epoll nginx haproxy"] [IDLE="2000 5000"] [HOLD=2s] bench/httpproxy.sh
#
# Everything listens on 127.0.0.1; every process the script starts is
# stopped on exit, and every load run is bounded by timeout(1).
set -euo pipefail
cd "$(dirname "$0")"
MODE=${MODE:-http}
DUR=${1:-10}
CONNS=${2:-64}
ROUNDS=${ROUNDS:-5}
H2CONNS=${H2CONNS:-16}
H2STREAMS=${H2STREAMS:-4}
IDLE=${IDLE:-"2000 5000"}
HOLD=${HOLD:-2s}
case $MODE in
http)
	SIZES=${SIZES:-"64 16384 1048576"}
	PROXIES=${PROXIES:-"veloq veloq-epoll nginx haproxy httputil caddy cfloor cfloor-uring"}
	OUT=results/httpproxy-latest.md
	TOOLS="wrk" ;;
h2)
	SIZES=${SIZES:-"64 16384"}
	PROXIES=${PROXIES:-"veloq veloq-epoll nginx haproxy veloq-tls nginx-tls haproxy-tls"}
	OUT=results/httpproxy-h2-latest.md
	TOOLS="h2load openssl" ;;
idle)
	SIZES=64
	PROXIES=${PROXIES:-"veloq veloq-epoll nginx haproxy"}
	OUT=results/httpproxy-idle-latest.md
	TOOLS="" ;;
*)
	echo "httpproxy.sh: MODE=$MODE: want http, h2 or idle" >&2
	exit 2 ;;
esac
UP_PORT=19500
PATH=$PATH:/usr/sbin

for tool in $TOOLS nginx haproxy taskset curl timeout awk; do
	command -v $tool >/dev/null || { echo "httpproxy.sh: $tool not found (apt-get install wrk nginx haproxy curl nghttp2-client openssl)" >&2; exit 1; }
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
[ "$MODE" != idle ] || GOWORK=off go build -o bin/tcpload ./cmd/tcpload
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
        location = / { return 200 \"Hello, World!\"; }
    }"
taskset -c 1 nginx -p "$TMP/up/" -c "$TMP/up/nginx.conf" -e "$TMP/up/error.log" >"$TMP/up.log" 2>&1 &
PIDS="$PIDS $!"
wait_port $UP_PORT || { cat "$TMP/up.log" >&2; exit 1; }
# upstream_accepts: connections the upstream accepted so far, less the
# one this query makes; upstream_active: connections open to it, less
# that one.
upstream_accepts() {
	curl -s "http://127.0.0.1:$UP_PORT/up_status" | awk 'NR == 3 { print $1 - 1 }'
}
upstream_active() {
	curl -s "http://127.0.0.1:$UP_PORT/up_status" | awk 'NR == 1 { print $3 - 1 }'
}

# MODE=h2: the proxies' HTTP/2 listeners, h2c and (the *-tls names) TLS
# with a self-signed ECDSA P-256 certificate; empty in the other modes.
NG_H2=""
HAP_H2=""
HAP_MAXCONN=4000
if [ "$MODE" = h2 ]; then
	openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
		-subj /CN=localhost -addext "subjectAltName=DNS:localhost,IP:127.0.0.1" \
		-keyout "$TMP/key.pem" -out "$TMP/cert.pem" >"$TMP/openssl.log" 2>&1 ||
		{ cat "$TMP/openssl.log" >&2; exit 1; }
	cat "$TMP/cert.pem" "$TMP/key.pem" >"$TMP/both.pem"
	NG_H2="    server {
        listen 127.0.0.1:19512 http2;
        location / { proxy_pass http://be; proxy_http_version 1.1; proxy_set_header Connection \"\"; proxy_buffering on; }
    }
    server {
        listen 127.0.0.1:19522 ssl http2;
        ssl_certificate $TMP/cert.pem;
        ssl_certificate_key $TMP/key.pem;
        location / { proxy_pass http://be; proxy_http_version 1.1; proxy_set_header Connection \"\"; proxy_buffering on; }
    }"
	HAP_H2="frontend fe_h2c
	bind 127.0.0.1:19513 proto h2
	default_backend be
frontend fe_h2tls
	bind 127.0.0.1:19523 ssl crt $TMP/both.pem alpn h2,http/1.1
	default_backend be"
fi
# MODE=idle: haproxy's connection limit above the largest N (about two
# descriptors per client, within the 20,000 a process may have here).
if [ "$MODE" = idle ]; then
	for n in $IDLE; do [ "$n" -lt "$HAP_MAXCONN" ] || HAP_MAXCONN=$((n + 1000)); done
fi

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
    }
$NG_H2"
cat >"$TMP/haproxy.cfg" <<HAP
global
	nbthread 1
	maxconn $HAP_MAXCONN
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
$HAP_H2
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
	veloq-tls) echo "19511 bin/veloq-proxy -listen 127.0.0.1:19511 -upstream 127.0.0.1:$UP_PORT -loops 1 -backend uring -cert $TMP/cert.pem -key $TMP/key.pem" ;;
	nginx-tls) echo "19522 nginx -p $TMP/ng/ -c $TMP/ng/nginx.conf -e $TMP/ng/error.log" ;;
	haproxy-tls) echo "19523 haproxy -db -f $TMP/haproxy.cfg" ;;
	esac
}

# url_for NAME PORT PATH: where the load goes; MODE=h2 reaches nginx and
# haproxy on their h2c listeners, the *-tls proxies over https.
url_for() {
	case $MODE/$1 in
	h2/nginx) echo "http://127.0.0.1:19512$3" ;;
	h2/haproxy) echo "http://127.0.0.1:19513$3" ;;
	h2/*-tls) echo "https://127.0.0.1:$2$3" ;;
	*) echo "http://127.0.0.1:$2$3" ;;
	esac
}

cpu_s() { # PID: "utime stime" in seconds
	awk -v t="$(getconf CLK_TCK)" '{ sub(/.*\) /, ""); split($0, f, " "); print f[12] / t, f[13] / t }' "/proc/$1/stat"
}

# start_proxy NAME: starts it fresh on CPU 0; sets pid and port.
start_proxy() {
	local log=$TMP/$1.log
	set -- $(proxy_cmd "$1")
	port=$1; shift
	taskset -c 0 "$@" >"$log" 2>&1 &
	pid=$!
	PIDS="$PIDS $pid"
	wait_port "$port" || { cat "$log" >&2; exit 1; }
}
stop_proxy() {
	kill -TERM "$pid" 2>/dev/null || true
	wait "$pid" 2>/dev/null || true
}

# median VALUES... / range VALUES... (n/a when none is a number: a proxy
# left out of PROXIES, e.g. nginx or cfloor as the ratio's base)
median() { printf '%s\n' "$@" | { grep -v n/a || true; } | sort -g | awk '{ a[NR] = $1 } END { if (NR == 0) print "n/a"; else print a[int((NR + 1) / 2)] }'; }
range() { printf '%s\n' "$@" | { grep -v n/a || true; } | sort -g | awk '{ a[NR] = $1 } END { if (NR == 0) print "n/a"; else print a[1] "–" a[NR] }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a == "n/a" || b == "n/a" || b + 0 == 0) print "n/a"; else printf "%.2f×", a / b }'; }
# rotated ROUND NAMES...: NAMES rotated by ROUND - 1.
rotated() {
	local r=$1; shift
	for _ in $(seq $(( (r - 1) % $# ))); do set -- "$@" "$1"; shift; done
	echo "$*"
}
versions() {
	echo "nginx $(nginx -v 2>&1 | sed 's|.*/||'), haproxy $(haproxy -v | head -1 | awk '{ print $3 }'), $(go version | awk '{ print $3 }')${CADDY:+, caddy v2.11.9}."
}

if [ "$MODE" = idle ]; then
	declare -A KIB RSS0 UPC IERR
	for round in $(seq "$ROUNDS"); do
		for n in $IDLE; do
			for name in $(rotated "$round" $PROXIES); do
				start_proxy "$name"
				echo "httpproxy.sh: round $round/$ROUNDS, $name, $n idle clients, hold $HOLD" >&2
				code=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/" || true)
				[ "$code" = 200 ] || echo "httpproxy.sh: $name answered $code to GET /" >&2
				timeout 300 taskset -c 1 bin/tcpload -addr "127.0.0.1:$port" -http -idle "$n" -hold "$HOLD" \
					-server-pid "$pid" -json >"$TMP/idle.out" 2>"$TMP/idle.err" &
				load=$!
				# The upstream connections, while the clients are held.
				up=n/a
				for _ in $(seq 1200); do
					grep -q "ready" "$TMP/idle.out" && { up=$(upstream_active); break; }
					kill -0 "$load" 2>/dev/null || break
					sleep 0.05
				done
				wait "$load" || true
				grep '^{' "$TMP/idle.out" >"$TMP/idle.json" || true # after its "ready" line
				stop_proxy
				k="$name/$n"
				if ! jq -e .server_kib_per_conn "$TMP/idle.json" >/dev/null 2>&1; then
					IERR[$k]+="r$round: $(tail -1 "$TMP/idle.err") $(tail -1 "$TMP/idle.out"); "
					continue
				fi
				KIB[$k]+=" $(jq -r '.server_kib_per_conn | . * 100 | round / 100' "$TMP/idle.json")"
				RSS0[$k]+=" $(jq -r '.server_rss_before_kib / 1024 | . * 10 | round / 10' "$TMP/idle.json")"
				UPC[$k]+=" $up"
				e=$(jq -r 'select(.errors > 0 or .conns_ok < .conns) | "\(.conns_ok)/\(.conns) held, \(.errors) errors: \(.first_error)"' "$TMP/idle.json")
				[ -z "$e" ] || IERR[$k]+="r$round: $e; "
			done
		done
	done
	{
		echo "# HTTP reverse proxy: memory per idle client"
		echo
		echo "\`MODE=idle ROUNDS=$ROUNDS IDLE=\"$IDLE\" HOLD=$HOLD bench/httpproxy.sh\` on $(date -u +%Y-%m-%d), $(uname -r), $(nproc) CPUs."
		echo
		echo "N keep-alive clients (tcpload -http -idle N, CPU 1), one GET / each through the proxy (CPU 0, one"
		echo "process, one thread/loop/worker) to nginx (CPU 1), then idle for $HOLD. KiB per idle client ="
		echo "(proxy VmRSS at the end of the hold − before the first connect) / N, the upstream connections"
		echo "the proxy pooled for them included; \"upstream conns\" = connections open to the upstream while"
		echo "the clients are held (stub_status). $ROUNDS interleaved rounds, medians and ranges. \"marginal\" ="
		echo "the growth from the previous N to this one / the clients added, from the medians: the cost of one"
		echo "more client without what a proxy pays once (code and runtime pages touched, io_uring's buffer"
		echo "ring, pools and tables), which the per-client figure spreads over N."
		echo
		echo "| proxy | idle clients | KiB per idle client | range | vs nginx | marginal KiB | RSS before MiB | upstream conns |"
		echo "|---|--:|--:|--:|--:|--:|--:|--:|"
		prev=""
		for n in $IDLE; do
			base=$(median ${KIB[nginx/$n]:-n/a})
			for name in $PROXIES; do
				k="$name/$n"
				m=$(median ${KIB[$k]:-n/a})
				marg=n/a
				[ -z "$prev" ] || marg=$(awk -v a="$(median ${KIB[$name/$prev]:-n/a})" -v b="$m" -v p="$prev" -v n="$n" \
					'BEGIN { if (a == "n/a" || b == "n/a" || n == p) print "n/a"; else printf "%.2f", (b * n - a * p) / (n - p) }')
				echo "| $name | $n | $m | $(range ${KIB[$k]:-n/a}) | $(ratio "$m" "$base") | $marg | $(median ${RSS0[$k]:-n/a}) | $(median ${UPC[$k]:-n/a}) |"
			done
			prev=$n
		done
		echo
		for k in "${!IERR[@]}"; do echo "- tcpload reported for $k: ${IERR[$k]}"; done
		echo
		versions
	} >"$OUT"
	cat "$OUT"
	exit 0
fi

# load_run URL SECONDS [LOG]: the mode's load on CPU 1, wrk -t1 -c$CONNS
# --latency or h2load -c$H2CONNS -m$H2STREAMS; with LOG its output goes
# there (and h2load's request log to LOG.req).
load_run() {
	local url=$1 secs=$2 log=${3:-/dev/null}
	if [ "$MODE" = h2 ]; then
		local reqlog=()
		[ "$log" = /dev/null ] || { rm -f "$log.req"; reqlog=(--log-file="$log.req"); } # h2load appends
		timeout $((secs + 30)) taskset -c 1 h2load -c"$H2CONNS" -m"$H2STREAMS" -D "$secs" \
			--tls13-ciphers=TLS_AES_128_GCM_SHA256 "${reqlog[@]}" "$url" >"$log" 2>&1 || true
	else
		timeout $((secs + 30)) taskset -c 1 wrk -t1 -c"$CONNS" -d"${secs}s" --latency "$url" >"$log" 2>&1 || true
	fi
}
# load_requests LOG / load_p99_ms LOG / load_errors LOG: from wrk
# --latency's output, or h2load's (succeeded requests) and its request
# log (the third field, µs).
load_requests() {
	if [ "$MODE" = h2 ]; then
		awk '/^requests:/ { for (i = 1; i < NF; i++) if ($(i + 1) == "succeeded,") print $i }' "$1"
	else
		awk '/requests in/ { print $1 }' "$1"
	fi
}
load_p99_ms() {
	if [ "$MODE" = h2 ]; then
		[ -s "$1.req" ] || { echo n/a; return; }
		awk '{ print $3 }' "$1.req" | sort -n | awk '{ a[NR] = $1 } END { print a[int(NR * 0.99) + 1] / 1000 }'
	else
		awk '$1 == "99%" { v = $2; u = v; sub(/[0-9.]+/, "", u); sub(/[a-z]+$/, "", v);
			print (u == "us" ? v / 1000 : (u == "s" ? v * 1000 : v)) }' "$1"
	fi
}
load_errors() {
	if [ "$MODE" = h2 ]; then
		awk '/^requests:/ && ($10 + $12 + $14 > 0) { printf "%s ", $0 }
			/^status codes:/ && ($5 + $7 + $9 > 0) { printf "%s ", $0 }' "$1"
	else
		awk '/Non-2xx|Socket errors/ { printf "%s ", $0 }' "$1"
	fi
}

declare -A RPS CPUREQ USRREQ SYSREQ P99 REUSE ERR
for round in $(seq "$ROUNDS"); do
	order=$(rotated "$round" $PROXIES)
	for size in $SIZES; do
		for name in $order; do
			start_proxy "$name"
			url=$(url_for "$name" "$port" "/$size")
			if [ "$MODE" = h2 ]; then
				echo "httpproxy.sh: round $round/$ROUNDS, $name, ${size} B, h2load -c$H2CONNS -m$H2STREAMS, ${DUR}s" >&2
				ok=$(timeout 30 taskset -c 1 h2load -n1 -c1 "$url" 2>&1 | awk '/^status codes:/ { print $3 }')
				[ "$ok" = 1 ] || echo "httpproxy.sh: $name did not answer 2xx to an h2 GET /$size" >&2
			else
				echo "httpproxy.sh: round $round/$ROUNDS, $name, ${size} B, $CONNS conns, ${DUR}s" >&2
				code=$(curl -s -o /dev/null -w '%{http_code}' "$url" || true)
				[ "$code" = 200 ] || echo "httpproxy.sh: $name answered $code to GET /$size" >&2
			fi
			load_run "$url" 1 # warm-up
			acc0=$(upstream_accepts)
			c0=$(cpu_s "$pid")
			load_run "$url" "$DUR" "$TMP/load.log"
			c1=$(cpu_s "$pid")
			acc1=$(upstream_accepts)
			stop_proxy
			req=$(load_requests "$TMP/load.log")
			req=${req:-0}
			k="$name/$size"
			RPS[$k]+=" $(awk -v r="$req" -v d="$DUR" 'BEGIN { printf "%.0f", r / d }')"
			read -r u0 s0 <<<"$c0"
			read -r u1 s1 <<<"$c1"
			CPUREQ[$k]+=" $(awk -v r="$req" -v a="$u0" -v b="$u1" -v c="$s0" -v d="$s1" 'BEGIN { t = b - a + d - c; if (t > 0) printf "%.0f", r / t; else print "n/a" }')"
			USRREQ[$k]+=" $(awk -v r="$req" -v a="$u0" -v b="$u1" 'BEGIN { if (r > 0) printf "%.2f", (b - a) * 1e6 / r; else print "n/a" }')"
			SYSREQ[$k]+=" $(awk -v r="$req" -v a="$s0" -v b="$s1" 'BEGIN { if (r > 0) printf "%.2f", (b - a) * 1e6 / r; else print "n/a" }')"
			P99[$k]+=" $(load_p99_ms "$TMP/load.log")"
			REUSE[$k]+=" $(awk -v r="$req" -v a="$acc0" -v b="$acc1" 'BEGIN { if (r > 0) printf "%.5f", 1 - (b - a) / r; else print "n/a" }')"
			e=$(load_errors "$TMP/load.log")
			[ -z "$e" ] || ERR[$k]+="r$round: $e; "
			case $name in veloq*) grep "client:" "$TMP/$name.log" | tail -1 >"$TMP/$name-$size.client" || true ;; esac
		done
	done
done

{
	if [ "$MODE" = h2 ]; then
		echo "# HTTP reverse-proxy benchmark: HTTP/2 clients, HTTP/1.1 upstream"
		echo
		echo "\`MODE=h2 ROUNDS=$ROUNDS H2CONNS=$H2CONNS H2STREAMS=$H2STREAMS bench/httpproxy.sh $DUR\` on $(date -u +%Y-%m-%d), $(uname -r), $(nproc) CPUs,"
		echo "load average before the run's end: $(cut -d' ' -f1-3 /proc/loadavg)."
		echo
		echo "h2load -c$H2CONNS -m$H2STREAMS (CPU 1) → proxy over h2c, or h2 over TLS for the *-tls rows (CPU 0, one"
		echo "thread/loop/worker) → nginx serving static files over HTTP/1.1 keep-alive (CPU 1, one worker)."
		echo "${DUR} s window after a 1 s warm-up; $ROUNDS interleaved rounds, medians. p99 from h2load's request log."
		tool=h2load
	else
		echo "# HTTP reverse-proxy benchmark"
		echo
		echo "\`ROUNDS=$ROUNDS bench/httpproxy.sh $DUR $CONNS\` on $(date -u +%Y-%m-%d), $(uname -r), $(nproc) CPUs,"
		echo "load average before the run's end: $(cut -d' ' -f1-3 /proc/loadavg)."
		echo
		echo "wrk -t1 -c$CONNS keep-alive (CPU 1) → proxy (CPU 0, one thread/loop/worker) → nginx serving static"
		echo "files (CPU 1, one worker). ${DUR} s window after a 1 s warm-up; $ROUNDS interleaved rounds, medians."
		tool=wrk
	fi
	echo "Proxy CPU = utime+stime of the proxy process over the window; user and kernel µs/req split it (/proc's"
	echo "clock ticks, 10 ms, so a few % at this window). Reuse = 1 − upstream accepts / requests."
	echo "p99 vs nginx: the proxy's p99 over nginx's (the target is at most 1.00×); the *-tls rows against nginx-tls."
	echo
	echo "| proxy | body B | req/s | req per proxy CPU-s | range | vs nginx | vs cfloor | user µs/req | kernel µs/req | p99 ms | p99 vs nginx | upstream reuse |"
	echo "|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|"
	for size in $SIZES; do
		floor=$(median ${CPUREQ[cfloor/$size]:-n/a})
		for name in $PROXIES; do
			ref=nginx
			case $name in *-tls) ref=nginx-tls ;; esac
			base=$(median ${CPUREQ[$ref/$size]:-n/a})
			basep99=$(median ${P99[$ref/$size]:-n/a})
			k="$name/$size"
			m=$(median ${CPUREQ[$k]:-n/a})
			p99=$(median ${P99[$k]:-n/a})
			echo "| $name | $size | $(median ${RPS[$k]:-n/a}) | $m | $(range ${CPUREQ[$k]:-n/a}) | $(ratio "$m" "$base") | $(ratio "$m" "$floor") | $(median ${USRREQ[$k]:-n/a}) | $(median ${SYSREQ[$k]:-n/a}) | $p99 | $(ratio "$p99" "$basep99") | $(median ${REUSE[$k]:-n/a}) |"
		done
	done
	echo
	for k in "${!ERR[@]}"; do echo "- $tool reported errors for $k: ${ERR[$k]}"; done
	for f in "$TMP"/veloq*.client; do [ -s "$f" ] && echo "- $(basename "$f" .client) $(cat "$f")"; done
	echo
	versions
} >"$OUT"
cat "$OUT"
