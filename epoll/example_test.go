//go:build linux

package epoll_test

import (
	"fmt"
	"time"

	"golang.org/x/sys/unix"

	"github.com/veloq/veloq/epoll"
)

func Example() {
	p, err := epoll.New()
	if err != nil {
		panic(err)
	}
	defer p.Close()

	var fds [2]int
	if err := unix.Pipe2(fds[:], unix.O_NONBLOCK|unix.O_CLOEXEC); err != nil {
		panic(err)
	}
	defer unix.Close(fds[0])
	defer unix.Close(fds[1])

	// Watch the read end; the token is what a reactor would use to find the
	// connection again (slot, generation, ...).
	const token = 0xc0ffee
	if err := p.Add(fds[0], epoll.In|epoll.EdgeTriggered, token); err != nil {
		panic(err)
	}
	unix.Write(fds[1], []byte("ping"))

	events := make([]epoll.Event, 8)
	n, err := p.Wait(events, time.Second)
	if err != nil {
		panic(err)
	}
	for _, ev := range events[:n] {
		fmt.Printf("token %#x readable=%v\n", ev.Data, ev.Events&epoll.In != 0)
	}

	// Another goroutine can interrupt a blocked Wait.
	go p.Wake()
	n, _ = p.Wait(events, -1)
	fmt.Println("woken, events:", n)
	// Output:
	// token 0xc0ffee readable=true
	// woken, events: 0
}
