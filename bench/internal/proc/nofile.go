package proc

import (
	"fmt"
	"syscall"
)

// RaiseNofile makes sure this process may hold need file descriptors,
// raising the hard limit too when allowed (root), and at least the soft
// limit up to the hard one otherwise.
func RaiseNofile(need uint64) error {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return err
	}
	if lim.Cur >= need {
		return nil
	}
	want := lim
	want.Cur = need
	if want.Max < need {
		want.Max = need
	}
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &want); err == nil {
		return nil
	}
	if lim.Max > lim.Cur {
		lim.Cur = lim.Max
		_ = syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim)
	}
	return fmt.Errorf("RLIMIT_NOFILE is %d, need %d: raise it (ulimit -n) or run as root", lim.Cur, need)
}
