package net

import (
	"errors"
	"fmt"
	"io"
	"os"

	"golang.org/x/sys/unix"

	"github.com/veloq/veloq/executor"
)

// ErrSendingFile is returned by writes to a connection while SendFile is
// sending a file on it, and by a second SendFile: the file's bytes must
// reach the peer before anything written after them.
var ErrSendingFile = errors.New("veloq: a file is being sent on this connection")

// fileChunk is what one read of the file moves in copy mode (TLS, or no
// pipe to be had): the read buffer a file send holds.
const fileChunk = 64 << 10

// fileCopyLow is the pending output below which copy mode reads its next
// chunk when the connection has no low-water mark of its own.
const fileCopyLow = 32 << 10

// fileSend is one SendFile in progress. The loop owns every field except
// while filling is set: then a blocking-pool task reads the file into the
// pipe (or into buf) and posts the result back, and the loop touches
// neither the pipe nor buf until it arrives.
//
// Why the disk read runs on the blocking pool on both backends, rather
// than as an IORING_OP_SPLICE on io_uring: the kernel runs a splice from
// a regular file on an io-wq worker thread anyway (a thread hop, the same
// cost as the pool's), and the pipe → socket leg as an io_uring splice on
// a non-blocking socket completes with EAGAIN instead of waiting (see
// splice.go), so it would need a poll before it all the same. One design
// for both backends keeps the backend contract as it is: the pool fills a
// pipe from the file (blocking on the disk if it must, never on the
// loop), and the loop empties the pipe into the socket with non-blocking
// splice(2) calls, waiting for writability through the backend's watch
// like SpliceTo. Neither leg copies the bytes through user space.
type fileSend struct {
	c    *Conn
	pool *executor.BlockingPool
	f    *os.File // kept referenced so that its descriptor stays open
	fd   int
	off  int64 // next file offset to read
	left int64 // bytes still to read from the file
	sent int64 // bytes handed to the socket or the output queue
	done func(sent int64, err error)

	pipe   spipe
	queued int    // zero-copy: bytes in the pipe
	buf    []byte // copy mode: the read buffer
	chunk  []byte // copy mode: read and not yet written

	copying    bool // no pipe: read into buf and write through the output queue
	filling    bool // a read task is on the blocking pool
	waitOut    bool // the socket is full: the backend reports writability
	waitDrain  bool // ordinary output must drain first
	ended      bool // torn down; released when the read task returns
	closeAfter bool // Close was called meanwhile
	shutAfter  bool // CloseWrite was called meanwhile
	err        error
}

