package net

import (
	"os"

	"golang.org/x/sys/unix"
)

// pageCached reports whether the n bytes of fd at off are all in the
// page cache, or cachestat's error.
func pageCached(fd int, off, n int64) (bool, error) {
	var st unix.Cachestat_t
	r := unix.CachestatRange{Off: uint64(off), Len: uint64(n)}
	if err := unix.Cachestat(uint(fd), &r, &st, 0); err != nil {
		return false, err
	}
	page := int64(os.Getpagesize())
	pages := (off+n-1)/page - off/page + 1
	return int64(st.Cache) >= pages, nil
}
