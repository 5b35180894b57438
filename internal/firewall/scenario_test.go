package firewall

import (
	"encoding/json"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"

	of "github.com/ovsagent/ovsagent/internal/openflow"
	"github.com/ovsagent/ovsagent/internal/testing/ovsdump"
)

// The reference capture: 4 ports on br-int with the default security group
// plus "ingress tcp 22 from 10.100.0.0/24".
// capturesDir holds the reference capture of the refenv scenario (Zed
// 21.0.0), copied unchanged from the reference environment's record
// (docs/reference/captures) so the golden test needs nothing beside the repository.
func capturesDir() string { return filepath.Join("testdata", "zed") }

func readCapture(t testing.TB, name string) []byte { return readCaptureIn(t, capturesDir(), name) }

func readCaptureIn(t testing.TB, dir, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		t.Fatalf("reference capture missing (needed by the golden test): %v", err)
	}
	return b
}

type ovoRule struct {
	ID                   string  `json:"id"`
	SecurityGroupID      string  `json:"security_group_id"`
	Direction            string  `json:"direction"`
	Ethertype            string  `json:"ethertype"`
	Protocol             *string `json:"protocol"`
	PortRangeMin         *int    `json:"port_range_min"`
	PortRangeMax         *int    `json:"port_range_max"`
	RemoteIPPrefix       *string `json:"remote_ip_prefix"`
	NormalizedCIDR       *string `json:"normalized_cidr"`
	RemoteGroupID        *string `json:"remote_group_id"`
	RemoteAddressGroupID *string `json:"remote_address_group_id"`
}

func (o ovoRule) rule(t testing.TB) Rule {
	d, err := ParseDirection(o.Direction)
	if err != nil {
		t.Fatal(err)
	}
	e, err := ParseEtherType(o.Ethertype)
	if err != nil {
		t.Fatal(err)
	}
	r := Rule{ID: o.ID, Direction: d, EtherType: e, PortRangeMin: o.PortRangeMin, PortRangeMax: o.PortRangeMax}
	if o.Protocol != nil {
		r.Protocol = *o.Protocol
	}
	pfx := o.NormalizedCIDR
	if pfx == nil {
		pfx = o.RemoteIPPrefix
	}
	if pfx != nil {
		r.RemoteIPPrefix = netip.MustParsePrefix(*pfx)
	}
	if o.RemoteGroupID != nil {
		r.RemoteGroupID = *o.RemoteGroupID
	}
	if o.RemoteAddressGroupID != nil {
		r.RemoteAddressGroupID = *o.RemoteAddressGroupID
	}
	return r
}

type pushMsg struct {
	Deliver []struct {
		Msg struct {
			Args struct {
				ResourceList []struct {
					Data json.RawMessage `json:"versioned_object.data"`
				} `json:"resource_list"`
			} `json:"args"`
		} `json:"oslo_message_decoded"`
	} `json:"deliver_example"`
}

// pushData reads the resources of the push message whose file name matches
// pattern (the OVO version in the name differs per release).
func pushData(t testing.TB, dir, pattern string) []json.RawMessage {
	names, err := filepath.Glob(filepath.Join(dir, "messages", pattern))
	if err != nil || len(names) != 1 {
		t.Fatalf("%s: want one message file %s, found %v (%v)", dir, pattern, names, err)
	}
	name := filepath.Base(names[0])
	var m pushMsg
	if err := json.Unmarshal(readCaptureIn(t, dir, "messages/"+name), &m); err != nil {
		t.Fatal(err)
	}
	var out []json.RawMessage
	for _, d := range m.Deliver {
		for _, r := range d.Msg.Args.ResourceList {
			out = append(out, r.Data)
		}
	}
	if len(out) == 0 {
		t.Fatalf("%s: no resources", name)
	}
	return out
}

