//go:build integration

package agent

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ovsagent/ovsagent/internal/metrics"
	"github.com/ovsagent/ovsagent/internal/testing/ovstest"
)

// hungSwitchAgent runs the agent on a private OVS with p1 wired and in sync,
// its probes served as run.go serves them (loop, OpenFlow), and returns
// the OVS, the harness and a function that GETs a probe.
func hungSwitchAgent(t *testing.T, tune func(*OFBridges, *Options)) (*ovstest.OVS, *harness, *fakeServer, func(path string) (int, string)) {
	t.Helper()
	o := ovstest.Start(t)
	if err := o.AddBridge("br-phys"); err != nil {
		t.Fatal(err)
	}
	srv := newFakeServer()
	srv.addPort("p1", "net-a", "vxlan", 100, "fa:16:3e:00:00:01")
	h, of := runRealAgentTuned(t, o, srv, tune, nil)
	ms, err := metrics.Listen("127.0.0.1:0", h.m)
	if err != nil {
		t.Fatal(err)
	}
	ms.Live(h.a.Alive)
	ms.Ready(h.a.LoopCheck)
	ms.Ready(of.Check)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go ms.Serve(ctx, nil)
	get := func(path string) (int, string) {
		t.Helper()
		resp, err := http.Get("http://" + ms.Addr() + path)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if _, err := o.Vsctl("add-port", "br-int", "tapp1", "--", "set", "Interface", "tapp1", "type=internal",
		"external_ids:iface-id=p1", "external_ids:attached-mac=fa:16:3e:00:00:01"); err != nil {
		t.Fatal(err)
	}
	h.waitFor("p1 ACTIVE and in sync", func() bool { return srv.status("p1") == "ACTIVE" && h.inSync() })
	for _, p := range []string{"/healthz", "/readyz", "/livez"} {
		if code, body := get(p); code != http.StatusOK {
			t.Fatalf("in sync: %s = %d %q", p, code, body)
		}
	}
	return o, h, srv, get
}

// waitProbe polls path every 20 ms until cond holds on its answer, for at
// most 60 s (a generous bound, not a measurement); it returns that answer's
// body and fails the test if /livez ever answers other than 200.
func waitProbe(t *testing.T, get func(string) (int, string), what, path string, cond func(int, string) bool) string {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		code, body := get(path)
		if cond(code, body) {
			return body
		}
		if lc, lb := get("/livez"); lc != http.StatusOK {
			t.Fatalf("%s: /livez = %d %q: a hung switch is not the agent's death", what, lc, lb)
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s: %s = %d %q", what, path, code, body)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func notReady(code int, _ string) bool { return code == http.StatusServiceUnavailable }
func ready(code int, _ string) bool    { return code == http.StatusOK }

// TestHungVswitchdIdleIsNotReady: ovs-vswitchd stops answering (SIGSTOP)
// while the agent is idle and in sync. Before of_inactivity_probe was
// used, /healthz kept answering "ok" for ever; now the probe finds the
// connections dead, the agent is not ready (alive all along), and ready
// again once the switch answers (SIGCONT).
func TestHungVswitchdIdleIsNotReady(t *testing.T) {
	o, _, _, get := hungSwitchAgent(t, func(of *OFBridges, opt *Options) {
		of.RequestTimeout = time.Second
		of.InactivityProbe = 200 * time.Millisecond
	})
	if err := o.PauseVswitchd(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = o.ResumeVswitchd() })
	waitProbe(t, get, "not ready while the switch is stopped", "/healthz", notReady)
	body := waitProbe(t, get, "every bridge reported down", "/readyz", func(_ int, body string) bool {
		return strings.Contains(body, "br-int") && strings.Contains(body, "br-tun") && strings.Contains(body, "br-phys")
	})
	t.Logf("/readyz while stopped: %q", body)
	if err := o.ResumeVswitchd(); err != nil {
		t.Fatal(err)
	}
	waitProbe(t, get, "ready again after SIGCONT", "/healthz", ready)
	waitProbe(t, get, "ready again after SIGCONT", "/readyz", ready)
}

// TestHungVswitchdMidBatchIsNotReady: ovs-vswitchd stops answering while
// the loop applies a change (p1 gains an address: new flows on br-int).
// Before of_request_timeout was used the batch waited for the switch for
// ever with /healthz "ok"; now the watchdog reports the loop stuck, the
// bundle times out, and the agent is in sync and ready again once the
// switch answers, with the change applied. No inactivity probe here, so
// that the bundle in flight meets the request timeout.
func TestHungVswitchdMidBatchIsNotReady(t *testing.T) {
	o, h, srv, get := hungSwitchAgent(t, func(of *OFBridges, opt *Options) {
		of.RequestTimeout = 5 * time.Second
		opt.StuckAfter = 100 * time.Millisecond
	})
	if err := o.PauseVswitchd(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = o.ResumeVswitchd() })
	srv.update("p1", func(d *Device) { d.FixedIPs = append(d.FixedIPs, FixedIP{SubnetID: "s", IP: "10.0.0.99"}) })
	h.a.Notify(PortChanged{PortID: "p1"})
	stuck := waitProbe(t, get, "the loop reported stuck", "/readyz", func(_ int, body string) bool {
		return strings.Contains(body, "agent loop stuck")
	})
	if code, _ := get("/healthz"); code != http.StatusServiceUnavailable {
		t.Errorf("/healthz = %d while the loop is stuck", code)
	}
	// the bundle times out; the batch returns, the loop is no longer stuck
	// but the change is not applied and the connection is down
	back := waitProbe(t, get, "the batch back from the timed-out bundle", "/readyz", func(code int, body string) bool {
		return code == http.StatusServiceUnavailable && !strings.Contains(body, "agent loop stuck") && strings.Contains(body, "not connected")
	})
	t.Logf("/readyz while stopped: %q, then %q", stuck, back)
	if err := o.ResumeVswitchd(); err != nil {
		t.Fatal(err)
	}
	waitProbe(t, get, "ready again after SIGCONT", "/healthz", ready)
	if !h.inSync() {
		t.Fatal("ready but not in sync")
	}
	if fs := dumpFlows(t, o, "br-int"); count(fs, "10.0.0.99") == 0 {
		t.Errorf("p1's new address has no flow after recovery:\n%s", strings.Join(fs, "\n"))
	}
}

// lockedLog is a log sink safe for the loop and the watchdog to write while
// the test reads it.
type lockedLog struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedLog) has(s string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Contains(l.b.String(), s)
}

