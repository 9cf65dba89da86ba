package net_test

import (
	"fmt"
	"time"

	vnet "github.com/veloq/veloq/net"
)

// A loop runs posted closures and timers on its own thread.
func ExampleLoop_Post() {
	l, err := vnet.NewLoop(0, vnet.Config{Backend: vnet.BackendEpoll})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer l.Close()
	done := make(chan string)
	l.Post(func() {
		l.AfterFunc(10*time.Millisecond, func() { done <- "timer fired on the loop" })
	})
	fmt.Println(<-done)
	// Output: timer fired on the loop
}
