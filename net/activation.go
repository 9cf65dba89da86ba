package net

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// ErrActivation reports LISTEN_FDS, LISTEN_PID or LISTEN_FDNAMES that do
// not describe descriptors passed to this process, such as LISTEN_PID
// naming another process (the variables were inherited by a child they
// were not meant for).
var ErrActivation = errors.New("veloq: socket activation")

// listenFdsStart is SD_LISTEN_FDS_START: the first passed descriptor.
const listenFdsStart = 3

// ActivationFiles returns the sockets systemd (or systemd-socket-activate,
// or any manager speaking the protocol) passed to this process, as
// sd_listen_fds(3) defines it: LISTEN_FDS descriptors from 3 on, for the
// process LISTEN_PID names, each named by the matching entry of the
// colon-separated LISTEN_FDNAMES (a file's Name; "unknown" when the list
// is absent, as sd_listen_fds_with_names says). Without LISTEN_FDS it
// returns no file and no error: the process was not activated, and
// listens itself. LISTEN_PID naming another process fails with
// ErrActivation: those variables were meant for a parent. The
// descriptors are set close-on-exec, so they are not passed on to a
// child by accident. With unset the three variables are removed from the
// environment (after a successful read or not), as sd_listen_fds's
// unset_environment does.
//
// Serve the files with Server.ListenFiles (stream) or ListenPacketFiles
// (datagram), then close them; FilesNamed picks one name's files.
func ActivationFiles(unset bool) ([]*os.File, error) {
	if unset {
		defer func() {
			os.Unsetenv("LISTEN_PID")
			os.Unsetenv("LISTEN_FDS")
			os.Unsetenv("LISTEN_FDNAMES")
		}()
	}
	nfds, ok := os.LookupEnv("LISTEN_FDS")
	if !ok {
		return nil, nil
	}
	pid, err := strconv.Atoi(os.Getenv("LISTEN_PID"))
	if err != nil {
		return nil, fmt.Errorf("%w: LISTEN_PID=%q is not a process id", ErrActivation, os.Getenv("LISTEN_PID"))
	}
	if pid != os.Getpid() {
		return nil, fmt.Errorf("%w: LISTEN_PID=%d names another process (this is %d)", ErrActivation, pid, os.Getpid())
	}
	n, err := strconv.Atoi(nfds)
	if err != nil || n < 0 {
		return nil, fmt.Errorf("%w: LISTEN_FDS=%q is not a count", ErrActivation, nfds)
	}
	var names []string
	if v, ok := os.LookupEnv("LISTEN_FDNAMES"); ok {
		names = strings.Split(v, ":")
		if len(names) != n {
			return nil, fmt.Errorf("%w: LISTEN_FDNAMES has %d names for LISTEN_FDS=%d", ErrActivation, len(names), n)
		}
	}
	files := make([]*os.File, 0, n)
	for i := range n {
		fd := listenFdsStart + i
		if err := inheritFd(fd); err != nil {
			for _, f := range files {
				f.Close()
			}
			return nil, fmt.Errorf("%w: descriptor %d of LISTEN_FDS=%d is not open: %w", ErrActivation, fd, n, err)
		}
		name := "unknown"
		if names != nil {
			name = names[i]
		}
		files = append(files, os.NewFile(uintptr(fd), name))
	}
	return files, nil
}

// FilesNamed returns the files among files whose Name is name, in order
// (the sockets of one LISTEN_FDNAMES entry, or of one address handed over
// by an upgrade).
func FilesNamed(files []*os.File, name string) []*os.File {
	var out []*os.File
	for _, f := range files {
		if f.Name() == name {
			out = append(out, f)
		}
	}
	return out
}