// TestWatchdogReportsStuckBatch: a batch that does not come back (an Apply
// that blocks) is reported once in the log and by LoopCheck, Alive stays
// nil, and both clear when the batch returns.
func TestWatchdogReportsStuckBatch(t *testing.T) {
	sw, fl, srv := newFakeSwitch(true), newFakeFlows(), newFakeServer()
	srv.addPort("p1", "net-a", "vxlan", 100, "fa:16:3e:00:00:01")
	logs := &lockedLog{}
	opt := testOpts(true)
	opt.StuckAfter = 50 * time.Millisecond
	h := &harness{t: t, sw: sw, fl: fl, srv: srv, m: metrics.New(), batches: make(chan bool, 1), done: make(chan error, 1)}
	h.a = newTestAgent(opt, Deps{Switch: sw, Flows: fl, Plugin: srv, Cache: srv, Reporter: srv, Metrics: h.m,
		Log: slog.New(slog.NewTextHandler(logs, nil)),
		AfterBatch: func(bool) {
			select {
			case h.batches <- true:
			default:
			}
		}})
	if err := h.a.LoopCheck(); err == nil {
		t.Error("LoopCheck nil before Run")
	}
	ctx, cancel := context.WithCancel(context.Background())
	h.cancel = cancel
	go func() { h.done <- h.a.Run(ctx) }()
	t.Cleanup(h.stop)
	sw.snapshot()
	sw.plug("p1", "tap1", "fa:16:3e:00:00:01")
	h.waitFor("p1 ACTIVE and in sync", func() bool { return srv.status("p1") == "ACTIVE" && h.inSync() })
	if err := h.a.LoopCheck(); err != nil {
		t.Fatalf("LoopCheck in sync: %v", err)
	}

	release := make(chan struct{})
	blocked := make(chan struct{}, 1)
	fl.mu.Lock()
	fl.onApply = func(string) {
		select {
		case blocked <- struct{}{}:
		default:
		}
		<-release
	}
	fl.mu.Unlock()
	srv.update("p1", func(d *Device) { d.FixedIPs = append(d.FixedIPs, FixedIP{SubnetID: "s", IP: "10.0.0.99"}) })
	h.a.Notify(PortChanged{PortID: "p1"})
	<-blocked
	waitUntilTrue(t, "LoopCheck reports the stuck batch", func() bool {
		err := h.a.LoopCheck()
		return err != nil && strings.Contains(err.Error(), "agent loop stuck")
	})
	waitUntilTrue(t, "the log reports the stuck batch", func() bool { return logs.has("agent: loop stuck") })
	if err := h.a.Alive(); err != nil {
		t.Errorf("Alive during a stuck batch: %v", err)
	}
	close(release) // the hook, called under fl.mu, returns at once from now on
	waitUntilTrue(t, "LoopCheck clear after the batch returned", func() bool { return h.a.LoopCheck() == nil })
	waitUntilTrue(t, "the log reports the loop resumed", func() bool { return logs.has("agent: loop resumed") })
	h.stop()
	if err := h.a.LoopCheck(); err == nil || h.a.Alive() == nil {
		t.Errorf("after Run returned: LoopCheck %v, Alive %v", err, h.a.Alive())
	}
}

// waitUntilTrue polls cond every 5 ms for up to 30 s (a generous bound, not
// a measurement).
func waitUntilTrue(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
