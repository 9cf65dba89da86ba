#!/bin/sh
# HTTP plaintext: wrk (CPU 1) against echo-server -mode http, the
# cloudwego/hertz peer and the net/http peer (CPU 0: taskset makes Go use GOMAXPROCS=1), each run in turn, with
# the server's CPU time (utime+stime from /proc) over the measured window.
#   bench/http.sh [duration-seconds] [connections]
# Needs wrk (apt-get install wrk). 16-deep pipelining uses wrk's Lua script.
set -eu
cd "$(dirname "$0")"
DUR=${1:-8}
CONNS=${2:-64}
command -v wrk >/dev/null || { echo "http.sh: wrk not found (apt-get install wrk)"; exit 1; }
mkdir -p bin results
GOWORK=off go build -o bin/stdhttp ./peers/stdhttp
GOWORK=off go build -o bin/hertzhttp ./peers/hertzhttp
(cd .. && go build -o bench/bin/echo-server ./cmd/echo-server)
TCK=$(getconf CLK_TCK)
cat > bin/pipeline.lua <<'LUA'
init = function(args)
  local r = {}
  for i = 1, 16 do r[i] = wrk.format("GET", "/") end
  req = table.concat(r)
end
request = function() return req end
LUA
cpu() { awk '{print $14+$15}' /proc/$1/stat; }
run() { # name port pipeline(0|1) cmd...
	name=$1; port=$2; pipe=$3; shift 3
	taskset -c 0 "$@" >/dev/null 2>&1 & pid=$!
	sleep 0.5
	extra=""; [ "$pipe" = 1 ] && extra="-s bin/pipeline.lua"
	taskset -c 1 wrk -t1 -c"$CONNS" -d1s $extra "http://127.0.0.1:$port/" >/dev/null
	c0=$(cpu $pid)
	out=$(taskset -c 1 wrk -t1 -c"$CONNS" -d"${DUR}s" $extra "http://127.0.0.1:$port/")
	c1=$(cpu $pid)
	kill -INT $pid; wait $pid 2>/dev/null || true
	reqs=$(echo "$out" | awk '/requests in/ {print $1}')
	rps=$(echo "$out" | awk '/Requests\/sec/ {print $2}')
	lat=$(echo "$out" | awk '/Latency/ {print $2}')
	secs=$(echo "$c0 $c1 $TCK" | awk '{printf "%.2f", ($2-$1)/$3}')
	percpu=$(echo "$reqs $secs" | awk '{ if ($2 > 0) printf "%.0f", $1/$2; else print "n/a" }')
	printf "| %s | %s | %s | %s | %s |\n" "$name" "$rps" "$lat" "$secs" "$percpu"
}
for mode in 0 1; do
	[ $mode = 0 ] && echo "### plaintext, $CONNS connections, no pipelining" || echo "### plaintext, $CONNS connections, 16-deep pipelining"
	echo "| server | req/s | avg latency | server CPU s | req per server CPU-s |"
	echo "|---|--:|--:|--:|--:|"
	run veloq-uring 19301 $mode bin/echo-server -mode http -loops 1 -backend uring -addr 127.0.0.1:19301
	run veloq-epoll 19302 $mode bin/echo-server -mode http -loops 1 -backend epoll -addr 127.0.0.1:19302
	run net/http 19303 $mode bin/stdhttp -addr 127.0.0.1:19303
	run hertz 19304 $mode bin/hertzhttp -addr 127.0.0.1:19304
	echo
done