// SendFile sends n bytes of f, from offset off, on c after everything
// written to c before it, and then calls done on c's loop with the
// number of bytes sent and nil, or with the error that ended the send.
// It returns nil when the send has started (done will run exactly once)
// and an error otherwise (done will not run).
//
// On a plaintext connection the bytes go from the file to the socket
// without passing through user space: a task on the blocking pool b
// splices a pipe load (up to 256 KiB) from the file into a pipe, so the
// loop never waits for the disk, and the loop splices the pipe into the
// socket with non-blocking calls, waiting for writability as needed. The
// pipe comes from the loop's pool, under the same descriptor bounds as
// SpliceTo. On a TLS connection (Conn.TLS is not nil), where the kernel
// would send the file as plaintext, and when no pipe can be had, SendFile
// falls back to copying: b reads the file 64 KiB at a time and each chunk
// goes through the connection's ordinary write path, the next being read
// once pending output is below the low-water mark. Either way a send holds
// one pipe or one 64 KiB buffer, however large the file.
//
// Until done runs, Write, Writev, WriteString and ForwardTo into c return
// ErrSendingFile and AvailableBuffer returns nil. Close and CloseWrite
// take effect after the file has been sent. f must stay open and must not
// be read through its offset meanwhile (SendFile reads with explicit
// offsets); closing it is the caller's, typically in done.
//
// If the file is shorter than off+n, or a read fails, or the connection
// fails or is closed by the peer, the connection is aborted (the peer
// cannot tell the rest of the data from what follows otherwise), and done
// gets the cause. If b refuses the first read (executor.ErrOverloaded),
// SendFile returns that error with nothing sent. done normally runs on
// c's loop; if the loop has stopped while a read was on the pool, it runs
// on that pool's goroutine.
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
	case c.aux != nil && c.aux.file != nil:
		return ErrSendingFile
	case c.spliceDst != nil:
		return fmt.Errorf("%w: the connection is a splice destination", ErrSendingFile)
	}
	l := c.loop
	fs := &fileSend{c: c, pool: b, f: f, fd: int(f.Fd()), off: off, left: n, done: done}
	if c.tlsLayer() != nil || n < fileChunk/4 {
		// Below 16 KiB a pipe's two system calls and its descriptors buy
		// nothing over one copy; over TLS nothing else is possible.
		fs.copying = true
	} else if p, err := l.getPipe(); err == nil {
		fs.pipe = p
	} else {
		fs.copying = true
	}
	if fs.copying {
		fs.buf = make([]byte, min(n, fileChunk))
	}
	c.more().file = fs
	if n == 0 {
		l.Defer(func() { l.fileNext(fs) })
		return nil
	}
	if err := l.startFill(fs); err != nil {
		c.aux.file = nil
		if !fs.copying {
			l.putPipe(fs.pipe, true)
		}
		return err
	}
	return nil
}

// SendingFile reports whether a SendFile is in progress on c.
func (c *Conn) SendingFile() bool { return c.aux != nil && c.aux.file != nil }

// FilePending returns how many bytes of the file SendFile is sending have
// not yet been handed to the socket (or, in copy mode, to the output
// queue, which OutputBuffered counts): 0 when no file is being sent. With
// OutputBuffered it tells whether a slow peer is making progress.
func (c *Conn) FilePending() int64 {
	if c.aux == nil || c.aux.file == nil {
		return 0
	}
	fs := c.aux.file
	return fs.left + int64(fs.queued) + int64(len(fs.chunk))
}

// sendingFile is the check the write paths make.
func (c *Conn) sendingFile() bool { return c.aux != nil && c.aux.file != nil }

// startFill submits the next read of the file to the pool.
func (l *Loop) startFill(fs *fileSend) error {
	fs.filling = true
	fd, off := fs.fd, fs.off
	var task func()
	if fs.copying {
		buf := fs.buf[:min(fs.left, int64(len(fs.buf)))]
		task = func() {
			n, err := preadFull(fd, buf, off)
			l.postFilled(fs, n, err)
		}
	} else {
		pw, want := fs.pipe.w, int(min(fs.left, int64(fs.pipe.size)))
		task = func() {
			n, err := spliceIn(fd, off, pw, want)
			l.postFilled(fs, n, err)
		}
	}
	if err := fs.pool.Submit(task); err != nil {
		fs.filling = false
		return fmt.Errorf("veloq: SendFile: %w", err)
	}
	return nil
}

// postFilled hands a read's result back to the loop (on the pool's
// goroutine). A stopped loop has torn the connection down already.
func (l *Loop) postFilled(fs *fileSend, n int, err error) {
	if l.Post(func() { l.filled(fs, n, err) }) != nil {
		if !fs.copying {
			closePipe(fs.pipe)
		}
		fs.done(fs.sent, ErrClosed)
	}
}

// spliceIn moves want bytes of the file at off into the empty pipe whose
// write end is pw. It blocks on the disk, so it runs on the pool.
func spliceIn(fd int, off int64, pw, want int) (int, error) {
	got := 0
	for got < want {
		n, err := unix.Splice(fd, &off, pw, nil, want-got, unix.SPLICE_F_MOVE)
		switch {
		case err == unix.EINTR:
			continue
		case err == unix.EAGAIN && got > 0:
			// The pipe's slots are full: a load that does not start on a
			// page boundary fills them with less than the pipe's size.
			return got, nil
		case err != nil:
			return got, os.NewSyscallError("splice", err)
		case n == 0:
			return got, io.ErrUnexpectedEOF
		}
		got += int(n)
	}
	return got, nil
}

