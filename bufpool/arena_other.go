//go:build !unix

package bufpool

// Arena needs mmap. Outside unix, importing linuxonly stops the build with
// one message, "veloq requires Linux", instead of an error for every unix
// name arena.go uses.
import _ "github.com/veloq/veloq/internal/linuxonly"
