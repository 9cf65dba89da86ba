package upgrade

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"sync"
	"time"

	vnet "github.com/veloq/veloq/net"
)

// The variables an old process sets for the new one.
const (
	// EnvFiles holds the JSON list of the names of the passed
	// descriptors, the first being 3 (os/exec's ExtraFiles).
	EnvFiles = "VELOQ_UPGRADE_FILES"
	// EnvReady holds the number of the descriptor the new process writes
	// one byte to once it serves (Ready).
	EnvReady = "VELOQ_UPGRADE_READY"
)

// Errors of Upgrade. The old process goes on serving after each of them.
var (
	// ErrInProgress: Upgrade was called while another one runs.
	ErrInProgress = errors.New("upgrade: an upgrade is in progress")
	// ErrUpgraded: this process has handed its sockets over already and
	// is draining.
	ErrUpgraded = errors.New("upgrade: already upgraded")
	// ErrExited: the new process exited (or closed its ready pipe)
	// before it reported ready.
	ErrExited = errors.New("upgrade: the new process exited before it was ready")
	// ErrNotReady: the new process did not report ready in time; it was
	// killed.
	ErrNotReady = errors.New("upgrade: the new process did not report ready in time")
)

// DefaultReadyTimeout is how long Upgrade waits for the new process to
// report ready when Upgrader.ReadyTimeout is zero.
const DefaultReadyTimeout = 30 * time.Second

// StreamServer is a server that listens on stream sockets and can serve
// and hand over descriptors: *vnet.Server and *vhttp.Server (and so the
// WebSocket servers built on it).
type StreamServer interface {
	Listen(network, address string) (net.Addr, error)
	ListenFiles(files ...*os.File) (net.Addr, error)
	ListenerFiles(addr net.Addr) ([]*os.File, error)
}

// Upgrader listens for a program, taking the sockets an old process of
// it handed over when there are some, and hands them all to a new
// process on Upgrade. A program makes one, early, with New.
type Upgrader struct {
	// ReadyTimeout bounds the wait for the new process to report ready
	// (DefaultReadyTimeout if zero).
	ReadyTimeout time.Duration
	// Command makes the new process; the Upgrader adds the descriptors
	// (ExtraFiles) and its variables (Env, from os.Environ() if nil).
	// nil: the same program with the same arguments, os.Args.
	Command func() *exec.Cmd

	mu        sync.Mutex
	inherited []*os.File // not yet taken by Listen
	ready     *os.File   // the old process's ready pipe; nil if none
	sources   []source
	seen      map[string]int // Listen calls per network and address
	upgrading bool
	upgraded  bool
}

// source is one address served, named for the new process.
type source struct {
	name  string
	files func() ([]*os.File, error)
}

// New reads what an old process passed (nothing when the program was
// started afresh) and removes the variables from the environment, so
// that they are not passed on.
func New() (*Upgrader, error) {
	u := &Upgrader{}
	defer os.Unsetenv(EnvFiles)
	defer os.Unsetenv(EnvReady)
	v, ok := os.LookupEnv(EnvFiles)
	if !ok {
		return u, nil
	}
	var names []string
	if err := json.Unmarshal([]byte(v), &names); err != nil {
		return nil, fmt.Errorf("upgrade: %s: %w", EnvFiles, err)
	}
	// Close-on-exec, so that a process this one starts before it is
	// ready does not inherit them (exec cleared the flag).
	for i, name := range names {
		if err := closeOnExec(3 + i); err != nil {
			return nil, err
		}
		u.inherited = append(u.inherited, os.NewFile(uintptr(3+i), name))
	}
	if r, ok := os.LookupEnv(EnvReady); ok {
		fd, err := strconv.Atoi(r)
		if err != nil || fd < 3 {
			return nil, fmt.Errorf("upgrade: %s=%q is not a descriptor", EnvReady, r)
		}
		if err := closeOnExec(fd); err != nil {
			return nil, err
		}
		u.ready = os.NewFile(uintptr(fd), "upgrade-ready")
	}
	return u, nil
}

// Inherited reports whether this process was started by Upgrade.
func (u *Upgrader) Inherited() bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.ready != nil || len(u.inherited) > 0
}

