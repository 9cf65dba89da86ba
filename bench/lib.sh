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

# nginx, as every script runs it: one process (master_process off, so its
# CPU is all in the PID that is sampled), in the foreground, every path it
# writes under one directory. nginx_bin is empty when it is not installed.
nginx_bin=$(command -v nginx || { [ -x /usr/sbin/nginx ] && echo /usr/sbin/nginx; } || true)

# nginx_cert DIR: an ECDSA P-256 certificate for localhost and 127.0.0.1,
# like the Go servers' -tls-self-signed, in DIR/cert.pem and DIR/key.pem;
# fails with openssl's words in DIR/openssl.log.
nginx_cert() {
	openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
		-subj /CN=localhost -addext "subjectAltName=DNS:localhost,IP:127.0.0.1" \
		-keyout "$1/key.pem" -out "$1/cert.pem" >"$1/openssl.log" 2>&1
}

# nginx_conf DIR SCRIPT HTTP: writes DIR/nginx.conf, the frame every
# script shares (keepalive_requests raised so nginx does not close a load
# generator's keep-alive connections every 1000 requests, which no other
# server does), with HTTP (directives and server blocks) inside http {}.
nginx_conf() {
	cat >"$1/nginx.conf" <<NGINX
# written by veloq's bench/$2 for one run
worker_processes 1;
master_process off;
daemon off;
worker_rlimit_nofile 65536;
pid $1/nginx.pid;
error_log $1/error.log warn;
events {
    worker_connections 16384;
}
http {
    access_log off;
    client_body_temp_path $1/client_body;
    proxy_temp_path $1/proxy;
    fastcgi_temp_path $1/fastcgi;
    uwsgi_temp_path $1/uwsgi;
    scgi_temp_path $1/scgi;
    keepalive_requests 100000000;
$3
}
NGINX
}

# nginx_check DIR [CONF]: whether nginx accepts DIR/nginx.conf (or CONF);
# its complaint is in DIR/check.log.
nginx_check() {
	"$nginx_bin" -p "$1/" -c "${2:-$1/nginx.conf}" -e "$1/error.log" -t >"$1/check.log" 2>&1
}

# Report arithmetic for the scripts' tables (values are strings; "n/a"
# passes through).
# stats VALUES...: "median min max" (the lower middle for an even count).
stats() {
	printf '%s\n' "$@" | awk 'NF' | sort -g | awk '{a[NR]=$1} END {if (NR == 0) print "n/a n/a n/a"; else print a[int((NR+1)/2)], a[1], a[NR]}'
}
# fmt FORMAT VALUE: VALUE in FORMAT, or n/a.
# shellcheck disable=SC2059 # the format is always one of the scripts'
fmt() { if [ "$2" = n/a ] || [ -z "$2" ]; then echo n/a; else printf "$1" "$2"; fi; }
# ratio A B: A/B as "1.23×", or n/a.
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {if (a == "n/a" || b == "n/a" || b + 0 == 0) print "n/a"; else printf "%.2f×", a / b}'; }
# pct FRACTION [DECIMALS]: as a percentage.
pct() { awk -v v="$1" -v d="${2:-0}" 'BEGIN {if (v == "n/a") print "n/a"; else printf "%." d "f%%", v * 100}'; }
# median_of ARRAY KEY: the median of the space-separated values ARRAY[KEY].
median_of() {
	local -n arr=$1
	# shellcheck disable=SC2086
	stats ${arr[$2]:-} | cut -d' ' -f1
}
