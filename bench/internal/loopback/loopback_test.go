package loopback

import (
	"strings"
	"testing"
)

func TestAddr(t *testing.T) {
	ok := map[string]string{
		"127.0.0.1:9000":       "127.0.0.1:9000",
		"127.1.2.3:80":         "127.1.2.3:80",
		"[::1]:9000":           "[::1]:9000",
		"localhost:9000":       "127.0.0.1:9000",
		"[::ffff:127.0.0.1]:1": "[::ffff:127.0.0.1]:1",
	}
	for in, want := range ok {
		got, err := Addr(in)
		if err != nil || got != want {
			t.Errorf("Addr(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{"10.0.0.1:80", "192.168.1.1:9000", "8.8.8.8:53", "example.com:80", "[2001:db8::1]:80", "0.0.0.0:9000", "9000"} {
		if _, err := Addr(in); err == nil {
			t.Errorf("Addr(%q) accepted a non-loopback address", in)
		}
	}
	if _, err := Addr("10.0.0.1:80"); err == nil || !strings.Contains(err.Error(), "loopback") {
		t.Errorf("error should say why: %v", err)
	}
}
