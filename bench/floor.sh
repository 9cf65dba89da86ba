#!/bin/sh
# veloq against the C floor, side by side: server CPU per request of veloq's
# two backends and of the minimal C servers, in one run.
#
#   bench/floor.sh [rounds] [seconds] [benchrun flags...]   # default: 3 rounds, 4 s windows
#
# Each case starts a fresh server pinned to CPU 0 with its load generator on
# CPU 1 (taskset), 1 s of warmup, then the measured window; each scenario's
# servers run one after another in every round, in an order rotated each
# round, and the medians over the rounds are reported:
#
#   echo-64B-c64         tcpload, 64 connections, 64 B     veloq-uring, c-uring, veloq-epoll, c-epoll
#   http-plaintext-c64   wrk -t1, 64 connections           veloq-uring, veloq-epoll, c-epoll
#   http-pipeline16-c64  the same, 16 requests pipelined   veloq-uring, veloq-epoll, c-epoll
#
# It prints a markdown table: req/s, µs of server CPU per request, and the
# ratio to the matching floor (veloq-uring to c-uring for echo, everything
# else to c-epoll). It is bench/run.sh with these flags, so the results go
# to results/floor-latest.* and the C sources come from bench/floor/ (see
# bench/floor/README.md); further flags (e.g. -limits DIR for another copy)
# pass through.
set -eu
cd "$(dirname "$0")"
ROUNDS=3
SECS=4
case "${1:-}" in [0-9]*) ROUNDS=$1; shift ;; esac
case "${1:-}" in [0-9]*) SECS=$1; shift ;; esac
case "$ROUNDS$SECS" in *[!0-9]*)
	echo "usage: bench/floor.sh [rounds] [seconds] [benchrun flags...]" >&2
	exit 2 ;;
esac
if [ "$ROUNDS" -lt 1 ] || [ "$SECS" -lt 1 ]; then
	echo "floor.sh: rounds and seconds must be at least 1" >&2
	exit 2
fi
exec ./run.sh \
	-servers veloq-uring,c-uring,veloq-epoll,c-epoll \
	-scenarios echo-64B-c64,http-plaintext-c64,http-pipeline16-c64 \
	-repeats "$ROUNDS" -warmup 1s -duration "${SECS}s" \
	-server-cpu 0 -load-cpu 1 \
	-tag floor-latest -print floor "$@"
