//go:build e2e

package e2e

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestScenarioSegmentationIDChange: a VLAN provider network's
// segmentation id changed through the API (network_update) moves its
// ports' traffic to the new VLAN on the physical bridge, as the reference
// does (_update_network_segmentation_id): frames leave tagged with the new
// id, a host on the new VLAN answers, the old VLAN no longer does.
func TestScenarioSegmentationIDChange(t *testing.T) {
	e := NewEnv(t)
	e.StartAgentAlive(AgentConfig{}, 90*time.Second)
	nw := e.ProviderVLANNetwork("segchg", "physnet1", 170)
	old := nw.SegmentationID
	sn := e.Subnet(nw.ID, "10.250.24.0/24")
	p := e.Port(PortSpec{Name: "segchg-vm", NetworkID: nw.ID, FixedIPs: []FixedIP{{SubnetID: sn.ID, IPAddress: "10.250.24.10"}}})
	vm := e.Plug(PlugSpec{Port: p, MTU: nw.MTU})
	e.WaitStatus(p, "ACTIVE", 90*time.Second)

	sw := e.NewPhysSwitch("br-phys")
	if err := sw.AddHost(e.Ctx, old, "10.250.24.250/24"); err != nil {
		t.Fatal(err)
	}
	if _, err := vm.PingUntil(e.Ctx, "10.250.24.250", 30*time.Second); err != nil {
		t.Fatalf("before the change: VLAN %d host does not answer: %v", old, err)
	}

	// Move the network to a free VLAN id.
	seg := 0
	for cand := old + 1; cand < old+30; cand++ {
		_, err := e.Neutron.UpdateNetwork(e.Ctx, nw.ID, map[string]any{"provider:segmentation_id": cand})
		if ae, ok := err.(*APIError); ok && ae.Status == http.StatusConflict {
			continue
		}
		if err != nil {
			t.Fatalf("update segmentation id: %v", err)
		}
		seg = cand
		break
	}
	if seg == 0 {
		t.Fatal("no free VLAN id to move to")
	}
	changed := time.Now()
	t.Logf("network %s: segmentation id %d -> %d", nw.ID, old, seg)
	if err := sw.AddHost(e.Ctx, seg, "10.250.24.251/24"); err != nil {
		t.Fatal(err)
	}
	var perr error
	frames, err := sw.Capture(e.Ctx, "ether src "+vm.MAC, func() {
		if _, perr = vm.PingUntil(e.Ctx, "10.250.24.251", 60*time.Second); perr == nil {
			_, perr = vm.Ping(e.Ctx, "10.250.24.251", 3)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if perr != nil {
		t.Fatalf("after the change: the host on VLAN %d does not answer: %v", seg, perr)
	}
	t.Logf("host on the new VLAN %d answers %s after the API call", seg, time.Since(changed).Round(time.Millisecond))
	newTag, oldTag := fmt.Sprintf("vlan %d,", seg), fmt.Sprintf("vlan %d,", old)
	n, onNew := 0, 0
	for _, f := range frames {
		if !strings.Contains(f, vm.MAC+" >") {
			continue
		}
		n++
		if strings.Contains(f, newTag) {
			onNew++
		}
	}
	if n == 0 || onNew == 0 {
		t.Errorf("no frame of %s tagged %q on the wire: %q", vm.MAC, newTag, frames)
	}
	// The last frames are on the new VLAN only.
	last := ""
	for _, f := range frames {
		if strings.Contains(f, vm.MAC+" >") {
			last = f
		}
	}
	if strings.Contains(last, oldTag) {
		t.Errorf("frames still leave on the old VLAN %d: %s", old, last)
	}
	st, _ := vm.Ping(e.Ctx, "10.250.24.250", 5)
	if st.Received != 0 {
		t.Errorf("the host on the old VLAN %d still answers: %d/%d", old, st.Received, st.Sent)
	}
	t.Logf("wire: %d frames from %s, %d tagged with the new VLAN", n, vm.MAC, onNew)
}
