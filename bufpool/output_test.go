package bufpool

import "testing"

func TestOutput(t *testing.T) {
	b := GetOutput()
	if b.Len() != 0 {
		t.Fatalf("fresh output buffer has %d bytes", b.Len())
	}
	b.WriteString("HTTP/1.1 200 OK\r\n")
	b.Write([]byte("\r\n"))
	if got := b.String(); got != "HTTP/1.1 200 OK\r\n\r\n" {
		t.Fatalf("got %q", got)
	}
	PutOutput(b)
	PutOutput(nil) // ignored
	if b2 := GetOutput(); b2.Len() != 0 {
		t.Fatalf("recycled output buffer not reset: %d bytes", b2.Len())
	}
}
