package openflow

import (
	"errors"
	"fmt"
	"os"
	"time"
)

// A switch that stops answering (ovs-vswitchd hung, or stopped) must not
// hold the agent for ever: requests are bounded by Options.RequestTimeout and
// an idle session is probed (Options.InactivityProbe). Either way the
// session is dropped, so the connection reports itself down and reconnects.

// handshakeTimeout bounds a connection's hello and features exchange: 10 s,
// or the request timeout when that is shorter (a hung switch accepts the
// connection in the kernel and never says hello).
func (c *Conn) handshakeTimeout() time.Duration {
	if t := c.opt.RequestTimeout; t > 0 && t < 10*time.Second {
		return t
	}
	return 10 * time.Second
}

// deadlineWriter is the socket as the session's bufio.Writer sees it: with a
// request timeout, each write must be taken by the switch within it.
type deadlineWriter struct{ s *session }

func (w deadlineWriter) Write(p []byte) (int, error) {
	s := w.s
	if s.timeout <= 0 {
		return s.c.Write(p)
	}
	_ = s.c.SetWriteDeadline(time.Now().Add(s.timeout))
	if s.interrupted.Load() {
		_ = s.c.SetWriteDeadline(time.Now()) // a cancelled Bundle's deadline stands
	}
	n, err := s.c.Write(p)
	if err != nil && errors.Is(err, os.ErrDeadlineExceeded) && !s.interrupted.Load() {
		err = fmt.Errorf("%w: it took no data for %s (of_request_timeout)", ErrTimeout, s.timeout)
	}
	return n, err
}

// probe is the session's inactivity probe (Options.InactivityProbe).
func (s *session) probe(every time.Duration) {
	t := time.NewTicker(every / 4)
	defer t.Stop()
	var echoed int64 // lastActive when the last echo request went out
	for {
		select {
		case <-s.dead:
			return
		case <-t.C:
		}
		now := time.Now()
		if s.busy() {
			s.lastActive.Store(now.UnixNano())
			continue
		}
		last := s.lastActive.Load()
		idle := now.Sub(time.Unix(0, last))
		switch {
		case idle >= 2*every:
			s.fail(fmt.Errorf("%w: nothing received for %s, echo request unanswered (of_inactivity_probe)", ErrTimeout, idle.Round(time.Millisecond)))
			return
		case idle >= every && echoed != last:
			echoed = last
			// xid 0 is never a call's (begin skips it); a write stuck behind
			// a hung switch must not stop the probe's clock
			go func() { _ = s.send(AppendSimple(nil, TypeEchoRequest, 0, nil)) }()
		}
	}
}

// busy reports whether a request is out.
func (s *session) busy() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.calls) > 0 || len(s.ranges) > 0
}
