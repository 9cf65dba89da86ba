#!/usr/bin/env bash
# TLS benchmark (issue 21): veloq's TLS layer (cmd/echo-server
# -tls-self-signed, io_uring and epoll) against net/http, Go's crypto/tls
# and nginx, in the same run:
#   - HTTPS keep-alive: wrk, 64 connections, GET / -> req/s and requests per
#     server CPU-second (veloq, net/http, nginx);
#   - HTTPS with a new connection per request and a FULL handshake each
#     (tcpload -tls -http -churn: its client keeps no session, so nothing
#     resumes) -> handshakes per server CPU-second;
#   - HTTPS with a new connection per request as wrk makes them (-H
#     "Connection: close"): wrk resumes the TLS session on every reconnect
#     (every server here issues tickets, and the script checks it resumes
#     with openssl s_client), so these are RESUMED handshakes;
#   - TLS echo of 64 B and 16 KiB over 64 connections (tcpload -tls) ->
#     msg/s and messages per server CPU-second (veloq, Go crypto/tls), with
#     the same servers in plaintext beside them, and AES-128-GCM's own cost
#     per record (bench/tlscost) to tell the cipher from the rest; then the
#     same paced at one rate for every server (tcpload -rate), so TLS and
#     plaintext servers are compared at the same load;
#   - idle memory: server RSS growth per idle TLS connection, over N
#     connections each having made one exchange (a TLS echo, or one HTTPS
#     GET / on keep-alive) and then held.
# Every server runs pinned to CPU 0 (one loop / one nginx worker /
# GOMAXPROCS=1) and the load generator on CPU 1; server CPU is read from
# /proc; every server runs in every round, in an order rotated each round;
# each figure is the median over the rounds, with its range (min-max).
# Everything talks to 127.0.0.1 only. Results go to results/tls-latest.md
# (tls-quick.md with --quick, tls-smoke.md with --smoke).
#
#   bench/tls.sh            # 3 rounds, 2 s warmup + 10 s windows, 10,000 idle (about 27 minutes)
#   bench/tls.sh --quick    # 1 round, 2 s windows, 1,000 idle (about 3 minutes)
#   bench/tls.sh --smoke    # under a minute: checks every server and load generator works; numbers mean nothing
#
# Needs jq (to read the load generators' JSON). Optional, each skipping only
# what needs it, with a message: wrk (the two wrk scenarios), nginx and
# openssl (the nginx server: openssl makes its certificate; openssl also
# checks which servers resume sessions), taskset (without it nothing is
# pinned). A server that cannot start here (veloq -backend uring where
# io_uring is refused) is skipped with its log.
set -euo pipefail
cd "$(dirname "$0")"

rounds=3 duration=10s warmup=2s wrk_duration=10s wrk_warmup=2s idle=10000 hold=5s benchtime=1s tag=latest
# The paced echo scenarios' rates (messages per second over the 64
# connections), below what every echo server here sustains (unpaced, the
# slowest makes about 68,000 64 B and 42,000 16 KiB echoes a second), so TLS
# and plaintext servers compare at the same load.
pace64=40000 pace16k=20000
case "${1:-}" in
--quick) rounds=1 duration=2s warmup=500ms wrk_duration=2s wrk_warmup=1s idle=1000 hold=2s benchtime=500ms tag=quick ;;
--smoke) rounds=1 duration=300ms warmup=100ms wrk_duration=1s wrk_warmup=0s idle=100 hold=300ms benchtime=50ms tag=smoke ;;
"") ;;
*) echo "usage: bench/tls.sh [--quick|--smoke]" >&2; exit 2 ;;
esac

# shellcheck source=lib.sh
. ./lib.sh
if ! have jq; then
	echo "tls.sh reads the load generators' JSON with jq: apt-get install jq" >&2
	exit 1
fi
notes=() # lines for the report's notes section
note() { echo "   note: $*"; notes+=("$*"); }

