package agent

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ovsagent/ovsagent/internal/feature"
	"github.com/ovsagent/ovsagent/internal/metrics"
	"github.com/ovsagent/ovsagent/internal/neutron"
	"github.com/ovsagent/ovsagent/internal/openflow"
)

// rateFeature is an extension as a test builds it: one "rate:<port>"
// owner per wired-up port, one br-int table 58 flow each whose priority is
// the rate of the TestPolicy object the server pushed (a pure function of
// its state: rateFlows), an OVSDB-like Sync that fails once, and its
// explain, takeover and report parts.
type rateFeature struct {
	h     feature.Host
	ports map[string]feature.Port
	rate  uint16

	mu       sync.Mutex // the test reads what the loop recorded
	asked    []string   // every owner Flows was asked for
	syncs    int
	failSync int
	resyncs  []string
}

func newRateFeature() *rateFeature {
	return &rateFeature{ports: map[string]feature.Port{}, rate: 10}
}

func (f *rateFeature) Name() string                    { return "rate" }
func (f *rateFeature) Attach(h feature.Host)           { f.h = h }
func (f *rateFeature) Kinds() []string                 { return []string{"rate"} }
func (f *rateFeature) Resources() []string             { return []string{"TestPolicy"} }
func (f *rateFeature) Extension() string               { return "rate" }
func (f *rateFeature) Configurations(c map[string]any) { c["rate_test"] = true }

func (f *rateFeature) Owners() []string {
	var out []string
	for id := range f.ports {
		out = append(out, "rate:"+id)
	}
	return out
}

func (f *rateFeature) Flows(owners []string) (map[string]map[string][]openflow.Flow, map[string]error) {
	f.mu.Lock()
	f.asked = append(f.asked, owners...)
	f.mu.Unlock()
	out := map[string]map[string][]openflow.Flow{}
	errs := map[string]error{}
	for _, o := range owners {
		id, ok := strings.CutPrefix(o, "rate:")
		if !ok {
			errs[o] = fmt.Errorf("not a rate owner: %q", o)
			continue
		}
		if p, ok := f.ports[id]; ok {
			out[o] = map[string][]openflow.Flow{f.h.Layout().Integration: rateFlows(p, f.rate)}
		}
	}
	return out, errs
}

// rateFlows is the feature's pure decider.
func rateFlows(p feature.Port, rate uint16) []openflow.Flow {
	return []openflow.Flow{{Table: 58, Priority: rate, Match: openflow.Match{openflow.InPort(p.OFPort)},
		Actions: []openflow.Action{openflow.GotoTable{Table: 60}}}}
}

func (f *rateFeature) PortWired(p feature.Port) {
	if p.Wiring != feature.WiredUp {
		f.PortRemoved(p.ID)
		return
	}
	f.ports[p.ID] = p
	f.h.Touch("rate:" + p.ID)
}

func (f *rateFeature) PortRemoved(id string) {
	if _, ok := f.ports[id]; ok {
		delete(f.ports, id)
		f.h.Touch("rate:" + id)
	}
}

func (f *rateFeature) ResourceChanged(r feature.Resource) {
	if r.Type == "TestPolicy" && slices.Contains(r.Changed, "rate") {
		f.rate = 20
		for _, o := range f.Owners() {
			f.h.Touch(o)
		}
	}
}

// HandleEvent: its own event (a new rate), from another goroutine.
func (f *rateFeature) HandleEvent(data any) {
	if r, ok := data.(uint16); ok {
		f.rate = r
		for _, o := range f.Owners() {
			f.h.Touch(o)
		}
	}
}

func (f *rateFeature) Sync(context.Context) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.syncs++
	if f.failSync > 0 {
		f.failSync--
		return errors.New("ovsdb: test row write failed")
	}
	return nil
}

func (f *rateFeature) Resync(reason string) {
	f.mu.Lock()
	f.resyncs = append(f.resyncs, reason)
	f.mu.Unlock()
}

