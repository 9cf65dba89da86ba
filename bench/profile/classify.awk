# Reads `perf script -F ip,sym,dso` (one blank line between samples, leaf
# frame first) and prints the share of samples per category.
function flush() {
	if (n == 0) return
	total++
	if (stack ~ / tcp_sendmsg /) c["tcp send (incl. loopback delivery to the peer)"]++
	else if (stack ~ / tcp_recvmsg /) c["tcp receive"]++
	else if (stack ~ / __schedule /) c["thread sleep/wake (kernel scheduler)"]++
	else if (stack ~ / runtime\.sysmon /) c["Go runtime: sysmon thread"]++
	else if (leafk) c["other kernel (syscall entry, io_uring, epoll, futex)"]++
	else if (leaf ~ /^runtime\./) c["Go runtime in user space (scheduler, GC)"]++
	else c["user space: server code"]++
	n = 0; stack = " "
}
BEGIN { stack = " " }
/^[ \t]*$/ { flush(); next }
{
	sym = $2
	if (n == 0) { leaf = sym; leafk = ($0 ~ /kernel\.kallsyms/) }
	stack = stack sym " "
	n++
}
END {
	flush()
	for (k in c) printf "%s\t%.1f\n", k, 100 * c[k] / total
}
