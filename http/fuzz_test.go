package http

import (
	"bytes"
	"errors"
	"testing"

	"github.com/veloq/veloq/http/internal/h1"
)

var fuzzLimits = []Limits{
	{},
	{MaxHeaderBytes: 256, MaxTargetBytes: 32, MaxHeaders: 4, MaxBodyBytes: 1000},
}

func FuzzParse(f *testing.F) {
	for _, tc := range validCases {
		f.Add([]byte(tc.in))
	}
	for _, tc := range invalidCases {
		if len(tc.in) < 1024 {
			f.Add([]byte(tc.in))
		}
	}
	f.Add([]byte("GET / HTTP/1.1\r\nHost: a\r\n\r\nGET / HTTP/1.1\r\nHost: a\r\n\r\n"))
	f.Fuzz(func(t *testing.T, buf []byte) {
		for _, l := range fuzzLimits {
			checkParse(t, l, buf)
		}
	})
}

func checkParse(t *testing.T, l Limits, buf []byte) {
	p := parser{Limits: h1.Limits(l)}
	var req Request
	n, err := p.Parse(buf, &req)
	var desc string
	switch {
	case err == nil:
		desc = describe(&req)
		checkRequest(t, &p.Limits, buf, n, &req)
	case err == h1.ErrNeedMore:
		if n != 0 {
			t.Fatalf("n = %d with ErrNeedMore", n)
		}
		if len(buf) > p.Limits.HeaderBytes() {
			t.Fatalf("ErrNeedMore for %d bytes", len(buf))
		}
	default:
		var pe *ProtocolError
		if !errors.As(err, &pe) {
			t.Fatalf("error of type %T: %v", err, err)
		}
		switch pe.Status {
		case 400, 413, 414, 417, 431, 501, 505:
		default:
			t.Fatalf("unexpected status %d", pe.Status)
		}
		if n != 0 {
			t.Fatalf("n = %d with error", n)
		}
	}

	// The outcome must not depend on how the input was split: feed
	// prefixes (every byte for short inputs, a few cuts otherwise) to one
	// parser, each in a new buffer.
	cuts := []int{len(buf) / 3, len(buf) / 2, len(buf) - 1}
	if len(buf) <= 300 {
		cuts = cuts[:0]
		for k := 0; k < len(buf); k++ {
			cuts = append(cuts, k)
		}
	}
	q := parser{Limits: h1.Limits(l)}
	var req2 Request
	for _, k := range cuts {
		if k < 0 {
			continue
		}
		n2, err2 := q.Parse(append([]byte(nil), buf[:k]...), &req2)
		if err2 == h1.ErrNeedMore {
			continue
		}
		// A prefix may only fail with the whole input's error.
		if err2 != err {
			t.Fatalf("prefix %d: %d, %v; whole input: %d, %v", k, n2, err2, n, err)
		}
		q.Reset()
		if err2 == nil && (n2 != n || describe(&req2) != desc) {
			t.Fatalf("prefix %d parsed differently", k)
		}
	}
	n2, err2 := q.Parse(append([]byte(nil), buf...), &req2)
	if n2 != n || err2 != err || (err == nil && describe(&req2) != desc) {
		t.Fatalf("incremental parse = %d, %v; whole = %d, %v", n2, err2, n, err)
	}
}

// checkRequest asserts the invariants of a successful parse.
func checkRequest(t *testing.T, l *h1.Limits, buf []byte, n int, req *Request) {
	if n <= 0 || n > len(buf) || n > l.HeaderBytes() {
		t.Fatalf("n = %d, len = %d", n, len(buf))
	}
	if !bytes.HasSuffix(buf[:n], []byte("\r\n\r\n")) {
		t.Fatalf("head %q does not end in CRLF", buf[:n])
	}
	if !h1.ValidToken(req.Method) {
		t.Fatalf("method %q", req.Method)
	}
	if len(req.Target) == 0 || len(req.Target) > l.TargetBytes() {
		t.Fatalf("target %q", req.Target)
	}
	for _, c := range req.Target {
		if c <= ' ' || c >= 0x7f {
			t.Fatalf("target %q", req.Target)
		}
	}
	if req.ProtoMajor != 1 || req.ProtoMinor < 0 || req.ProtoMinor > 9 {
		t.Fatalf("version %d.%d", req.ProtoMajor, req.ProtoMinor)
	}
	if len(req.Headers) > l.Headers() {
		t.Fatalf("%d headers", len(req.Headers))
	}
	for _, h := range req.Headers {
		if !h1.ValidToken(h.Name) {
			t.Fatalf("field name %q", h.Name)
		}
		if len(h.Value) > 0 && (h1.TrimOWS(h.Value) == nil || len(h1.TrimOWS(h.Value)) != len(h.Value)) {
			t.Fatalf("field value %q not trimmed", h.Value)
		}
		for _, c := range h.Value {
			if c < ' ' && c != '\t' || c == 0x7f {
				t.Fatalf("field value %q", h.Value)
			}
		}
	}
	if req.ContentLength < -1 || req.ContentLength > l.BodyBytes() {
		t.Fatalf("content length %d", req.ContentLength)
	}
	if req.Chunked && req.ContentLength != -1 {
		t.Fatal("chunked with a content length")
	}
	if req.Chunked && req.ProtoMinor == 0 {
		t.Fatal("chunked HTTP/1.0")
	}
	if req.ProtoMinor >= 1 && req.Host == nil {
		t.Fatal("HTTP/1.1 without Host")
	}
	// The head alone parses to the same request.
	var p parser
	p.Limits = *l
	var again Request
	if n2, err := p.Parse(buf[:n], &again); n2 != n || err != nil || describe(&again) != describe(req) {
		t.Fatalf("head alone: %d, %v", n2, err)
	}
}
