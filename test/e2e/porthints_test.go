//go:build e2e

package e2e

import (
	"strings"
	"testing"
	"time"
)

// TestPortHintsTxSteering: a port's hints (Port 1.8+, the ml2 port_hints and
// port_hint_ovs_tx_steering extension drivers, which refenv's 2025.1 and 2026.2 servers
// load) reach the VIF's Interface other_config as the reference agent writes them
// (internal/porthints): tx-steering=hash on bind, thread after a live update, the
// column cleared once the hints go. Zed (21.0) has no port hints: the test needs a
// server that has them and skips on Zed only.
func TestPortHintsTxSteering(t *testing.T) {
	e := NewEnv(t)
	if err := e.Neutron.Do(e.Ctx, "GET", "/extensions/port-hint-ovs-tx-steering", nil, nil); err != nil {
		if refRelease() == "zed" && IsNotFound(err) {
			t.Skip("Zed (21.0) has no port hints (2023.2 on); run with OVSAGENT_RELEASE=2025.1 or 2026.2")
		}
		t.Fatalf("the server has no port-hint-ovs-tx-steering extension (refenv's ml2_conf for chroot releases loads it): %v", err)
	}
	e.StartAgentAlive(AgentConfig{}, 60*time.Second)

	nw := e.Network(NetworkSpec{Name: "hints", NetworkType: "vxlan"})
	e.Subnet(nw.ID, "10.250.12.0/24")
	p := e.Port(PortSpec{Name: "vm1", NetworkID: nw.ID})
	hints := func(v any) map[string]any {
		if v == nil {
			return map[string]any{"hints": nil}
		}
		return map[string]any{"hints": map[string]any{"openvswitch": map[string]any{"other_config": map[string]any{"tx-steering": v}}}}
	}
	if _, err := e.Neutron.UpdatePort(e.Ctx, p.ID, hints("hash")); err != nil {
		t.Fatalf("PUT hints (admin-only; refenv's noauth requests are the admin context): %v", err)
	}
	vm := e.Plug(PlugSpec{Port: p, MTU: nw.MTU})
	e.WaitStatus(vm.Port, "ACTIVE", 30*time.Second)

	otherConfig := func() string {
		out, err := e.OVS.Vsctl(e.Ctx, "get", "Interface", vm.Tap, "other_config")
		if err != nil {
			t.Fatalf("ovs-vsctl get Interface %s other_config: %v", vm.Tap, err)
		}
		return strings.TrimSpace(out)
	}
	wait := func(what, want string) {
		t.Helper()
		t0 := time.Now()
		for {
			got := otherConfig()
			if got == want {
				t.Logf("%s: Interface %s other_config %s, %s after", what, vm.Tap, got, time.Since(t0).Round(time.Millisecond))
				return
			}
			if time.Since(t0) > 15*time.Second {
				t.Fatalf("%s: Interface %s other_config %s after 15 s, want %s", what, vm.Tap, got, want)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	wait("bound with tx-steering=hash", `{tx-steering=hash}`)

	if _, err := e.Neutron.UpdatePort(e.Ctx, p.ID, hints("thread")); err != nil {
		t.Fatal(err)
	}
	wait("hints changed live to thread", `{tx-steering=thread}`)

	if _, err := e.Neutron.UpdatePort(e.Ctx, p.ID, hints(nil)); err != nil {
		t.Fatal(err)
	}
	wait("hints removed", `{}`)
	// the port stays wired throughout
	if tag, err := e.OVS.PortTag(e.Ctx, vm.Tap); err != nil || tag < 1 || tag > 4094 {
		t.Errorf("%s: local VLAN tag %d (%v)", vm.Tap, tag, err)
	}
}