// preadFull reads len(buf) bytes of the file at off (on the pool).
func preadFull(fd int, buf []byte, off int64) (int, error) {
	got := 0
	for got < len(buf) {
		n, err := unix.Pread(fd, buf[got:], off+int64(got))
		switch {
		case err == unix.EINTR:
			continue
		case err != nil:
			return got, os.NewSyscallError("pread", err)
		case n == 0:
			return got, io.ErrUnexpectedEOF
		}
		got += n
	}
	return got, nil
}

// filled takes a read's result on the loop.
func (l *Loop) filled(fs *fileSend, n int, err error) {
	fs.filling = false
	if !fs.copying {
		fs.queued = n // also on failure: a pipe holding bytes is closed, not pooled
	}
	if fs.ended {
		l.releaseFile(fs)
		return
	}
	if err != nil {
		l.abort(fs.c, fmt.Errorf("veloq: SendFile: reading the file: %w", err))
		return
	}
	fs.off += int64(n)
	fs.left -= int64(n)
	if fs.copying {
		fs.chunk = fs.buf[:n]
	}
	l.fileNext(fs)
}

// fileNext moves the send on: out of the pipe or the buffer, then the
// next read, or the end.
func (l *Loop) fileNext(fs *fileSend) {
	c := fs.c
	if fs.ended || fs.filling || fs.waitOut || c.state != connOpen {
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
		low := c.lowWater
		if low <= 0 {
			low = fileCopyLow
		}
		if fs.left > 0 && c.out.len() > low {
			fs.waitDrain = true // afterWrite calls back
			return
		}
	} else if fs.queued > 0 && !l.pumpFile(fs) {
		return
	}
	if fs.left > 0 {
		if err := l.startFill(fs); err != nil {
			l.abort(c, err)
		}
		return
	}
	l.finishFile(fs)
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

// pumpFile splices the pipe into the socket and reports whether the pipe
// is empty. Output written before SendFile leaves first.
func (l *Loop) pumpFile(fs *fileSend) bool {
	c := fs.c
	if c.out.len() > 0 {
		fs.waitDrain = true // afterWrite calls back at zero
		return false
	}
	for fs.queued > 0 {
		n, err := unix.Splice(fs.pipe.r, nil, c.fd, nil, fs.queued, unix.SPLICE_F_NONBLOCK|unix.SPLICE_F_MOVE)
		switch {
		case err == unix.EINTR:
			continue
		case err == unix.EAGAIN:
			fs.waitOut = true
			l.be.watch(c.slot, true, true)
			return false
		case err != nil:
			l.abort(c, os.NewSyscallError("splice", err))
			return false
		}
		fs.queued -= int(n)
		fs.sent += n
		c.lastActive = l.now
		l.ctr.bytesOut += uint64(n)
	}
	return true
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
		if low = fs.c.lowWater; low <= 0 {
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
// pool finishes first: the pipe and the file are released, and done told,
// when it returns.
func (l *Loop) fileTeardown(c *Conn) {
	fs := c.aux.file
	c.aux.file = nil
	fs.ended = true
	fs.err = c.err
	if fs.err == nil || fs.err == io.EOF {
		fs.err = ErrClosed
	}
	if !fs.filling {
		l.releaseFile(fs)
	}
}

// releaseFile gives the pipe back (or closes it, holding bytes) and calls
// done.
func (l *Loop) releaseFile(fs *fileSend) {
	if !fs.copying {
		l.putPipe(fs.pipe, fs.queued == 0)
		fs.pipe = spipe{}
	}
	fs.buf, fs.chunk, fs.f = nil, nil, nil
	done := fs.done
	fs.done = nil
	l.safeCall(func() { done(fs.sent, fs.err) }, "SendFile done func")
}
