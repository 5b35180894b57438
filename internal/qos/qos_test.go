package qos

import (
	"net"
	"reflect"
	"strings"
	"testing"

	"github.com/ovsagent/ovsagent/internal/neutron"
	of "github.com/ovsagent/ovsagent/internal/openflow"
)

func i64(v int64) *int64 { return &v }

const pid = "5f1c7e3a-6b7e-4d2b-9a55-0d7c0c1e9a01"

var mac, _ = net.ParseMAC("fa:16:3e:11:22:33")

func vm() Port {
	return Port{ID: "p1", Name: "tapp1", MAC: mac, OFPort: 7, LocalVLAN: 3, DeviceOwner: "compute:nova", PolicyID: pid}
}

// policy is the golden policy of internal/neutron/testdata/qos (every rule class).
func policy() *neutron.QosPolicy {
	return &neutron.QosPolicy{ID: pid, Rules: []neutron.QosRule{
		{Type: neutron.RuleBandwidthLimit, ID: "r1", QosPolicyID: pid, Direction: "egress", MaxKbps: i64(10000), MaxBurstKbps: i64(8000)},
		{Type: neutron.RuleBandwidthLimit, ID: "r2", QosPolicyID: pid, Direction: "ingress", MaxKbps: i64(20000)},
		{Type: neutron.RuleDSCPMarking, ID: "r3", QosPolicyID: pid, DSCPMark: 26},
		{Type: neutron.RuleMinimumBandwidth, ID: "r4", QosPolicyID: pid, Direction: "egress", MinKbps: i64(1000)},
		{Type: neutron.RulePacketRateLimit, ID: "r5", QosPolicyID: pid, Direction: "egress", MaxKpps: i64(2), MaxBurstKpps: i64(1)},
		{Type: neutron.RuleMinimumPacketRate, ID: "r6", QosPolicyID: pid, Direction: "any", MinKpps: 5},
	}}
}

func render(fs []of.Flow) []string {
	var out []string
	for _, f := range fs {
		out = append(out, strings.TrimSpace(f.String()))
	}
	return out
}

