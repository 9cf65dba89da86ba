package sock

import (
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

func unsafePointer(r *unix.RawSockaddrAny) unsafe.Pointer { return unsafe.Pointer(r) }

func TestRawRoundTrip(t *testing.T) {
	raw, n, err := Raw(&unix.SockaddrInet4{Port: 0x1234, Addr: [4]byte{127, 0, 0, 1}})
	if err != nil || n != unix.SizeofSockaddrInet4 {
		t.Fatal(err, n)
	}
	p := (*unix.RawSockaddrInet4)((unsafePointer(raw)))
	if p.Port != 0x3412 || p.Addr != [4]byte{127, 0, 0, 1} {
		t.Fatalf("raw = %+v", p)
	}
	if _, _, err := Raw(&unix.SockaddrUnix{Name: string(make([]byte, 200))}); err == nil {
		t.Fatal("overlong unix path accepted")
	}
}
