package main

import (
	"errors"
	"strings"
	"testing"
)

func TestFrame(t *testing.T) {
	get := "GET / HTTP/1.1\r\nHost: x\r\n\r\n"
	post := "POST / HTTP/1.1\r\nHost: x\r\ncontent-length:  5 \r\n\r\nhello"
	tests := []struct {
		name    string
		in      string
		size    int
		ok      bool
		close   bool
		wantErr error
	}{
		{name: "empty", in: ""},
		{name: "partial head", in: get[:len(get)-1]},
		{name: "get", in: get, size: len(get), ok: true},
		{name: "first of two pipelined", in: get + get, size: len(get), ok: true},
		{name: "body counted, header name any case", in: post, size: len(post), ok: true},
		{name: "partial body", in: post[:len(post)-2]},
		{name: "connection close", in: "GET / HTTP/1.1\r\nConnection: Close\r\n\r\n", size: 37, ok: true, close: true},
		{name: "no headers", in: "GET / HTTP/1.0\r\n\r\n", size: 18, ok: true},
		{name: "bad content length", in: "POST / HTTP/1.1\r\nContent-Length: -1\r\n\r\n", wantErr: errContentLength},
		{name: "body too large", in: "POST / HTTP/1.1\r\nContent-Length: 1048577\r\n\r\n", wantErr: errBodyTooLarge},
		{name: "chunked", in: "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n", wantErr: errChunked},
		{name: "endless head", in: "GET / HTTP/1.1\r\n" + strings.Repeat("X-A: b\r\n", maxHead/8), wantErr: errHeadTooLarge},
		{name: "complete head too large", in: "GET / HTTP/1.1\r\nX: " + strings.Repeat("a", maxHead) + "\r\n\r\n", wantErr: errHeadTooLarge},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, ok, err := frame([]byte(tt.in))
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("err = %v, want %v", err, tt.wantErr)
			}
			if ok != tt.ok || req.size != tt.size || req.close != tt.close {
				t.Errorf("frame = %+v, ok %v; want size %d, close %v, ok %v", req, ok, tt.size, tt.close, tt.ok)
			}
		})
	}
}
