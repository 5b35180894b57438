//go:build integration

package ovstest

import (
	"os"
	"strings"
	"testing"
)

func TestStartAddBridgeRestart(t *testing.T) {
	o := Start(t)
	if err := o.AddBridge("br-int"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(o.Mgmt("br-int")); err != nil {
		t.Fatalf("mgmt socket not in private run dir: %v", err)
	}
	if _, err := o.Ofctl("add-flow", "br-int", "table=3,priority=7,actions=drop"); err != nil {
		t.Fatal(err)
	}
	out, err := o.Ofctl("dump-flows", "br-int", "--no-stats")
	if err != nil || !strings.Contains(out, "table=3, priority=7") {
		t.Fatalf("dump: %v %q", err, out)
	}
	if err := o.StopVswitchd(); err != nil {
		t.Fatal(err)
	}
	if err := o.StartVswitchd(); err != nil {
		t.Fatal(err)
	}
	if err := o.AddBridge("br-int"); err != nil {
		t.Fatal(err)
	}
	out, err = o.Ofctl("dump-flows", "br-int", "--no-stats")
	if err != nil || strings.Contains(out, "priority=7") {
		t.Fatalf("flows must be gone after a vswitchd restart: %v %q", err, out)
	}
}
