//go:build integration

package agent

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/ovsagent/ovsagent/internal/ovsdb"
	"github.com/ovsagent/ovsagent/internal/testing/ovstest"
)

// TestReferenceControllerRowsKept: the takeover leaves the reference's
// Controller rows (tcp:127.0.0.1:6633 on each bridge) as they are, and
// must. ovs-vswitchd flushes every flow of a bridge when the bridge goes
// from "has a primary (active) controller" to none or back
// (bridge_configure_remotes): removing the rows would wipe the dataplane
// being taken over, and a reference agent started later adds its row with
// del-controller + set-controller when it is missing — two flushes. Kept,
// the rows are harmless: fail_mode=secure, nobody listens, ovs-vswitchd
// only retries; the reference finds its row and changes nothing when it
// comes back. This test pins both facts on a private OVS.
func TestReferenceControllerRowsKept(t *testing.T) {
	o := ovstest.Start(t)
	for _, br := range []string{"br-int", "br-tun", "br-phys"} {
		if err := o.AddBridge(br); err != nil {
			t.Fatal(err)
		}
		if _, err := o.Vsctl("set-controller", br, "tcp:127.0.0.1:6633"); err != nil {
			t.Fatal(err)
		}
	}
	flow := func(br string) bool {
		out, _ := o.Ofctl("dump-flows", br)
		return strings.Contains(out, "in_port=999")
	}
	addFlow := func(br string) {
		if _, err := o.Ofctl("add-flow", br, "cookie=0x99,table=0,priority=3,in_port=999,actions=drop"); err != nil {
			t.Fatal(err)
		}
	}
	for _, br := range []string{"br-int", "br-tun", "br-phys"} {
		addFlow(br)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := ovsdb.Dial(ctx, o.DB, ovsdb.Options{RunDir: o.Dir, Logger: testLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	sw := NewOVSDBSwitch(ctx, c, SwitchConfig{Integration: "br-int", Tunnel: "br-tun", IntPeerPatch: "patch-tun", TunPeerPatch: "patch-int",
		DatapathType: "netdev", BridgeMappings: map[string]string{"physnet1": "br-phys"}, VXLANUDPPort: 4789}, testLogger())
	if _, err := sw.SetupBridges(ctx); err != nil {
		t.Fatal(err)
	}
	for _, br := range []string{"br-int", "br-tun", "br-phys"} {
		got, _ := o.Vsctl("get-controller", br)
		if strings.TrimSpace(got) != "tcp:127.0.0.1:6633" {
			t.Errorf("%s: controllers %q after SetupBridges, want the reference's row kept", br, got)
		}
		if !flow(br) {
			t.Errorf("%s: flows flushed by SetupBridges", br)
		}
	}

	// Why not remove them: the last primary controller going away flushes
	// the bridge's flows.
	if _, err := o.Vsctl("del-controller", "br-phys"); err != nil {
		t.Fatal(err)
	}
	if flow("br-phys") {
		t.Errorf("ovs-vswitchd kept the flows when the bridge lost its controller; the flush this design avoids is gone")
	}
}
