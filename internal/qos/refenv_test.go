package qos

// Golden: what this package decides for a host equals what the 2026.2 reference agent's
// QoS extension (neutron 29.0.0, qos_driver.py) built on its private Open vSwitch for the
// same scenario, captured by refenv/qos_capture.sh into docs/reference/captures-2026.2/qos
// (README there: commands, scenario, agent options). Each capture step is a host state
// plus the server's objects; the test feeds the objects (policies, ports, networks) and
// what the host holds (ofports, local VLANs, the meter ids kept in Port other_config, the
// minimum-bandwidth QoS id, the physical NICs) to the Manager, then compares line for
// line: br-int's flows of the extension's cookie, br-phys's flows of any cookie but the
// bridge's own, the meters, the QoS and Queue rows with the ports holding them, every
// Interface's ingress policing and every Port's meter keys. Cookies are dropped from the
// lines; ids are the capture's (meter ids and the QoS id are taken from it, as at a
// takeover). Any difference not listed in knownQoSDifferences fails the test, and so does
// a listed one that does not occur.

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/ovsagent/ovsagent/internal/neutron"
	"github.com/ovsagent/ovsagent/internal/testing/ovsdump"
)

const refQoSDir = "../../docs/reference/captures-2026.2/qos"

// refQoSCaptures are the capture steps: variant (the reference's [ovs]
// qos_meter_bandwidth) / step (applied, then changed: see the README).
var refQoSCaptures = []string{"meter/applied", "meter/changed", "policing/applied", "policing/changed"}

// knownQoSDifference is a line the reference has and we do not (missing) or we have
// and it does not (extra), with the reason; kind is "br-int", "br-phys", "meters" or "rows".
type knownQoSDifference struct {
	capture, kind, dir, line, reason string
}

// The reference's set_queue_for_minimum_bandwidth adds a br-phys flow per queue and
// nothing ever deletes it (delete_minimum_bandwidth_queue only removes br-int's pkt_mark
// flow and the Queue row): once a port's minimum-bandwidth rule goes, the flow stays
// until the agent restarts, sending marked packets to a queue the QoS no longer has.
// Ours follow the queues: no queue, no flow.
const whyStaleSetQueue = "reference leaks br-phys set_queue flows of removed minimum-bandwidth queues (ovs_lib.delete_minimum_bandwidth_queue never deletes them); ours go with the queue"

// knownQoSDifferences: lines are as compared (cookies dropped, see flowsOfCookie).
var knownQoSDifferences = []knownQoSDifference{
	{"meter/changed", "br-phys", "missing", " reset_counts priority=200,pkt_mark=0x5,reg4=0,in_port=1 actions=set_queue:5,load:0x1->NXM_NX_REG4[0],resubmit(,0)", whyStaleSetQueue},
	{"policing/changed", "br-phys", "missing", " reset_counts priority=200,pkt_mark=0x5,reg4=0,in_port=1 actions=set_queue:5,load:0x1->NXM_NX_REG4[0],resubmit(,0)", whyStaleSetQueue},
}

func readCapture(t *testing.T, dir, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		t.Fatalf("read %s: %v", name, err)
	}
	return string(b)
}

func mapText(m map[string]string) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	b.WriteString("{")
	for i, k := range keys {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s=%s", k, m[k])
	}
	b.WriteString("}")
	return b.String()
}

func ofports(t *testing.T, dir, bridge string) map[string]uint32 {
	return ovsdump.OfctlPorts(readCapture(t, dir, "ovs/ofctl-show-"+bridge+".txt"))
}

// flowsOfCookie returns a dump's lines whose cookie keep accepts, cookie dropped (the
// reference's are random per bridge and per extension), sorted.
func flowsOfCookie(t *testing.T, dir, name string, keep func(cookie string) bool) []string {
	return ovsdump.Lines(readCapture(t, dir, name), func(l string) bool {
		c, ok := ovsdump.Cookie(l)
		return ok && keep(c)
	}, ovsdump.DropCookie)
}

