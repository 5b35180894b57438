package qos

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/ovsagent/ovsagent/internal/neutron"
	of "github.com/ovsagent/ovsagent/internal/openflow"
)

// A restart or takeover finds meters on br-int whose ids the ports' other_config
// names (held). Until a port is planned — its details and its policy known — its
// meter must stay: deleting a meter deletes the flows that use it, and the port's
// limit would be lifted until the plan comes. A held meter goes once its port is
// planned without it, or is removed without ever being planned.
func TestRuntimeKeepsHeldMeters(t *testing.T) {
	sw := newFakeSwitch()
	sw.meters[1] = of.MeterConfig{ID: 1, Flags: of.MeterKbps | of.MeterBurst, Rate: 10000, Burst: 8000}
	sw.meters[2] = of.MeterConfig{ID: 2, Flags: of.MeterPktps, Rate: 3000}
	sw.meters[3] = of.MeterConfig{ID: 3, Flags: of.MeterKbps, Rate: 5000}
	held := map[string]uint32{"bps_p1_egress": 1, "pps_p2_ingress": 2, "bps_p3_egress": 3}
	policies := map[string]*neutron.QosPolicy{"A": {ID: "A", Rules: []neutron.QosRule{
		{Type: neutron.RuleBandwidthLimit, ID: "r1", QosPolicyID: "A", Direction: "egress", MaxKbps: i64(10000), MaxBurstKbps: i64(8000)}}}}
	pullErr := map[string]error{"B": errors.New("server busy")}
	rt := &Runtime{M: NewManager(Options{MeterBandwidth: true}, 100, held), Meters: sw, Rows: sw,
		Pull: func(_ context.Context, id string) (*neutron.QosPolicy, error) { return policies[id], pullErr[id] }}
	ctx := context.Background()
	has := func(what string, ids ...uint32) {
		t.Helper()
		for _, id := range ids {
			if _, ok := sw.meters[id]; !ok {
				t.Errorf("%s: meter %d deleted (calls %v)", what, id, sw.calls)
			}
		}
	}

	// no port known yet (the first batch before the ports' details)
	if _, err := rt.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	has("no port planned yet", 1, 2, 3)

	// p1 planned with the limit it had: its meter is kept, not re-added
	p1 := vm()
	p1.PolicyID = "A"
	rt.M.SetPort(p1)
	// p3's policy cannot be pulled yet: its meter stays
	p3 := Port{ID: "p3", Name: "tapp3", MAC: mac, OFPort: 9, LocalVLAN: 3, DeviceOwner: "compute:nova", PolicyID: "B"}
	rt.M.SetPort(p3)
	sw.calls = nil
	if _, err := rt.Sync(ctx); err == nil {
		t.Fatal("the pull error of B is not returned")
	}
	has("p1 planned, p3's policy pending", 1, 2, 3)
	// ... and so does its meter flow: the agent's sweep, in the same batch, would
	// otherwise delete the flow the earlier run (or the reference) installed
	fs, errs := rt.M.Flows([]string{"qos:p3"})
	if got := render(fs["qos:p3"]); len(errs) != 0 || len(got) != 1 ||
		got[0] != "table=59, priority=100,in_port=9,dl_src=fa:16:3e:11:22:33 actions=meter:3,goto_table:60" {
		t.Errorf("flows of p3 while its policy is pulled: %q %v", got, errs)
	}
	if slices.Contains(sw.calls, "meter add 1") || slices.Contains(sw.calls, "meter delete 1") {
		t.Errorf("p1's meter replaced: %v", sw.calls)
	}
	if got := rt.M.MeterIDs("p1"); got["bps_p1_egress"] != 1 {
		t.Errorf("p1's meter id %v, want the held 1", got)
	}

	// p2 was never planned and goes (unplugged, or wired dead): its meter goes
	rt.M.RemovePort("p2")
	if _, err := rt.Sync(ctx); err == nil {
		t.Fatal("the pull error of B is not returned")
	}
	if _, ok := sw.meters[2]; ok {
		t.Errorf("meter 2 of a port removed before it was planned is left (calls %v)", sw.calls)
	}
	has("p2 removed", 1, 3)

	// p3's policy arrives without a limit: its meter goes
	policies["B"], pullErr["B"] = &neutron.QosPolicy{ID: "B"}, nil
	if _, err := rt.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if _, ok := sw.meters[3]; ok || len(sw.meters) != 1 {
		t.Errorf("meters %v, want p1's only", sw.meters)
	}
	if fs, _ := rt.M.Flows([]string{"qos:p3"}); len(fs["qos:p3"]) != 0 {
		t.Errorf("p3 planned without a limit keeps flows: %q", render(fs["qos:p3"]))
	}
}
