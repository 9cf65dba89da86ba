#!/usr/bin/env bash
# The regression guard: veloq built from a base commit against the work
# tree, side by side on one machine, over the core scenarios, each
# judged against the noise its own run measured.
#
#   bench/regress.sh BASE [--rounds N] [--secs S] [--quick|--smoke]
#                         [--only SCENARIO,...] [--backends uring,epoll]
#                         [--floor PCT] [--out FILE]
#
#   bench/regress.sh 813680c            # 3 rounds × 5 s windows (about 12 minutes)
#   bench/regress.sh 813680c --quick    # 2 rounds × 2 s (about 5 minutes)
#   bench/regress.sh HEAD --smoke       # 1 round × 1 s, few connections: checks the script works; numbers mean nothing
#
# It builds cmd/echo-server and examples/tcp-proxy from BASE (git archive
# into a temporary directory, removed on exit) and from the work tree as it
# is (uncommitted changes included), and the load generators once, from
# the work tree's bench/, so both sides are measured with the same
# instrument. Every scenario runs base, work and base again (base2) in
# every round, in an order rotated each round, through abab.py: the server
# pinned to CPU 0, the load to CPU 1, server CPU from /proc utime+stime
# over the window (the load generator's own window edges where it samples
# the server). Scenarios (all one loop, -backend per --backends):
#
#   echo-64B            tcpload, 64 connections, 64 B         µs server CPU per request
#   http-plain          wrkload (wrk -t1 -c64), GET /          µs server CPU per request
#   http-pipelined      wrkload -pipeline 16, 64 connections   µs server CPU per request
#   fromstd             the same as http-plain, -mode http-std µs server CPU per request
#   https-keepalive     wrkload -tls, 64 connections           µs server CPU per request
#   h2-tls              h2load -c64 -m16 over TLS              µs server CPU per request
#   udp-64B             udpload, 64 ports × 8 in flight, 64 B  µs server CPU per datagram
#   proxy-slowread-mem  slowread: 16 stalled readers × 8 MiB through tcp-proxy (in front of the work tree's echo-server on CPU 1): the proxy's RSS growth, KiB
#   idle-tls-mem        tcpload -tls -idle: KiB per idle TLS echo connection
#   idle-h2-mem         h2idle -tls: KiB per idle HTTP/2 connection over TLS
#
# Per scenario it prints base's and work's medians with [min–max] over the
# runs, work/base per round (work over the mean of that round's base and
# base2) with its range, the noise (the largest base2/base deviation over
# the rounds) and a verdict: REGRESSION when every round's ratio lies above
# 1 + max(noise, --floor %, default 2), improvement when every one lies
# below 1 − that, otherwise within noise (abab.py --judge). Lower is better
# for every figure. A scenario whose tool is missing prints SKIP with the
# apt package to install. The table goes to stdout and to
# results/regress-latest.md (regress-quick.md, regress-smoke.md; --out FILE
# elsewhere).
#
# Exit status: 0 when nothing regressed; 1 when a scenario is flagged
# REGRESSION, failed on work's side (its server did not start or answer),
# or made errors that base did not (with --smoke, only the last two: its
# windows are too short for a verdict); 2 for a usage error or a build
# that failed. A scenario base's build cannot run (a flag or mode newer
# than BASE) is n/a and does not fail the run.
# 127.0.0.1 only; every process it starts is stopped on exit.
set -euo pipefail
cd "$(dirname "$0")"

all=(echo-64B http-plain http-pipelined fromstd https-keepalive h2-tls udp-64B proxy-slowread-mem idle-tls-mem idle-h2-mem)
usage() {
	echo "usage: bench/regress.sh BASE [--rounds N] [--secs S] [--quick|--smoke] [--only SCENARIO,...] [--backends uring,epoll] [--floor PCT] [--out FILE]" >&2
	echo "scenarios: ${all[*]}" >&2
	exit 2
}

base="" preset="" gate=all rounds="" secs="" only="" backends=uring floor=2 out=""
while [ $# -gt 0 ]; do
	case $1 in
	--rounds | --secs | --only | --backends | --floor | --out) [ $# -ge 2 ] || { echo "regress.sh: $1 needs a value" >&2; usage; } ;;
	esac
	case $1 in
	--rounds) rounds=$2 && shift ;;
	--secs) secs=$2 && shift ;;
	--quick | --smoke) preset=${1#--} ;;
	--only) only=$2 && shift ;;
	--backends) backends=$2 && shift ;;
	--floor) floor=$2 && shift ;;
	--out) out=$2 && shift ;;
	-h | --help) usage ;;
	-*) echo "regress.sh: unknown flag $1" >&2; usage ;;
	*) [ -z "$base" ] || usage; base=$1 ;;
	esac
	shift
done
[ -n "$base" ] || usage

