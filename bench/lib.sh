# Shell functions the bench scripts share (sourced, not run): one server
# at a time, started by the script, waited for here, stopped here. The
# sourcing script defines note() (a line for its report) and keeps the
# server's process id in $pid.

have() { command -v "$1" >/dev/null 2>&1; }

# server_ready NAME LOG [PORT]: waits up to 10 s for the server $pid to be
# ready: with PORT, until 127.0.0.1:PORT accepts (nginx prints nothing);
# otherwise until its log says "on 127.0.0.1:N", as veloq's servers and the
# Go peers do. A server named *uring* that ran on another backend is noted.
# Fails, showing the log, when the server exits first, and stops it when
# it is not ready in time.
server_ready() {
	local name=$1 log=$2 port=${3:-}
	for _ in $(seq 100); do
		if [ -n "$port" ]; then
			(: <"/dev/tcp/127.0.0.1/$port") 2>/dev/null && return 0
		elif grep -qE "on 127\.0\.0\.1:[0-9]+" "$log"; then
			case $name in
			*uring*) grep -q "backend uring" "$log" || note "$name did not run on io_uring: $(grep -m1 -oE 'backend [a-z]+' "$log")" ;;
			esac
			return 0
		fi
		kill -0 "$pid" 2>/dev/null || { sed 's/^/   | /' "$log"; pid=""; return 1; }
		sleep 0.1
	done
	echo "   $name did not start within 10 s"
	stop_server
	return 1
}

# stop_server stops the server $pid, if any, and waits for it.
stop_server() {
	[ -n "${pid:-}" ] || return 0
	kill -TERM "$pid" 2>/dev/null || true
	wait "$pid" 2>/dev/null || true
	pid=""
}
trap stop_server EXIT
trap 'exit 130' INT TERM
