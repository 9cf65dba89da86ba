package h1

import (
	"bufio"
	"bytes"
	"io"
	nethttp "net/http"
	"testing"
)

func TestStatusText(t *testing.T) {
	for code := 100; code < 600; code++ {
		ours, std := StatusText(code), nethttp.StatusText(code)
		// RFC 9110 renamed reason phrases that net/http still uses.
		switch code {
		case 413:
			std = "Content Too Large"
		case 414:
			std = "URI Too Long"
		case 416:
			std = "Range Not Satisfiable"
		case 422:
			std = "Unprocessable Content"
		case 306:
			std = ""
		}
		if ours != std {
			t.Errorf("StatusText(%d) = %q, net/http has %q", code, ours, std)
		}
	}
}

func TestAppendStatusLine(t *testing.T) {
	tests := []struct {
		minor, status int
		want          string
	}{
		{1, 200, "HTTP/1.1 200 OK\r\n"},
		{0, 404, "HTTP/1.0 404 Not Found\r\n"},
		{7, 431, "HTTP/1.1 431 Request Header Fields Too Large\r\n"},
		{1, 299, "HTTP/1.1 299 \r\n"},
		{1, 42, "HTTP/1.1 500 Internal Server Error\r\n"},
		{1, 1000, "HTTP/1.1 500 Internal Server Error\r\n"},
	}
	for _, tt := range tests {
		if got := string(AppendStatusLine([]byte("x"), tt.minor, tt.status)); got != "x"+tt.want {
			t.Errorf("AppendStatusLine(%d, %d) = %q, want %q", tt.minor, tt.status, got, tt.want)
		}
	}
	if got := string(AppendContinue(nil)); got != "HTTP/1.1 100 Continue\r\n\r\n" {
		t.Errorf("AppendContinue = %q", got)
	}
}

func TestAppendError(t *testing.T) {
	out := AppendError(nil, ErrObsFold.Status, []byte("Sun, 06 Nov 1994 08:49:37 GMT"), "veloq")
	resp, err := nethttp.ReadResponse(bufio.NewReader(bytes.NewReader(out)), &nethttp.Request{Method: "GET"})
	if err != nil {
		t.Fatalf("net/http cannot read %q: %v", out, err)
	}
	b, _ := io.ReadAll(resp.Body)
	body := string(b)
	expect(t, "status", resp.StatusCode, 400)
	expect(t, "body", body, "Bad Request\n")
	expect(t, "close", resp.Close, true)
	expect(t, "date", resp.Header.Get("Date"), "Sun, 06 Nov 1994 08:49:37 GMT")
	expect(t, "server", resp.Header.Get("Server"), "veloq")
}
