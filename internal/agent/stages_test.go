package agent

import (
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// stageSample is one _sum or _count line of the wiring histograms.
var stageSample = regexp.MustCompile(`(?m)^ovsagent_(port_wiring_stage_seconds|port_wiring_seconds)_(sum|count)(?:\{stage="([^"]*)"\})? (\S+)$`)

// stageSums reads ovsagent_port_wiring_stage_seconds from the exposition:
// stage → (sum, count), and the end-to-end histogram as "end_to_end".
func stageSums(t *testing.T, h *harness) map[string][2]float64 {
	t.Helper()
	out := map[string][2]float64{}
	for _, s := range stageSample.FindAllStringSubmatch(string(h.m.AppendText(nil)), -1) {
		key := s[3]
		if s[1] == "port_wiring_seconds" {
			key = "end_to_end"
		}
		v, err := strconv.ParseFloat(s[4], 64)
		if err != nil {
			t.Fatal(err)
		}
		e := out[key]
		if s[2] == "sum" {
			e[0] = v
		} else {
			e[1] = v
		}
		out[key] = e
	}
	return out
}

// TestWiringStages: each stage of a plug is charged to whoever spent it,
// on a fake clock that only ovs-vswitchd (25 ms to an ofport), the server
// (40 ms for the details, 300 ms per update_device_list) and the bridge
// (7 ms per br-int bundle) move. The bundle's 7 ms are the dataplane's,
// the agent's own share is what is left (nothing on this clock), not the
// 72 ms from the first event; a port that waits for a call slot is charged
// to report_queue, not to the agent.
func TestWiringStages(t *testing.T) {
	sw, fl, srv := newFakeSwitch(true), newFakeFlows(), newFakeServer()
	srv.addPort("p1", "net-a", "vxlan", 100, "fa:16:3e:00:00:01")
	srv.addPort("p2", "net-a", "vxlan", 100, "fa:16:3e:00:00:02")
	clock := &fakeClock{t: time.Date(2026, 12, 3, 8, 0, 0, 0, time.UTC)}
	gate := make(chan struct{})
	srv.gate = gate
	opt := testOpts(false)
	opt.MaxInflightReports = 1
	h := startWithClock(t, sw, fl, srv, opt, clock.now)
	sw.snapshot()
	h.waitFor("in sync with no port", h.inSync)

	ms := time.Millisecond
	srv.mu.Lock()
	srv.onDevices = func() { clock.advance(40 * ms) }
	srv.onUDL = func() { clock.advance(300 * ms) }
	srv.mu.Unlock()
	fl.mu.Lock()
	fl.onApply = func(br string) {
		if br == "br-int" {
			clock.advance(7 * ms)
		}
	}
	fl.mu.Unlock()

	// p1: the row first, its ofport 25 ms later (ovs-vswitchd's time).
	t0 := clock.now()
	v := VIF{PortID: "p1", Name: "tap1", MAC: "fa:16:3e:00:00:01", Tag: -1, UUID: "uuid-tap1"}
	sw.events <- PortEvent{Kind: PortUpserted, VIF: v, Seen: t0}
	clock.advance(25 * ms)
	v.OFPort = 7
	sw.events <- PortEvent{Kind: PortUpserted, VIF: v, Seen: clock.now()}
	poll := func(what string, cond func() bool) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s", what)
			}
		}
	}
	poll("p1's call out", func() bool { now, _ := srv.outNow(false); return now == 1 })

	// p2 is wired while p1's call holds the only slot; 100 ms pass before
	// the slot frees.
	sw.plug("p2", "tap2", "fa:16:3e:00:00:02")
	h.waitFor("p2 wired", func() bool { return sw.tag("tap2") == 1 && fl.owners("br-int")["port:p2"] > 0 })
	clock.advance(100 * ms)
	gate <- struct{}{} // p1's call: +300 ms
	poll("p2's call out", func() bool { now, _ := srv.outNow(false); return now == 1 && srv.status("p1") == "ACTIVE" })
	gate <- struct{}{}
	poll("p2 ACTIVE", func() bool { return srv.status("p2") == "ACTIVE" })
	h.waitFor("in sync", h.inSync)

	got := stageSums(t, h)
	near := func(stage string, wantSum time.Duration, wantCount int) {
		t.Helper()
		g := got[stage]
		if int(g[1]) != wantCount || time.Duration(g[0]*1e9).Round(ms) != wantSum {
			t.Errorf("%s: %d ports, %.1f ms in all; want %d, %v", stage, int(g[1]), g[0]*1e3, wantCount, wantSum)
		}
	}
	// p1: 25 ms vswitchd, 40 ms details, 7 ms bundle, no wait, then its
	// call is out while p2 is wired (47 ms) and 100 ms pass: 447 ms.
	// p2: ofport in its first event, 40 ms details, 7 ms bundle, then
	// 100 ms + p1's 300 ms reply waiting for the slot, its own 300 ms call.
	near(stageVswitchd, 25*ms, 2)
	near(stageServerData, 80*ms, 2)
	near(stageAgent, 0, 2)
	near(stageDataplane, 14*ms, 2)
	near(stageReportQueue, 400*ms, 2)
	near(stageServer, (447+300)*ms, 2)
	near("end_to_end", (25+40+7+447+40+7+400+300)*ms, 2)
}

