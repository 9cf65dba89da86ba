#!/usr/bin/env python3
"""Interleaved A/B: any servers under one load, side by side.

    bench/abab.py [options] ROUNDS SECS 'LOAD with {port} and {secs}' NAME='SERVER with {port}' ...
    bench/abab.py --judge [--floor PCT] [--gate all|failures] FILE

Each round starts every server in turn (the order rotated each round) pinned
to CPU 0, warms it with a 1 s load, then runs the load for SECS pinned to
CPU 1 and reads the server's utime+stime from /proc over the window. It
prints, per server, the median requests per second and per server
CPU-second over the rounds with the range. The load's output must say how
many requests it made (wrk's "N requests in", h2load's "N succeeded", or a
JSON "requests" field). A load that samples the server itself (bench's
load generators with -server-pid {pid}: {pid} is the server's process id)
and prints "req_per_server_cpu_s" is taken at its word: its window edges
leave out its warmup and its connects. For comparing two builds of one
server (before and after a change) with a floor beside them, e.g.:

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

Options:
  --value KEY   the figure is the number KEY the load prints (a JSON field
                or a "KEY N" line, e.g. tcpload -idle's server_kib_per_conn)
                instead of requests per server CPU-second; lower is better
  --scale X     multiply --value's figure by X (e.g. 0.0009765625: B to KiB)
  --no-warmup   no 1 s load before the measured one (memory figures)
  --port N      the first port (one per run, counting up; default 19700)
  --json FILE   append the rounds' figures as one JSON line, with --label
                and --unit, for --judge; a run that fails is recorded too
  --judge FILE  read such lines, whose servers are base, work and base2 (a
                second run of base in every round), and print a markdown
                table: per scenario the medians and ranges of base and work,
                work/base per round (work over the mean of base and base2 in
                that round) with its range, the noise (base2/base per round,
                the largest deviation) and a verdict: REGRESSION when every
                round's ratio lies above 1 + max(noise, --floor %),
                improvement when every one lies below 1 - that, otherwise
                within noise. It exits 1 when a scenario regressed, failed
                on work's side, or made errors that base did not;
                otherwise 0 (a failure on base's side, such as a scenario
                newer than base's build, is n/a). With
                --gate failures, a REGRESSION alone does not make it exit 1
                (for windows too short to judge CPU by).

A server that is not up is found by connecting to its TCP port or, for a
UDP server, by its port in /proc/net/udp. 127.0.0.1 only; it stops by
itself."""
import argparse, json, os, re, socket, statistics, subprocess, sys, tempfile, time

tck = os.sysconf('SC_CLK_TCK')


def cpu_total(pid):
    f = open(f'/proc/{pid}/stat').read().rsplit(')', 1)[1].split()
    return (int(f[11]) + int(f[12])) / tck


def listening(port):
    try:
        socket.create_connection(('127.0.0.1', port), 0.2).close()
        return True
    except OSError:
        pass
    want = f':{port:04X}'
    for table in ('/proc/net/udp', '/proc/net/udp6'):
        try:
            rows = open(table).read().splitlines()[1:]
        except OSError:
            continue
        if any(r.split()[1].endswith(want) for r in rows if len(r.split()) > 1):
            return True
    return False


class RunFailed(Exception):
    pass


def wait_port(port, proc, log):
    for _ in range(200):
        if listening(port):
            return
        if proc.poll() is not None:
            # The first line of its log says why (a flag or mode this build lacks, ...).
            raise RunFailed(f'the server exited ({proc.returncode}) before port {port} opened: {tail(log, 0, 1).strip()}\n{tail(log)}')
        time.sleep(0.05)
    raise RunFailed(f'port {port} never opened:\n{tail(log)}')


def tail(path, start=-8, end=None):
    try:
        return ''.join(open(path, errors='replace').readlines()[start:end])
    except OSError:
        return ''


def number(pattern, out):
    m = re.search(pattern, out, re.M)
    return float(m.group(1)) if m else None


def requests(out):
    for p in (r'(\d+) requests in', r'^DONE (\d+)', r'^requests: .*?(\d+) succeeded',
              r'"(?:requests|messages|datagrams|received)"\s*:\s*(\d+)'):
        n = number(p, out)
        if n is not None:
            return int(n)
    raise RunFailed('cannot parse load output:\n' + out[-2000:])


def errors(out):
    """Errors the load reports: a JSON "errors" field, wrk's socket errors
    and non-2xx responses, h2load's failed, errored and timed-out requests."""
    n = number(r'"errors"\s*:\s*(\d+)', out)
    if n is not None:
        return int(n)
    total = 0
    m = re.search(r'Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)', out)
    if m:
        total += sum(int(x) for x in m.groups())
    total += int(number(r'Non-2xx or 3xx responses: (\d+)', out) or 0)
    m = re.search(r'^requests: .*?(\d+) failed, (\d+) errored, (\d+) timeout', out, re.M)
    if m:
        total += sum(int(x) for x in m.groups())
    return total