# Presets: windows, idle connections and the stalled readers' load.
case $preset in
quick) r=2 s=2 idle=1000 hold=1s slow_size=$((8 << 20)) stall=1s tag=quick ;;
smoke) r=1 s=1 idle=100 hold=300ms slow_size=$((1 << 20)) stall=300ms tag=smoke gate=failures ;;
*) r=3 s=5 idle=2000 hold=2s slow_size=$((8 << 20)) stall=2s tag=latest ;;
esac
rounds=${rounds:-$r} secs=${secs:-$s}
case "$rounds$secs" in *[!0-9]* | "") echo "regress.sh: --rounds and --secs take whole numbers" >&2; usage ;; esac
[ "$rounds" -ge 1 ] && [ "$secs" -ge 1 ] || { echo "regress.sh: --rounds and --secs must be at least 1" >&2; usage; }
awk -v f="$floor" 'BEGIN {exit !(f ~ /^[0-9]+(\.[0-9]+)?$/)}' || { echo "regress.sh: --floor takes a percentage, e.g. 2 or 1.5" >&2; usage; }
out=${out:-results/regress-$tag.md}
scenarios=("${all[@]}")
if [ -n "$only" ]; then
	IFS=, read -r -a scenarios <<<"$only"
	for sc in "${scenarios[@]}"; do
		[[ " ${all[*]} " == *" $sc "* ]] || { echo "regress.sh: no scenario $sc" >&2; usage; }
	done
fi
IFS=, read -r -a bes <<<"$backends"
for be in "${bes[@]}"; do
	case $be in uring | epoll) ;; *) echo "regress.sh: backend $be: want uring or epoll" >&2; usage ;; esac
done

# shellcheck source=lib.sh
. ./lib.sh
note() { echo "   note: $*"; }
for tool in git python3 go; do
	have $tool || { echo "regress.sh needs $tool" >&2; exit 2; }
done
if ! have taskset || [ "$(nproc)" -lt 2 ]; then
	echo "regress.sh pins servers to CPU 0 and load to CPU 1: it needs taskset (apt-get install util-linux) and two CPUs" >&2
	exit 2
fi
base_sha=$(git -C .. rev-parse --verify --quiet "$base^{commit}") || { echo "regress.sh: $base is not a commit here" >&2; exit 2; }

tmp=$(mktemp -d /tmp/veloq-regress.XXXXXX)
trap 'stop_server; rm -rf "$tmp"' EXIT
mkdir -p "$tmp/src" "$tmp/base" "$tmp/work" "$tmp/tools" "$(dirname "$out")"
echo "== build: base $(git -C .. log -1 --format='%h %s' "$base_sha" | cut -c1-72)"
git -C .. archive "$base_sha" | tar -x -C "$tmp/src"
if ! (cd "$tmp/src" && go build -o "$tmp/base/" ./cmd/echo-server ./examples/tcp-proxy); then
	echo "regress.sh: $base does not build" >&2
	exit 2
fi
echo "== build: work tree"
(cd .. && go build -o "$tmp/work/" ./cmd/echo-server ./examples/tcp-proxy) || { echo "regress.sh: the work tree does not build" >&2; exit 2; }
go build -o "$tmp/tools/" ./cmd/tcpload ./cmd/wrkload ./cmd/udpload ./cmd/h2idle ./cmd/slowread || { echo "regress.sh: bench's load generators do not build" >&2; exit 2; }
ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)"

t=$tmp/tools backend_port=19590 pid=""
# define SCENARIO BACKEND: sets need and pkg (a tool and its apt package),
# server (a command with @BIN@ for the build's directory and abab.py's
# {port}), load (with {port}, {secs}, {pid}) and flags (abab.py's, for a
# memory figure). The load command lines are the other scripts'.
define() {
	local es="@BIN@/echo-server -loops 1 -backend $2 -addr 127.0.0.1:{port}"
	local wrk="$t/wrkload -addr 127.0.0.1:{port} -conns 64 -duration {secs}s -warmup 0s -server-pid {pid} -json"
	need="" pkg="" flags=()
	case $1 in
	echo-64B) server="$es -mode tcp" load="$t/tcpload -addr 127.0.0.1:{port} -conns 64 -size 64 -duration {secs}s -warmup 0s -server-pid {pid} -json" ;;
	http-plain) need=wrk pkg=wrk server="$es -mode http" load=$wrk ;;
	http-pipelined) need=wrk pkg=wrk server="$es -mode http" load="$wrk -pipeline 16" ;;
	fromstd) need=wrk pkg=wrk server="$es -mode http-std" load=$wrk ;;
	https-keepalive) need=wrk pkg=wrk server="$es -mode http -tls-self-signed" load="$wrk -tls" ;;
	h2-tls) need=h2load pkg=nghttp2-client server="$es -mode http -tls-self-signed" load="h2load -c64 -m16 --tls13-ciphers=TLS_AES_128_GCM_SHA256 -D {secs} https://127.0.0.1:{port}/" ;;
	udp-64B) server="$es -mode udp" load="$t/udpload -addr 127.0.0.1:{port} -ports 64 -window 8 -size 64 -duration {secs}s -warmup 0s -server-pid {pid} -json" flags=(--unit "µs server CPU/datagram") ;;
	proxy-slowread-mem)
		server="@BIN@/tcp-proxy -listen 127.0.0.1:{port} -backends 127.0.0.1:$backend_port -loops 1 -backend $2"
		load="$t/slowread -addr 127.0.0.1:{port} -server-pid {pid} -conns 16 -size $slow_size -stall $stall"
		flags=(--value growth_stall_kib --unit "KiB proxy RSS growth" --no-warmup) ;;
	idle-tls-mem)
		server="$es -mode tcp -tls-self-signed"
		# The RSS before is read at the load's start: let the server settle after it listens.
		load="sleep 0.3; $t/tcpload -tls -addr 127.0.0.1:{port} -idle $idle -hold $hold -dial-parallel 64 -server-pid {pid} -json"
		flags=(--value server_kib_per_conn --unit "KiB/idle conn" --no-warmup) ;;
	idle-h2-mem)
		server="$es -mode http -tls-self-signed"
		load="sleep 0.3; $t/h2idle -tls -addr 127.0.0.1:{port} -pid {pid} -n $idle -hold $hold"
		flags=(--value bytes_per_conn --scale 0.0009765625 --unit "KiB/idle conn" --no-warmup) ;;
	esac
}