// cookieOf is the cookie of the dump's first line containing marker.
func cookieOf(t *testing.T, dir, name, marker string) string {
	for _, l := range strings.Split(readCapture(t, dir, name), "\n") {
		if strings.Contains(l, marker) {
			if c, ok := ovsdump.Cookie(l); ok {
				return c
			}
		}
	}
	t.Fatalf("%s: no flow with %q", name, marker)
	return ""
}

type apiQoSPort struct {
	ID          string `json:"id"`
	NetworkID   string `json:"network_id"`
	MAC         string `json:"mac_address"`
	DeviceOwner string `json:"device_owner"`
	PolicyID    string `json:"qos_policy_id"`
}

type apiQoSNetwork struct {
	ID       string  `json:"id"`
	Physnet  *string `json:"provider:physical_network"`
	PolicyID string  `json:"qos_policy_id"`
}

// hostCapture is one capture step read back: the server's objects and the host.
type hostCapture struct {
	dir      string
	opts     Options
	policies []*neutron.QosPolicy
	ports    []Port
	held     map[string]uint32 // meter ids in Port other_config
	maxMeter uint32
	minBWID  string   // the reference's _min_bw_qos_id, "" when no such QoS row
	nics     []string // br-phys ports of Interface type "" (get_bridge_ports(''))
	phyPatch uint32   // br-phys's patch port to br-int
}

func loadHostCapture(t *testing.T, dir string) hostCapture {
	t.Helper()
	h := hostCapture{dir: dir, held: map[string]uint32{}}
	ini := readCapture(t, dir, "agent-ini.txt")
	if !regexp.MustCompile(`(?m)^extensions *= *qos$`).MatchString(ini) {
		t.Fatalf("%s: the reference ran without the qos extension", dir)
	}
	h.opts.MeterBandwidth = regexp.MustCompile(`(?mi)^qos_meter_bandwidth *= *true$`).MatchString(ini)

	var pols struct {
		Policies []struct {
			ID    string            `json:"id"`
			Rules []neutron.QosRule `json:"rules"`
		} `json:"policies"`
	}
	if err := json.Unmarshal([]byte(readCapture(t, dir, "api-qos-policies.json")), &pols); err != nil {
		t.Fatal(err)
	}
	for _, p := range pols.Policies {
		pol := &neutron.QosPolicy{ID: p.ID}
		for _, r := range p.Rules {
			if r.QosPolicyID == "" {
				r.QosPolicyID = p.ID
			}
			pol.Rules = append(pol.Rules, r)
		}
		h.policies = append(h.policies, pol)
	}

	var nets struct{ Networks []apiQoSNetwork }
	if err := json.Unmarshal([]byte(readCapture(t, dir, "api-networks.json")), &nets); err != nil {
		t.Fatal(err)
	}
	netByID := map[string]apiQoSNetwork{}
	for _, n := range nets.Networks {
		netByID[n.ID] = n
	}
	tags := map[string]uint16{}
	for _, r := range ovsdump.Records(readCapture(t, dir, "ovs/ovsdb-Port-qos.txt")) {
		if n, err := strconv.Atoi(r["tag"]); err == nil {
			tags[r["name"]] = uint16(n)
		}
		for k, v := range ParseMeterIDs(ovsdump.Map(r["other_config"])) {
			h.held[k] = v
		}
	}
	intPorts := ofports(t, dir, "br-int")
	var ports struct{ Ports []apiQoSPort }
	if err := json.Unmarshal([]byte(readCapture(t, dir, "api-ports.json")), &ports); err != nil {
		t.Fatal(err)
	}
	for _, ap := range ports.Ports {
		name := "tap" + ap.ID[:11]
		ofp, plugged := intPorts[name]
		if !plugged {
			continue // another scenario's port, not on this host
		}
		mac, err := net.ParseMAC(ap.MAC)
		if err != nil {
			t.Fatal(err)
		}
		n := netByID[ap.NetworkID]
		p := Port{ID: ap.ID, Name: name, MAC: mac, OFPort: ofp, LocalVLAN: tags[name], DeviceOwner: ap.DeviceOwner,
			PolicyID: ap.PolicyID, NetworkPolicyID: n.PolicyID}
		if n.Physnet != nil {
			p.PhysicalNetwork = *n.Physnet
		}
		h.ports = append(h.ports, p)
	}
	if len(h.ports) == 0 {
		t.Fatalf("%s: no port of the API on br-int", dir)
	}

	for _, l := range strings.Split(readCapture(t, dir, "ovs/meter-features-br-int.txt"), "\n") {
		if m := regexp.MustCompile(`max_meter:(\d+)`).FindStringSubmatch(l); m != nil {
			n, _ := strconv.Atoi(m[1])
			h.maxMeter = uint32(n)
		}
	}
	for _, r := range ovsdump.Records(readCapture(t, dir, "ovs/ovsdb-QoS.txt")) {
		if ext := ovsdump.Map(r["external_ids"]); ext["_type"] == neutron.RuleMinimumBandwidth {
			h.minBWID = ext["id"]
		}
	}
	types := map[string]string{}
	for _, r := range ovsdump.Records(readCapture(t, dir, "ovs/ovsdb-Interface-qos.txt")) {
		types[r["name"]] = strings.Trim(r["type"], `"`)
	}
	for name, ofp := range ofports(t, dir, "br-phys") {
		switch {
		case name == "phy-br-phys":
			h.phyPatch = ofp
		case types[name] == "":
			h.nics = append(h.nics, name)
		}
	}
	sort.Strings(h.nics)
	return h
}