// scenarioGroup is the scenario's security group: from the API's
// api-security-group.json when the capture has it (2026.2), else from the
// SecurityGroup push plus the SecurityGroupRule push (Zed).
func scenarioGroup(t testing.TB, dir string) SecurityGroup {
	if b, err := os.ReadFile(filepath.Join(dir, "api-security-group.json")); err == nil {
		var api struct {
			SG struct {
				ID       string    `json:"id"`
				Stateful *bool     `json:"stateful"`
				Rules    []ovoRule `json:"security_group_rules"`
			} `json:"security_group"`
		}
		if err := json.Unmarshal(b, &api); err != nil {
			t.Fatal(err)
		}
		g := SecurityGroup{ID: api.SG.ID, Stateless: api.SG.Stateful != nil && !*api.SG.Stateful}
		for _, r := range api.SG.Rules {
			g.Rules = append(g.Rules, r.rule(t))
		}
		if g.ID == "" || len(g.Rules) == 0 {
			t.Fatalf("%s: api-security-group.json has no group or no rules", dir)
		}
		return g
	}
	var sg struct {
		ID       string `json:"id"`
		Stateful *bool  `json:"stateful"`
		Rules    []struct {
			Data ovoRule `json:"versioned_object.data"`
		} `json:"rules"`
	}
	if err := json.Unmarshal(pushData(t, dir, "neutron-vo-SecurityGroup-*_fanout__push__updated.json")[0], &sg); err != nil {
		t.Fatal(err)
	}
	g := SecurityGroup{ID: sg.ID, Stateless: sg.Stateful != nil && !*sg.Stateful}
	for _, r := range sg.Rules {
		g.Rules = append(g.Rules, r.Data.rule(t))
	}
	for _, raw := range pushData(t, dir, "neutron-vo-SecurityGroupRule-*_fanout__push__updated.json") {
		var o ovoRule
		if err := json.Unmarshal(raw, &o); err != nil {
			t.Fatal(err)
		}
		if o.SecurityGroupID == g.ID {
			g.Rules = append(g.Rules, o.rule(t))
		}
	}
	return g
}

// scenarioState builds the firewall input of the capture: ports from the API
// dump, ofports from ofctl show, local VLANs from the Port tags, the default
// group from the SecurityGroup push plus the tcp/22 rule from the
// SecurityGroupRule push, members = every port of the group.
func scenarioState(t testing.TB) *State { return scenarioStateIn(t, capturesDir()) }

func scenarioStateIn(t testing.TB, dir string) *State {
	t.Helper()
	readCapture := func(t testing.TB, name string) []byte { return readCaptureIn(t, dir, name) }
	var api struct {
		Ports []struct {
			ID       string `json:"id"`
			MAC      string `json:"mac_address"`
			FixedIPs []struct {
				IP string `json:"ip_address"`
			} `json:"fixed_ips"`
			AAP []struct {
				IP  string `json:"ip_address"`
				MAC string `json:"mac_address"`
			} `json:"allowed_address_pairs"`
			SGs          []string `json:"security_groups"`
			PortSecurity bool     `json:"port_security_enabled"`
		} `json:"ports"`
	}
	if err := json.Unmarshal(readCapture(t, "api-ports.json"), &api); err != nil {
		t.Fatal(err)
	}
	ofports := ovsdump.OfctlPorts(string(readCapture(t, "ovs/ofctl-show-br-int.txt")))
	tags := map[string]uint16{}
	for _, r := range ovsdump.Records(string(readCapture(t, "ovs/ovsdb-Port.txt"))) {
		if n, err := strconv.Atoi(r["tag"]); err == nil {
			tags[r["name"]] = uint16(n)
		}
	}

	g := scenarioGroup(t, dir)
	st := &State{Ports: map[string]Port{}, Groups: map[string]SecurityGroup{g.ID: g}, Members: map[string][]Member{}}
	for _, ap := range api.Ports {
		tap := "tap" + ap.ID[:11]
		ofport, ok := ofports[tap]
		if !ok {
			t.Fatalf("no ofport for %s", tap)
		}
		mac, err := net.ParseMAC(ap.MAC)
		if err != nil {
			t.Fatal(err)
		}
		p := Port{ID: ap.ID, OFPort: ofport, VLAN: tags[tap], MAC: mac, PortSecurity: ap.PortSecurity, SecurityGroupIDs: ap.SGs}
		for _, f := range ap.FixedIPs {
			a := netip.MustParseAddr(f.IP)
			p.FixedIPs = append(p.FixedIPs, a)
			for _, sgid := range ap.SGs {
				st.Members[sgid] = append(st.Members[sgid], Member{IP: hostPrefix(a), MAC: mac})
			}
		}
		for _, aap := range ap.AAP {
			m, _ := net.ParseMAC(aap.MAC)
			pfx, err := netip.ParsePrefix(aap.IP)
			if err != nil {
				pfx = hostPrefix(netip.MustParseAddr(aap.IP))
			}
			p.AllowedAddressPairs = append(p.AllowedAddressPairs, AddressPair{MAC: m, IP: pfx})
		}
		st.Ports[p.ID] = p
	}
	return st
}

// normaliseLine drops the cookie (random per agent run; the reference also
// leaves temporary cookies behind on some conjunction flows).
func normaliseLine(s string) string {
	return strings.TrimSpace(ovsdump.DropCookie(s))
}

