package http

import (
	"io"
	"os"
	"slices"
)

// This file sends a file body prepared by fs.go: back on the loop, the
// head is written, then each part's bytes with vnet.Conn.SendFile, and
// the connection moves on to its next request once the last part is out.

// fileBody is a response body that comes from a file: its parts in order
// (one for a whole file or a single range; one per range, each with its
// multipart head, for several) and the multipart closing line.
type fileBody struct {
	f      *os.File // nil for HEAD: the length is all that is sent
	parts  []filePart
	tail   []byte
	length int64 // the Content-Length
}

// filePart is a part of a file body: head, then r's bytes of the file.
type filePart struct {
	head []byte
	r    byteRange
}

// discard closes the file, keeping the length (HEAD).
func (b *fileBody) discard() {
	if b.f != nil {
		b.f.Close()
		b.f = nil
	}
}

// readInto appends the whole body to w's buffered body and closes the
// file (off the loop).
func (b *fileBody) readInto(w *ResponseWriter) error {
	defer b.discard()
	for _, p := range b.parts {
		w.Write(p.head)
		body := w.resp.Body()
		n := len(body)
		body = slices.Grow(body, int(p.r.length))[:n+int(p.r.length)]
		if _, err := b.f.ReadAt(body[n:], p.r.start); err != nil && err != io.EOF {
			return err
		}
		w.resp.body = body
	}
	w.Write(b.tail)
	return nil
}

// writeFile writes the head of resp, the answer to req, and then body, on
// the loop, with Conn.SendFile. The connection stays busy (its later
// requests wait) until the last byte is handed to the socket, then goes on
// as after any response.
//
// The head goes out through writeHead, as a streamed answer's does, so a
// failure while the body is being sent only closes the connection
// (outStarted) instead of writing an error answer into the body.
func (cs *conn) writeFile(resp *response, req *Request, body *fileBody) {
	cs.phase = phaseBusy
	cs.writeHead(resp, req, body.length)
	s := &fileSender{cs: cs, body: body}
	if !cs.outBody || body.f == nil {
		body.discard()
		s.finish()
		return
	}
	s.next()
}

// fileSender sends a fileBody's parts one after the other.
type fileSender struct {
	cs   *conn
	body *fileBody
	i    int // the part to send next
}

// next writes the next part's head and starts sending its bytes, or ends
// the body.
func (s *fileSender) next() {
	c := s.cs.c
	if c.Closed() {
		s.body.discard()
		return
	}
	if s.i == len(s.body.parts) {
		if len(s.body.tail) > 0 {
			s.cs.write(s.body.tail)
		}
		s.body.discard()
		s.finish()
		return
	}
	p := s.body.parts[s.i]
	s.i++
	if len(p.head) > 0 {
		s.cs.write(p.head)
	}
	err := c.SendFile(s.cs.ls.srv.opts.filePool, s.body.f, p.r.start, p.r.length, func(sent int64, err error) {
		if err != nil {
			s.body.discard() // the connection was aborted
			return
		}
		s.cs.rec.out += sent
		s.next()
	})
	if err != nil {
		// The head is out: the connection cannot carry anything else.
		s.body.discard()
		c.Abort(err)
	}
}

// finish moves the connection on after the body.
func (s *fileSender) finish() {
	cs := s.cs
	if cs.c.Closed() {
		return
	}
	if cs.end(true) {
		cs.resume() // the requests that waited behind this one
	}
}
