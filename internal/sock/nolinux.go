//go:build !linux

package sock

// This package is Linux only. Elsewhere, importing linuxonly stops the
// build with one message, "veloq requires Linux", instead of an error for
// every Linux name used here.
import _ "github.com/veloq/veloq/internal/linuxonly"
