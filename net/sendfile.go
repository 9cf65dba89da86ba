package net

import (
	"errors"
	"fmt"
	"io"
	"os"
	"syscall"

	"github.com/veloq/veloq/executor"
)

// ErrSendingFile is returned by writes to a connection while SendFile is
// sending a file on it, and by a second SendFile: the file's bytes must
// reach the peer before anything written after them.
var ErrSendingFile = errors.New("veloq: a file is being sent on this connection")

// fileChunk is what one read of the file moves in copy mode (TLS, a small
// part, or no descriptor to be had): the read buffer a file send holds.
const fileChunk = 64 << 10

// fileCopyLow is the pending output below which copy mode reads its next
// chunk when the connection has no low-water mark of its own.
const fileCopyLow = 32 << 10

// fileSend is one SendFile in progress. The loop owns every field except
// while busy is set: then a blocking-pool task is sending (or reading into
// buf) and posts the result back, and the loop touches neither sock nor
// buf until it arrives.
//
// The zero-copy path is sendfile(2) on the blocking pool, on both
// backends, into a duplicate of the connection's (non-blocking) socket:
//   - the disk read inside sendfile may block, so it must not run on the
//     loop; on the pool it blocks one pool goroutine, never the loop;
//   - one sendfile call moves what the socket buffer takes (a loopback
//     socket takes megabytes) with no user-space copy and no pipe; the
//     alternatives cost more calls per byte: splice file → pipe on the pool
//     and pipe → socket on the loop is two calls and a thread hop per pipe
//     load (256 KiB), and IORING_OP_SPLICE runs a file read on an io-wq
//     thread anyway and fails with EAGAIN on a full non-blocking socket
//     instead of waiting (see splice.go);
//   - the duplicate keeps the socket open while a task uses it: if the
//     connection is torn down meanwhile, the loop's close(2) of its
//     descriptor cannot let a new connection reuse the number under the
//     task's feet, and the socket itself closes when the task returns;
//   - a full socket ends the task with EAGAIN; the loop then waits for
//     writability through the backend's watch, as SpliceTo does, and sends
//     the rest from the pool again.
//
// The send starts only when output written before it has left (so the
// bytes keep their order), and writes are refused until it ends.
type fileSend struct {
	c    *Conn
	pool *executor.BlockingPool
	f    *os.File // kept referenced so that its descriptor stays open
	fd   int
	off  int64 // next file offset to send
	left int64 // bytes still to send
	sent int64 // bytes handed to the socket or the output queue
	done func(sent int64, err error)

	sock    int    // the duplicate of the socket a pool task sends into; -1 until one is needed
	copying bool   // copy mode: read into buf, write through the output queue
	buf     []byte // copy mode: the read buffer
	chunk   []byte // copy mode: read and not yet written

	busy        bool // a task is on the blocking pool
	noCachestat bool // the file's filesystem has no cachestat: every send goes to the pool
	onLoop      bool // the send being accounted for ran on the loop
	waitOut     bool // the socket is full: the backend reports writability
	waitDrain   bool // ordinary output must drain first
	ended       bool // torn down; released when the task returns
	closeAfter  bool // Close was called meanwhile
	shutAfter   bool // CloseWrite was called meanwhile
	err         error
}

// loopFiles is a loop's SendFile state.
type loopFiles struct {
	// noCachestat: the kernel has no cachestat(2), so SendFile never
	// sends on the loop (sendCached).
	noCachestat bool
}

// sendfileMax bounds what one pool task sends, so that a large file on a
// slow disk does not hold a pool goroutine for long at a time.
const sendfileMax = 4 << 20

// errAgain is a task's report that the socket is full.
var errAgain = errors.New("socket full")

