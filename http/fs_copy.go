package http

import (
	"io"

	"github.com/veloq/veloq/executor"
)

// fileChunk is how much of a file a copied body reads at a time.
const fileChunk = 64 << 10

// copyFile sends a file body through ex's ordinary writes, for a protocol
// that frames its body itself (an HTTP/2 stream's DATA frames) and so
// cannot hand the file to the socket: the file is read in 64 KiB chunks on
// the server's file pool, and each chunk goes out once the client can take
// more (whenWritable: for HTTP/2, once its windows let the last one
// leave), so a large file never sits in memory and a slow reader slows
// the reads.
func copyFile(ex exchange, resp *response, req *Request, body *fileBody) {
	ex.writeHead(resp, req, body.length)
	fc := &fileCopier{ex: ex, body: body, pool: ex.shared().srv.opts.filePool}
	if body.f == nil { // HEAD
		fc.done()
		return
	}
	fc.step()
}

// fileCopier copies a fileBody's parts one chunk at a time.
type fileCopier struct {
	ex        exchange
	body      *fileBody
	pool      *executor.BlockingPool
	i         int   // the part to start next
	off, left int64 // the part in progress: file offset and bytes left
	buf       []byte
}

// step sends the next chunk, part head or tail (on the loop).
func (fc *fileCopier) step() {
	ex := fc.ex
	c := ex.transport()
	if c.Closed() {
		fc.body.discard()
		return
	}
	for fc.left == 0 {
		if fc.i == len(fc.body.parts) {
			if len(fc.body.tail) > 0 {
				ex.writeBody(fc.body.tail)
			}
			fc.done()
			return
		}
		p := fc.body.parts[fc.i]
		fc.i++
		if len(p.head) > 0 {
			ex.writeBody(p.head)
		}
		fc.off, fc.left = p.r.start, p.r.length
	}
	n := min(fc.left, fileChunk)
	if fc.buf == nil {
		fc.buf = make([]byte, min(fileChunk, fc.body.length)) // a small file, a small buffer
	}
	buf, off, f := fc.buf[:n], fc.off, fc.body.f
	err := fc.pool.Spawn(func() {
		k, err := f.ReadAt(buf, off)
		if err == io.EOF && int64(k) == n {
			err = nil
		} else if err == nil && int64(k) < n {
			err = io.ErrUnexpectedEOF // the file shrank under us
		}
		if c.Loop().Post(func() { fc.sent(buf, err) }) != nil {
			f.Close() // the loop is gone
		}
	})
	if err != nil {
		fc.body.discard()
		ex.abort(err)
	}
}

// sent queues a chunk read off the loop and waits for room for the next.
func (fc *fileCopier) sent(buf []byte, err error) {
	if err != nil {
		// The head is out: the answer can only be cut short.
		fc.body.discard()
		fc.ex.abort(err)
		return
	}
	fc.off += int64(len(buf))
	fc.left -= int64(len(buf))
	fc.ex.writeBody(buf)
	fc.ex.whenWritable(func(err error) {
		if err != nil {
			fc.body.discard()
			return
		}
		fc.step()
	})
}

// done ends the exchange after the body.
func (fc *fileCopier) done() {
	fc.body.discard()
	if fc.ex.end(true) {
		fc.ex.resume()
	}
}
