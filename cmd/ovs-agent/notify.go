package main

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strconv"
	"sync"
	"time"
)

// systemd's service notification protocol (sd_notify(3)) without a
// library: one datagram of newline-separated VAR=value assignments to the
// unix socket named by NOTIFY_SOCKET ("@" names an abstract socket). Outside
// systemd (no NOTIFY_SOCKET) every call does nothing.

// sdNotify sends state to NOTIFY_SOCKET; false when there is none.
func sdNotify(state string) (bool, error) {
	path := os.Getenv("NOTIFY_SOCKET")
	if path == "" {
		return false, nil
	}
	if path[0] == '@' {
		path = "\x00" + path[1:]
	} else if path[0] != '/' {
		return false, fmt.Errorf("NOTIFY_SOCKET %q: not a unix socket path", path)
	}
	conn, err := net.DialUnix("unixgram", nil, &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		return false, fmt.Errorf("NOTIFY_SOCKET: %w", err)
	}
	defer conn.Close()
	if _, err := conn.Write([]byte(state)); err != nil {
		return false, fmt.Errorf("NOTIFY_SOCKET: %w", err)
	}
	return true, nil
}

// readyOnce sends READY=1 once: after the first successful state report
// (the server knows the agent), or at start when reports are off.
type readyOnce struct {
	once sync.Once
	log  *slog.Logger
}

func (r *readyOnce) ready(status string) {
	r.once.Do(func() {
		sent, err := sdNotify("READY=1\nSTATUS=" + status)
		switch {
		case err != nil:
			r.log.Warn("systemd: READY=1 not sent", "err", err)
		case sent:
			r.log.Info("systemd: READY=1 sent")
		}
	})
}

// watchdogInterval is how often to send WATCHDOG=1: half of WATCHDOG_USEC,
// when systemd asks this process for it (WATCHDOG_PID unset or ours).
func watchdogInterval() time.Duration {
	usec, err := strconv.ParseInt(os.Getenv("WATCHDOG_USEC"), 10, 64)
	if err != nil || usec <= 0 {
		return 0
	}
	if pid := os.Getenv("WATCHDOG_PID"); pid != "" && pid != strconv.Itoa(os.Getpid()) {
		return 0
	}
	return time.Duration(usec) * time.Microsecond / 2
}

// watchdog pings systemd until ctx ends. It proves the process is alive
// and scheduled; a busy event loop (a wiring burst can hold it for minutes
// at scale) is not death, so the loop's own progress is not what it checks.
func watchdog(ctx context.Context, log *slog.Logger) {
	every := watchdogInterval()
	if every <= 0 {
		return
	}
	log.Info("systemd: watchdog", "interval", every)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		if _, err := sdNotify("WATCHDOG=1"); err != nil {
			log.Warn("systemd: WATCHDOG=1 not sent", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
