#!/usr/bin/env bash
# Static file benchmark (issue 23): veloq's FileServer (cmd/echo-server
# -mode http -static, io_uring and epoll) against nginx (sendfile on, one
# worker) and net/http's http.FileServer (bench/peers/stdfile,
# GOMAXPROCS=1), serving a 64 KiB and a 1 MiB file over keep-alive
# connections (wrk -t1 through wrkload): requests/s and requests per
# server CPU-second.
#
# Every server runs pinned to CPU 0 (one loop / one nginx worker /
# GOMAXPROCS=1; veloq's and net/http's other threads, such as veloq's
# file pool, share that CPU and are counted) and wrk on CPU 1; server CPU
# is utime+stime from /proc/PID/stat over the measured window; every
# server runs in every round, in an order rotated each round; each figure
# is the median over the rounds, with its range (min-max). Everything
# talks to 127.0.0.1 only. The files are on the directory's file system
# and in the page cache after the first request (every server reads them
# from there). Results go to results/files-latest.md (files-quick.md with
# --quick, files-smoke.md with --smoke).
#
#   bench/files.sh            # 5 rounds, 2 s warmup + 10 s windows (about 10 minutes)
#   bench/files.sh --quick    # 1 round, 1 s + 2 s windows (about 1 minute)
#   bench/files.sh --smoke    # seconds: checks every server answers; numbers mean nothing
#
# CONNS (default 32) sets wrk's connections. Needs jq and wrk; nginx is
# optional (skipped with a note), as is taskset (without it nothing is
# pinned). A server that cannot start (veloq -backend uring where io_uring
# is refused) is skipped with its log.
set -euo pipefail
cd "$(dirname "$0")"

rounds=5 duration=10s warmup=2s tag=latest
case "${1:-}" in
--quick) rounds=1 duration=2s warmup=1s tag=quick ;;
--smoke) rounds=1 duration=1s warmup=0s tag=smoke ;;
"") ;;
*) echo "usage: bench/files.sh [--quick|--smoke]" >&2; exit 2 ;;
esac
conns=${CONNS:-32}

# shellcheck source=lib.sh
. ./lib.sh
for tool in jq wrk; do
	if ! have $tool; then
		echo "files.sh needs $tool: apt-get install $tool" >&2
		exit 1
	fi
done
notes=()
note() { echo "   note: $*"; notes+=("$*"); }

bin=$PWD/bin tmp=$PWD/results/tmp/files
rm -rf "$tmp"
mkdir -p "$bin" "$tmp/www" results
echo "== build"
(cd .. && go build -o "$bin/echo-server" ./cmd/echo-server)
go build -o "$bin/" ./cmd/wrkload ./peers/stdfile

# The files: random bytes, so nothing compresses or dedups them.
declare -A fsize=([f64k]=65536 [f1m]=1048576)
for f in "${!fsize[@]}"; do
	head -c "${fsize[$f]}" /dev/urandom >"$tmp/www/$f.bin"
done

ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)"
server_cpu="taskset -c 0"
load_cpu="taskset -c 1"
if ! have taskset || [ "$(nproc)" -lt 2 ]; then
	note "no taskset or fewer than 2 CPUs: servers and wrk ran unpinned, sharing CPUs; the figures are not comparable with pinned runs"
	server_cpu="" load_cpu=""
fi

# nginx: one process (master_process off, so all its CPU is in the PID
# sampled), sendfile on (with tcp_nopush, as its static-file guides set
# it), no open_file_cache (veloq and net/http open the file per request
# too), keepalive_requests raised so it does not close wrk's connections
# every 1000 requests.
nginx_dir=$tmp/nginx
nginx_ok=""
if [ -z "$nginx_bin" ]; then
	note "nginx is not installed (apt-get install nginx): skipped"
else
	mkdir -p "$nginx_dir"
	nginx_conf "$nginx_dir" files.sh "    sendfile on;
    tcp_nopush on;
    default_type application/octet-stream;
    server {
        listen 127.0.0.1:19304;
        root $tmp/www;
    }"
	if nginx_check "$nginx_dir"; then
		nginx_ok=1
	else
		note "nginx refused the config ($(grep -m1 emerg "$nginx_dir/check.log" || tail -1 "$nginx_dir/check.log")): skipped"
	fi
fi

declare -A cmd port
add() { cmd[$1]=$3 port[$1]=$2; }
add veloq-uring 19301 "env GOMAXPROCS=1 $bin/echo-server -mode http -static $tmp/www -loops 1 -backend uring -addr 127.0.0.1:19301"
add veloq-epoll 19302 "env GOMAXPROCS=1 $bin/echo-server -mode http -static $tmp/www -loops 1 -backend epoll -addr 127.0.0.1:19302"
add nethttp 19303 "env GOMAXPROCS=1 $bin/stdfile -dir $tmp/www -addr 127.0.0.1:19303"
add nginx 19304 "$nginx_bin -p $nginx_dir/ -c $nginx_dir/nginx.conf -e $nginx_dir/error.log"
servers=(veloq-uring veloq-epoll nethttp)
[ -n "$nginx_ok" ] && servers+=(nginx)
files=(f64k f1m)

pid="" addr=""
start_server() { # name -> pid, addr; fails when the server does not start
	local key=$1 log=$tmp/$1.log
	# shellcheck disable=SC2086
	$server_cpu ${cmd[$key]} >"$log" 2>&1 &
	pid=$! addr=127.0.0.1:${port[$key]}
	local ready_port=""
	[ "$key" = nginx ] && ready_port=${port[$key]}
	server_ready "$key" "$log" $ready_port
}

