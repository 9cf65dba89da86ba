#!/bin/sh
# Build and run the veloq benchmark suite. All flags go to benchrun:
#   bench/run.sh --quick    # ~2 minutes: every scenario once, short windows -> results/quick.*
#   bench/run.sh            # full: 3 repeats -> results/latest.*, charts, ../BENCHMARKS.md
#   bench/run.sh -help      # every flag
# HTTP scenarios need wrk (apt-get install wrk); nginx is used when installed.
# The C floor (c-epoll, c-uring) is built from its sources vendored in
# bench/floor/ (or -limits DIR) with gcc and liburing-dev, or skipped.
# bench/floor.sh runs only veloq against the floor.
set -eu
cd "$(dirname "$0")"
export GOWORK=off
# benchrun records the command in the results as it was typed here.
export BENCH_CMD="bench/run.sh"
mkdir -p bin
go build -o bin/benchrun ./cmd/benchrun
exec bin/benchrun "$@"