bin=$PWD/bin tmp=$PWD/results/tmp/tls
rm -rf "$tmp"
mkdir -p "$bin" "$tmp" results
echo "== build"
(cd .. && go build -o "$bin/echo-server" ./cmd/echo-server)
go build -o "$bin/" ./cmd/tcpload ./cmd/wrkload ./peers/stdhttp ./peers/stdecho
go test -c -o "$bin/tlscost.test" ./tlscost

ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)"
server_cpu="taskset -c 0"
load_cpu="taskset -c 1"
if ! have taskset || [ "$(nproc)" -lt 2 ]; then
	note "no taskset or fewer than 2 CPUs: servers and load generators ran unpinned, sharing CPUs; the figures are not comparable with pinned runs"
	server_cpu="" load_cpu=""
fi

# nginx: one process (master_process off, so its CPU is all in the PID that
# is sampled), in the foreground, every path it writes in $tmp/nginx, as
# bench/cmd/benchrun runs it for plaintext HTTP; TLS 1.3 only, with the
# key exchange (X25519) and the cipher (AES-128-GCM) every Go server here
# negotiates with these clients, so all do the same cryptography (nginx
# would otherwise follow wrk's preference for AES-256-GCM). Session tickets
# are on, as they are in crypto/tls's defaults that veloq and the Go peers
# use: tcpload's client never resumes anyway, and wrk resumes with every
# server alike. keepalive_requests is raised so nginx does not close wrk's
# keep-alive connections every 1000 requests (no other server does).
nginx_dir=$tmp/nginx
nginx_ok=""
if [ -z "$nginx_bin" ]; then
	note "nginx is not installed (apt-get install nginx): the nginx HTTPS server is skipped"
elif ! have openssl; then
	note "openssl is not installed (apt-get install openssl): it makes nginx's certificate, so nginx is skipped"
else
	mkdir -p "$nginx_dir"
	if ! nginx_cert "$nginx_dir"; then
		note "openssl could not make nginx's certificate ($(tail -1 "$nginx_dir/openssl.log")): nginx is skipped"
	else
		nginx_conf "$nginx_dir" tls.sh "    server {
        listen 127.0.0.1:19204 ssl;
        ssl_certificate $nginx_dir/cert.pem;
        ssl_certificate_key $nginx_dir/key.pem;
        ssl_protocols TLSv1.3;
        ssl_ecdh_curve X25519;
        ssl_conf_command Ciphersuites TLS_AES_128_GCM_SHA256;
        ssl_session_tickets on;
        location = / {
            default_type text/plain;
            return 200 \"Hello, World!\";
        }
    }"
		if nginx_check "$nginx_dir"; then
			nginx_ok=1
		else
			note "nginx refused the TLS config ($(grep -m1 emerg "$nginx_dir/check.log" || tail -1 "$nginx_dir/check.log")): nginx is skipped"
		fi
	fi
fi
if ! have wrk; then
	note "wrk is not installed (apt-get install wrk): the two wrk scenarios (HTTPS keep-alive, HTTPS resumed per request) are skipped"
fi

# Servers, by "group:name": https serves GET / over TLS, echo is a TCP echo
# (TLS unless the name ends in -plain). Fixed ports (nginx needs one in its
# config), away from the defaults other tools use.
declare -A cmd port
add() { cmd[$1]=$3 port[$1]=$2; }
add https:veloq-uring 19201 "env GOMAXPROCS=1 $bin/echo-server -mode http -loops 1 -backend uring -tls-self-signed -addr 127.0.0.1:19201"
add https:veloq-epoll 19202 "env GOMAXPROCS=1 $bin/echo-server -mode http -loops 1 -backend epoll -tls-self-signed -addr 127.0.0.1:19202"
add https:nethttp 19203 "env GOMAXPROCS=1 $bin/stdhttp -tls-self-signed -addr 127.0.0.1:19203"
add https:nginx 19204 "$nginx_bin -p $nginx_dir/ -c $nginx_dir/nginx.conf -e $nginx_dir/error.log"
add echo:veloq-uring 19211 "env GOMAXPROCS=1 $bin/echo-server -mode tcp -loops 1 -backend uring -tls-self-signed -addr 127.0.0.1:19211"
add echo:veloq-epoll 19212 "env GOMAXPROCS=1 $bin/echo-server -mode tcp -loops 1 -backend epoll -tls-self-signed -addr 127.0.0.1:19212"
add echo:go-tls 19213 "env GOMAXPROCS=1 $bin/stdecho -tls-self-signed -addr 127.0.0.1:19213"
add echo:veloq-uring-plain 19214 "env GOMAXPROCS=1 $bin/echo-server -mode tcp -loops 1 -backend uring -addr 127.0.0.1:19214"
add echo:go-plain 19215 "env GOMAXPROCS=1 $bin/stdecho -addr 127.0.0.1:19215"
add echo:veloq-epoll-plain 19216 "env GOMAXPROCS=1 $bin/echo-server -mode tcp -loops 1 -backend epoll -addr 127.0.0.1:19216"