# The proxy's backend: the work tree's echo-server, one loop on CPU 1
# beside the load, shared by base's and work's proxies.
start_backend() {
	[ -z "${pid:-}" ] || return 0
	taskset -c 1 "$tmp/work/echo-server" -loops 1 -addr 127.0.0.1:$backend_port >"$tmp/backend.log" 2>&1 &
	pid=$!
	server_ready echo-backend "$tmp/backend.log"
}

runs=$tmp/runs.jsonl
: >"$runs"
record() { python3 -c 'import json, sys; print(json.dumps(dict(zip(sys.argv[1::2], sys.argv[2::2]))))' "$@" >>"$runs"; }
start_date=$(date -u '+%F %H:%M UTC') load_start=$(cut -d' ' -f1-3 /proc/loadavg)
port=19800
for be in "${bes[@]}"; do
	for sc in "${scenarios[@]}"; do
		label="$sc ($be)"
		define "$sc" "$be"
		echo "== $label: $rounds round(s) of base, work, base2"
		if [ -n "$need" ] && ! have "$need"; then
			echo "   SKIP: $need is not installed (apt-get install $pkg)"
			record label "$label" skip "$need is not installed (apt-get install $pkg)"
			continue
		fi
		if [ "$sc" = proxy-slowread-mem ] && ! start_backend; then
			record label "$label" failed "the proxy's backend echo-server did not start"
			continue
		fi
		# A failed run is recorded in $runs by abab.py and judged below.
		python3 abab.py --port "$port" --json "$runs" --label "$label" "${flags[@]}" "$rounds" "$secs" "$load" \
			base="${server//@BIN@/$tmp/base}" work="${server//@BIN@/$tmp/work}" base2="${server//@BIN@/$tmp/base}" 2>&1 |
			sed 's/^/   /' || true
		port=$((port + 3 * rounds + 1))
	done
done
stop_server
load_end=$(cut -d' ' -f1-3 /proc/loadavg)

work_desc=$(git -C .. rev-parse --short HEAD)
git -C .. diff --quiet HEAD -- 2>/dev/null || work_desc+=" with uncommitted changes"
status=0
{
	echo "# Regression guard: the work tree against $(git -C .. log -1 --format=%h "$base_sha")"
	echo
	echo "\`bench/regress.sh $base${preset:+ --$preset} --rounds $rounds --secs $secs --backends $backends${only:+ --only $only}\`: base $(git -C .. log -1 --format=%h "$base_sha") ($(git -C .. log -1 --format=%s "$base_sha" | cut -c1-72)), work $work_desc; $start_date."
	echo "$(nproc) CPUs ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')), Linux $(uname -r), $(go version | cut -d' ' -f3). Load average $load_start at the start, $load_end at the end (on a busy machine the figures are for smoke-testing only)."
	echo
	echo "Every round runs base, work and base again (base2), in an order rotated each round; server on CPU 0 (one loop), load on CPU 1; ${secs} s windows after a 1 s warmup (memory scenarios: no warmup; $idle idle connections held $hold; 16 stalled readers × $((slow_size >> 20)) MiB, $stall stall). Lower is better everywhere. work/base is per round, work over the mean of that round's base and base2; noise is the largest |base2/base − 1| over the rounds; a verdict needs every round beyond max(noise, $floor %)."
	echo
	python3 abab.py --judge "$runs" --floor "$floor" --gate "$gate" || status=$?
	[ "$gate" = all ] || printf '\n%s\n' "--smoke: one round of 1 s windows cannot judge CPU or memory; the exit status reflects only failed scenarios and errors, not the verdicts."
} >"$out"
echo
cat "$out"
exit $status
