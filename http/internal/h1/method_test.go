package h1

import "testing"

func TestMethodString(t *testing.T) {
	for _, m := range []string{"GET", "HEAD", "POST", "PUT", "DELETE", "PATCH", "OPTIONS", "CONNECT", "TRACE"} {
		if got := MethodString([]byte(m)); got != m {
			t.Errorf("MethodString(%q) = %q", m, got)
		}
		if n := testing.AllocsPerRun(10, func() { MethodString([]byte(m)) }); n != 0 {
			t.Errorf("MethodString(%q) allocates %v times", m, n)
		}
	}
	for _, m := range []string{"", "get", "PROPFIND", "GETX"} {
		if got := MethodString([]byte(m)); got != "" {
			t.Errorf("MethodString(%q) = %q, want \"\"", m, got)
		}
	}
}