// take removes and returns the inherited files named name.
func (u *Upgrader) take(name string) []*os.File {
	u.mu.Lock()
	defer u.mu.Unlock()
	var got, rest []*os.File
	for _, f := range u.inherited {
		if f.Name() == name {
			got = append(got, f)
		} else {
			rest = append(rest, f)
		}
	}
	u.inherited = rest
	return got
}

func closeAll(files []*os.File) {
	for _, f := range files {
		f.Close()
	}
}

// name returns the name the sockets of network and address are handed
// over under: the address as the program asked for it (so ":0" finds the
// port the old process got), with the number of earlier calls for the
// same one, so that two servers on "127.0.0.1:0" each find their own.
func (u *Upgrader) name(network, address string) string {
	u.mu.Lock()
	defer u.mu.Unlock()
	key := network + " " + address
	if u.seen == nil {
		u.seen = make(map[string]int)
	}
	n := u.seen[key]
	u.seen[key]++
	if n == 0 {
		return key
	}
	return key + " #" + strconv.Itoa(n+1)
}

// Listen makes srv listen on network and address: on the sockets the old
// process served for the same network and address, or on new ones when
// none was handed over. Addresses are matched as the program asked for
// them (the second Listen for one address gets the old process's second),
// so a new version listens in the same order. The sockets are handed
// over by Upgrade.
func (u *Upgrader) Listen(srv StreamServer, network, address string) (net.Addr, error) {
	name := u.name(network, address)
	var addr net.Addr
	var err error
	if files := u.take(name); len(files) > 0 {
		addr, err = srv.ListenFiles(files...)
		closeAll(files)
	} else {
		addr, err = srv.Listen(network, address)
	}
	if err != nil {
		return nil, err
	}
	u.add(name, func() ([]*os.File, error) { return srv.ListenerFiles(addr) })
	return addr, nil
}

// ListenPacket is Listen for a datagram address served by srv with h.
func (u *Upgrader) ListenPacket(srv *vnet.Server, network, address string, h vnet.PacketHandler) (*vnet.PacketListener, error) {
	name := u.name(network, address)
	var pl *vnet.PacketListener
	var err error
	if files := u.take(name); len(files) > 0 {
		pl, err = srv.ListenPacketFiles(h, files...)
		closeAll(files)
	} else {
		pl, err = srv.ListenPacket(network, address, h)
	}
	if err != nil {
		return nil, err
	}
	u.add(name, pl.Files)
	return pl, nil
}

func (u *Upgrader) add(name string, files func() ([]*os.File, error)) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.sources = append(u.sources, source{name, files})
}

// Ready tells the old process that this one serves, so that it stops
// accepting and drains. Call it once every address is listened on.
// Inherited sockets no Listen took are closed: this version does not
// serve those addresses. Without an old process it does nothing else.
func (u *Upgrader) Ready() error {
	u.mu.Lock()
	left, ready := u.inherited, u.ready
	u.inherited, u.ready = nil, nil
	u.mu.Unlock()
	closeAll(left)
	if ready == nil {
		return nil
	}
	defer ready.Close()
	if _, err := ready.Write([]byte{1}); err != nil {
		return fmt.Errorf("upgrade: reporting ready: %w", err)
	}
	return nil
}

// Upgrade starts a new process of the program with every socket listened
// on through u (stream and datagram, every loop's), and waits until it
// reports ready (Ready). It returns nil then: the caller stops its
// servers gracefully (Shutdown), and exits. The sockets are shared, not
// moved: a connection waiting in an accept queue is accepted by the new
// process, and the socket lives on in it when this one closes its
// descriptors, so nothing queued is reset.
//
// If the new process exits first (ErrExited), or is not ready within
// ReadyTimeout or before ctx ends (ErrNotReady: it is killed), this
// process has lost nothing and goes on serving; the error says why.
// An Upgrade while another runs fails with ErrInProgress, and one after
// a successful one with ErrUpgraded.
func (u *Upgrader) Upgrade(ctx context.Context) error {
	u.mu.Lock()
	switch {
	case u.upgrading:
		u.mu.Unlock()
		return ErrInProgress
	case u.upgraded:
		u.mu.Unlock()
		return ErrUpgraded
	}
	if err := ctx.Err(); err != nil {
		u.mu.Unlock()
		return err
	}
	u.upgrading = true
	sources := append([]source(nil), u.sources...)
	u.mu.Unlock()
	err := u.upgrade(ctx, sources)
	u.mu.Lock()
	u.upgrading = false
	u.upgraded = err == nil
	u.mu.Unlock()
	return err
}

