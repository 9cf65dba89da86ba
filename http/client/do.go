package client

import (
	"context"
	"io"
	"net/http"
	"sync"

	vnet "github.com/veloq/veloq/net"
)

// A Response is what Do returns: the head, copied, and the body as a
// stream.
type Response struct {
	Status        int
	Minor         int  // HTTP/1.Minor
	HTTP2         bool // the response came over HTTP/2
	Reason        string
	Header        http.Header
	ContentLength int64 // -1: unknown
	// Body streams the body. Its reads are paced: the loop stops reading
	// from the upstream while BodyBuffer bytes wait for the reader. Close
	// it (before EOF it cancels the call and closes the upstream
	// connection).
	Body io.ReadCloser
	// Trailer holds a chunked body's (or an HTTP/2 response's) trailer
	// fields once Body returned io.EOF.
	Trailer http.Header
}

// BodyBuffer is how much of a response body Do's reader may fall behind
// before the loop stops reading from the upstream.
const BodyBuffer = 64 << 10

// Do sends req from any goroutine, on one of the Client's loops, and
// returns once the response head has arrived (or the call failed, or ctx
// ended). The caller reads and closes resp.Body.
func (c *Client) Do(ctx context.Context, req *Request) (*Response, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	l := c.pickLoop()
	d := &doCall{loop: l, head: make(chan struct{}), wake: make(chan struct{}, 1)}
	if err := l.Post(func() {
		if d.canceled {
			d.OnResponseEnd(nil, nil, ErrCanceled)
			return
		}
		d.call = c.Send(l, req, d)
	}); err != nil {
		return nil, err
	}
	stop := context.AfterFunc(ctx, func() { d.cancel(ctx.Err()) })
	select {
	case <-d.head:
	case <-l.Done():
		stop()
		return nil, ErrClientClosed
	}
	d.stop = stop
	if d.resp == nil {
		stop()
		if cerr := ctx.Err(); cerr != nil {
			return nil, cerr
		}
		return nil, d.err
	}
	return d.resp, nil
}

// doCall is the ResponseHandler of a Do: it hands the head over on a
// channel and buffers the body for the reader, pausing the call when the
// reader falls BodyBuffer behind.
type doCall struct {
	loop *vnet.Loop
	call *Call // loop-owned, like ended and canceled
	head chan struct{}
	wake chan struct{}
	stop func() bool

	ended, canceled bool

	// Set on the loop before head is closed.
	resp *Response
	err  error

	mu      sync.Mutex // guards the fields below, shared with the reader
	buf     []byte
	paused  bool
	done    bool
	endErr  error
	closed  bool
	trailer http.Header
}

func (d *doCall) OnResponseHead(call *Call, h *ResponseHead) {
	hdr := make(http.Header, len(h.Fields))
	for _, f := range h.Fields {
		k := http.CanonicalHeaderKey(string(f.Name))
		hdr[k] = append(hdr[k], string(f.Value))
	}
	d.resp = &Response{
		Status: h.Status, Minor: h.Minor, HTTP2: h.HTTP2, Reason: string(h.Reason),
		Header: hdr, ContentLength: h.ContentLength, Body: &doBody{d: d},
	}
	close(d.head)
}

func (d *doCall) OnResponseBody(call *Call, p []byte) {
	d.mu.Lock()
	d.buf = append(d.buf, p...)
	if len(d.buf) >= BodyBuffer && !d.paused {
		d.paused = true
		call.Pause()
	}
	d.mu.Unlock()
	d.signal()
}

func (d *doCall) OnResponseEnd(call *Call, trailer []Field, err error) {
	d.ended = true
	d.call = nil
	var t http.Header
	if len(trailer) > 0 {
		t = make(http.Header, len(trailer))
		for _, f := range trailer {
			k := http.CanonicalHeaderKey(string(f.Name))
			t[k] = append(t[k], string(f.Value))
		}
	}
	d.mu.Lock()
	d.done, d.endErr, d.trailer = true, err, t
	d.mu.Unlock()
	if d.resp == nil {
		d.err = err
		close(d.head)
	}
	d.signal()
}

func (d *doCall) signal() {
	select {
	case d.wake <- struct{}{}:
	default:
	}
}

// cancel gives the call up from any goroutine (ctx ended, or Body closed
// early).
func (d *doCall) cancel(err error) {
	_ = d.loop.Post(func() {
		d.canceled = true
		if !d.ended && d.call != nil {
			d.call.Cancel()
		}
	})
}

// resume lets the loop read again: the reader caught up.
func (d *doCall) resume() {
	_ = d.loop.Post(func() {
		if !d.ended && d.call != nil {
			d.call.Resume()
		}
	})
}

// doBody is Response.Body of a Do.
type doBody struct {
	d *doCall
}

func (b *doBody) Read(p []byte) (int, error) {
	d := b.d
	for {
		d.mu.Lock()
		if d.closed {
			d.mu.Unlock()
			return 0, io.ErrClosedPipe
		}
		if len(d.buf) > 0 {
			n := copy(p, d.buf)
			d.buf = d.buf[n:]
			resume := d.paused && len(d.buf) <= BodyBuffer/2
			if resume {
				d.paused = false
			}
			if len(d.buf) == 0 {
				d.buf = d.buf[:0:0]
			}
			d.mu.Unlock()
			if resume {
				d.resume()
			}
			return n, nil
		}
		if d.done {
			err := d.endErr
			if err == nil {
				err = io.EOF
				if d.trailer != nil {
					resp := d.resp
					if resp.Trailer == nil {
						resp.Trailer = http.Header{}
					}
					for k, v := range d.trailer {
						resp.Trailer[k] = v
					}
					d.trailer = nil
				}
			}
			d.mu.Unlock()
			return 0, err
		}
		d.mu.Unlock()
		select {
		case <-d.wake:
		case <-d.loop.Done():
			return 0, ErrClientClosed
		}
	}
}

// Close ends the body; before its end it cancels the call.
func (b *doBody) Close() error {
	d := b.d
	d.mu.Lock()
	wasDone := d.done
	d.closed = true
	d.buf = nil
	d.mu.Unlock()
	if d.stop != nil {
		d.stop()
	}
	if !wasDone {
		d.cancel(ErrCanceled)
	}
	return nil
}