// decide runs the capture's objects and host state through the Manager, as the agent's
// feature does after a restart or a takeover: meter ids held on the host, every policy
// known, every port wired.
func (h hostCapture) decide(t *testing.T) *Manager {
	m := NewManager(h.opts, h.maxMeter, h.held)
	for _, p := range h.policies {
		m.SetPolicy(p)
	}
	for _, p := range h.ports {
		m.SetPort(p)
	}
	if miss := m.Missing(); len(miss) != 0 {
		t.Fatalf("policies missing: %v", miss)
	}
	return m
}

func (h hostCapture) ourBrInt(t *testing.T, m *Manager) []string {
	flows, errs := m.Flows(m.Owners())
	for o, err := range errs {
		t.Errorf("owner %s: %v", o, err)
	}
	var out []string
	for _, fs := range flows {
		for _, f := range fs {
			out = append(out, f.String())
		}
	}
	sort.Strings(out)
	return out
}

func (h hostCapture) ourBrPhys(m *Manager) []string {
	var nums []uint32
	for _, q := range m.MinBandwidthQueues() {
		nums = append(nums, q.QueueNum)
	}
	var out []string
	if len(nums) > 0 {
		for _, f := range PhysicalFlows([]uint32{h.phyPatch}, nums) {
			out = append(out, f.String())
		}
	}
	sort.Strings(out)
	return out
}

var meterHead = regexp.MustCompile(`^meter=\d+ `)

// refMeters joins dump-meters' two lines per meter into MeterConfig.String's one.
func refMeters(t *testing.T, dir string) []string {
	var out []string
	lines := strings.Split(readCapture(t, dir, "ovs/meters-br-int.txt"), "\n")
	for i := 0; i < len(lines); i++ {
		if meterHead.MatchString(lines[i]) && i+1 < len(lines) {
			out = append(out, lines[i]+lines[i+1])
			i++
		}
	}
	sort.Strings(out)
	return out
}

func ourMeters(t *testing.T, m *Manager) []string {
	ms, err := m.Meters()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, c := range ms {
		out = append(out, c.String())
	}
	sort.Strings(out)
	return out
}