declare -A rate eff scpu lcpu errs
run_one() { # file server
	local f=$1 name=$2 j k="$1|$2" log=$tmp/$1-$2.load.log
	start_server "$name" || { note "$name did not start: skipped in that round (log: results/tmp/files/$name.log)"; return 0; }
	# -expect "": wrkload's preflight checks only for a 200.
	j=$($load_cpu "$bin/wrkload" -addr "$addr" -path "/$f.bin" -expect "" -conns "$conns" \
		-duration "$duration" -warmup "$warmup" -server-pid "$pid" -json 2>"$log") || j=""
	stop_server
	if [ -z "$j" ] || ! jq -e . >/dev/null 2>&1 <<<"$j"; then
		note "$name ($f): wrkload failed: $(tail -2 "$log" | tr '\n' ' ')"
		return 0
	fi
	errs[$k]=$((${errs[$k]:-0} + $(jq -r '.errors' <<<"$j")))
	rate[$k]+=" $(jq -r .rps <<<"$j")" eff[$k]+=" $(jq -r .req_per_server_cpu_s <<<"$j")"
	scpu[$k]+=" $(jq -r .server_cpu_util <<<"$j")" lcpu[$k]+=" $(jq -r .client_cpu_util <<<"$j")"
	echo "   $(jq -r '"\(.rps|floor)/s, \(.req_per_server_cpu_s|floor) per server CPU-s, server CPU \(.server_cpu_util*100|floor)%, load \(.client_cpu_util*100|floor)%, errors \(.errors)"' <<<"$j")"
}

start_date=$(date -u '+%F %H:%M UTC') load_start=$(cut -d' ' -f1-3 /proc/loadavg)
for round in $(seq "$rounds"); do
	for f in "${files[@]}"; do
		n=${#servers[@]}
		for i in $(seq 0 $((n - 1))); do
			name=${servers[$(((i + round - 1) % n))]}
			echo "== round $round/$rounds: $f: $name"
			run_one "$f" "$name"
		done
	done
done
load_end=$(cut -d' ' -f1-3 /proc/loadavg)

mibps() { awk -v r="$1" -v s="$2" 'BEGIN {if (r == "n/a") print "n/a"; else printf "%.0f", r * s / 1048576}'; }

out=results/files-$tag.md
cpu_model=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')
commit=$(git -C .. rev-parse --short HEAD 2>/dev/null || echo unknown)
git -C .. diff --quiet HEAD -- 2>/dev/null || commit+=" (work tree with uncommitted changes)"
bases=(nethttp)
[ -n "$nginx_ok" ] && bases+=(nginx)
{
	echo "# Static files: veloq FileServer vs nginx and net/http"
	echo
	echo "\`bench/files.sh $*\` on $(nproc) CPUs ($cpu_model), Linux $(uname -r), $(go version | cut -d' ' -f3), veloq $commit, $start_date."
	echo "wrk $(wrk -v 2>&1 | head -1 | cut -d' ' -f2 || true); nginx $([ -n "$nginx_ok" ] && "$nginx_bin" -v 2>&1 | cut -d/ -f2 || echo none)."
	echo "Load average $load_start at the start, $load_end at the end (on a busy machine the figures are for smoke-testing only)."
	echo
	echo "Server on CPU 0 (one loop / one nginx worker / GOMAXPROCS=1), wrk -t1 -c$conns keep-alive on CPU 1; $rounds interleaved round(s), each figure the median over the rounds with its range (min–max); $warmup warmup + $duration window. \"per server CPU-s\" is the server's utime+stime from /proc over the window; \"vs\" columns divide medians."
	for f in "${files[@]}"; do
		echo
		echo "## GET /$f.bin ($((fsize[$f] / 1024)) KiB), $conns keep-alive connections"
		echo
		head="| server | req/s | range | MiB/s" sep="|---|---:|---:|---:"
		for b in "${bases[@]}"; do head+=" | vs $b"; sep+="|---:"; done
		head+=" | req per server CPU-s | range"
		sep+="|---:|---:"
		for b in "${bases[@]}"; do head+=" | vs $b"; sep+="|---:"; done
		echo "$head | server CPU | load CPU | errors |"
		echo "$sep|---:|---:|---:|"
		for name in "${servers[@]}"; do
			k="$f|$name"
			[ -n "${rate[$k]:-}" ] || continue
			# shellcheck disable=SC2086
			read -r rm rl rh <<<"$(stats ${rate[$k]})"
			# shellcheck disable=SC2086
			read -r em el eh <<<"$(stats ${eff[$k]})"
			row="| $name | $(fmt %.0f "$rm") | $(fmt %.0f "$rl")–$(fmt %.0f "$rh") | $(mibps "$rm" "${fsize[$f]}")"
			for b in "${bases[@]}"; do row+=" | $(ratio "$rm" "$(median_of rate "$f|$b")")"; done
			row+=" | $(fmt %.0f "$em") | $(fmt %.0f "$el")–$(fmt %.0f "$eh")"
			for b in "${bases[@]}"; do row+=" | $(ratio "$em" "$(median_of eff "$f|$b")")"; done
			echo "$row | $(pct "$(median_of scpu "$k")") | $(pct "$(median_of lcpu "$k")") | ${errs[$k]:-0} |"
		done
	done
	echo
	echo "## Notes"
	echo
	echo "- veloq opens and inspects each file on its blocking pool (a file up to 16 KiB is read there into the response) and sends a larger body with sendfile(2) from the pool into a duplicate of the socket, the loop waiting for writability when the socket is full; net/http's FileServer uses sendfile(2) from its goroutine; nginx sendfile(2) from its worker. None caches open files."
	echo "- With the load on one CPU, wrk may be the bottleneck for the 1 MiB file (see the load CPU column): then req/s says little and req per server CPU-s is the figure to compare."
	for n in "${notes[@]}"; do echo "- $n"; done
} >"$out"

trap - EXIT
echo
cat "$out"
