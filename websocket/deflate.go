package websocket

import (
	"compress/flate"
	"io"
	"sync"
)

// permessage-deflate (RFC 7692) with no context takeover in either
// direction: every message is compressed and inflated on its own, with a
// compressor or decompressor taken from the Upgrader's pools for the
// duration of one message. An idle connection holds no flate state (a
// flate.Writer is several hundred KiB).

// deflateTail is what §7.2.2 says to append to a message's payload before
// inflating it (the end of the sync flush the sender removed), followed by
// an empty final stored block so the decompressor ends with io.EOF rather
// than io.ErrUnexpectedEOF.
var deflateTail = [...]byte{0x00, 0x00, 0xff, 0xff, 0x01, 0x00, 0x00, 0xff, 0xff}

// flatePools holds an Upgrader's reusable compressors and decompressors.
type flatePools struct {
	writers sync.Pool // *flateWriter
	readers sync.Pool // *flateReader
}

// sliceWriter appends what is written to b.
type sliceWriter struct{ b []byte }

func (w *sliceWriter) Write(p []byte) (int, error) {
	w.b = append(w.b, p...)
	return len(p), nil
}

type flateWriter struct {
	fw  *flate.Writer
	out sliceWriter
}

// compress appends the permessage-deflate payload for p to dst: p
// deflated with a sync flush, minus the flush's trailing 00 00 FF FF
// (§7.2.1).
func (fp *flatePools) compress(dst, p []byte) []byte {
	w, _ := fp.writers.Get().(*flateWriter)
	if w == nil {
		w = new(flateWriter)
		// BestSpeed: the loop's CPU is the scarce resource. NewWriter only
		// fails for an invalid level.
		w.fw, _ = flate.NewWriter(&w.out, flate.BestSpeed)
	}
	w.out.b = dst
	w.fw.Reset(&w.out)
	w.fw.Write(p) // writes to a sliceWriter cannot fail
	w.fw.Flush()
	out := w.out.b
	if n := len(out); n >= 4 && out[n-4] == 0 && out[n-3] == 0 && out[n-2] == 0xff && out[n-1] == 0xff {
		out = out[:n-4]
	}
	w.out.b = nil
	fp.writers.Put(w)
	return out
}

// multiSource reads a payload and then the deflate tail, without
// allocating per message.
type multiSource struct {
	p    []byte
	tail []byte
}

func (s *multiSource) Read(b []byte) (int, error) {
	if len(s.p) > 0 {
		n := copy(b, s.p)
		s.p = s.p[n:]
		return n, nil
	}
	if len(s.tail) > 0 {
		n := copy(b, s.tail)
		s.tail = s.tail[n:]
		return n, nil
	}
	return 0, io.EOF
}

// ReadByte makes multiSource an io.ByteReader, so flate reads from it
// directly instead of wrapping it in a bufio.Reader.
func (s *multiSource) ReadByte() (byte, error) {
	var b [1]byte
	if n, err := s.Read(b[:]); n == 0 {
		return 0, err
	}
	return b[0], nil
}

type flateReader struct {
	fr  io.ReadCloser
	src multiSource
}

// inflate appends the inflated payload p to dst, failing with
// errMessageTooBig past limit bytes (limit > 0) and errBadCompressed when
// p is not valid deflate data.
func (fp *flatePools) inflate(dst, p []byte, limit int64) ([]byte, error) {
	r, _ := fp.readers.Get().(*flateReader)
	if r == nil {
		r = new(flateReader)
		r.src = multiSource{p: p, tail: deflateTail[:]}
		r.fr = flate.NewReader(&r.src)
	} else {
		r.src = multiSource{p: p, tail: deflateTail[:]}
		r.fr.(flate.Resetter).Reset(&r.src, nil)
	}
	start := len(dst)
	var err error
	for {
		if len(dst) == cap(dst) {
			dst = append(dst, 0)[:len(dst)]
		}
		var n int
		n, err = r.fr.Read(dst[len(dst):cap(dst)])
		dst = dst[:len(dst)+n]
		if limit > 0 && int64(len(dst)-start) > limit {
			err = errMessageTooBig
			break
		}
		if err != nil {
			break
		}
	}
	r.src = multiSource{}
	fp.readers.Put(r)
	switch err {
	case io.EOF:
		return dst, nil
	case errMessageTooBig:
		return dst, err
	}
	return dst, errBadCompressed
}