https_servers=(veloq-uring veloq-epoll nethttp)
[ -n "$nginx_ok" ] && https_servers+=(nginx)
echo_servers=(veloq-uring veloq-epoll go-tls veloq-uring-plain veloq-epoll-plain go-plain)

# Scenarios: id, group of its servers, title (the report's heading).
scenarios=()
declare -A group title unit
scen() { scenarios+=("$1"); group[$1]=$2 title[$1]=$3 unit[$1]=$4; }
have wrk && scen https-keepalive https "HTTPS keep-alive: wrk -t1 -c64, GET /" "req"
scen https-full https "HTTPS, a new connection and a full TLS handshake per request: tcpload -tls -http -churn, 32 workers" "handshakes"
have wrk && scen https-resumed https "HTTPS, a new connection per request as wrk makes it (-H \"Connection: close\", 64 connections): the session is resumed" "handshakes"
scen echo-64 echo "TLS echo, 64 B messages, 64 connections: tcpload -tls -conns 64 -size 64" "msg"
scen echo-16k echo "TLS echo, 16 KiB messages, 64 connections: tcpload -tls -conns 64 -size 16384" "msg"
scen echo-64-paced echo "TLS echo paced at $pace64 messages/s, 64 B, 64 connections: tcpload -tls -conns 64 -size 64 -rate $pace64" "msg"
scen echo-16k-paced echo "TLS echo paced at $pace16k messages/s, 16 KiB, 64 connections: tcpload -tls -conns 64 -size 16384 -rate $pace16k" "msg"
scen idle-https https "Idle HTTPS connections: $idle, each after one GET / on keep-alive (tcpload -tls -http -idle $idle)" "KiB"
scen idle-echo echo "Idle TLS echo connections: $idle, each after one 64 B echo (tcpload -tls -idle $idle)" "KiB"

pid="" addr=""
start_server() { # group:name -> pid, addr; fails when the server does not start
	local key=$1 log=$tmp/${1/:/-}.log
	# shellcheck disable=SC2086
	$server_cpu ${cmd[$key]} >"$log" 2>&1 &
	pid=$! addr=127.0.0.1:${port[$key]}
	local ready_port=""
	[ "${key#*:}" = nginx ] && ready_port=${port[$key]} # nginx prints nothing: it is up when its port accepts
	server_ready "$key" "$log" $ready_port
}

# resumes ADDR: whether the server resumes a TLS 1.3 session, by openssl
# s_client: one connection keeps the ticket the server sends, a second
# offers it.
resumes() {
	have openssl || { echo "not checked (no openssl)"; return; }
	local sess=$tmp/session.pem
	rm -f "$sess"
	# The sleep keeps the connection open until the post-handshake ticket came.
	sleep 0.5 | timeout 10 openssl s_client -connect "$1" -tls1_3 -sess_out "$sess" >/dev/null 2>&1 || true
	if [ ! -s "$sess" ]; then
		echo "no ticket"
	elif sleep 0.3 | timeout 10 openssl s_client -connect "$1" -tls1_3 -sess_in "$sess" 2>/dev/null | grep -q '^Reused'; then
		echo "yes"
	else
		echo "no"
	fi
}

