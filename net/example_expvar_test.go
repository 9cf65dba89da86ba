//go:build unix

package net_test

import (
	"encoding/json"
	"expvar"
	"fmt"
	"io"
	"net"
	nethttp "net/http"
	"net/http/httptest"
	"time"

	vnet "github.com/veloq/veloq/net"
)

// PublishExpvar puts each loop's counters among the variables that
// expvar.Handler serves: a program that imports expvar and serves
// net/http's DefaultServeMux has them at /debug/vars.
func ExamplePublishExpvar() {
	s, err := vnet.NewServer(&vnet.HandlerFuncs{Data: func(c *vnet.Conn) {
		b, _ := c.Peek(0)
		c.Write(b) // echo
		c.Discard(len(b))
	}}, vnet.WithLoops(2))
	if err != nil {
		panic(err)
	}
	if _, err := s.Listen("tcp", "127.0.0.1:0"); err != nil {
		panic(err)
	}
	defer s.Close()
	vnet.PublishExpvar("veloq_net_example", s)

	vars := httptest.NewServer(expvar.Handler()) // /debug/vars
	defer vars.Close()

	c, err := net.Dial("tcp", s.Addr().String())
	if err != nil {
		panic(err)
	}
	defer c.Close()
	c.Write([]byte("ping"))
	io.ReadFull(c, make([]byte, 4))

	var all struct {
		Loops []vnet.Stats `json:"veloq_net_example"`
	}
	var accepted, in, out uint64
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline) && out < 4; time.Sleep(time.Millisecond) {
		resp, err := nethttp.Get(vars.URL)
		if err != nil {
			panic(err)
		}
		err = json.NewDecoder(resp.Body).Decode(&all)
		resp.Body.Close()
		if err != nil {
			panic(err)
		}
		accepted, in, out = 0, 0, 0
		for _, l := range all.Loops {
			accepted += l.Accepted
			in += l.BytesIn
			out += l.BytesOut
		}
	}
	fmt.Printf("loops: %d, accepted: %d, bytes in: %d, out: %d\n", len(all.Loops), accepted, in, out)
	// Output: loops: 2, accepted: 1, bytes in: 4, out: 4
}
