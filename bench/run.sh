#!/bin/sh
# Build and run the veloq benchmark suite. All flags go to benchrun:
#   ./run.sh --quick        # ~2 minutes: 1 repeat, headline scenarios
#   ./run.sh                # full: 3 repeats, all scenarios
#   ./run.sh -help          # every flag
# Results: results/latest.json and results/latest.md (or -tag NAME).
set -eu
cd "$(dirname "$0")"
export GOWORK=off
mkdir -p bin
go build -o bin/benchrun ./cmd/benchrun
exec bin/benchrun "$@"
