//go:build integration

package firewall

import (
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/ovsagent/ovsagent/internal/testing/ovsdump"
	"github.com/ovsagent/ovsagent/internal/testing/ovstest"
)

// TestOVSRoundTrip installs the firewall flows of the reference scenario,
// every golden case and the 100x20 benchmark state into a private Open
// vSwitch and checks that dump-flows prints back exactly the lines we
// render: the switch accepts every flow (prerequisites, conjunction
// consistency, masks) and rewrites nothing. It also installs the
// reference's own spelling of the capture and checks it dumps as ours.
func TestOVSRoundTrip(t *testing.T) {
	o := ovstest.Start(t)
	const br = "br-int"
	if err := o.AddBridge(br); err != nil {
		t.Fatal(err)
	}
	states := goldenCases()
	states["reference_scenario"] = scenarioState(t)
	states["bench_100x20"] = benchState(100, 20)
	for name, st := range states {
		t.Run(name, func(t *testing.T) {
			if _, err := o.Ofctl("del-flows", br); err != nil {
				t.Fatal(err)
			}
			ids := AssignConjIDs(ConjIDs{}, NeededConjKeys(st))
			var want []string
			for _, fs := range Compute(st, ids) {
				for _, f := range fs {
					f.Cookie = 0x1234
					want = append(want, f.String())
				}
			}
			sort.Strings(want)
			got := installAndDump(t, o, br, want)
			missing, extra := ovsdump.Diff(want, got)
			for _, l := range missing {
				t.Errorf("rendered but not dumped back: %s", l)
			}
			for _, l := range extra {
				t.Errorf("dumped but not rendered: %s", l)
			}
		})
	}
}

// The reference writes the hw-offload reply action as ofctl text
// "mod_vlan_vid:L,normal"; it must install as the flow we compute.
func TestOVSReferenceSpellingHWOffload(t *testing.T) {
	o := ovstest.Start(t)
	if err := o.AddBridge("br-int"); err != nil {
		t.Fatal(err)
	}
	st := goldenCases()["hw_offload"]
	ids := AssignConjIDs(ConjIDs{}, NeededConjKeys(st))
	var want []string
	for _, f := range PortFlows(st, st.Ports["p1"], ids) {
		if f.Table == TableRulesIngress && f.Priority == 50 && len(f.Match) == 4 {
			want = append(want, f.String())
		}
	}
	sort.Strings(want)
	got := installAndDump(t, o, "br-int", []string{
		"table=82,priority=50,ct_state=+est-rel+rpl,ct_zone=5,ct_mark=0,reg5=7,actions=mod_vlan_vid:5,normal",
		"table=82,priority=50,ct_state=-new-est+rel-inv,ct_zone=5,ct_mark=0,reg5=7,actions=mod_vlan_vid:5,normal",
	})
	if len(want) != 2 || strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("reference spelling installs as\n%s\nwe compute\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func installAndDump(t *testing.T, o *ovstest.OVS, br string, lines []string) []string {
	t.Helper()
	f := filepath.Join(t.TempDir(), "flows.txt")
	var b strings.Builder
	for _, l := range lines {
		b.WriteString(strings.TrimSpace(l))
		b.WriteByte('\n')
	}
	if err := os.WriteFile(f, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := o.Ofctl("add-flows", br, f); err != nil {
		t.Fatalf("add-flows: %v\n%s", err, out)
	}
	out, err := o.Ofctl("dump-flows", br, "--no-stats")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, l := range strings.Split(out, "\n") {
		if strings.TrimSpace(l) == "" || strings.HasPrefix(l, "OFPST_FLOW") {
			continue
		}
		got = append(got, l)
	}
	sort.Strings(got)
	return got
}