func (u *Upgrader) upgrade(ctx context.Context, sources []source) error {
	var files []*os.File
	var names []string
	defer func() { closeAll(files) }() // the new process has its own copies
	for _, s := range sources {
		fs, err := s.files()
		files = append(files, fs...)
		if err != nil {
			return fmt.Errorf("upgrade: %s: %w", s.name, err)
		}
		for range fs {
			names = append(names, s.name)
		}
	}
	list, err := json.Marshal(names)
	if err != nil {
		return err
	}
	r, w, err := os.Pipe()
	if err != nil {
		return fmt.Errorf("upgrade: %w", err)
	}
	defer r.Close()
	cmd := u.command()
	if cmd.Env == nil {
		cmd.Env = os.Environ()
	}
	cmd.Env = append(cmd.Env, EnvFiles+"="+string(list), EnvReady+"="+strconv.Itoa(3+len(files)))
	cmd.ExtraFiles = append(append([]*os.File(nil), files...), w)
	err = cmd.Start()
	w.Close()
	if err != nil {
		return fmt.Errorf("upgrade: starting the new process: %w", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }() // reaps it, now or when it ends
	readyc := make(chan error, 1)
	go func() {
		var b [1]byte
		_, err := io.ReadFull(r, b[:])
		readyc <- err
	}()
	timeout := u.ReadyTimeout
	if timeout <= 0 {
		timeout = DefaultReadyTimeout
	}
	t := time.NewTimer(timeout)
	defer t.Stop()
	var why error
	select {
	case err := <-readyc:
		if err == nil {
			return nil
		}
		// The pipe closed without a byte: the process is exiting (or
		// closed it and hangs: it is killed at the timeout).
		select {
		case err := <-exited:
			return exitErr(err)
		case <-t.C:
			why = fmt.Errorf("%w: closed its ready pipe without reporting", ErrExited)
		}
	case err := <-exited:
		return exitErr(err)
	case <-t.C:
		why = fmt.Errorf("%w: not ready after %v", ErrNotReady, timeout)
	case <-ctx.Done():
		why = fmt.Errorf("%w: %w", ErrNotReady, ctx.Err())
	}
	_ = cmd.Process.Kill()
	<-exited
	return why
}

func exitErr(err error) error {
	if err == nil {
		return fmt.Errorf("%w: exit status 0", ErrExited)
	}
	return fmt.Errorf("%w: %w", ErrExited, err)
}

func (u *Upgrader) command() *exec.Cmd {
	if u.Command != nil {
		return u.Command()
	}
	cmd := exec.Command(os.Args[0], os.Args[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	return cmd
}

// UpgradeOn upgrades each time one of sigs arrives (a program's SIGUSR2,
// say), until an upgrade succeeds, and returns a context that is done
// then, or when ctx is: the program's cue to shut its servers down
// gracefully and exit. A failed upgrade is passed to report (if not nil)
// and the program goes on serving. The signals stay caught while the
// program drains: one more reports ErrUpgraded instead of killing it
// (SIGUSR2's default action). With no sigs it only waits for ctx.
func (u *Upgrader) UpgradeOn(ctx context.Context, report func(error), sigs ...os.Signal) context.Context {
	done, cancel := context.WithCancel(ctx)
	ch := make(chan os.Signal, 1)
	if len(sigs) > 0 { // none would catch every signal
		signal.Notify(ch, sigs...)
	}
	go func() {
		defer signal.Stop(ch)
		for {
			select {
			case <-ctx.Done():
				cancel()
				return
			case <-ch:
			}
			err := u.Upgrade(done)
			if err == nil {
				cancel()
				continue
			}
			if report != nil {
				report(err)
			}
		}
	}()
	return done
}
