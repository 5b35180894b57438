//go:build integration

package agent

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ovsagent/ovsagent/internal/testing/ovstest"
)

// TestForeignFlowsSurviveReconnect: another controller's flows on our
// bridges are not ours to delete. At start the agent clears, as the
// reference's first-iteration cleanup_stale_flows does, the foreign cookies
// in the reference's own tables only; after an OpenFlow reconnect (a real
// one: ovs-vswitchd drops every connection when a bridge's OpenFlow
// versions change) it deletes only flows carrying an ovs-agent cookie.
func TestForeignFlowsSurviveReconnect(t *testing.T) {
	o := ovstest.Start(t)
	for _, br := range []string{"br-int", "br-phys"} {
		if err := o.AddBridge(br); err != nil {
			t.Fatal(err)
		}
	}
	addFlow := func(br, f string) {
		t.Helper()
		if _, err := o.Ofctl("add-flow", br, f); err != nil {
			t.Fatalf("add-flow %s %s: %v", br, f, err)
		}
	}
	// Before the agent starts: a stale flow in a table the reference cleans
	// (it goes at the first sweep), a foreign one in a table it does not
	// (it stays).
	addFlow("br-int", "cookie=0x99,table=0,priority=3,in_port=999,actions=drop")
	addFlow("br-int", "cookie=0x77,table=100,priority=3,in_port=998,actions=drop")

	srv := newFakeServer()
	srv.addPort("p1", "net-a", "vxlan", 100, "fa:16:3e:00:00:01")
	h, _ := runRealAgent(t, o, srv)
	if _, err := o.Vsctl("add-port", "br-int", "tapf1", "--", "set", "Interface", "tapf1", "type=internal",
		"external_ids:iface-id=p1", "external_ids:attached-mac=fa:16:3e:00:00:01"); err != nil {
		t.Fatal(err)
	}
	h.waitFor("p1 ACTIVE and in sync", func() bool { return srv.status("p1") == "ACTIVE" && h.inSync() })
	intFlows := dumpFlows(t, o, "br-int")
	if count(intFlows, "in_port=999") != 0 {
		t.Errorf("the reference-table stale flow survived the start-up sweep:\n%s", strings.Join(intFlows, "\n"))
	}
	if count(intFlows, "cookie=0x77,") != 1 {
		t.Errorf("the start-up sweep deleted a foreign flow in table 100, which the reference never cleans:\n%s", strings.Join(intFlows, "\n"))
	}

	// In sync: another controller adds flows to the agent's own table 0 on
	// every bridge, and a flow with an ovs-agent cookie of an earlier round
	// (ours, no owner wants it) is there too.
	bridges := []string{"br-int", "br-tun", "br-phys"}
	ourStale := fmt.Sprintf("cookie=%#x", uint64(0xbeef)<<32|ownCookieTag)
	for _, br := range bridges {
		addFlow(br, "cookie=0x1234,table=0,priority=1000,in_port=4242,actions=drop")
		addFlow(br, ourStale+",table=0,priority=7,in_port=4243,actions=drop")
	}
	// A real reconnect of every bridge's OpenFlow connection: toggling
	// OpenFlow11, which nothing uses, changes the allowed versions.
	for _, br := range bridges {
		ps, err := o.Vsctl("get", "Bridge", br, "protocols")
		if err != nil {
			t.Fatal(err)
		}
		op := "add"
		if strings.Contains(ps, "OpenFlow11") {
			op = "remove"
		}
		if _, err := o.Vsctl(op, "Bridge", br, "protocols", "OpenFlow11"); err != nil {
			t.Fatal(err)
		}
	}
	// The re-read after the reconnect deletes our stale flow; what it does
	// with the foreign one is decided in the same bundle.
	deadline := time.Now().Add(10 * time.Second)
	for _, br := range bridges {
		for count(dumpFlows(t, o, br), "in_port=4243") != 0 {
			if time.Now().After(deadline) {
				t.Fatalf("%s: the flow with our earlier cookie was not swept after the reconnect:\n%s", br, strings.Join(dumpFlows(t, o, br), "\n"))
			}
			select {
			case <-h.batches:
			case <-time.After(50 * time.Millisecond): // the re-read runs on the agent's loop; poll the switch
			}
		}
	}
	h.waitFor("in sync after the reconnect", h.inSync)
	for _, br := range bridges {
		fs := dumpFlows(t, o, br)
		if count(fs, "cookie=0x1234,") != 1 {
			t.Errorf("%s: another controller's flow was deleted after the reconnect:\n%s", br, strings.Join(fs, "\n"))
		}
	}
	if fs := dumpFlows(t, o, "br-int"); count(fs, "cookie=0x77,") != 1 || count(fs, "table=23") != 1 {
		t.Errorf("br-int after the reconnect (foreign table-100 flow, canary):\n%s", strings.Join(fs, "\n"))
	}
}
