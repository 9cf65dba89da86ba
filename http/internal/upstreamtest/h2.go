package upstreamtest

import (
	"bufio"
	"bytes"
	"io"
	"net"
	"testing"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/veloq/veloq/internal/backendtest"
)

// RawH2 is a minimal HTTP/2 (h2c prior knowledge) server for faults
// net/http does not make: it reads the preface, sends its SETTINGS,
// acknowledges the client's, and hands each request's stream id to onReq
// with the connection's framer, an HPACK encoder of name, value pairs and
// the connection's index. It stops when tb ends and returns the address.
func RawH2(tb testing.TB, onReq func(fr *http2.Framer, enc func(...string) []byte, id uint32, conn int)) string {
	tb.Helper()
	return backendtest.ServeTCP(tb, func(c net.Conn, i int) {
		br := bufio.NewReader(c)
		preface := make([]byte, len(http2.ClientPreface))
		if _, err := io.ReadFull(br, preface); err != nil {
			return
		}
		fr := http2.NewFramer(c, br)
		fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
		var buf bytes.Buffer
		e := hpack.NewEncoder(&buf)
		enc := func(kv ...string) []byte {
			buf.Reset()
			for j := 0; j < len(kv); j += 2 {
				_ = e.WriteField(hpack.HeaderField{Name: kv[j], Value: kv[j+1]})
			}
			return append([]byte(nil), buf.Bytes()...)
		}
		_ = fr.WriteSettings()
		for {
			f, err := fr.ReadFrame()
			if err != nil {
				return
			}
			switch f := f.(type) {
			case *http2.SettingsFrame:
				if !f.IsAck() {
					_ = fr.WriteSettingsAck()
				}
			case *http2.MetaHeadersFrame:
				onReq(fr, enc, f.StreamID, i)
			}
		}
	})
}
