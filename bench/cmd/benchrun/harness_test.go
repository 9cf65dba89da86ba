package main

import (
	"os/exec"
	"strings"
	"syscall"
	"testing"
)

func TestTermNote(t *testing.T) {
	term := exec.Command("sleep", "30")
	if err := term.Start(); err != nil {
		t.Skip("no sleep(1):", err)
	}
	term.Process.Signal(syscall.SIGTERM)
	if n := termNote(term.Wait()); n != "" {
		t.Errorf("death by the SIGTERM sent is a normal stop, got note %q", n)
	}
	kill := exec.Command("sleep", "30")
	if err := kill.Start(); err != nil {
		t.Fatal(err)
	}
	kill.Process.Kill()
	if n := termNote(kill.Wait()); !strings.Contains(n, "killed") {
		t.Errorf("SIGKILL must be noted, got %q", n)
	}
	if n := termNote(exec.Command("false").Run()); !strings.Contains(n, "exit status 1") {
		t.Errorf("a failing exit must be noted, got %q", n)
	}
	if n := termNote(nil); n != "" {
		t.Errorf("a clean exit is not noted, got %q", n)
	}
}
