package agent

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/ovsagent/ovsagent/internal/feature"
	"github.com/ovsagent/ovsagent/internal/neutron"
	"github.com/ovsagent/ovsagent/internal/openflow"
	"github.com/ovsagent/ovsagent/internal/ovsdb"
	"github.com/ovsagent/ovsagent/internal/qos"
)

// qosEdges are the qos extension's edges as fakes: br-int's meters and the OVSDB rows.
type qosEdges struct {
	mu       sync.Mutex
	meters   map[uint32]openflow.MeterConfig
	policing map[string][2]int64
	other    map[string]map[string]string
}

func (e *qosEdges) DumpMeters(context.Context) (map[uint32]openflow.MeterConfig, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := map[uint32]openflow.MeterConfig{}
	for k, v := range e.meters {
		out[k] = v
	}
	return out, nil
}

func (e *qosEdges) MeterMods(_ context.Context, mods []openflow.MeterMod) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, m := range mods {
		if m.Command == openflow.MeterDelete {
			delete(e.meters, m.Meter.ID)
		} else {
			e.meters[m.Meter.ID] = m.Meter
		}
	}
	return nil
}

func (e *qosEdges) EnsureQoS(context.Context, ovsdb.QoSSpec, ...string) error { return nil }
func (e *qosEdges) DeleteQoS(context.Context, string, string) error           { return nil }
func (e *qosEdges) SetIngressPolicing(_ context.Context, iface string, rate, burst int64) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.policing[iface] = [2]int64{rate, burst}
	return nil
}
func (e *qosEdges) SetPortOtherConfig(_ context.Context, port string, set map[string]string, del ...string) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	m := e.other[port]
	if m == nil {
		m = map[string]string{}
		e.other[port] = m
	}
	for _, k := range del {
		delete(m, k)
	}
	for k, v := range set {
		m[k] = v
	}
	return nil
}

func (e *qosEdges) meterCount() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.meters)
}

// TestQoSThroughSeam: the qos extension registered through Deps.Features: a port
// whose Port object names a policy gets it pulled, its meters on br-int before its
// flows (table 58 pps meter, DSCP in table 0) in the bundles with the pipeline's, a
// pushed policy change reaches the flows, and the port's unplug takes both away.
func TestQoSThroughSeam(t *testing.T) {
	sw, fl, srv := newFakeSwitch(true), newFakeFlows(), newFakeServer()
	srv.addPort("p1", "net-a", "vxlan", 100, "fa:16:3e:00:00:01")
	edges := &qosEdges{meters: map[uint32]openflow.MeterConfig{}, policing: map[string][2]int64{}, other: map[string]map[string]string{}}
	kpps := int64(2)
	pol := &neutron.QosPolicy{ID: "A", Rules: []neutron.QosRule{
		{Type: neutron.RulePacketRateLimit, ID: "r1", QosPolicyID: "A", Direction: "egress", MaxKpps: &kpps},
		{Type: neutron.RuleDSCPMarking, ID: "r2", QosPolicyID: "A", DSCPMark: 26},
	}}
	var pulls int
	var mu sync.Mutex
	qf := qos.New(qos.Deps{
		Meters: func() (qos.Meters, error) { return edges, nil },
		Rows:   edges,
		Ports:  func(context.Context, string) ([]ovsdb.PortInfo, error) { return nil, nil },
		Features: func(context.Context) (openflow.MeterFeatures, error) {
			return openflow.MeterFeatures{MaxMeter: 100, BandTypes: 1, Capabilities: 15, MaxBands: 1}, nil
		},
		Pull: func(_ context.Context, id string) (*neutron.QosPolicy, error) {
			mu.Lock()
			pulls++
			mu.Unlock()
			return pol, nil
		},
		Port:    func(id string) *neutron.Port { return &neutron.Port{ID: id, QosPolicyID: "A"} },
		Network: func(string) *neutron.Network { return nil },
	})
	defer func() {
		if t.Failed() {
			t.Logf("br-int owners %v; qos:p1 %v; meters %v", fl.owners("br-int"), fl.Desired("br-int", "qos:p1"), edges.meters)
		}
	}()
	h := startFeatures(t, sw, fl, srv, testOpts(false), qf)
	sw.snapshot()
	sw.plug("p1", "tap1", "fa:16:3e:00:00:01")
	h.waitFor("p1 ACTIVE", func() bool { return srv.status("p1") == "ACTIVE" })
	h.waitFor("qos flows in", func() bool { return len(fl.Desired("br-int", "qos:p1")) == 3 })
	var lines []string
	for _, f := range fl.Desired("br-int", "qos:p1") {
		lines = append(lines, f.String())
	}
	got := strings.Join(lines, "\n")
	for _, want := range []string{"table=58, priority=100,in_port=", "actions=meter:1,goto_table:59", "set_field:26->ip_dscp"} {
		if !strings.Contains(got, want) {
			t.Errorf("qos:p1 flows lack %q:\n%s", want, got)
		}
	}
	if edges.meterCount() != 1 {
		t.Errorf("meters %v", edges.meters)
	}
	if len(fl.Desired("br-int", "qos")) != 1 {
		t.Errorf("base flow missing: %v", fl.owners("br-int"))
	}

	// a pushed policy without the DSCP rule: only the meter flow stays
	pol2 := &neutron.QosPolicy{ID: "A", Rules: pol.Rules[:1]}
	h.a.Notify(ResourceChanged{feature.Resource{Type: neutron.TypeQosPolicy, ID: "A", New: pol2}})
	h.waitFor("dscp flows gone", func() bool { return len(fl.Desired("br-int", "qos:p1")) == 1 })

	sw.unplug("tap1")
	h.waitFor("qos:p1 and its meter removed", func() bool {
		return fl.owners("br-int")["qos:p1"] == 0 && edges.meterCount() == 0
	})
	mu.Lock()
	defer mu.Unlock()
	if pulls != 1 {
		t.Errorf("policy pulled %d times, want once", pulls)
	}
}