# Per "scenario|server": space-separated values, one per round.
declare -A rate eff scpu lcpu kib opens errs firsterr resumed counts
run_one() { # scenario server
	local sc=$1 name=$2 key=${group[$1]}:$2 j k="$1|$2" log=$tmp/$1-$2.load.log
	start_server "$key" || { note "$name ($sc) did not start: skipped in that round (log: results/tmp/tls/${key/:/-}.log)"; return 0; }
	case $sc in
	https-keepalive)
		j=$($load_cpu "$bin/wrkload" -tls -addr "$addr" -conns 64 -duration "$wrk_duration" -warmup "$wrk_warmup" -server-pid "$pid" -json 2>"$log") || j="" ;;
	https-full)
		j=$($load_cpu "$bin/tcpload" -tls -http -churn -addr "$addr" -conns 32 -duration "$duration" -warmup "$warmup" -server-pid "$pid" -json 2>"$log") || j="" ;;
	https-resumed)
		[ -n "${resumed[$name]:-}" ] || resumed[$name]=$(resumes "$addr")
		j=$($load_cpu "$bin/wrkload" -tls -close -addr "$addr" -conns 64 -duration "$wrk_duration" -warmup "$wrk_warmup" -server-pid "$pid" -json 2>"$log") || j="" ;;
	echo-*)
		local size=64 tls=-tls pace=""
		case $sc in echo-16k*) size=16384 ;; esac
		case $sc in echo-64-paced) pace="-rate $pace64" ;; echo-16k-paced) pace="-rate $pace16k" ;; esac
		[ "${name%-plain}" != "$name" ] && tls=""
		# shellcheck disable=SC2086
		j=$($load_cpu "$bin/tcpload" $tls $pace -addr "$addr" -conns 64 -size "$size" -duration "$duration" -warmup "$warmup" -server-pid "$pid" -json 2>"$log") || j="" ;;
	idle-https | idle-echo)
		local flags="-tls"
		[ "$sc" = idle-https ] && flags="-tls -http"
		[ "${name%-plain}" != "$name" ] && flags=""
		sleep 0.3 # the RSS before is read at tcpload's start: let the server settle after its start line
		# shellcheck disable=SC2086
		j=$($load_cpu "$bin/tcpload" $flags -addr "$addr" -idle "$idle" -hold "$hold" -dial-parallel 64 -server-pid "$pid" -json 2>"$log" | tail -1) || j="" ;;
	esac
	stop_server
	# net/http counts its handshakes: the last run's counts go into the
	# report as the check that churn made full handshakes (or resumed
	# ones, with wrk).
	case $sc in
	https-full | https-resumed)
		local counted
		counted=$(grep -m1 -oE "[0-9]+ connections accepted, [0-9]+ full TLS handshakes, [0-9]+ resumed" "$tmp/${key/:/-}.log" || true)
		if [ -n "$counted" ]; then counts[$k]=$counted; fi
		;;
	esac
	if [ -z "$j" ] || ! jq -e . >/dev/null 2>&1 <<<"$j"; then
		note "$name ($sc): the load generator failed: $(tail -2 "$log" | tr '\n' ' ')"
		return 0
	fi
	errs[$k]=$((${errs[$k]:-0} + $(jq -r '.errors' <<<"$j")))
	local fe
	fe=$(jq -r '.first_error // empty' <<<"$j")
	[ -n "$fe" ] && [ -z "${firsterr[$k]:-}" ] && firsterr[$k]=$fe
	case $sc in
	idle-*)
		kib[$k]+=" $(jq -r '.server_kib_per_conn // 0' <<<"$j")"
		echo "   $(jq -r '"\(.conns_ok)/\(.conns) held, server RSS \(.server_rss_before_kib) -> \(.server_rss_after_kib) KiB: \(.server_kib_per_conn) KiB/conn, errors \(.errors)"' <<<"$j")"
		;;
	*)
		rate[$k]+=" $(jq -r .rps <<<"$j")" eff[$k]+=" $(jq -r .req_per_server_cpu_s <<<"$j")"
		scpu[$k]+=" $(jq -r .server_cpu_util <<<"$j")" lcpu[$k]+=" $(jq -r .client_cpu_util <<<"$j")"
		[ "$sc" = https-resumed ] && opens[$k]+=" $(jq -r '(.tcp_passive_opens // 0) / ([.requests, 1] | max)' <<<"$j")"
		echo "   $(jq -r '"\(.rps|floor)/s, \(.req_per_server_cpu_s|floor) per server CPU-s, server CPU \(.server_cpu_util*100|floor)%, load \(.client_cpu_util*100|floor)%, errors \(.errors)"' <<<"$j")"
		;;
	esac
}