def measure(args, name, cmd, load, port, logdir):
    """One run of one server: its figures, or RunFailed."""
    log = os.path.join(logdir, f'{name}-{port}.log')
    with open(log, 'w') as f:
        p = subprocess.Popen(['taskset', '-c', '0', 'sh', '-c', 'exec ' + cmd.format(port=port)], stdout=f, stderr=f)
    try:
        wait_port(port, p, log)
        fill = lambda secs: load.format(port=port, secs=secs, pid=p.pid)
        if not args.no_warmup:
            subprocess.run(['taskset', '-c', '1', 'sh', '-c', fill(1)], capture_output=True, text=True)
        c0 = cpu_total(p.pid); t0 = time.time()
        o = subprocess.run(['taskset', '-c', '1', 'sh', '-c', fill(args.secs)], capture_output=True, text=True)
        c1 = cpu_total(p.pid); t1 = time.time()
        out = o.stdout + o.stderr
        if p.poll() is not None:
            raise RunFailed(f'the server exited ({p.returncode}) during the load:\n{tail(log)}\n{out[-1000:]}')
        run = {'errors': errors(out)}
        if args.value:
            v = number(r'(?:"' + re.escape(args.value) + r'"\s*:\s*|^' + re.escape(args.value) + r'[ \t:=]+)(-?[0-9.]+(?:[eE][-+]?\d+)?)', out)
            if v is None or o.returncode != 0:
                raise RunFailed(f'no {args.value} in the load output (exit {o.returncode}):\n' + out[-2000:])
            run['cost'] = v * args.scale
            return run
        n = requests(out)
        per = number(r'"req_per_server_cpu_s"\s*:\s*([0-9.eE+]+)', out)
        if per:
            rps = number(r'"rps"\s*:\s*([0-9.eE+]+)', out) or 0
            cpu = number(r'"server_cpu_util"\s*:\s*([0-9.eE+]+)', out) or 0
        else:
            c = c1 - c0
            rps, per, cpu = n / (t1 - t0), n / c if c > 0 else 0, c / (t1 - t0)
        if n == 0 or per == 0:
            raise RunFailed('no requests, or no server CPU, in the window:\n' + out[-2000:])
        run.update(rps=rps, per=per, cpu=cpu, cost=1e6 / per)
        return run
    finally:
        p.terminate(); p.wait()


def run_rounds(args):
    servers = [a.split('=', 1) for a in args.servers]
    loads = {n: (c.split(' ;; ', 1) + [args.load])[1] for n, c in servers}
    servers = [(n, c.split(' ;; ', 1)[0]) for n, c in servers]
    res = {n: [] for n, _ in servers}
    port = args.port
    failed = failed_server = None
    logdir = tempfile.mkdtemp(prefix='abab-')
    try:
        for r in range(args.rounds):
            order = servers[r % len(servers):] + servers[:r % len(servers)]
            for name, cmd in order:
                port += 1
                try:
                    run = measure(args, name, cmd, loads[name], port, logdir)
                except (RunFailed, OSError) as e:
                    failed, failed_server = f'round {r + 1}, {name}: {e}', name
                    break
                res[name].append(run)
                if args.value:
                    print(f'round {r+1} {name}: {run["cost"]:,.2f} {args.unit or args.value}, errors {run["errors"]}', flush=True)
                else:
                    print(f'round {r+1} {name}: {run["rps"]:,.0f} req/s, {run["per"]:,.0f} req/CPU-s, cpu {run["cpu"]:.2f}, errors {run["errors"]}', flush=True)
            if failed:
                break
    finally:
        subprocess.run(['rm', '-rf', logdir])
    if args.json:
        rec = {'label': args.label, 'unit': args.unit or (args.value or 'µs server CPU/request'), 'runs': res}
        if failed:
            rec['failed'], rec['failed_server'] = failed, failed_server
        with open(args.json, 'a') as f:
            f.write(json.dumps(rec) + '\n')
    if failed:
        print(failed, file=sys.stderr)
        return 1
    if args.value:
        print(f'\n| server | {args.value} median | range |')
        print('|---|---:|---:|')
        for name, _ in servers:
            v = [x['cost'] for x in res[name]]
            print(f'| {name} | {statistics.median(v):,.2f} | {min(v):,.2f}–{max(v):,.2f} |')
        return 0
    print('\n| server | req/s median | req per server CPU-s median | range | server CPU |')
    print('|---|---:|---:|---:|---:|')
    for name, _ in servers:
        v = res[name]
        per = [x['per'] for x in v]
        print(f'| {name} | {statistics.median(x["rps"] for x in v):,.0f} | {statistics.median(per):,.0f} | {min(per):,.0f}–{max(per):,.0f} | {statistics.median(x["cpu"] for x in v):.2f} |')
    return 0


