#!/usr/bin/env bash
# Stalled readers against veloq's echo server, directly and through
# examples/tcp-proxy, on io_uring and epoll: what 16 clients that send
# 8 MiB each and read nothing for 2 s add to the server's (or the
# proxy's) resident memory, at its peak during the stall and over the
# whole run (the stall, then every byte read back: bursts that arrive as
# the readers resume show only in the second). Loopback only; every run
# stops by itself.
#
#	bench/slowread.sh [conns] [size-bytes] [stall]
set -euo pipefail
cd "$(dirname "$0")/.."
conns=${1:-16}
size=${2:-$((8 << 20))}
stall=${3:-2s}
bin=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$bin"' EXIT
go build -o "$bin/echo-server" ./cmd/echo-server
go build -o "$bin/tcp-proxy" ./examples/tcp-proxy
(cd bench && go build -o "$bin/slowread" ./cmd/slowread)

waitport() { for _ in $(seq 100); do (exec 3<>/dev/tcp/127.0.0.1/$1) 2>/dev/null && return 0; sleep 0.05; done; return 1; }

printf '| target | backend | RSS before | peak during stall | growth | peak over the run | growth |\n|---|---|--:|--:|--:|--:|--:|\n'
for be in uring epoll; do
	for via in direct proxy; do
		"$bin/echo-server" -addr 127.0.0.1:19100 -loops 1 -backend "$be" >/dev/null &
		echo_pid=$!
		waitport 19100
		port=19100 pid=$echo_pid
		if [ "$via" = proxy ]; then
			"$bin/tcp-proxy" -listen 127.0.0.1:19101 -backends 127.0.0.1:19100 -loops 1 -backend "$be" >/dev/null &
			pid=$!
			port=19101
			waitport 19101
		fi
		out=$("$bin/slowread" -addr 127.0.0.1:$port -server-pid "$pid" -conns "$conns" -size "$size" -stall "$stall")
		before=$(awk '/^rss_before_kib/ {print $2}' <<<"$out")
		peak=$(awk '/^rss_peak_stall_kib/ {print $2}' <<<"$out")
		growth=$(awk '/^growth_stall_kib/ {print $2}' <<<"$out")
		runpeak=$(awk '/^rss_peak_kib/ {print $2}' <<<"$out")
		rungrowth=$(awk '/^growth_kib/ {print $2}' <<<"$out")
		name="echo-server"; [ "$via" = proxy ] && name="tcp-proxy (in front of echo-server)"
		printf '| %s | %s | %d KiB | %d KiB | %+d KiB | %d KiB | %+d KiB |\n' "$name" "$be" "$before" "$peak" "$growth" "$runpeak" "$rungrowth"
		kill $(jobs -p) 2>/dev/null || true
		wait 2>/dev/null || true
	done
done