// refRows renders the capture's QoS state: each QoS row with its queues and the ports
// holding it, each Interface's ingress policing (VM ports), each Port's meter keys.
func refRows(t *testing.T, dir string, ports []Port) []string {
	queues := map[string]map[string]string{}
	for _, r := range ovsdump.Records(readCapture(t, dir, "ovs/ovsdb-Queue.txt")) {
		queues[r["_uuid"]] = r
	}
	holders := map[string][]string{}
	meterKeys := map[string]map[string]string{}
	for _, r := range ovsdump.Records(readCapture(t, dir, "ovs/ovsdb-Port-qos.txt")) {
		if q := r["qos"]; q != "[]" && q != "" {
			holders[q] = append(holders[q], r["name"])
		}
		keys := map[string]string{}
		for k, v := range ParseMeterIDs(ovsdump.Map(r["other_config"])) {
			keys[k] = strconv.FormatUint(uint64(v), 10)
		}
		meterKeys[r["name"]] = keys
	}
	var out []string
	for _, r := range ovsdump.Records(readCapture(t, dir, "ovs/ovsdb-QoS.txt")) {
		sort.Strings(holders[r["_uuid"]])
		var qs []string
		for num, uuid := range ovsdump.Map(r["queues"]) {
			q := queues[uuid]
			if q == nil {
				t.Fatalf("QoS %s: queue %s not in the Queue table", r["_uuid"], uuid)
			}
			qs = append(qs, fmt.Sprintf("%s:external_ids=%s,other_config=%s", num, mapText(ovsdump.Map(q["external_ids"])), mapText(ovsdump.Map(q["other_config"]))))
		}
		sort.Strings(qs)
		out = append(out, fmt.Sprintf("QoS type=%s external_ids=%s other_config=%s ports=%v queues=%v",
			r["type"], mapText(ovsdump.Map(r["external_ids"])), mapText(ovsdump.Map(r["other_config"])), holders[r["_uuid"]], qs))
	}
	if n := len(ovsdump.Records(readCapture(t, dir, "ovs/ovsdb-Queue.txt"))); n != countQueues(out) {
		t.Errorf("%d Queue rows, %d in QoS rows: a Queue row no QoS holds", n, countQueues(out))
	}
	policing := map[string][2]string{}
	for _, r := range ovsdump.Records(readCapture(t, dir, "ovs/ovsdb-Interface-qos.txt")) {
		policing[r["name"]] = [2]string{r["ingress_policing_rate"], r["ingress_policing_burst"]}
	}
	for _, p := range ports {
		pol := policing[p.Name]
		out = append(out, fmt.Sprintf("Interface %s ingress_policing_rate=%s ingress_policing_burst=%s", p.Name, pol[0], pol[1]))
		out = append(out, fmt.Sprintf("Port %s meter ids %s", p.Name, mapText(meterKeys[p.Name])))
	}
	sort.Strings(out)
	return out
}

func countQueues(rows []string) int {
	n := 0
	for _, r := range rows {
		if i := strings.Index(r, "queues=["); i >= 0 && !strings.HasSuffix(r, "queues=[]") {
			n += strings.Count(r[i:], "external_ids=")
		}
	}
	return n
}

// ourRows renders the same from the Manager's decisions, written the way Runtime
// writes them (IngressQoSSpec on the port, MinBandwidthQoSSpec on the NICs).
func ourRows(h hostCapture, m *Manager) []string {
	var out []string
	specRow := func(typ string, ext, oc map[string]string, ports []string, queues []string) string {
		sort.Strings(ports)
		sort.Strings(queues)
		return fmt.Sprintf("QoS type=%s external_ids=%s other_config=%s ports=%v queues=%v", typ, mapText(ext), mapText(oc), ports, queues)
	}
	for _, p := range h.ports {
		plan, _ := m.Plan(p.ID)
		rate, burst := int64(0), int64(0)
		if plan.EgressPolicing != nil {
			rate, burst = plan.EgressPolicing.Rate, plan.EgressPolicing.Burst
		}
		out = append(out, fmt.Sprintf("Interface %s ingress_policing_rate=%d ingress_policing_burst=%d", p.Name, rate, burst))
		keys := map[string]string{}
		for k, v := range m.MeterIDs(p.ID) {
			keys[k] = strconv.FormatUint(uint64(v), 10)
		}
		out = append(out, fmt.Sprintf("Port %s meter ids %s", p.Name, mapText(keys)))
		if q := plan.IngressQueue; q != nil {
			s := IngressQoSSpec(p.Name, q)
			var qs []string
			for _, sq := range s.Queues {
				qs = append(qs, fmt.Sprintf("%d:external_ids=%s,other_config=%s", sq.Num, mapText(sq.ExternalIDs), mapText(sq.OtherConfig)))
			}
			out = append(out, specRow(s.Type, s.ExternalIDs, s.OtherConfig, []string{p.Name}, qs))
		}
	}
	if qs := m.MinBandwidthQueues(); len(qs) > 0 {
		s := MinBandwidthQoSSpec(h.minBWID, qs)
		var rows []string
		for _, sq := range s.Queues {
			rows = append(rows, fmt.Sprintf("%d:external_ids=%s,other_config=%s", sq.Num, mapText(sq.ExternalIDs), mapText(sq.OtherConfig)))
		}
		out = append(out, specRow(s.Type, s.ExternalIDs, s.OtherConfig, append([]string(nil), h.nics...), rows))
	}
	sort.Strings(out)
	return out
}