func (f *rateFeature) PortOwners(p feature.Port) []string { return []string{"rate:" + p.ID} }
func (f *rateFeature) Reason(owner, bridge string, table uint8) string {
	return fmt.Sprintf("rate limit of %s: table %d", owner, table)
}

func (f *rateFeature) Unrebuilt(h feature.HostState) []string {
	if slices.Contains(h.Bridges, "rate-br") {
		return []string{"rate bridge found"}
	}
	return nil
}

func (f *rateFeature) askedOwners() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.asked)
}

func startFeatures(t *testing.T, sw *fakeSwitch, fl *fakeFlows, srv *fakeServer, opt Options, fs ...feature.Feature) *harness {
	t.Helper()
	h := &harness{t: t, sw: sw, fl: fl, srv: srv, m: metrics.New(), batches: make(chan bool, 1), done: make(chan error, 1)}
	h.a = newTestAgent(opt, Deps{Switch: sw, Flows: fl, Plugin: srv, Cache: srv, Reporter: srv, Metrics: h.m, Log: testLogger(),
		Features: fs,
		AfterBatch: func(bool) {
			select {
			case h.batches <- true:
			default:
			}
		}})
	ctx, cancel := context.WithCancel(context.Background())
	h.cancel = cancel
	go func() { h.done <- h.a.Run(ctx) }()
	t.Cleanup(func() { h.stop() })
	return h
}

// TestFeatureFlowsReachBridgeThroughSeam: an extension registered through
// Deps.Features gets the port lifecycle and its server objects on the
// loop, its owners (and only its) are dispatched to it by kind, its flows
// reach the switch in the bundles with the pipeline's and firewall's,
// change with its state, go with the port, and show in explain.
func TestFeatureFlowsReachBridgeThroughSeam(t *testing.T) {
	sw, fl, srv := newFakeSwitch(true), newFakeFlows(), newFakeServer()
	srv.addPort("p1", "net-a", "vxlan", 100, "fa:16:3e:00:00:01")
	opt := testOpts(false)
	opt.Pipeline.FirewallDriver, opt.Pipeline.EnableSecurityGroup = "openvswitch", true // fw: owners in the same batches
	rf := newRateFeature()
	rf.failSync = 1 << 30 // until the test lets it succeed
	h := startFeatures(t, sw, fl, srv, opt, rf)
	sw.snapshot()
	sw.plug("p1", "tap1", "fa:16:3e:00:00:01")
	// While its Sync fails (retried with back-off) the agent is not in sync.
	h.waitFor("p1 ACTIVE and Sync retried", func() bool {
		rf.mu.Lock()
		defer rf.mu.Unlock()
		return srv.status("p1") == "ACTIVE" && rf.syncs >= 3
	})
	if h.inSync() {
		t.Errorf("in sync while a feature's Sync fails")
	}
	rf.mu.Lock()
	rf.failSync = 0
	rf.mu.Unlock()
	h.waitFor("in sync once Sync succeeds", h.inSync)

	own := fl.owners("br-int")
	if own["rate:p1"] != 1 || own["port:p1"] == 0 || own["fw:port:p1"] == 0 {
		t.Fatalf("br-int owners = %v, want rate:p1 beside port:p1 and fw:port:p1", own)
	}
	got := fl.Desired("br-int", "rate:p1")
	if len(got) != 1 || got[0].Table != 58 || got[0].Priority != 10 || got[0].Cookie != fl.Cookie("br-int") {
		t.Errorf("rate:p1 flows = %v, want one table 58 priority 10 flow with br-int's cookie %#x", got, fl.Cookie("br-int"))
	}
	for _, o := range rf.askedOwners() {
		if !strings.HasPrefix(o, "rate:") {
			t.Errorf("the rate feature was asked for owner %q of another feature", o)
		}
	}

	// A server object it consumes: delivered on the loop, its owners recomputed.
	NotifyFromCache(h.a, "me", neutron.Event{Type: "TestPolicy", Kind: neutron.Updated, ID: "pol", Changed: []string{"rate"}})
	h.waitFor("rate 20 flow", func() bool {
		fs := fl.Desired("br-int", "rate:p1")
		return len(fs) == 1 && fs[0].Priority == 20
	})

	// Its own event from another goroutine, through Host.Notify.
	go rf.h.Notify(uint16(30))
	h.waitFor("rate 30 flow", func() bool {
		fs := fl.Desired("br-int", "rate:p1")
		return len(fs) == 1 && fs[0].Priority == 30
	})

	e, err := h.a.Explain(context.Background(), "p1")
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := e.Write(&b); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "rate limit of rate:p1: table 58 [owner rate:p1]") {
		t.Errorf("explain lacks the feature's flow and reason:\n%s", b.String())
	}

	sw.unplug("tap1")
	h.waitFor("rate:p1 removed", func() bool { return fl.owners("br-int")["rate:p1"] == 0 && fl.owners("br-int")["port:p1"] == 0 })

	h.a.Notify(Resync{Reason: "test"})
	h.waitFor("resync told", func() bool {
		rf.mu.Lock()
		defer rf.mu.Unlock()
		return slices.Contains(rf.resyncs, "test")
	})
}