// SendFile sends n bytes of f, from offset off, on c after everything
// written to c before it, and then calls done on c's loop with the
// number of bytes sent and nil, or with the error that ended the send.
// It returns nil when the send has started (done will run exactly once)
// and an error otherwise (done will not run).
//
// On a plaintext connection the bytes go from the file to the socket
// without passing through user space, with sendfile(2) until the socket is
// full, then again once the backend reports it writable. The loop makes
// the call itself when cachestat(2) finds the part in the page cache;
// otherwise a task on the blocking pool b makes it, so the loop never
// waits for the disk. A task writes through a duplicate of the socket's
// descriptor, which a send holds while it runs (none is made once half of RLIMIT_NOFILE is in
// use, the rule SpliceTo follows for its pipes). On a TLS connection
// (Conn.TLS is not nil), where the kernel would send the file as
// plaintext, for a part under 16 KiB, and when no descriptor can be had,
// SendFile copies instead: b reads the file 64 KiB at a time and each
// chunk goes through the connection's ordinary write path, the next being
// read once pending output is below the low-water mark. The portable
// backend (BackendPortable) always copies. Either way a send
// holds one descriptor or one 64 KiB buffer, however large the file.
//
// Until done runs, Write, Writev, WriteString and ForwardTo into c return
// ErrSendingFile and AvailableBuffer returns nil. Close and CloseWrite
// take effect after the file has been sent. f must stay open until done
// runs (closing it is the caller's, typically in done); SendFile reads it
// at explicit offsets, not through its file offset.
//
// If the file is shorter than off+n, or reading it fails, or b refuses a
// task (executor.ErrOverloaded), or the connection fails or is closed by
// the peer, the connection is aborted (the peer could not tell the rest
// of the data from what follows otherwise), and done gets the cause. done
// normally runs on c's loop; if the loop has stopped while a task was on
// the pool, it runs on that pool's goroutine.
func (c *Conn) SendFile(b *executor.BlockingPool, f *os.File, off, n int64, done func(sent int64, err error)) error {
	switch {
	case c.offLoop():
		return ErrNotOnLoop
	case c.state != connOpen || c.wrShut:
		return ErrClosed
	case b == nil || f == nil || done == nil:
		return errors.New("veloq: SendFile needs a pool, a file and a done function")
	case off < 0 || n < 0:
		return fmt.Errorf("veloq: SendFile of %d bytes at offset %d", n, off)
	case c.SendingFile():
		return ErrSendingFile
	case c.spliceDst() != nil:
		return fmt.Errorf("%w: the connection is a splice destination", ErrSendingFile)
	}
	l := c.loop
	fs := &fileSend{c: c, pool: b, f: f, fd: int(f.Fd()), off: off, left: n, done: done, sock: -1}
	if c.tlsLayer() != nil || n < fileChunk/4 || l.backend == BackendPortable {
		// Over TLS nothing else is possible; below 16 KiB a sendfile
		// buys nothing over one copy; the portable backend has no
		// readiness report for a socket a task filled.
		fs.copyMode()
	}
	c.more().file = fs
	// Started from a deferred task: the send may end at once (a cached
	// file that the socket takes whole), and done must not run inside
	// SendFile.
	l.Defer(func() { l.fileNext(fs) })
	return nil
}

// copyMode switches fs to reading chunks and writing them (TLS, a small
// part, no descriptor to be had).
func (fs *fileSend) copyMode() {
	fs.copying = true
	fs.buf = make([]byte, min(fs.left, fileChunk))
}

// SendingFile reports whether a SendFile is in progress on c. Call it on
// c's loop.
func (c *Conn) SendingFile() bool { return c.aux != nil && c.aux.file != nil }

// FilePending returns how many bytes of the file SendFile is sending have
// not yet been handed to the socket (or, in copy mode, to the output
// queue, which OutputBuffered counts): 0 when no file is being sent. With
// OutputBuffered it tells whether a slow peer is making progress. Call it
// on c's loop.
func (c *Conn) FilePending() int64 {
	if !c.SendingFile() {
		return 0
	}
	fs := c.aux.file
	return fs.left + int64(len(fs.chunk))
}

