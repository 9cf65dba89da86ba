package main

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"
)

// Framing limits: what a request may hold before the connection is refused.
const (
	maxHead = 16 << 10 // request line and headers, with the empty line
	maxBody = 1 << 20  // a Content-Length body
)

// Framing errors; the connection gets a 400 and is closed.
var (
	errHeadTooLarge  = fmt.Errorf("request head over %d bytes", maxHead)
	errBodyTooLarge  = fmt.Errorf("request body over %d bytes", maxBody)
	errContentLength = errors.New("bad Content-Length")
	errChunked       = errors.New("unsupported Transfer-Encoding")
)

// request is one framed request: how many bytes it spans and whether the
// client asked to close the connection after the answer.
type request struct {
	size  int
	close bool
}

var endOfHead = []byte("\r\n\r\n")

// frame finds where the first request in b ends, the way gnet's own HTTP
// example frames requests: the head ends at the first empty line, and a
// Content-Length body follows it. Nothing else is checked: not the method,
// the target, the version nor the header syntax. ok is false when b holds
// only part of a request (read more and call again).
func frame(b []byte) (req request, ok bool, err error) {
	end := bytes.Index(b, endOfHead)
	if end < 0 {
		if len(b) >= maxHead {
			return request{}, false, errHeadTooLarge
		}
		return request{}, false, nil
	}
	headLen := end + len(endOfHead)
	if headLen > maxHead {
		return request{}, false, errHeadTooLarge
	}
	body := 0
	// Header lines start after the request line; each ends in CRLF.
	rest := b[:end+2]
	if i := bytes.Index(rest, []byte("\r\n")); i >= 0 {
		rest = rest[i+2:]
	}
	for len(rest) > 0 {
		line, after, _ := bytes.Cut(rest, []byte("\r\n"))
		rest = after
		name, value, found := bytes.Cut(line, []byte(":"))
		if !found {
			continue
		}
		value = bytes.TrimSpace(value)
		switch {
		case bytes.EqualFold(name, []byte("Content-Length")):
			n, perr := strconv.ParseUint(string(value), 10, 63)
			if perr != nil {
				return request{}, false, fmt.Errorf("%w: %q", errContentLength, value)
			}
			if n > maxBody {
				return request{}, false, errBodyTooLarge
			}
			body = int(n)
		case bytes.EqualFold(name, []byte("Transfer-Encoding")):
			return request{}, false, errChunked
		case bytes.EqualFold(name, []byte("Connection")):
			req.close = req.close || bytes.EqualFold(value, []byte("close"))
		}
	}
	req.size = headLen + body
	if len(b) < req.size {
		return request{}, false, nil
	}
	return req, true, nil
}
