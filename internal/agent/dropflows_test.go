//go:build integration

package agent

import (
	"context"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/ovsagent/ovsagent/internal/testing/ovstest"
)

// firstApplyProbe is the real OpenFlow adapter that dumps each bridge
// (ovs-ofctl) just before the agent's first bundle on it: what the start
// left there for the first sync to build on.
type firstApplyProbe struct {
	*OFBridges
	o     *ovstest.OVS
	mu    sync.Mutex
	first map[string][]string
}

func (p *firstApplyProbe) Apply(ctx context.Context, br string, ch FlowChange) error {
	p.mu.Lock()
	if _, ok := p.first[br]; !ok {
		out, err := p.o.Ofctl("dump-flows", br, "--no-stats")
		if err != nil {
			out = "dump failed: " + err.Error()
		}
		p.first[br] = flowLines(out)
	}
	p.mu.Unlock()
	return p.OFBridges.Apply(ctx, br, ch)
}

func (p *firstApplyProbe) firstSeen(br string) ([]string, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	fs, ok := p.first[br]
	return fs, ok
}

var cookieField = regexp.MustCompile(`cookie=0x[0-9a-f]+, ?`)

func flowLines(out string) []string {
	var fs []string
	for _, l := range strings.Split(out, "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "OFPST") && !strings.HasPrefix(l, "NXST") {
			fs = append(fs, l)
		}
	}
	sort.Strings(fs)
	return fs
}

// withoutCookies is a bridge's flows with the cookies left out (a run's
// cookie is random; the flows are what must match).
func withoutCookies(fs []string) string {
	out := make([]string, len(fs))
	for i, f := range fs {
		out[i] = cookieField.ReplaceAllString(f, "")
	}
	sort.Strings(out)
	return strings.Join(out, "\n")
}

// runAgentOn is runRealAgentTuned (adapters_ovs_test.go) with
// drop_flows_on_start set as asked and the first-apply probe around the
// OpenFlow adapter.
func runAgentOn(t *testing.T, o *ovstest.OVS, srv *fakeServer, drop bool) (*harness, *firstApplyProbe) {
	t.Helper()
	var probe *firstApplyProbe
	h, _ := runRealAgentTuned(t, o, srv, func(_ *OFBridges, opt *Options) { opt.DropFlowsOnStart = drop },
		func(of *OFBridges) Flows {
			probe = &firstApplyProbe{OFBridges: of, o: o, first: map[string][]string{}}
			return probe
		})
	return h, probe
}

// [agent] drop_flows_on_start on a private OVS: an earlier run wired the
// bridges, and a foreign flow was added to each. With the option every
// flow of br-int, br-tun and br-phys is gone before the first bundle (the
// reference's uninstall_flows(cookie=COOKIE_ANY) at setup), and the first
// sync re-installs the full pipeline; without it the earlier flows are
// adopted, still there at the first bundle. Either way the end state is
// the earlier run's flows, the foreign one swept.
func TestDropFlowsOnStart(t *testing.T) {
	bridges := []string{"br-int", "br-tun", "br-phys"}
	for _, drop := range []bool{false, true} {
		name := "adopt"
		if drop {
			name = "drop"
		}
		t.Run(name, func(t *testing.T) {
			o := ovstest.Start(t)
			if err := o.AddBridge("br-phys"); err != nil {
				t.Fatal(err)
			}
			srv := newFakeServer()
			h1, _ := runAgentOn(t, o, srv, false)
			h1.waitFor("first run in sync", h1.inSync)
			h1.stop()
			earlier := map[string][]string{}
			for _, br := range bridges {
				earlier[br] = dumpFlows(t, o, br)
				if len(earlier[br]) == 0 {
					t.Fatalf("%s: the first run installed no flow", br)
				}
				if _, err := o.Ofctl("add-flow", br, "cookie=0xdead,table=0,priority=3,in_port=999,actions=drop"); err != nil {
					t.Fatal(err)
				}
			}

			h2, probe := runAgentOn(t, o, srv, drop)
			h2.waitFor("second run in sync", h2.inSync)
			for _, br := range bridges {
				first, ok := probe.firstSeen(br)
				if !ok {
					t.Fatalf("%s: no bundle in the second run", br)
				}
				if drop {
					if len(first) != 0 {
						t.Errorf("%s held %d flows at the first bundle with drop_flows_on_start, want none:\n%s", br, len(first), strings.Join(first, "\n"))
					}
				} else {
					want := withoutCookies(append(append([]string(nil), earlier[br]...), "priority=3,in_port=999 actions=drop"))
					if got := withoutCookies(first); got != want {
						t.Errorf("%s at the first bundle without drop_flows_on_start:\n got %s\nwant (adopted) %s", br, got, want)
					}
				}
				if got, want := withoutCookies(dumpFlows(t, o, br)), withoutCookies(earlier[br]); got != want {
					t.Errorf("%s in sync after the restart:\n got %s\nwant %s", br, got, want)
				}
			}
		})
	}
}