// TestFeatureOwnerKindConflictRefused: two features claiming one owner kind
// (here the pipeline's "port") cannot run: an owner must have one source.
func TestFeatureOwnerKindConflictRefused(t *testing.T) {
	a := New(testOpts(false), Deps{Switch: newFakeSwitch(false), Log: testLogger(), Features: []feature.Feature{portThief{}}})
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	err := a.Run(ctx)
	if err == nil || !strings.Contains(err.Error(), `owner kind "port"`) {
		t.Fatalf("Run = %v, want the owner kind conflict", err)
	}
}

type portThief struct{}

func (portThief) Name() string     { return "thief" }
func (portThief) Kinds() []string  { return []string{"port"} }
func (portThief) Owners() []string { return nil }
func (portThief) Flows([]string) (map[string]map[string][]openflow.Flow, map[string]error) {
	return nil, nil
}

// TestFeatureTakeoverAndUnrebuilt: a registered feature replaces the
// absent-feature check of its name and says what it would not rebuild;
// its flows are part of the takeover plan.
func TestFeatureTakeoverAndUnrebuilt(t *testing.T) {
	sw := newFakeSwitch(false)
	l, _ := sw.SetupBridges(context.Background())
	h := HostState{Layout: l, Bridges: []string{"br-int", "rate-br"}, QoSRows: 1}
	if got := UnrebuiltState(h); len(got) != 1 || !strings.Contains(got[0], "QoS") {
		t.Errorf("without features: %q, want the QoS refusal", got)
	}
	rf := newRateFeature()
	got := UnrebuiltState(h, qosNamed{rf})
	if len(got) != 1 || got[0] != "rate bridge found" {
		t.Errorf("with a feature named qos: %q, want only its own line", got)
	}

	vif := VIF{PortID: "p1", Name: "tap1", MAC: "fa:16:3e:00:00:01", OFPort: 7, Tag: -1}
	seg := 100
	// table 58 also holds the pipeline's own default (2026.2's 58 -> 59 chain):
	// the feature adds exactly one flow beside it
	table58 := func(fs []feature.Feature) int {
		plan := PlanTakeover(testOpts(false), TakeoverInputs{
			Layout: l, VIFs: []VIF{vif},
			Devices:  map[string]Device{"p1": {PortID: "p1", Bound: true, NetworkID: "n", MAC: vif.MAC, AdminStateUp: true, NetworkType: "vxlan", SegmentationID: &seg}},
			Features: fs,
		})
		n := 0
		for _, b := range plan.Bridges {
			for _, tp := range b.Tables {
				if b.Name == l.Integration && tp.Table == 58 {
					n = tp.Ours
				}
			}
		}
		return n
	}
	base := table58(nil)
	if ours := table58([]feature.Feature{newRateFeature()}); ours != base+1 {
		t.Errorf("takeover plan: %d flows of ours in br-int table 58, want the pipeline's %d and the feature's 1", ours, base)
	}
}

// qosNamed is a feature registered under the name "qos".
type qosNamed struct{ *rateFeature }

func (qosNamed) Name() string { return "qos" }
