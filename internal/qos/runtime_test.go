package qos

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/ovsagent/ovsagent/internal/neutron"
	of "github.com/ovsagent/ovsagent/internal/openflow"
	"github.com/ovsagent/ovsagent/internal/ovsdb"
)

// fakeSwitch keeps meters and OVSDB rows as a switch would, and logs the calls.
type fakeSwitch struct {
	meters   map[uint32]of.MeterConfig
	policing map[string][2]int64
	qos      map[string]ovsdb.QoSSpec // by external_ids id
	other    map[string]map[string]string
	calls    []string
	failQoS  error
}

func newFakeSwitch() *fakeSwitch {
	return &fakeSwitch{meters: map[uint32]of.MeterConfig{}, policing: map[string][2]int64{},
		qos: map[string]ovsdb.QoSSpec{}, other: map[string]map[string]string{}}
}

func (f *fakeSwitch) DumpMeters(context.Context) (map[uint32]of.MeterConfig, error) {
	out := map[uint32]of.MeterConfig{}
	for k, v := range f.meters {
		out[k] = v
	}
	return out, nil
}

func (f *fakeSwitch) MeterMods(_ context.Context, mods []of.MeterMod) error {
	for _, m := range mods {
		f.calls = append(f.calls, fmt.Sprintf("meter %s %d", m.Command, m.Meter.ID))
		switch m.Command {
		case of.MeterAdd:
			if _, ok := f.meters[m.Meter.ID]; ok {
				return errors.New("exists")
			}
			f.meters[m.Meter.ID] = m.Meter
		case of.MeterModify:
			f.meters[m.Meter.ID] = m.Meter
		case of.MeterDelete:
			delete(f.meters, m.Meter.ID)
		}
	}
	return nil
}

func (f *fakeSwitch) EnsureQoS(_ context.Context, spec ovsdb.QoSSpec, ports ...string) error {
	if f.failQoS != nil {
		return f.failQoS
	}
	f.calls = append(f.calls, "ensure qos "+spec.ExternalIDs["id"])
	f.qos[spec.ExternalIDs["id"]] = spec
	return nil
}

func (f *fakeSwitch) DeleteQoS(_ context.Context, id, typ string) error {
	f.calls = append(f.calls, "delete qos "+id)
	delete(f.qos, id)
	return nil
}

func (f *fakeSwitch) SetIngressPolicing(_ context.Context, iface string, rate, burst int64) error {
	f.calls = append(f.calls, fmt.Sprintf("policing %s %d %d", iface, rate, burst))
	f.policing[iface] = [2]int64{rate, burst}
	return nil
}

func (f *fakeSwitch) SetPortOtherConfig(_ context.Context, port string, set map[string]string, del ...string) error {
	m := f.other[port]
	if m == nil {
		m = map[string]string{}
		f.other[port] = m
	}
	for _, k := range del {
		delete(m, k)
	}
	for k, v := range set {
		m[k] = v
	}
	return nil
}

