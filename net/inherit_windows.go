//go:build windows

package net

import (
	"errors"
	"fmt"
	"os"
)

// Windows has no descriptor passing veloq can use: its sockets are owned
// by Go's net package (internal/sock), which cannot wrap one handed in as
// an *os.File (net.FileConn and net.FileListener are not implemented
// there). ListenFiles, ListenPacketFiles, ListenerFiles, Files and
// ActivationFiles with LISTEN_FDS set therefore fail with an error that
// wraps errors.ErrUnsupported, the standard library's name for it.
var errFdPassing = fmt.Errorf("veloq: descriptor passing (ListenFiles, ListenerFiles, activation, upgrade) is not available on Windows: %w", errors.ErrUnsupported)

func fdPassing() error { return errFdPassing }

func checkSocket(*os.File, int) (string, error) { return "", errFdPassing }

func dupFd(*os.File) (int, error) { return -1, errFdPassing }

func dupRaw(int) (int, error) { return -1, errFdPassing }

func inheritFd(int) error { return errFdPassing }
