package qos

import (
	"context"
	"reflect"
	"testing"

	"github.com/ovsagent/ovsagent/internal/feature"
	"github.com/ovsagent/ovsagent/internal/neutron"
	of "github.com/ovsagent/ovsagent/internal/openflow"
	"github.com/ovsagent/ovsagent/internal/ovsdb"
	"github.com/ovsagent/ovsagent/internal/testing/fakes"
)

func TestFeatureNetworkPolicyAndPhysical(t *testing.T) {
	sw := newFakeSwitch()
	nets := map[string]*neutron.Network{"net1": {ID: "net1", QosPolicyID: "N"}}
	pols := map[string]*neutron.QosPolicy{"N": {ID: "N", Rules: []neutron.QosRule{
		{Type: neutron.RuleMinimumBandwidth, ID: "m", QosPolicyID: "N", Direction: "egress", MinKbps: i64(1000)},
		{Type: neutron.RuleDSCPMarking, ID: "d", QosPolicyID: "N", DSCPMark: 10}}}}
	f := New(Deps{
		Meters: func() (Meters, error) { return sw, nil },
		Rows:   sw,
		Ports: func(_ context.Context, br string) ([]ovsdb.PortInfo, error) {
			return []ovsdb.PortInfo{{Name: "eth1", Type: ""}, {Name: "phy-br-phys", Type: "patch"}}, nil
		},
		Features: func(context.Context) (of.MeterFeatures, error) {
			return of.MeterFeatures{MaxMeter: 10, BandTypes: 1, Capabilities: 1, MaxBands: 1}, nil
		},
		Pull:              func(_ context.Context, id string) (*neutron.QosPolicy, error) { return pols[id], nil },
		Port:              func(id string) *neutron.Port { return &neutron.Port{ID: id} },
		Network:           func(id string) *neutron.Network { return nets[id] },
		MinBandwidthQoSID: "minbw",
	})
	h := &fakes.Host{Bridges: feature.BridgeLayout{Integration: "br-int",
		Physical: map[string]feature.PhysBridge{"physnet1": {Bridge: "br-phys", IntOFPort: 1, PhyOFPort: 2}}}}
	f.Attach(h)
	p := feature.Port{ID: "p1", Name: "tapp1", OFPort: 7, MAC: "fa:16:3e:11:22:33", Wiring: feature.WiredUp, LocalVLAN: 3,
		NetworkID: "net1", PhysicalNetwork: "physnet1", DeviceOwner: "compute:nova"}
	f.PortWired(p)
	if got := h.Take(); !reflect.DeepEqual(got, []string{"qos:p1"}) {
		t.Fatalf("touched %v", got)
	}
	if err := f.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	h.Take()
	owners := f.Owners()
	if !reflect.DeepEqual(owners, []string{"qos", "qos:p1", "qos:physical"}) {
		t.Fatalf("owners %v", owners)
	}
	fs, errs := f.Flows(owners)
	if len(errs) != 0 {
		t.Fatal(errs)
	}
	if n := len(fs["qos:p1"]["br-int"]); n != 3 { // DSCP v4, v6, pkt_mark
		t.Errorf("qos:p1 flows %v", fs["qos:p1"])
	}
	phys := render(fs["qos:physical"]["br-phys"])
	if want := []string{"reset_counts priority=200,pkt_mark=0x7,reg4=0,in_port=2 actions=set_queue:7,load:0x1->NXM_NX_REG4[0],resubmit(,0)"}; !reflect.DeepEqual(phys, want) {
		t.Errorf("physical flows %q", phys)
	}
	if q := sw.qos["minbw"]; len(q.Queues) != 1 {
		t.Errorf("min bw qos %+v", sw.qos)
	}
	// the network's policy goes: the port's flows are recomputed without it
	nets["net1"] = &neutron.Network{ID: "net1"}
	f.ResourceChanged(feature.Resource{Type: neutron.TypeNetwork, ID: "net1", New: nets["net1"]})
	if got := h.Take(); !reflect.DeepEqual(got, []string{"qos:p1"}) {
		t.Errorf("touched %v", got)
	}
	fs, _ = f.Flows([]string{"qos:p1"})
	if len(fs["qos:p1"]["br-int"]) != 0 {
		t.Errorf("flows after the network policy went: %v", fs["qos:p1"])
	}
	// a dead port has no QoS
	nets["net1"] = &neutron.Network{ID: "net1", QosPolicyID: "N"}
	p.Wiring = feature.WiredDead
	f.PortWired(p)
	fs, _ = f.Flows([]string{"qos:p1"})
	if len(fs["qos:p1"]["br-int"]) != 0 {
		t.Errorf("flows of a dead port: %v", fs["qos:p1"])
	}
}