func referenceFirewallLines(t testing.TB, dir string) []string {
	return ovsdump.Lines(string(readCaptureIn(t, dir, "ovs/flows-br-int.nostats.txt")), func(l string) bool {
		n, ok := ovsdump.Table(l)
		return ok && isFirewallTable(n)
	}, normaliseLine)
}

func isFirewallTable(t uint8) bool {
	for _, x := range Tables {
		if x == t {
			return true
		}
	}
	return false
}

func renderAll(owners map[string][]of.Flow) []string {
	var out []string
	for _, fs := range owners {
		for _, f := range fs {
			out = append(out, normaliseLine(f.String()))
		}
	}
	sort.Strings(out)
	return out
}

// releaseDifference is a line by which a capture of an older release
// differs from our (2026.2) flows, with the reason.
type releaseDifference struct {
	line, reason string
}

const whyRARP = "table 71 passes RARP from the port's MACs (neutron 24.0.0/2024.1): live-migration announcements"

// referenceCaptures are the captures TestGoldenReferenceScenario compares
// with: directory, number of firewall lines, and the lines we add (extra) or
// lack (missing) on purpose because the release is older than 2026.2.
var referenceCaptures = []struct {
	release, dir   string
	lines          int
	extra, missing []releaseDifference
}{
	// The 2026.2 scenario has the default group only (no tcp/22 rule).
	{release: "2026.2", dir: filepath.Join("testdata", "2026.2"), lines: 248},
	{release: "zed", dir: filepath.Join("testdata", "zed"), lines: 252, extra: []releaseDifference{
		{"table=71, priority=95,rarp,reg5=0x3,in_port=3,dl_src=fa:16:3e:18:c9:a5 actions=resubmit(,94)", whyRARP},
		{"table=71, priority=95,rarp,reg5=0x4,in_port=4,dl_src=fa:16:3e:75:9e:b0 actions=resubmit(,94)", whyRARP},
		{"table=71, priority=95,rarp,reg5=0x5,in_port=5,dl_src=fa:16:3e:fa:95:0c actions=resubmit(,94)", whyRARP},
		{"table=71, priority=95,rarp,reg5=0x6,in_port=6,dl_src=fa:16:3e:e0:73:4d actions=resubmit(,94)", whyRARP},
	}},
}

// expectDifferences removes the listed differences from lines, failing on a
// listed one that is absent.
func expectDifferences(t *testing.T, kind string, lines []string, known []releaseDifference) []string {
	t.Helper()
	used := make([]bool, len(known))
	var out []string
next:
	for _, l := range lines {
		for i, k := range known {
			if !used[i] && k.line == l {
				used[i] = true
				t.Logf("expected difference (%s) %s: %s", kind, l, k.reason)
				continue next
			}
		}
		out = append(out, l)
	}
	for i, k := range known {
		if !used[i] {
			t.Errorf("listed difference (%s) did not occur: %s (%s)", kind, k.line, k.reason)
		}
	}
	return out
}

// TestGoldenReferenceScenario compares tables 71-94 line for line with the
// reference agent's dumps: our flows are 2026.2's, so an older capture
// differs by exactly its listed release differences. Remaining differences,
// none of them visible in this scenario's lines:
//   - cookies are normalised: the reference's are random per run, and it
//     leaves the temporary cookie of a port re-filter on some conjunction
//     address flows (three such lines in the Zed capture);
//   - the 72/82 "+inv+trk" drop is owned by fw:base, so it also exists with
//     no port (the reference adds it per port; same match, one entry);
//   - conjunction ids are keyed per (remote, direction, ethertype), not also
//     per referencing group; ids here are 16 and 24 as in the reference;
//   - a MAC claimed by several ports of a network gets one table-73 entry
//     (the reference: last writer wins).
func TestGoldenReferenceScenario(t *testing.T) {
	for _, c := range referenceCaptures {
		t.Run(c.release, func(t *testing.T) {
			st := scenarioStateIn(t, c.dir)
			ids := AssignConjIDs(ConjIDs{}, NeededConjKeys(st))
			got := renderAll(Compute(st, ids))
			want := referenceFirewallLines(t, c.dir)
			if len(want) != c.lines {
				t.Fatalf("reference has %d firewall lines, expected %d", len(want), c.lines)
			}
			missing, extra := ovsdump.Diff(want, got)
			missing = expectDifferences(t, "missing", missing, c.missing)
			extra = expectDifferences(t, "extra", extra, c.extra)
			for _, l := range missing {
				t.Errorf("missing: %s", l)
			}
			for _, l := range extra {
				t.Errorf("extra:   %s", l)
			}
			t.Logf("firewall flows: ours %d, reference %d", len(got), len(want))
		})
	}
}
