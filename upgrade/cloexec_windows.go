//go:build windows

package upgrade

import (
	"errors"
	"fmt"
)

// closeOnExec: Windows passes no descriptors to a new process that veloq
// could serve (net cannot wrap an inherited socket there), so a process
// started with the upgrade variables set fails in New; Upgrade itself
// fails earlier, when the server cannot hand its sockets over.
func closeOnExec(int) error {
	return fmt.Errorf("upgrade: inherited sockets are not available on Windows: %w", errors.ErrUnsupported)
}
