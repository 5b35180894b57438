//go:build e2e

package e2e

import (
	"strings"
	"testing"
	"time"
)

// TestTwoHostBindingDeactivate: live migration's binding switch, through the
// real API (binding-extended): an inactive binding is created on hv-b and
// activated; neutron-server deactivates hv-a's binding, and hv-a's ovs-agent
// removes the VM's port from its br-int, as the reference's
// process_deactivated_bindings does (it was left dead on VLAN 4095).
func TestTwoHostBindingDeactivate(t *testing.T) {
	e := NewEnv(t)
	th := NewTwoHost(e, twoHostAgentTimeout)
	ha, hb := th.HV[0], th.HV[1]
	nw := e.Network(NetworkSpec{Name: "mig", NetworkType: "vxlan"})
	e.Subnet(nw.ID, "10.251.9.0/24")
	vm := th.VM(ha, nw, "vmig")
	e.WaitStatus(vm.Port, "ACTIVE", twoHostActive)
	onBrInt := func() bool {
		out, err := ha.OVS.Vsctl(e.Ctx, "list-ports", "br-int")
		if err != nil {
			t.Fatal(err)
		}
		return strings.Contains("\n"+out+"\n", "\n"+vm.Tap+"\n")
	}
	if !onBrInt() {
		t.Fatalf("%s: %s not on br-int before the migration", ha.Name, vm.Tap)
	}

	var port struct{ Port map[string]any }
	if err := e.Neutron.Do(e.Ctx, "GET", "/ports/"+vm.Port.ID, nil, &port); err != nil {
		t.Fatal(err)
	}
	// The API (noauth here) wants the port's project with the binding.
	var created struct{ Binding map[string]any }
	body := map[string]any{"binding": map[string]any{"host": hb.Name, "project_id": port.Port["project_id"]}}
	if err := e.Neutron.Do(e.Ctx, "POST", "/ports/"+vm.Port.ID+"/bindings", body, &created); err != nil {
		t.Fatalf("create the binding on %s: %v", hb.Name, err)
	}
	t.Logf("binding on %s: status %v, vif_type %v", hb.Name, created.Binding["status"], created.Binding["vif_type"])
	start := time.Now()
	if err := e.Neutron.Do(e.Ctx, "PUT", "/ports/"+vm.Port.ID+"/bindings/"+hb.Name+"/activate", nil, nil); err != nil {
		t.Fatalf("activate the binding on %s: %v", hb.Name, err)
	}
	deadline := time.Now().Add(60 * time.Second)
	for onBrInt() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: %s still on br-int 60 s after the binding moved to %s (agent log: %s)", ha.Name, vm.Tap, hb.Name, ha.Agent.LogTail(5))
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Logf("%s: %s removed from br-int %s after the binding moved to %s", ha.Name, vm.Tap, time.Since(start).Round(time.Millisecond), hb.Name)
}
