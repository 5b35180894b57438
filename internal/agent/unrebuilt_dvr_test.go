package agent

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	of "github.com/ovsagent/ovsagent/internal/openflow"
)

var dumpTablePrio = regexp.MustCompile(`^ cookie=0x[0-9a-f]+, (?:table=(\d+), )?[^ ]*?priority=(\d+)`)

// captureTablePrio reads the table and priority of each line of an `ovs-ofctl dump-flows`
// capture: all UnrebuiltState looks at for DVR.
func captureTablePrio(t *testing.T, path string) []of.Flow {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []of.Flow
	for _, l := range strings.Split(string(b), "\n") {
		m := dumpTablePrio.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		tb, _ := strconv.Atoi(m[1])
		p, _ := strconv.Atoi(m[2])
		out = append(out, of.Flow{Table: uint8(tb), Priority: uint16(p)})
	}
	if len(out) == 0 {
		t.Fatalf("%s: no flow read", path)
	}
	return out
}

// The 2026.2 reference agent's real DVR state (refenv/dvr.sh, the three-host capture that
// internal/dvr is golden-tested against) is refused while ovs-agent runs without
// enable_distributed_routing (no dvr feature registered): the network node without VMs as
// well as the computes, on every bridge. (With DVR, internal/dvr's Unrebuilt decides.)
func TestUnrebuiltRefusesReferenceDVRHosts(t *testing.T) {
	l := BridgeLayout{Integration: "br-int", Tunnel: "br-tun", Physical: map[string]PhysBridge{"physnet1": {Bridge: "br-phys"}}}
	dir := filepath.Join("..", "dvr", "testdata", "2026.2-three-hosts")
	for _, hv := range []string{"hv1", "hv2", "hv3"} {
		h := HostState{Layout: l, Bridges: []string{"br-int", "br-tun", "br-phys"}, Flows: map[string][]of.Flow{}}
		for _, br := range h.Bridges {
			h.Flows[br] = captureTablePrio(t, filepath.Join(dir, hv, "flows-"+br+".nostats.txt"))
		}
		got := UnrebuiltState(h)
		if len(got) != 1 {
			t.Fatalf("%s: %q, want one reason (DVR)", hv, got)
		}
		for _, want := range []string{"DVR flows (", "on br-int tables 1,2,3,4", "on br-tun tables 1,9", "on br-phys tables 1,2,3", "enable_distributed_routing is off"} {
			if !strings.Contains(got[0], want) {
				t.Errorf("%s: %q lacks %q", hv, got[0], want)
			}
		}
		t.Logf("%s: %s", hv, got[0])
	}
}
