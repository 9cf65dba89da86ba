#!/usr/bin/env python3
"""Interleaved A/B: any servers under one load, side by side.

    bench/abab.py ROUNDS SECS 'LOAD with {port} and {secs}' NAME='SERVER with {port}' ...

Each round starts every server in turn (the order rotated each round) pinned
to CPU 0, warms it with a 1 s load, then runs the load for SECS pinned to
CPU 1 and reads the server's utime+stime from /proc over the window. It
prints, per server, the median requests per second and per server
CPU-second over the rounds with the range. The load's output must say how
many requests it made (wrk's "N requests in", or a JSON "requests" field).
For comparing two builds of one server (before and after a change) with a
floor beside them, e.g.:

    bench/abab.py 5 4 'wrk -t1 -c64 -d{secs}s http://127.0.0.1:{port}/' \
        before='/tmp/echo-before -mode http -loops 1 -addr 127.0.0.1:{port}' \
        after='bin/echo-server -mode http -loops 1 -addr 127.0.0.1:{port}' \
        c-epoll='bin/c-epoll-http -addr 127.0.0.1:{port}'

A server given as NAME='SERVER ;; LOAD' runs under its own LOAD instead of
the common one (e.g. a TLS server and a plaintext one under the same paced
load, one with -tls and one without):

    bench/abab.py 5 6 'bin/tcpload -tls -addr 127.0.0.1:{port} -rate 40000 -duration {secs}s -json' \
        tls='bin/echo-server -loops 1 -tls-self-signed -addr 127.0.0.1:{port}' \
        plain='bin/echo-server -loops 1 -addr 127.0.0.1:{port} ;; bin/tcpload -addr 127.0.0.1:{port} -rate 40000 -duration {secs}s -json'

With --udp first, the servers are UDP echo servers: a server is ready once
it echoes a probe datagram (instead of accepting a TCP connection), e.g.
veloq's before and after a change and net.UDPConn under a DNS-like load:

    bench/abab.py --udp 5 4 'bin/udpload -addr 127.0.0.1:{port} -ports 64 -window 1 -warmup 0s -duration {secs}s -json' \
        before='env GOMAXPROCS=1 /tmp/echo-before -mode udp -loops 1 -backend uring -addr 127.0.0.1:{port}' \
        after='env GOMAXPROCS=1 bin/echo-server -mode udp -loops 1 -backend uring -addr 127.0.0.1:{port}' \
        netudpconn='env GOMAXPROCS=1 bin/stdudp -addr 127.0.0.1:{port}'

127.0.0.1 only; it stops by itself."""
import os, re, socket, statistics, subprocess, sys, time
udp = len(sys.argv) > 1 and sys.argv[1] == '--udp'
if udp:
    del sys.argv[1]
rounds, secs, load = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
servers = [a.split('=', 1) for a in sys.argv[4:]]
loads = {n: (c.split(' ;; ', 1) + [load])[1] for n, c in servers}
servers = [(n, c.split(' ;; ', 1)[0]) for n, c in servers]
tck = os.sysconf('SC_CLK_TCK')
def cpu_total(pid):
    f = open(f'/proc/{pid}/stat').read().rsplit(')', 1)[1].split()
    return (int(f[11]) + int(f[12])) / tck
def wait_port(port, host='127.0.0.1'):
    for _ in range(200):
        try:
            socket.create_connection((host, port), 0.2).close(); return
        except OSError:
            time.sleep(0.05)
    raise SystemExit(f'port {port} never opened')
def wait_udp(port, host='127.0.0.1'):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.settimeout(0.05)
    try:
        for _ in range(200):
            try:
                s.sendto(b'abab probe', (host, port))
                if s.recv(64) == b'abab probe': return
            except OSError:
                time.sleep(0.05)
    finally:
        s.close()
    raise SystemExit(f'nothing echoes on udp port {port}')
def parse(out):
    m = re.search(r'(\d+) requests in', out)
    if m: return int(m.group(1))
    m = re.search(r'^DONE (\d+)', out, re.M)
    if m: return int(m.group(1))
    m = re.search(r'"(?:requests|messages|datagrams|received)"\s*:\s*(\d+)', out)
    if m: return int(m.group(1))
    raise SystemExit('cannot parse load output:\n' + out[-2000:])
res = {n: [] for n, _ in servers}
port = 19700
for r in range(rounds):
    order = servers[r % len(servers):] + servers[:r % len(servers)]
    for name, cmd in order:
        port += 1
        p = subprocess.Popen(['taskset', '-c', '0', 'sh', '-c', 'exec ' + cmd.format(port=port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            wait_udp(port) if udp else wait_port(port)
            subprocess.run(['taskset', '-c', '1', 'sh', '-c', loads[name].format(port=port, secs=1)], capture_output=True, text=True)
            c0 = cpu_total(p.pid); t0 = time.time()
            o = subprocess.run(['taskset', '-c', '1', 'sh', '-c', loads[name].format(port=port, secs=secs)], capture_output=True, text=True)
            c1 = cpu_total(p.pid); t1 = time.time()
            n = parse(o.stdout + o.stderr)
            c = c1 - c0
            rps, per, cpu = n / (t1 - t0), n / c if c > 0 else 0, c / (t1 - t0)
            res[name].append((rps, per, cpu))
            print(f'round {r+1} {name}: {rps:,.0f} req/s, {per:,.0f} req/CPU-s, cpu {cpu:.2f}', flush=True)
        finally:
            p.terminate(); p.wait()
print('\n| server | req/s median | req per server CPU-s median | range | server CPU |')
print('|---|---:|---:|---:|---:|')
for name, _ in servers:
    v = res[name]
    per = [x[1] for x in v]
    print(f'| {name} | {statistics.median(x[0] for x in v):,.0f} | {statistics.median(per):,.0f} | {min(per):,.0f}–{max(per):,.0f} | {statistics.median(x[2] for x in v):.2f} |')