// TestNoMetricExportedTwice: no two histogram series carry the same
// observations (the agent stage was also exported as
// ovsagent_agent_batch_seconds). On the real clock two series that
// observe different things cannot agree to the nanosecond; two fed by one
// observation always do.
func TestNoMetricExportedTwice(t *testing.T) {
	sw, fl, srv := newFakeSwitch(true), newFakeFlows(), newFakeServer()
	srv.addPort("p1", "net-a", "vxlan", 100, "fa:16:3e:00:00:01")
	srv.addPort("p2", "net-a", "vxlan", 100, "fa:16:3e:00:00:02")
	opt := testOpts(true)
	opt.RecordRPC = true
	h := start(t, sw, fl, srv, opt)
	sw.snapshot()
	sw.plug("p1", "tap1", "fa:16:3e:00:00:01")
	sw.plug("p2", "tap2", "fa:16:3e:00:00:02")
	h.waitFor("p1, p2 ACTIVE and in sync", func() bool {
		return srv.status("p1") == "ACTIVE" && srv.status("p2") == "ACTIVE" && h.inSync()
	})
	text := string(h.m.AppendText(nil))
	if !strings.Contains(text, `ovsagent_port_wiring_stage_seconds_count{stage="agent"} 2`) {
		t.Fatalf("the agent stage of the two ports was not observed:\n%s", text)
	}
	if dups := sameValuedHistograms(text); len(dups) > 0 {
		t.Errorf("histogram series carrying the same observations: %v", dups)
	}
}

// histSample is one sample line of a histogram series.
var histSample = regexp.MustCompile(`^([a-zA-Z_:][a-zA-Z0-9_:]*?)_(bucket|sum|count)(?:\{(.*)\})? (\S+)$`)

// sameValuedHistograms lists the pairs of histogram series (family and
// labels) with observations whose buckets, sum and count are all equal.
func sameValuedHistograms(text string) []string {
	hist := map[string]bool{}
	values := map[string][]string{} // series -> its sample values in order
	var order []string
	for _, l := range strings.Split(text, "\n") {
		if f, ok := strings.CutPrefix(l, "# TYPE "); ok {
			if name, typ, _ := strings.Cut(f, " "); typ == "histogram" {
				hist[name] = true
			}
			continue
		}
		m := histSample.FindStringSubmatch(l)
		if m == nil || !hist[m[1]] {
			continue
		}
		var labels []string
		for _, kv := range strings.Split(m[3], ",") {
			if !strings.HasPrefix(kv, "le=") {
				labels = append(labels, kv)
			}
		}
		key := m[1] + "{" + strings.Join(labels, ",") + "}"
		if values[key] == nil {
			order = append(order, key)
		}
		values[key] = append(values[key], m[2]+"="+m[4])
	}
	var dups []string
	seen := map[string]string{}
	for _, k := range order {
		sig := strings.Join(values[k], " ")
		if strings.HasSuffix(sig, "count=0") {
			continue
		}
		if other, ok := seen[sig]; ok {
			dups = append(dups, other+" = "+k)
		}
		seen[sig] = k
	}
	return dups
}
