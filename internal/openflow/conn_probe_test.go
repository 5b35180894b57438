//go:build integration

package openflow

import (
	"context"
	"encoding/binary"
	"errors"
	"net"
	"testing"
	"time"
)

// silentSwitch is a switch that completes the handshake, then reads every
// request and answers none (a hung ovs-vswitchd whose socket buffers still
// take data).
func silentSwitch(t *testing.T) string {
	return fakeSwitch(t, Version13, func(c net.Conn) {
		for {
			if _, err := readMsg(c, nil); err != nil {
				return
			}
		}
	})
}

// TestRequestsTimeOutOnSilentSwitch: every kind of request returns ErrTimeout
// within of_request_timeout, however long the caller's ctx, and drops the
// session; before the timeout existed each waited for ever.
func TestRequestsTimeOutOnSilentSwitch(t *testing.T) {
	mods := adds(genFlows(3, 0x1))
	for name, req := range map[string]func(context.Context, *Conn) error{
		"barrier": func(ctx context.Context, c *Conn) error { return c.Barrier(ctx) },
		"dump":    func(ctx context.Context, c *Conn) error { _, err := c.DumpFlows(ctx, TableAll, 0, 0); return err },
		"bundle":  func(ctx context.Context, c *Conn) error { return c.Bundle(ctx, mods) },
	} {
		t.Run(name, func(t *testing.T) {
			c, err := Dial(context.Background(), silentSwitch(t), Options{RequestTimeout: 100 * time.Millisecond, MaxBackoff: 10 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			err = req(ctx, c)
			if !errors.Is(err, ErrTimeout) || !errors.Is(err, ErrNotConnected) || ctx.Err() != nil {
				t.Fatalf("want ErrTimeout well before the caller's ctx ended, got %v (ctx %v)", err, ctx.Err())
			}
			if c.Connected() {
				t.Error("the session of a switch that timed out is still reported connected")
			}
		})
	}
}

// TestBundleWriteTimesOut: a switch that stops reading holds a bundle's
// writes only for of_request_timeout, without the caller cancelling.
func TestBundleWriteTimesOut(t *testing.T) {
	release := make(chan struct{})
	path := fakeSwitch(t, Version13, func(net.Conn) { <-release }) // never reads again
	defer close(release)
	c, err := Dial(context.Background(), path, Options{RequestTimeout: 200 * time.Millisecond, MaxBackoff: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	mods := make([]FlowMod, 50000) // ~5 MB: far more than the socket buffers
	for i := range mods {
		mods[i] = FlowMod{Command: CmdAdd, Flow: Flow{Table: 60, Priority: uint16(i), Match: Match{InPort(uint32(i + 1))},
			Actions: []Action{SetReg(5, uint32(i)), ResubmitTable(71)}}}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := c.Bundle(ctx, mods); !errors.Is(err, ErrTimeout) || ctx.Err() != nil {
		t.Fatalf("want ErrTimeout from the stuck write, got %v (ctx %v)", err, ctx.Err())
	}
}

// TestInactivityProbeDropsSilentSwitch: an idle session to a switch that
// answers nothing sends an echo request, then is declared dead.
func TestInactivityProbeDropsSilentSwitch(t *testing.T) {
	echo := make(chan []byte, 1)
	path := fakeSwitch(t, Version13, func(c net.Conn) {
		for {
			m, err := readMsg(c, nil)
			if err != nil {
				return
			}
			if m[1] == TypeEchoRequest {
				select {
				case echo <- m:
				default:
				}
			}
		}
	})
	c, err := Dial(context.Background(), path, Options{InactivityProbe: 50 * time.Millisecond, MaxBackoff: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	select {
	case m := <-echo:
		if binary.BigEndian.Uint32(m[4:]) != 0 || m[0] != Version13 {
			t.Errorf("echo request %x", m)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("no echo request on an idle session")
	}
	waitUntil(t, "the session declared dead", func() bool { return !c.Connected() })
}

// TestInactivityProbeSparesBusySession: while a request is out, silence is
// the request timeout's business, not the probe's: a switch that takes many
// probe periods to answer a barrier (a big commit) keeps its session.
func TestInactivityProbeSparesBusySession(t *testing.T) {
	const probe = 20 * time.Millisecond
	path := fakeSwitch(t, Version13, func(c net.Conn) {
		for {
			m, err := readMsg(c, nil)
			if err != nil {
				return
			}
			xid := binary.BigEndian.Uint32(m[4:])
			switch m[1] {
			case TypeEchoRequest:
				c.Write(AppendSimple(nil, TypeEchoReply, xid, m[8:]))
			case TypeBarrierRequest:
				time.Sleep(10 * probe) // busy: nothing at all said meanwhile
				c.Write(AppendSimple(nil, TypeBarrierReply, xid, nil))
			}
		}
	})
	c, err := Dial(context.Background(), path, Options{InactivityProbe: probe, MaxBackoff: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := c.Barrier(ctx); err != nil {
		t.Fatalf("a slow but alive switch lost its session: %v", err)
	}
	if !c.Connected() {
		t.Fatal("not connected after the barrier's reply")
	}
}

// waitUntil polls cond every 10 ms for up to 30 s (a generous bound, not a
// measurement).
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestPausedVswitchdTimesOutAndRecovers: a real ovs-vswitchd stopped with
// SIGSTOP. A bundle returns ErrTimeout instead of waiting for it; the idle
// connection is found dead by the probe while it stays stopped; once it
// runs again (SIGCONT) the connection comes back by itself and works.
func TestPausedVswitchdTimesOutAndRecovers(t *testing.T) {
	re := make(chan struct{}, 8)
	o, br, c := testBridge(t, Options{RequestTimeout: 300 * time.Millisecond, InactivityProbe: 100 * time.Millisecond,
		MaxBackoff: 50 * time.Millisecond, OnReconnect: func() { re <- struct{}{} }})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := c.Bundle(ctx, adds(genFlows(10, 0x1))); err != nil {
		t.Fatal(err)
	}
	// idle for many probe periods: the echo replies keep the session
	time.Sleep(time.Second)
	if len(re) != 0 || !c.Connected() {
		t.Fatalf("a running switch's idle session was dropped (reconnects %d)", len(re))
	}

	if err := o.PauseVswitchd(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = o.ResumeVswitchd() })
	if err := c.Bundle(ctx, adds(genFlows(20, 0x2))); !errors.Is(err, ErrTimeout) || ctx.Err() != nil {
		t.Fatalf("bundle to a stopped switch: want ErrTimeout, got %v (ctx %v)", err, ctx.Err())
	}
	// reconnects are attempted and fail (no hello) while it stays stopped
	time.Sleep(time.Second)
	if c.Connected() {
		t.Fatal("connected to a stopped switch")
	}
	if err := c.Barrier(ctx); !errors.Is(err, ErrNotConnected) {
		t.Fatalf("barrier while stopped: want ErrNotConnected, got %v", err)
	}

	if err := o.ResumeVswitchd(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-re:
	case <-ctx.Done():
		t.Fatal("no reconnection after SIGCONT")
	}
	if err := c.Bundle(ctx, adds(genFlows(20, 0x2))); err != nil {
		t.Fatalf("bundle after SIGCONT: %v", err)
	}
	// the same matches as the first 10, under the new cookie
	if got := len(ofctlDump(t, o, br)); got != 20 {
		t.Errorf("%d flows after recovery, want 20", got)
	}

	// idle again, then stopped: the probe alone finds it dead
	if err := o.PauseVswitchd(); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the probe to drop the stopped switch's idle session", func() bool { return !c.Connected() })
	if err := o.ResumeVswitchd(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-re:
	case <-ctx.Done():
		t.Fatal("no reconnection after the second SIGCONT")
	}
	if err := c.Barrier(ctx); err != nil {
		t.Fatalf("barrier after the second SIGCONT: %v", err)
	}
}
