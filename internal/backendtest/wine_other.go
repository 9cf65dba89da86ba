//go:build !windows

package backendtest

const wine = false
