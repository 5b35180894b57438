package main

import (
	"context"
	"log/slog"
	"os"
	"strconv"
	"testing"
	"time"
)

// READY=1 reaches the socket systemd names in NOTIFY_SOCKET, once, however
// many state reports succeed.
func TestReadyNotify(t *testing.T) {
	c, path := listenUnixgram(t)
	t.Setenv("NOTIFY_SOCKET", path)
	r := &readyOnce{log: slog.New(slog.NewTextHandler(os.Stderr, nil))}
	r.ready("reporting to neutron-server")
	r.ready("again")
	if got := readDatagram(t, c); got != "READY=1\nSTATUS=reporting to neutron-server" {
		t.Fatalf("notify datagram: %q", got)
	}
	c.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
	if n, err := c.Read(make([]byte, 64)); err == nil {
		t.Fatalf("a second READY was sent (%d bytes)", n)
	}
	// Outside systemd it does nothing.
	t.Setenv("NOTIFY_SOCKET", "")
	if sent, err := sdNotify("READY=1"); sent || err != nil {
		t.Fatalf("without NOTIFY_SOCKET: %v %v", sent, err)
	}
}

// WATCHDOG=1 at half of WATCHDOG_USEC, only when WATCHDOG_PID is ours (or unset).
func TestWatchdogPings(t *testing.T) {
	c, path := listenUnixgram(t)
	t.Setenv("NOTIFY_SOCKET", path)
	t.Setenv("WATCHDOG_USEC", "200000")
	t.Setenv("WATCHDOG_PID", strconv.Itoa(os.Getpid()+1))
	if watchdogInterval() != 0 {
		t.Fatal("watchdog asked of another pid")
	}
	t.Setenv("WATCHDOG_PID", strconv.Itoa(os.Getpid()))
	if d := watchdogInterval(); d != 100*time.Millisecond {
		t.Fatalf("interval %s, want 100ms", d)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { watchdog(ctx, slog.New(slog.NewTextHandler(os.Stderr, nil))); close(done) }()
	for i := 0; i < 2; i++ {
		if got := readDatagram(t, c); got != "WATCHDOG=1" {
			t.Fatalf("ping %d: %q", i, got)
		}
	}
	cancel()
	<-done
}