func TestRuntimeSync(t *testing.T) {
	sw := newFakeSwitch()
	pulled := 0
	policies := map[string]*neutron.QosPolicy{"A": {ID: "A", Rules: []neutron.QosRule{
		{Type: neutron.RuleBandwidthLimit, ID: "r1", QosPolicyID: "A", Direction: "egress", MaxKbps: i64(10000)},
		{Type: neutron.RuleBandwidthLimit, ID: "r2", QosPolicyID: "A", Direction: "ingress", MaxKbps: i64(5000), MaxBurstKbps: i64(100)},
		{Type: neutron.RulePacketRateLimit, ID: "r3", QosPolicyID: "A", Direction: "ingress", MaxKpps: i64(3)},
	}}}
	rt := &Runtime{M: NewManager(Options{}, 100, nil), Meters: sw, Rows: sw,
		Pull: func(_ context.Context, id string) (*neutron.QosPolicy, error) {
			pulled++
			return policies[id], nil
		}}
	ctx := context.Background()
	p := vm()
	p.PolicyID = "A"
	rt.M.SetPort(p)
	dirty, err := rt.Sync(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(dirty, []string{"qos:p1"}) || pulled != 1 {
		t.Fatalf("dirty %v pulled %d", dirty, pulled)
	}
	if got := sw.policing["tapp1"]; got != [2]int64{10000, 8000} {
		t.Errorf("policing %v", got)
	}
	if q := sw.qos["tapp1"]; q.Type != "linux-htb" || q.Queues[0].OtherConfig["max-rate"] != "5000000" || q.Queues[0].OtherConfig["burst"] != "100000" {
		t.Errorf("qos %+v", q)
	}
	if want := map[uint32]of.MeterConfig{1: {ID: 1, Flags: of.MeterPktps, Rate: 3000}}; !reflect.DeepEqual(sw.meters, want) {
		t.Errorf("meters %v", sw.meters)
	}
	if got := sw.other["tapp1"]; !reflect.DeepEqual(got, map[string]string{"pps_p1_ingress": "1"}) {
		t.Errorf("other_config %v", got)
	}
	// nothing changed: nothing written, nothing pulled
	sw.calls = nil
	if dirty, err := rt.Sync(ctx); err != nil || len(dirty) != 0 || len(sw.calls) != 0 || pulled != 1 {
		t.Errorf("idle sync: dirty %v calls %v err %v pulled %d", dirty, sw.calls, err, pulled)
	}
	// the policy loses its ingress rules: the QoS row and the meter go
	policies["A"] = &neutron.QosPolicy{ID: "A", Rules: policies["A"].Rules[:1]}
	rt.M.SetPolicy(policies["A"])
	if _, err := rt.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if len(sw.qos) != 0 || len(sw.meters) != 0 || len(sw.other["tapp1"]) != 0 {
		t.Errorf("left: qos %v meters %v other_config %v", sw.qos, sw.meters, sw.other["tapp1"])
	}
	// an OVSDB error is returned and retried at the next Sync
	policies["A"] = &neutron.QosPolicy{ID: "A", Rules: []neutron.QosRule{
		{Type: neutron.RuleBandwidthLimit, ID: "r2", QosPolicyID: "A", Direction: "ingress", MaxKbps: i64(5000)}}}
	rt.M.SetPolicy(policies["A"])
	sw.failQoS = errors.New("ovsdb down")
	if _, err := rt.Sync(ctx); err == nil || !strings.Contains(err.Error(), "ovsdb down") {
		t.Fatalf("err %v", err)
	}
	sw.failQoS = nil
	if _, err := rt.Sync(ctx); err != nil || sw.qos["tapp1"].Queues == nil {
		t.Fatalf("retry: %v %v", err, sw.qos)
	}
	// the port goes: its rows go
	rt.M.RemovePort("p1")
	sw.calls = nil
	if _, err := rt.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	sort.Strings(sw.calls)
	if !reflect.DeepEqual(sw.calls, []string{"delete qos tapp1"}) || len(sw.qos) != 0 {
		t.Errorf("calls %v qos %v", sw.calls, sw.qos)
	}
	// a policy the server no longer has: the port is reset
	p.PolicyID = "gone"
	rt.M.SetPort(p)
	if dirty, err := rt.Sync(ctx); err != nil || !reflect.DeepEqual(dirty, []string{"qos:p1"}) {
		t.Errorf("absent policy: %v %v", dirty, err)
	}
	if fs, _ := rt.M.Flows([]string{"qos:p1"}); len(fs["qos:p1"]) != 0 {
		t.Errorf("flows of an absent policy: %v", fs)
	}
}

func TestRuntimeMinBandwidth(t *testing.T) {
	sw := newFakeSwitch()
	pol := &neutron.QosPolicy{ID: "A", Rules: []neutron.QosRule{
		{Type: neutron.RuleMinimumBandwidth, ID: "m", QosPolicyID: "A", Direction: "egress", MinKbps: i64(1000)}}}
	rt := &Runtime{M: NewManager(Options{}, 100, nil), Meters: sw, Rows: sw,
		Pull:              func(context.Context, string) (*neutron.QosPolicy, error) { return pol, nil },
		MinBandwidthQoSID: "agent-qos-uuid",
		PhysicalNICs:      func(context.Context) ([]string, error) { return []string{"eth1"}, nil }}
	p := vm()
	p.PolicyID, p.PhysicalNetwork = "A", "physnet1"
	rt.M.SetPort(p)
	if _, err := rt.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	q, ok := sw.qos["agent-qos-uuid"]
	if !ok || q.ExternalIDs["_type"] != "minimum_bandwidth" || len(q.Queues) != 1 || q.Queues[0].Num != 7 ||
		q.Queues[0].OtherConfig["min-rate"] != "1000000" || q.Queues[0].ExternalIDs["port"] != "p1" {
		t.Fatalf("min bw qos %+v", q)
	}
	sw.calls = nil
	if _, err := rt.Sync(context.Background()); err != nil || len(sw.calls) != 0 {
		t.Errorf("idle: %v %v", sw.calls, err)
	}
	rt.M.RemovePort("p1")
	if _, err := rt.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, ok := sw.qos["agent-qos-uuid"]; ok {
		t.Error("min bw qos left after its last port went")
	}
}
