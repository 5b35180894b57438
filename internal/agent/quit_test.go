package agent

import (
	"testing"
	"time"
)

// A stop (SIGTERM) lets the update_device_list call in flight finish within
// QuitGrace ([agent] quitting_rpc_timeout), as the reference lets its last
// loop end: the port the server is being told about becomes ACTIVE.
func TestStopLetsCallInFlightFinishWithinQuitGrace(t *testing.T) {
	sw, fl, srv := newFakeSwitch(true), newFakeFlows(), newFakeServer()
	srv.addPort("p1", "net-a", "vxlan", 100, "fa:16:3e:00:00:01")
	gate := make(chan struct{})
	started := make(chan struct{}, 4)
	srv.gate = gate
	srv.onUDLStart = func(bool) { started <- struct{}{} }
	opt := testOpts(true)
	opt.QuitGrace = time.Minute
	h := start(t, sw, fl, srv, opt)
	sw.snapshot()
	sw.plug("p1", "tap1", "fa:16:3e:00:00:01")
	<-started // the call is out, held by the server

	stopped := make(chan struct{})
	go func() { h.stop(); close(stopped) }()
	select {
	case <-stopped:
		t.Fatal("Run returned while a call was in flight and the grace had not run out")
	case <-time.After(100 * time.Millisecond):
	}
	close(gate) // the server answers
	<-stopped
	if got := srv.status("p1"); got != "ACTIVE" {
		t.Errorf("p1 = %q after the stop, want ACTIVE (the call in flight was cut)", got)
	}
}

// Past the grace the call is cut and Run returns.
func TestStopCutsCallAfterQuitGrace(t *testing.T) {
	sw, fl, srv := newFakeSwitch(true), newFakeFlows(), newFakeServer()
	srv.addPort("p1", "net-a", "vxlan", 100, "fa:16:3e:00:00:01")
	srv.gate = make(chan struct{}) // never answers
	started := make(chan struct{}, 4)
	srv.onUDLStart = func(bool) { started <- struct{}{} }
	opt := testOpts(true)
	opt.QuitGrace = 50 * time.Millisecond
	h := start(t, sw, fl, srv, opt)
	sw.snapshot()
	sw.plug("p1", "tap1", "fa:16:3e:00:00:01")
	<-started
	h.stop() // fails the test if Run is not back within 5 s
	if got := srv.status("p1"); got == "ACTIVE" {
		t.Errorf("p1 ACTIVE though the server never answered")
	}
}