start_date=$(date -u '+%F %H:%M UTC') load_start=$(cut -d' ' -f1-3 /proc/loadavg)
for round in $(seq "$rounds"); do
	for sc in "${scenarios[@]}"; do
		if [ "${group[$sc]}" = https ]; then list=("${https_servers[@]}"); else list=("${echo_servers[@]}"); fi
		n=${#list[@]}
		# Rotated each round, so a slow spell of the machine falls on
		# every server alike.
		for i in $(seq 0 $((n - 1))); do
			name=${list[$(((i + round - 1) % n))]}
			echo "== round $round/$rounds: $sc: $name"
			run_one "$sc" "$name"
		done
	done
done

echo "== tlscost (the cryptography alone, on the server's CPU)"
# shellcheck disable=SC2086
cost=$($server_cpu "$bin/tlscost.test" -test.run '^$' -test.bench . -test.benchtime "$benchtime" 2>&1 | tee "$tmp/tlscost.log") || cost=""
ns_of() { awk -v b="$1" '$1 ~ "^"b"(-[0-9]+)?$" {for (i = 2; i < NF; i++) if ($(i+1) == "ns/op") {print $i; exit}}' <<<"$cost"; }
gcm64=$(ns_of BenchmarkSealOpen/64B) gcm16k=$(ns_of BenchmarkSealOpen/16384B) hscrypto=$(ns_of BenchmarkHandshakeCrypto)
load_end=$(cut -d' ' -f1-3 /proc/loadavg)

# version TOOL: the version of a tool this run used, or "none".
version() {
	case $1 in
	wrk) if have wrk; then wrk -v 2>&1 | head -1 | cut -d' ' -f2 || true; else echo none; fi ;; # wrk -v exits 1
	nginx) if [ -n "$nginx_ok" ]; then "$nginx_bin" -v 2>&1 | cut -d/ -f2; else echo none; fi ;;
	openssl) if have openssl; then openssl version | cut -d' ' -f2; else echo none; fi ;;
	esac
}

out=results/tls-$tag.md
cpu_model=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')
commit=$(git -C .. rev-parse --short HEAD 2>/dev/null || echo unknown)
git -C .. diff --quiet HEAD -- 2>/dev/null || commit+=" (work tree with uncommitted changes)"
{
	echo "# TLS: veloq vs net/http, Go crypto/tls and nginx"
	echo
	echo "\`bench/tls.sh $*\` on $(nproc) CPUs ($cpu_model), Linux $(uname -r), $(go version | cut -d' ' -f3), veloq $commit, $start_date."
	echo "wrk $(version wrk); nginx $(version nginx); openssl $(version openssl)."
	echo "Load average $load_start at the start, $load_end at the end (on a busy machine the figures are for smoke-testing only)."
	echo
	echo "Server on CPU 0 (one loop / one nginx worker / GOMAXPROCS=1), load generator on CPU 1; $rounds interleaved round(s) (each runs every server, in a rotated order), each figure the median over the rounds with its range (min–max); $warmup warmup + $duration window for tcpload, $wrk_warmup + $wrk_duration for wrk."
	echo "TLS 1.3 everywhere, X25519 and TLS_AES_128_GCM_SHA256, ECDSA P-256 certificates (self-signed; the clients do not verify them: loopback only). \"per server CPU-s\" is the server's utime+stime from /proc over the window; \"vs\" columns divide medians."
} >"$out"

