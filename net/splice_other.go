//go:build !linux

package net

// splice(2) is Linux only. Outside Linux every loop runs the portable
// backend, whose SpliceTo refuses with ErrCannotSplice before any of these
// is reached; they fail with ErrLinuxOnly all the same.

func spliceNB(int, int, int) (int64, error) { return 0, ErrLinuxOnly }

func pipe2(*[2]int) error { return ErrLinuxOnly }

func setPipeSize(int, int) (int, error) { return 0, ErrLinuxOnly }