// startTask submits the next send (or, in copy mode, read) of the file
// to the pool.
func (l *Loop) startTask(fs *fileSend) error {
	if !fs.copying && fs.sock < 0 {
		// The socket's duplicate is made for the first task, not for a
		// send the loop completes from the page cache.
		var err error
		if fs.sock, err = dupSocket(fs.c.fd); err != nil {
			fs.copyMode()
		}
	}
	fs.busy = true
	fd, off := fs.fd, fs.off
	var task func()
	if fs.copying {
		buf := fs.buf[:min(fs.left, int64(len(fs.buf)))]
		task = func() {
			n, err := preadFull(fd, buf, off)
			l.postDone(fs, n, err)
		}
	} else {
		sock, want, short := fs.sock, min(fs.left, sendfileMax), l.backend == BackendUring
		task = func() {
			n, err := sendfileSome(sock, fd, off, want, short)
			l.postDone(fs, n, err)
		}
	}
	if err := fs.pool.Spawn(task); err != nil {
		fs.busy = false
		return fmt.Errorf("veloq: SendFile: %w", err)
	}
	return nil
}

// postDone hands a task's result back to the loop (on the pool's
// goroutine). A stopped loop has torn the connection down already.
func (l *Loop) postDone(fs *fileSend, n int, err error) {
	if l.Post(func() { l.taskDone(fs, n, err) }) != nil {
		if fs.sock >= 0 {
			closeFD(fs.sock)
		}
		fs.done(fs.sent+int64(n), ErrClosed)
	}
}

// taskDone takes a task's result on the loop.
func (l *Loop) taskDone(fs *fileSend, n int, err error) {
	fs.busy = false
	l.fileSent(fs, n, err)
}

// fileSent accounts for a send or read of n bytes that ended with err,
// and moves on.
func (l *Loop) fileSent(fs *fileSend, n int, err error) {
	c := fs.c
	if !fs.copying {
		fs.off += int64(n)
		fs.left -= int64(n)
		fs.sent += int64(n)
		l.ctr.bytesOut += uint64(n)
		if n > 0 {
			c.lastActive = l.now
		}
	}
	if fs.ended {
		l.releaseFile(fs)
		return
	}
	switch {
	case err == errAgain:
		l.waitWritable(fs)
		return
	case err != nil && !fs.copying:
		l.abort(c, fmt.Errorf("veloq: SendFile: %w", err))
		return
	case err != nil:
		l.abort(c, fmt.Errorf("veloq: SendFile: reading the file: %w", err))
		return
	}
	if fs.copying {
		fs.off += int64(n)
		fs.left -= int64(n)
		fs.chunk = fs.buf[:n]
	}
	l.fileNext(fs)
}

// waitWritable waits for the backend to report c's socket writable. The
// task saw it full on another thread, so on epoll the edge that ends that
// may already have passed unwatched: once the watch is on, a poll(2) with
// no timeout tells whether it did (an edge after the watch is reported).
// An io_uring poll request looks at the socket's state when armed.
func (l *Loop) waitWritable(fs *fileSend) {
	c := fs.c
	fs.waitOut = true
	l.be.watch(c.slot, true, true)
	if l.backend != BackendEpoll || fs.onLoop {
		// An edge that follows a full socket seen on this thread comes
		// after the watch.
		return
	}
	if pollWritable(c.fd) {
		l.be.watch(c.slot, true, false)
		fs.waitOut = false
		l.fileNext(fs)
	}
}

// fileNext moves the send on: the next task, the buffered chunk, or the
// end.
func (l *Loop) fileNext(fs *fileSend) {
	c := fs.c
	if fs.ended || fs.busy || fs.waitOut || c.state != connOpen {
		return
	}
	if fs.copying {
		if len(fs.chunk) > 0 {
			if err := l.fileWrite(c, fs.chunk); err != nil {
				l.abort(c, err)
				return
			}
			fs.sent += int64(len(fs.chunk))
			fs.chunk = nil
		}
		low, _ := c.waterMarks()
		if low <= 0 {
			low = fileCopyLow
		}
		if fs.left > 0 && c.out.len() > low {
			fs.waitDrain = true // afterWrite calls back
			return
		}
	} else if fs.left > 0 && c.out.len() > 0 {
		fs.waitDrain = true // afterWrite calls back at zero
		return
	}
	if fs.left > 0 {
		if !fs.copying && l.sendCached(fs) {
			return
		}
		if err := l.startTask(fs); err != nil {
			l.abort(c, err)
		}
		return
	}
	l.finishFile(fs)
}