# load_table SCENARIO BASELINES...: one table of a load scenario.
load_table() {
	local sc=$1 u=${unit[$1]}
	shift
	local bases=("$@") list name k b
	if [ "${group[$sc]}" = https ]; then list=("${https_servers[@]}"); else list=("${echo_servers[@]}"); fi
	{
		echo
		echo "## ${title[$sc]}"
		echo
		local head="| server | $u/s | range" sep="|---|---:|---:"
		for b in "${bases[@]}"; do head+=" | vs $b"; sep+="|---:"; done
		head+=" | $u per server CPU-s | range"
		sep+="|---:|---:"
		for b in "${bases[@]}"; do head+=" | vs $b"; sep+="|---:"; done
		head+=" | server CPU | load CPU"
		sep+="|---:|---:"
		[ "$sc" = https-resumed ] && { head+=" | conns/request | resumes"; sep+="|---:|---"; }
		echo "$head | errors |"
		echo "$sep|---:|"
		for name in "${list[@]}"; do
			k="$sc|$name"
			[ -n "${rate[$k]:-}" ] || continue
			# shellcheck disable=SC2086
			read -r rm rl rh <<<"$(stats ${rate[$k]})"
			# shellcheck disable=SC2086
			read -r em el eh <<<"$(stats ${eff[$k]})"
			local label=$name
			case $name in *-plain) label="$name (no TLS)" ;; esac
			local row
			row="| $label | $(fmt %.0f "$rm") | $(fmt %.0f "$rl")–$(fmt %.0f "$rh")"
			for b in "${bases[@]}"; do row+=" | $(ratio "$rm" "$(median_of rate "$sc|$b")")"; done
			row+=" | $(fmt %.0f "$em") | $(fmt %.0f "$el")–$(fmt %.0f "$eh")"
			for b in "${bases[@]}"; do row+=" | $(ratio "$em" "$(median_of eff "$sc|$b")")"; done
			row+=" | $(pct "$(median_of scpu "$k")") | $(pct "$(median_of lcpu "$k")")"
			[ "$sc" = https-resumed ] && row+=" | $(fmt %.2f "$(median_of opens "$k")") | ${resumed[$name]:-not checked}"
			echo "$row | ${errs[$k]:-0} |"
		done
		for name in "${list[@]}"; do
			k="$sc|$name"
			if [ -n "${firsterr[$k]:-}" ]; then printf '\n%s\n' "$name's first error: \`${firsterr[$k]}\`"; fi
			if [ -n "${counts[$k]:-}" ]; then printf '\n%s\n' "$name counted, in its last run: ${counts[$k]}."; fi
		done
	} >>"$out"
}

idle_table() { # SCENARIO BASELINES...
	local sc=$1
	shift
	local bases=("$@") list name k b
	if [ "${group[$sc]}" = https ]; then list=("${https_servers[@]}"); else list=("${echo_servers[@]}"); fi
	{
		echo
		echo "## ${title[$sc]}"
		echo
		local head="| server | KiB per idle conn | range" sep="|---|---:|---:"
		for b in "${bases[@]}"; do head+=" | vs $b"; sep+="|---:"; done
		echo "$head | errors |"
		echo "$sep|---:|"
		for name in "${list[@]}"; do
			k="$sc|$name"
			[ -n "${kib[$k]:-}" ] || continue
			# shellcheck disable=SC2086
			read -r m l h <<<"$(stats ${kib[$k]})"
			local label=$name
			case $name in *-plain) label="$name (no TLS)" ;; esac
			local row
			row="| $label | $(fmt %.2f "$m") | $(fmt %.2f "$l")–$(fmt %.2f "$h")"
			for b in "${bases[@]}"; do row+=" | $(ratio "$m" "$(median_of kib "$sc|$b")")"; done
			echo "$row | ${errs[$k]:-0} |"
		done
		for name in "${list[@]}"; do
			k="$sc|$name"
			if [ -n "${firsterr[$k]:-}" ]; then printf '\n%s\n' "$name's first error: \`${firsterr[$k]}\`"; fi
		done
	} >>"$out"
}

https_bases=(nethttp)
[ -n "$nginx_ok" ] && https_bases+=(nginx)
for sc in "${scenarios[@]}"; do
	case $sc in
	https-*) load_table "$sc" "${https_bases[@]}" ;;
	echo-*) load_table "$sc" go-tls ;;
	idle-https) idle_table "$sc" "${https_bases[@]}" ;;
	idle-echo) idle_table "$sc" go-tls ;;
	esac
done

