//go:build unix

package upgrade_test

import (
	"context"
	"log"
	"os"
	"os/signal"
	"syscall"
	"time"

	vhttp "github.com/veloq/veloq/http"
	"github.com/veloq/veloq/upgrade"
)

// A server that restarts without dropping a connection: on SIGUSR2 it
// starts a new process of itself (a new binary put in place, say) with
// its sockets, and once that one serves, drains and exits.
func Example() {
	u, err := upgrade.New() // the sockets an old process handed over, if any
	if err != nil {
		log.Fatal(err)
	}
	srv, err := vhttp.NewServer(vhttp.HandlerFunc(func(w *vhttp.ResponseWriter, r *vhttp.Request) {
		w.Write([]byte("hello\n"))
	}))
	if err != nil {
		log.Fatal(err)
	}
	if _, err := u.Listen(srv, "tcp", "127.0.0.1:0"); err != nil {
		log.Fatal(err)
	}
	if err := u.Ready(); err != nil { // the old process may stop now
		log.Fatal(err)
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGUSR2, syscall.SIGTERM)
	go func() { sig <- syscall.SIGTERM }() // so that this example ends
	for s := range sig {
		if s == syscall.SIGUSR2 {
			if err := u.Upgrade(context.Background()); err != nil {
				log.Print(err) // the new process failed: this one serves on
				continue
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		srv.Shutdown(ctx) // stop accepting, finish what is in flight
		cancel()
		return
	}
	// Output:
}