// compareQoS fails on every difference of want (the reference's) and got (ours) that
// knownQoSDifferences does not list for capture and kind; listed ones must occur.
func compareQoS(t *testing.T, capture, kind string, want, got []string) {
	t.Helper()
	missing, extra := ovsdump.Diff(want, got)
	for _, d := range []struct {
		dir   string
		lines []string
	}{{"missing", missing}, {"extra", extra}} {
	next:
		for _, l := range d.lines {
			for _, k := range knownQoSDifferences {
				if k.capture == capture && k.kind == kind && k.dir == d.dir && k.line == l {
					t.Logf("%s %s: expected difference (%s) %q: %s", capture, kind, d.dir, l, k.reason)
					continue next
				}
			}
			if d.dir == "missing" {
				t.Errorf("%s %s: reference has, we do not:\n%s", capture, kind, l)
			} else {
				t.Errorf("%s %s: we have, the reference does not:\n%s", capture, kind, l)
			}
		}
	}
	for _, k := range knownQoSDifferences {
		if k.capture != capture || k.kind != kind {
			continue
		}
		found := false
		for _, l := range map[string][]string{"missing": missing, "extra": extra}[k.dir] {
			found = found || l == k.line
		}
		if !found {
			t.Errorf("%s %s: listed difference (%s) did not occur: %q (%s)", capture, kind, k.dir, k.line, k.reason)
		}
	}
}

func TestRefenvQoS(t *testing.T) {
	for _, c := range refQoSCaptures {
		t.Run(c, func(t *testing.T) {
			dir := filepath.Join(refQoSDir, c)
			h := loadHostCapture(t, dir)
			m := h.decide(t)

			qosCookie := cookieOf(t, dir, "ovs/flows-br-int.nostats.txt", "priority=200,reg3=0 actions=set_queue:0")
			wantInt := flowsOfCookie(t, dir, "ovs/flows-br-int.nostats.txt", func(c string) bool { return c == qosCookie })
			compareQoS(t, c, "br-int", wantInt, h.ourBrInt(t, m))

			physCookie := cookieOf(t, dir, "ovs/flows-br-phys.nostats.txt", "priority=0 actions=NORMAL")
			wantPhys := flowsOfCookie(t, dir, "ovs/flows-br-phys.nostats.txt", func(c string) bool { return c != physCookie })
			compareQoS(t, c, "br-phys", wantPhys, h.ourBrPhys(m))

			compareQoS(t, c, "meters", refMeters(t, dir), ourMeters(t, m))
			wantRows := refRows(t, dir, h.ports)
			compareQoS(t, c, "rows", wantRows, ourRows(h, m))
			t.Logf("%s: %d ports, %d br-int QoS flows, %d br-phys, %d meters, %d OVSDB rows compared (meter_bandwidth=%v)",
				c, len(h.ports), len(wantInt), len(wantPhys), len(refMeters(t, dir)), len(wantRows), h.opts.MeterBandwidth)
			if len(wantInt) == 0 || len(wantRows) == 0 {
				t.Fatal("nothing compared")
			}
		})
	}
}