// TestMeterModeGolden: [ovs] qos_meter_bandwidth = true. The expected values are the
// reference's (qos_driver.py _update_meter_rate_limit, br_int.py create_meter /
// apply_meter_to_port / install_dscp_marking_rule, ovs_lib minimum bandwidth), written
// out as ovs-ofctl prints them.
func TestMeterModeGolden(t *testing.T) {
	p := vm()
	p.PhysicalNetwork = "physnet1"
	plan, err := Decide(p, policy(), Options{MeterBandwidth: true})
	if err != nil {
		t.Fatal(err)
	}
	wantMeters := []MeterSpec{
		// max_kbps / max_burst_kbps as they are: kbps meter with burst
		{Key: "bps_p1_egress", Kind: KindBPS, Direction: "egress", Rate: 10000, Burst: 8000},
		// burst unset: 0, no OFPMF_BURST (meters get no 80 % default)
		{Key: "bps_p1_ingress", Kind: KindBPS, Direction: "ingress", Rate: 20000},
		// max_kpps * 1000, max_burst_kpps * 1000
		{Key: "pps_p1_egress", Kind: KindPPS, Direction: "egress", Rate: 2000, Burst: 1000},
	}
	if !reflect.DeepEqual(plan.Meters, wantMeters) {
		t.Errorf("meters %+v\nwant %+v", plan.Meters, wantMeters)
	}
	if plan.EgressPolicing != nil || plan.IngressQueue != nil {
		t.Errorf("meter mode also polices: %+v %+v", plan.EgressPolicing, plan.IngressQueue)
	}
	ids, err := AssignMeterIDs([]string{"bps_p1_egress", "bps_p1_ingress", "pps_p1_egress"}, nil, 262144)
	if err != nil {
		t.Fatal(err)
	}
	got := render(Flows(p, plan, ids))
	want := []string{
		"table=59, priority=100,in_port=7,dl_src=fa:16:3e:11:22:33 actions=meter:1,goto_table:60",
		"table=59, priority=100,dl_vlan=3,dl_dst=fa:16:3e:11:22:33 actions=meter:2,goto_table:60",
		"table=58, priority=100,in_port=7,dl_src=fa:16:3e:11:22:33 actions=meter:3,goto_table:59",
		"priority=65535,ip,reg2=0,in_port=7 actions=set_field:0x1->reg2,set_field:26->ip_dscp,resubmit:7",
		"priority=65535,ipv6,reg2=0,in_port=7 actions=set_field:0x1->reg2,set_field:26->ip_dscp,resubmit:7",
		"reset_counts priority=200,reg4=0,in_port=7 actions=load:0x7->NXM_NX_PKT_MARK[],load:0x1->NXM_NX_REG4[0],resubmit(,0)",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("flows\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	var cfgs []string
	for _, m := range plan.Meters {
		cfgs = append(cfgs, m.Config(ids[m.Key]).String())
	}
	wantCfg := []string{
		"meter=1 kbps burst bands=type=drop rate=10000 burst_size=8000",
		"meter=2 kbps bands=type=drop rate=20000",
		"meter=3 pktps burst bands=type=drop rate=2000 burst_size=1000",
	}
	if !reflect.DeepEqual(cfgs, wantCfg) {
		t.Errorf("meters %q\nwant %q", cfgs, wantCfg)
	}
	wantQ := &Queue{Type: "minimum_bandwidth", Port: "p1", QueueNum: 7,
		OtherConfig: map[string]string{"min-rate": "1000000", "max-rate": "34359738367"}}
	if !reflect.DeepEqual(plan.MinBandwidthQueue, wantQ) {
		t.Errorf("min bw queue %+v", plan.MinBandwidthQueue)
	}
	if !reflect.DeepEqual(plan.PlacementOnly, []string{"minimum_packet_rate/any"}) {
		t.Errorf("placement only %v", plan.PlacementOnly)
	}
}

// TestDefaultModeGolden: qos_meter_bandwidth = false (the default): egress limit by
// ingress policing (burst 80 % of the rate when unset), ingress limit by a linux-htb
// queue 0 in bit/s; packet rate still by meters.
func TestDefaultModeGolden(t *testing.T) {
	pol := policy()
	pol.Rules[0].MaxBurstKbps = nil
	pol.Rules[1].MaxBurstKbps = i64(300)
	plan, err := Decide(vm(), pol, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if want := (&Policing{Rate: 10000, Burst: 8000}); !reflect.DeepEqual(plan.EgressPolicing, want) {
		t.Errorf("policing %+v", plan.EgressPolicing)
	}
	wantQ := &Queue{Type: "bandwidth_limit", Port: "tapp1", QueueNum: 0,
		OtherConfig: map[string]string{"max-rate": "20000000", "burst": "300000"}}
	if !reflect.DeepEqual(plan.IngressQueue, wantQ) {
		t.Errorf("ingress queue %+v", plan.IngressQueue)
	}
	if got := wantQ.ExternalIDs(); !reflect.DeepEqual(got, map[string]string{"port": "tapp1", "type": "bandwidth_limit", "queue-num": "0"}) {
		t.Errorf("queue external_ids %v", got)
	}
	if got := QoSFor("bandwidth_limit", "tapp1"); got.Type != "linux-htb" || got.ExternalIDs["id"] != "tapp1" ||
		got.ExternalIDs["_type"] != "bandwidth_limit" || got.OtherConfig["max-rate"] != "34359738367" {
		t.Errorf("qos row %+v", got)
	}
	if len(plan.Meters) != 1 || plan.Meters[0].Key != "pps_p1_egress" {
		t.Errorf("meters %+v", plan.Meters)
	}
	// no physical network: the minimum-bandwidth rule has no queue
	if plan.MinBandwidthQueue != nil {
		t.Errorf("min bw queue without physnet: %+v", plan.MinBandwidthQueue)
	}
	base := render(BaseFlows())
	if want := "reset_counts priority=200,reg3=0 actions=set_queue:0,load:0x1->NXM_NX_REG3[0],resubmit(,0)"; len(base) != 1 || base[0] != want {
		t.Errorf("base flows %q", base)
	}
	phys := render(PhysicalFlows([]uint32{2}, []uint32{7}))
	if want := "reset_counts priority=200,pkt_mark=0x7,reg4=0,in_port=2 actions=set_queue:7,load:0x1->NXM_NX_REG4[0],resubmit(,0)"; len(phys) != 1 || phys[0] != want {
		t.Errorf("physical flows %q", phys)
	}
}

// TestApplies is should_apply_to_port.
func TestApplies(t *testing.T) {
	netPol := "net-pol"
	r := neutron.QosRule{QosPolicyID: netPol}
	for _, c := range []struct {
		owner, portPol string
		want           bool
	}{
		{"compute:nova", "", true},
		{"compute:nova", "other", false},
		{"network:router_interface", "", false},
		{"network:dhcp", "", false},
		{"network:router_gateway", "", true},
		{"network:floatingip_agent_gateway", "", true},
		{"neutron:LOADBALANCERV2", "", false},
		{"network:dhcp", netPol, true},
	} {
		p := Port{DeviceOwner: c.owner, PolicyID: c.portPol, NetworkPolicyID: netPol}
		if got := Applies(r, p); got != c.want {
			t.Errorf("owner %q port policy %q: %v", c.owner, c.portPol, got)
		}
	}
	p := vm()
	p.PolicyID, p.NetworkPolicyID = "", "n"
	if p.PolicyIDToApply() != "n" {
		t.Error("network policy not used")
	}
	plan, _ := Decide(Port{DeviceOwner: "network:dhcp", NetworkPolicyID: pid, OFPort: 1, MAC: mac}, policy(), Options{})
	if plan.DSCP != -1 || len(plan.Meters) != 0 {
		t.Errorf("network policy applied to a dhcp port: %+v", plan)
	}
}

func TestFlowsNeedWiring(t *testing.T) {
	p := vm()
	p.OFPort, p.LocalVLAN = 0, 0
	plan, _ := Decide(p, policy(), Options{MeterBandwidth: true})
	ids, _ := AssignMeterIDs([]string{"bps_p1_egress", "bps_p1_ingress", "pps_p1_egress"}, nil, 10)
	if fs := Flows(p, plan, ids); len(fs) != 0 {
		t.Errorf("flows for an unwired port: %v", render(fs))
	}
	if fs := Flows(vm(), plan, nil); len(fs) != 2 { // the two DSCP flows; meters without ids get none
		t.Errorf("flows without meter ids: %v", render(fs))
	}
}

func TestAssignMeterIDs(t *testing.T) {
	held := map[string]uint32{"bps_a_egress": 1, "pps_b_ingress": 3, "bps_c_egress": 99}
	got, err := AssignMeterIDs([]string{"bps_a_egress", "bps_x_egress", "bps_c_egress"}, held, 4)
	if err != nil {
		t.Fatal(err)
	}
	// kept 1; 99 is beyond max_meter and reassigned; new keys take 2 and 4 (3 is held)
	want := map[string]uint32{"bps_a_egress": 1, "bps_c_egress": 2, "bps_x_egress": 4}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %v want %v", got, want)
	}
	if _, err := AssignMeterIDs([]string{"bps_a_egress", "bps_c_egress", "bps_x_egress", "pps_x_ingress"}, held, 4); err == nil {
		t.Error("ran out of ids without an error")
	}
	ids := ParseMeterIDs(map[string]string{"bps_p1_egress": "17", "tag": "3", "pps_p1_ingress": "x", "net_uuid": "n", "pps_p1_egress": "0"})
	if !reflect.DeepEqual(ids, map[string]uint32{"bps_p1_egress": 17}) {
		t.Errorf("parsed %v", ids)
	}
}

func TestDecideRejectsMeterOverflow(t *testing.T) {
	pol := &neutron.QosPolicy{ID: pid, Rules: []neutron.QosRule{
		{Type: neutron.RulePacketRateLimit, ID: "r", QosPolicyID: pid, Direction: "egress", MaxKpps: i64(5_000_000)}}}
	if _, err := Decide(vm(), pol, Options{}); err == nil {
		t.Error("5e9 pps accepted into a 32-bit meter")
	}
}
