package qos

import (
	"reflect"
	"strings"
	"testing"

	"github.com/ovsagent/ovsagent/internal/neutron"
	of "github.com/ovsagent/ovsagent/internal/openflow"
)

func bwPolicy(id string, kbps int64, dir string) *neutron.QosPolicy {
	return &neutron.QosPolicy{ID: id, Rules: []neutron.QosRule{
		{Type: neutron.RuleBandwidthLimit, ID: id + "-r", QosPolicyID: id, Direction: dir, MaxKbps: i64(kbps)}}}
}

func TestManagerLifecycle(t *testing.T) {
	// p1's egress meter was given id 5 by an earlier run (Port other_config)
	m := NewManager(Options{MeterBandwidth: true}, 100, map[string]uint32{"bps_p1_egress": 5, "bps_gone_egress": 1})
	p1 := vm()
	p1.PolicyID = "A"
	if got := m.SetPort(p1); !reflect.DeepEqual(got, []string{"qos:p1"}) {
		t.Fatalf("owners %v", got)
	}
	if got := m.Missing(); !reflect.DeepEqual(got, []string{"A"}) {
		t.Fatalf("missing %v", got)
	}
	// while the policy is pulled, the flow of the meter it held stays (a restart must
	// not lift a limit meanwhile)
	if fs, _ := m.Flows([]string{"qos:p1"}); len(fs["qos:p1"]) != 1 || !strings.Contains(render(fs["qos:p1"])[0], "actions=meter:5,goto_table:60") {
		t.Fatalf("flows before the policy is known: %v", fs)
	}
	if got := m.SetPolicy(bwPolicy("A", 10000, "egress")); !reflect.DeepEqual(got, []string{"qos:p1"}) {
		t.Fatalf("owners %v", got)
	}
	fs, errs := m.Flows(m.Owners())
	if len(errs) != 0 {
		t.Fatal(errs)
	}
	if got := render(fs["qos:p1"]); len(got) != 1 || !strings.Contains(got[0], "actions=meter:5,goto_table:60") {
		t.Fatalf("p1 flows %v (the held id 5 must be kept)", got)
	}
	if len(fs["qos"]) != 1 {
		t.Errorf("base flows %v", fs["qos"])
	}
	// a second port on the network's policy gets another id (1 is still held by a port
	// not wired yet)
	p2 := Port{ID: "p2", Name: "tapp2", MAC: mac, OFPort: 8, LocalVLAN: 3, DeviceOwner: "compute:nova", NetworkPolicyID: "N"}
	m.SetPort(p2)
	m.SetPolicy(bwPolicy("N", 2000, "ingress"))
	meters, err := m.Meters()
	if err != nil {
		t.Fatal(err)
	}
	want := map[uint32]of.MeterConfig{
		5: {ID: 5, Flags: of.MeterKbps, Rate: 10000},
		2: {ID: 2, Flags: of.MeterKbps, Rate: 2000},
	}
	if !reflect.DeepEqual(meters, want) {
		t.Fatalf("meters %v", meters)
	}
	if got := m.MeterIDs("p2"); !reflect.DeepEqual(got, map[string]uint32{"bps_p2_ingress": 2}) {
		t.Errorf("p2 ids %v", got)
	}
	// the policy's rate changes: same meter, new rate
	if got := m.SetPolicy(bwPolicy("A", 3000, "egress")); !reflect.DeepEqual(got, []string{"qos:p1"}) {
		t.Errorf("owners %v", got)
	}
	meters, _ = m.Meters()
	if meters[5].Rate != 3000 {
		t.Errorf("meter 5 after the update: %+v", meters[5])
	}
	// the rule goes from egress to ingress: the egress key's id is freed
	m.SetPolicy(bwPolicy("A", 3000, "ingress"))
	if got := m.MeterIDs("p1"); len(got) != 1 || got["bps_p1_ingress"] == 0 || got["bps_p1_ingress"] == 2 {
		t.Errorf("p1 ids after the direction change %v", got)
	}
	// the policy is deleted: what the port had stays until a pull says it is gone
	m.DeletePolicy("A")
	if fs, _ := m.Flows([]string{"qos:p1"}); len(fs["qos:p1"]) != 1 {
		t.Errorf("flows while the policy is pulled again: %v", render(fs["qos:p1"]))
	}
	if got := m.Missing(); !reflect.DeepEqual(got, []string{"A"}) {
		t.Errorf("missing %v", got)
	}
	m.PolicyAbsent("A")
	if fs, _ := m.Flows([]string{"qos:p1"}); len(fs["qos:p1"]) != 0 {
		t.Errorf("flows of an absent policy: %v", render(fs["qos:p1"]))
	}
	m.SetPolicy(bwPolicy("A", 3000, "ingress"))
	// the port loses its policy: no flows, no meters of its own
	p1.PolicyID = ""
	m.SetPort(p1)
	fs, _ = m.Flows([]string{"qos:p1"})
	if len(fs["qos:p1"]) != 0 {
		t.Errorf("flows without a policy: %v", render(fs["qos:p1"]))
	}
	meters, _ = m.Meters()
	if len(meters) != 1 || meters[2].Rate != 2000 {
		t.Errorf("meters %v", meters)
	}
	// the port goes: owner returned, no flows
	if got := m.RemovePort("p2"); !reflect.DeepEqual(got, []string{"qos:p2"}) {
		t.Errorf("owners %v", got)
	}
	fs, _ = m.Flows([]string{"qos:p2"})
	if f, ok := fs["qos:p2"]; !ok || len(f) != 0 {
		t.Errorf("removed port's flows %v %v", f, ok)
	}
	if meters, _ = m.Meters(); len(meters) != 0 {
		t.Errorf("meters after every port went %v", meters)
	}
	if m.RemovePort("p2") != nil {
		t.Error("a second removal dirties an owner")
	}
}

func TestManagerErrorsStayOnTheirPort(t *testing.T) {
	m := NewManager(Options{MeterBandwidth: true}, 1, nil)
	a, b := vm(), vm()
	a.ID, b.ID = "a", "b"
	a.PolicyID, b.PolicyID = "A", "A"
	m.SetPort(a)
	m.SetPort(b)
	m.SetPolicy(bwPolicy("A", 1000, "egress"))
	_, errs := m.Flows(m.Owners())
	// one meter id on this switch: one of the two ports cannot be limited and says so
	if len(errs) != 1 || (errs["qos:a"] == nil && errs["qos:b"] == nil) {
		t.Fatalf("errs %v", errs)
	}
	if _, errs := m.Flows([]string{"port:x"}); errs["port:x"] == nil {
		t.Error("a foreign owner accepted")
	}
}

// TestManagerWithoutMeters: on a switch without meters the meter rules are skipped and
// the others (DSCP) still applied, as the reference's support_meter check does.
func TestManagerWithoutMeters(t *testing.T) {
	m := NewManager(Options{MeterBandwidth: true}, 0, nil)
	p := vm()
	m.SetPort(p)
	m.SetPolicy(policy())
	fs, errs := m.Flows([]string{"qos:p1"})
	if len(errs) != 0 {
		t.Fatal(errs)
	}
	got := render(fs["qos:p1"])
	if len(got) != 2 || !strings.Contains(got[0], "ip_dscp") || strings.Contains(strings.Join(got, " "), "meter:") {
		t.Errorf("flows %q", got)
	}
	if meters, _ := m.Meters(); len(meters) != 0 {
		t.Errorf("meters %v", meters)
	}
}
