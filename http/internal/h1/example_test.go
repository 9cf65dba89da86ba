package h1_test

import (
	"fmt"

	"github.com/veloq/veloq/http/internal/h1"
)

func ExampleChunkedDecoder() {
	in := []byte("5\r\nhello\r\n7;ext=1\r\n, world\r\n0\r\nChecksum: 42\r\n\r\n")
	var d h1.ChunkedDecoder
	for {
		n, data, done, err := d.Next(in)
		if len(data) > 0 {
			fmt.Printf("%q\n", data)
		}
		if done {
			f, _, _ := h1.NextField(d.Trailer(in))
			fmt.Printf("trailer %s=%s\n", f.Name, f.Value)
			break
		}
		if err != nil {
			fmt.Println(err)
			break
		}
		in = in[n:]
	}
	// Output:
	// "hello"
	// ", world"
	// trailer Checksum=42
}