# TLS against plaintext echo, per message, in server CPU: what the TLS layer
# adds, and how much of that the cipher alone accounts for.
us_per() { awk -v e="$1" 'BEGIN {if (e == "n/a" || e + 0 == 0) print "n/a"; else printf "%.2f", 1e6 / e}'; }
{
	echo
	echo "## TLS echo against plaintext echo: server CPU per message"
	echo
	echo "µs of server CPU per echoed message (1 / the median messages per server CPU-s). The cipher's cost is AES-128-GCM opening the client's record and sealing the answer, measured alone on CPU 0 (bench/tlscost, BenchmarkSealOpen); what remains of TLS's extra cost after it is the record layer, the copies and the extra system-call bytes. Unpaced, each server runs as fast as its clients answer, and the TLS client is slower than the plaintext one, so the two servers see different loads (a server that is less busy wakes up more often per message); paced, both see the same messages per second (tcpload -rate), which isolates what TLS costs the server."
	echo
	echo "| server | message | load | TLS µs/msg | plaintext µs/msg | TLS adds µs/msg | AES-GCM seal+open µs | TLS adds, less the cipher µs | that, over plaintext + cipher |"
	echo "|---|---:|---|---:|---:|---:|---:|---:|---:|"
	for pair in "veloq-uring veloq-uring-plain" "veloq-epoll veloq-epoll-plain" "go-tls go-plain"; do
		read -r t p <<<"$pair"
		for sc in echo-64 echo-64-paced echo-16k echo-16k-paced; do
			tu=$(us_per "$(median_of eff "$sc|$t")") pu=$(us_per "$(median_of eff "$sc|$p")")
			g=$gcm64 label="64 B" load=unpaced
			case $sc in echo-16k*) g=$gcm16k label="16 KiB" ;; esac
			case $sc in echo-64-paced) load="$pace64/s" ;; echo-16k-paced) load="$pace16k/s" ;; esac
			gu=$(awk -v g="${g:-n/a}" 'BEGIN {if (g == "n/a" || g == "") print "n/a"; else printf "%.2f", g / 1000}')
			read -r add rest over <<<"$(awk -v t="$tu" -v p="$pu" -v g="$gu" 'BEGIN {if (t == "n/a" || p == "n/a") {print "n/a n/a n/a"; exit} a = t - p; if (g == "n/a") {printf "%.2f n/a n/a\n", a; exit} printf "%.2f %.2f %+.0f%%\n", a, a - g, (t / (p + g) - 1) * 100}')"
			echo "| $t | $label | $load | $tu | $pu | $add | $gu | $rest | $over |"
		done
	done
	echo
	if [ -n "$hscrypto" ]; then
		echo "A full handshake's server-side public-key work with Go's crypto (X25519 key pair and shared secret, one ECDSA P-256 signature; bench/tlscost, BenchmarkHandshakeCrypto) took $(awk -v n="$hscrypto" 'BEGIN {printf "%.1f", n / 1000}') µs on CPU 0: at most $(awk -v n="$hscrypto" 'BEGIN {printf "%.0f", 1e9 / n}') full handshakes per CPU-second for a Go server that did nothing else (nginx uses OpenSSL's own code for both)."
	else
		echo "(bench/tlscost did not run: see results/tmp/tls/tlscost.log)"
	fi
	echo
	echo "## Notes"
	echo
	echo "- The idle figures are (server VmRSS with every connection open and idle, after a $hold hold) − (VmRSS before the first connect), ÷ connections held; for the Go servers they include garbage the collector has not returned yet. Each HTTPS connection made one GET / on keep-alive first, each TLS echo connection one 64 B echo (the plaintext rows the same without TLS), so every server has finished the handshake and served once."
	echo "- Full handshakes (tcpload -tls -http -churn): tcpload's client keeps no session cache, so every connection is a full TLS 1.3 handshake (certificate and signature), although every server issues tickets; net/http's own count, under its table, checks it. The client verifies the server's signature (not the self-signed chain), so the load generator spends more per handshake than the server: watch the load CPU column."
	have wrk && echo "- wrk's \"Connection: close\" reconnects for every request (conns/request is the TCP connections the machine accepted over the window, ÷ requests: about 1), but OpenSSL keeps the session across wrk's reconnects and every server resumes it (the resumes column, checked with openssl s_client): those are resumed handshakes (PSK with X25519, no certificate, no signature)."
	for n in "${notes[@]}"; do echo "- $n"; done
} >>"$out"

trap - EXIT
echo
cat "$out"
