//go:build unix

package net_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"

	"github.com/veloq/veloq/executor"
	vnet "github.com/veloq/veloq/net"
)

// SendFile sends a file after a header written before it, without copying
// the file through user space; done runs on the loop once the last byte is
// handed to the socket, and may write again.
func ExampleConn_SendFile() {
	dir, err := os.MkdirTemp("", "veloq-example")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	name := filepath.Join(dir, "greeting.txt")
	os.WriteFile(name, []byte(strings.Repeat("hello from a file\n", 2000)), 0o644)

	pool := executor.NewBlockingPool() // opens and reads happen here, off the loop
	defer pool.Shutdown(context.Background())

	s, err := vnet.Listen("tcp", "127.0.0.1:0", &vnet.HandlerFuncs{Open: func(c *vnet.Conn) {
		f, err := os.Open(name) // a real server opens it on the pool too
		if err != nil {
			c.Close()
			return
		}
		fi, _ := f.Stat()
		fmt.Fprintf(c, "%d bytes follow\n", fi.Size())
		err = c.SendFile(pool, f, 0, fi.Size(), func(sent int64, err error) {
			f.Close()
			if err == nil {
				c.WriteString("the end\n")
				c.Close()
			}
		})
		if err != nil {
			f.Close()
			c.Close()
		}
	}}, vnet.WithLoops(1))
	if err != nil {
		panic(err)
	}
	defer s.Shutdown(context.Background())

	conn, err := net.Dial("tcp", s.Addr().String())
	if err != nil {
		panic(err)
	}
	defer conn.Close()
	all, _ := io.ReadAll(conn)
	lines := strings.Split(strings.TrimSuffix(string(all), "\n"), "\n")
	fmt.Println(lines[0])
	fmt.Println(len(lines)-2, "lines from the file")
	fmt.Println(lines[len(lines)-1])
	// Output:
	// 36000 bytes follow
	// 2000 lines from the file
	// the end
}