// sendCached sends the next part of the file on the loop itself when all
// of it is in the page cache (cachestat(2), Linux 6.5), so that
// sendfile(2) reads memory and cannot wait for the disk, and reports
// whether it did. It saves the trip through the pool, which costs more
// than the send. A page evicted between the check and the call would be
// read while the loop waits; the window is one system call wide.
func (l *Loop) sendCached(fs *fileSend) bool {
	want := min(fs.left, sendfileMax)
	if l.files.noCachestat || fs.noCachestat {
		return false
	}
	cached, err := pageCached(fs.fd, fs.off, want)
	switch {
	case err == syscall.ENOSYS: // the kernel's (before Linux 6.5): asked once per loop
		l.files.noCachestat = true
	case err == syscall.EOPNOTSUPP: // the file's filesystem
		fs.noCachestat = true
	}
	if !cached {
		return false
	}
	n, err := sendfileSome(fs.c.fd, fs.fd, fs.off, want, l.backend == BackendUring)
	if err == nil && fs.left > int64(n) {
		// More to send and the socket took all of this: the rest goes
		// after the loop's other work, not in this call.
		fs.off += int64(n)
		fs.left -= int64(n)
		fs.sent += int64(n)
		l.ctr.bytesOut += uint64(n)
		fs.c.lastActive = l.now
		fs.busy = true
		l.Defer(func() { fs.busy = false; l.fileSent(fs, 0, nil) })
		return true
	}
	fs.onLoop = true // a full socket was seen on the loop's own thread
	l.fileSent(fs, n, err)
	fs.onLoop = false
	return true
}

// fileWrite queues a chunk of the file on c's output (copy mode).
func (l *Loop) fileWrite(c *Conn, p []byte) error {
	if t := c.tlsLayer(); t != nil {
		_, err := l.tlsWrite(c, t, p)
		return err
	}
	c.out.write(l, p)
	l.wrote(c)
	return nil
}

// fileWritable is the backend's report that c's socket has room again.
func (l *Loop) fileWritable(fs *fileSend) {
	fs.waitOut = false
	l.fileNext(fs)
}

// fileDrained runs after c's output made progress (afterWrite).
func (l *Loop) fileDrained(fs *fileSend, pending int) {
	if !fs.waitDrain {
		return
	}
	low := 0
	if fs.copying {
		if low, _ = fs.c.waterMarks(); low <= 0 {
			low = fileCopyLow
		}
	}
	if pending > low {
		return
	}
	fs.waitDrain = false
	l.Defer(func() { l.fileNext(fs) })
}

// finishFile ends a send whose every byte has been handed over.
func (l *Loop) finishFile(fs *fileSend) {
	c := fs.c
	c.aux.file = nil
	fs.ended = true
	l.releaseFile(fs)
	switch {
	case fs.closeAfter:
		c.Close()
	case fs.shutAfter:
		c.CloseWrite()
	}
}

// fileTeardown ends c's send when c is torn down. A read still on the
// pool finishes first: the duplicate and the file are released, and done
// told, when it returns.
func (l *Loop) fileTeardown(c *Conn) {
	fs := c.aux.file
	c.aux.file = nil
	fs.ended = true
	fs.err = c.err
	if fs.err == nil || fs.err == io.EOF {
		fs.err = ErrClosed
	}
	if !fs.busy {
		l.releaseFile(fs)
	}
}

// releaseFile closes the socket's duplicate and calls done.
func (l *Loop) releaseFile(fs *fileSend) {
	if fs.sock >= 0 {
		closeFD(fs.sock)
		fs.sock = -1
	}
	fs.buf, fs.chunk, fs.f = nil, nil, nil
	done := fs.done
	fs.done = nil
	l.safeCall(func() { done(fs.sent, fs.err) }, "SendFile done func")
}