def judge_one(rec, floor):
    """(row cells after the scenario and unit, gate failed?) for one record."""
    if 'skip' in rec:
        return ['', '', '', '', 'SKIP: ' + rec['skip']], False
    if 'failed' in rec:
        why = rec['failed'].splitlines()[0].replace('|', '\\|')
        if rec.get('failed_server') in ('base', 'base2'):
            # Not work's fault: typically a scenario newer than BASE
            # (a flag or mode its build does not have).
            return ['', '', '', '', 'n/a: base failed: ' + why], False
        return ['', '', '', '', 'FAILED: ' + why], True
    runs = rec['runs']
    base, work, base2 = ([x['cost'] for x in runs.get(k, [])] for k in ('base', 'work', 'base2'))
    n = min(len(base), len(work), len(base2) if base2 else len(base))
    if n == 0:
        return ['', '', '', '', 'FAILED: no complete round'], True
    ratios, noise = [], []
    for i in range(n):
        ref = (base[i] + base2[i]) / 2 if base2 else base[i]
        ratios.append(work[i] / ref if ref else float('inf'))
        if base2:
            noise.append(base2[i] / base[i] - 1 if base[i] else float('inf'))
    spread = max((abs(x) for x in noise), default=0.0)
    thr = max(spread, floor)
    rng = lambda v: f'{statistics.median(v):,.2f} [{min(v):,.2f}–{max(v):,.2f}]'
    pct = lambda x: f'{(x - 1) * 100:+.1f}%'
    werr = sum(x['errors'] for x in runs['work'])
    berr = sum(x['errors'] for k in ('base', 'base2') for x in runs.get(k, []))
    if werr and not berr:
        verdict, bad = f'ERRORS: work made {werr}, base none', True
    elif min(ratios) > 1 + thr:
        verdict, bad = f'REGRESSION {pct(statistics.median(ratios))} (beyond ±{thr * 100:.1f}%)', True
    elif max(ratios) < 1 - thr:
        verdict, bad = f'improvement {pct(statistics.median(ratios))} (beyond ±{thr * 100:.1f}%)', False
    else:
        verdict, bad = f'within noise (±{thr * 100:.1f}%)', False
    noise_cell = f'±{spread * 100:.1f}%' if base2 else 'n/a (no base2)'
    return [rng(base + base2), rng(work), f'{statistics.median(ratios):.3f} [{min(ratios):.3f}–{max(ratios):.3f}]', noise_cell, verdict], bad


def judge(path, floor, gate):
    print('| scenario | unit | base median [min–max] | work median [min–max] | work/base per round, median [min–max] | noise: base2/base | verdict |')
    print('|---|---|---:|---:|---:|---:|---|')
    bad = 0
    for line in open(path):
        if not line.strip():
            continue
        rec = json.loads(line)
        cells, b = judge_one(rec, floor)
        bad += b and (gate == 'all' or not cells[-1].startswith('REGRESSION'))
        print('| ' + ' | '.join([rec['label'], rec.get('unit', '')] + cells) + ' |')
    return 1 if bad else 0


def main():
    ap = argparse.ArgumentParser(usage=__doc__.split('\n\n')[1], add_help=True)
    ap.add_argument('--value')
    ap.add_argument('--scale', type=float, default=1.0)
    ap.add_argument('--no-warmup', action='store_true')
    ap.add_argument('--port', type=int, default=19700)
    ap.add_argument('--json')
    ap.add_argument('--label', default='')
    ap.add_argument('--unit', default='')
    ap.add_argument('--judge', metavar='FILE')
    ap.add_argument('--floor', type=float, default=2.0, help='the least threshold, in percent')
    ap.add_argument('--gate', choices=('all', 'failures'), default='all')
    ap.add_argument('rounds', type=int, nargs='?')
    ap.add_argument('secs', type=int, nargs='?')
    ap.add_argument('load', nargs='?')
    ap.add_argument('servers', nargs='*')
    args = ap.parse_args()
    if args.judge:
        return judge(args.judge, args.floor / 100, args.gate)
    if args.load is None or not args.servers or args.rounds < 1 or args.secs < 1:
        ap.error('want ROUNDS SECS LOAD NAME=SERVER...')
    return run_rounds(args)


if __name__ == '__main__':
    sys.exit(main())
