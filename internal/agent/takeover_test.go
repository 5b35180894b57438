package agent

import (
	"bytes"
	"strings"
	"testing"

	"github.com/ovsagent/ovsagent/internal/openflow"
)

// TestPlanTakeover: on a dataplane another agent built (same flows, its
// cookie, one flow of its own and one learned flow), the plan keeps the
// port's VLAN, re-cookies every flow in place and removes the two others;
// another controller's flow in a table the reference never clears stays.
func TestPlanTakeover(t *testing.T) {
	sw, fl, srv := newFakeSwitch(true), newFakeFlows(), newFakeServer()
	srv.addPort("p1", "net-a", "vxlan", 100, "fa:16:3e:00:00:01")
	h := start(t, sw, fl, srv, testOpts(false))
	sw.snapshot()
	sw.plug("p1", "tap1", "fa:16:3e:00:00:01")
	h.waitFor("in sync", func() bool { return h.inSync() && srv.status("p1") == "ACTIVE" })
	h.stop()

	const theirs = 0xabcdef
	installed := map[string][]openflow.Flow{}
	total := 0
	fl.mu.Lock()
	for br, tab := range fl.tables {
		for _, e := range tab {
			f := e.flow
			f.Cookie = theirs
			installed[br] = append(installed[br], f)
			total++
		}
	}
	fl.mu.Unlock()
	installed["br-int"] = append(installed["br-int"], openflow.Flow{Table: 60, Priority: 7, Cookie: theirs, Match: openflow.Match{openflow.InPort(99)}, Actions: []openflow.Action{openflow.Drop{}}})
	installed["br-tun"] = append(installed["br-tun"], openflow.Flow{Table: 20, Priority: 1, Cookie: theirs, HardTimeout: 300, Match: openflow.Match{openflow.InPort(98)}, Actions: []openflow.Action{openflow.Drop{}}})
	installed["br-int"] = append(installed["br-int"], openflow.Flow{Table: 100, Priority: 7, Cookie: 0x77, Match: openflow.Match{openflow.InPort(97)}, Actions: []openflow.Action{openflow.Drop{}}})

	srv.mu.Lock()
	dev := srv.devices["p1"]
	srv.mu.Unlock()
	sw.mu.Lock()
	vif := *sw.rows["tap1"]
	sw.mu.Unlock()
	plan := PlanTakeover(testOpts(false), TakeoverInputs{Layout: sw.layout, VIFs: []VIF{vif}, Devices: map[string]Device{"p1": dev}, Installed: installed})
	same, modify, add, remove := plan.Totals()
	if same != total || modify != 0 || add != 0 || remove != 2 {
		t.Errorf("plan: same %d (want %d) modify %d add %d remove %d (want 2)", same, total, modify, add, remove)
	}
	if len(plan.Ports) != 1 || plan.Ports[0].NewTag != vif.Tag || plan.Ports[0].Tag != vif.Tag {
		t.Errorf("ports: %+v (tag %d)", plan.Ports, vif.Tag)
	}
	if len(plan.VLANs) != 1 || !plan.VLANs[0].Adopted {
		t.Errorf("VLANs: %+v", plan.VLANs)
	}
	var b bytes.Buffer
	if err := plan.Write(&b); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"KEPT", "adopted from the ports' tags", "REPLACED", "0xabcdef:", "(1 learned)", "add 0, modify 0, remove 2", "tap1"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("plan output lacks %q:\n%s", want, b.String())
		}
	}

	// A port the other agent tagged 7 keeps VLAN 7.
	vif.Tag = 7
	vif.OtherConfig = map[string]string{"net_uuid": "net-a", "segmentation_id": "100", "tag": "7"}
	plan = PlanTakeover(testOpts(false), TakeoverInputs{Layout: sw.layout, VIFs: []VIF{vif}, Devices: map[string]Device{"p1": dev}, Installed: installed})
	if plan.Ports[0].NewTag != 7 || plan.VLANs[0].VLAN != 7 {
		t.Errorf("adopted VLAN: port %+v, VLANs %+v", plan.Ports[0], plan.VLANs)
	}
}
