package agent

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/ovsagent/ovsagent/internal/feature"
	"github.com/ovsagent/ovsagent/internal/firewall"
	"github.com/ovsagent/ovsagent/internal/openflow"
	"github.com/ovsagent/ovsagent/internal/pipeline"
)

// TakeoverInputs is what `ovs-agent takeover --dry-run` reads, without
// changing anything: the bridges and VM ports as OVSDB holds them (built
// by the reference agent or an earlier ovs-agent), the server's view of
// those ports and their security groups, and every installed flow.
type TakeoverInputs struct {
	Layout      BridgeLayout
	VIFs        []VIF
	Tunnels     []TunnelPort
	Devices     map[string]Device // by port id; a missing port is unbound here
	Groups      map[string]firewall.SecurityGroup
	Members     map[string][]firewall.Member
	Installed   map[string][]openflow.Flow // bridge -> dumped flows
	Controllers map[string][]string        // bridge -> Controller targets
	Managers    []string                   // Open_vSwitch manager_options targets
	// Features are the extensions the agent would run (agent.Deps.Features):
	// their flows are part of the plan.
	Features []feature.Feature
}

// TakeoverPlan is what the agent would do at start on this dataplane.
type TakeoverPlan struct {
	Ports       []PortPlan
	VLANs       []VLANPlan
	Tunnels     []TunnelPort
	Bridges     []BridgePlan
	Controllers map[string][]string
	Managers    []string
	Messages    []string // VLAN adoption conflicts
}

// PortPlan is one VM port: what it carries now and what it would carry.
type PortPlan struct {
	Name, PortID string
	OFPort       int32
	Tag          int // now (-1: none)
	NetUUID      string
	NewTag       int // after the takeover
	Wiring       string
}

// VLANPlan is one network's local VLAN.
type VLANPlan struct {
	Network  string
	VLAN     uint16
	Adopted  bool // the VLAN its ports already carry
	Ports    int
	NetType  string
	Physnet  string
	SegValue string
}

// BridgePlan is one bridge's flow replacement, table by table.
type BridgePlan struct {
	Name   string
	Tables []TablePlan
}

// TablePlan counts, for one table: the flows installed now by cookie, the
// flows ovs-agent computes, and how the one bundle gets from one to the
// other (same entry with only the cookie changed, entry modified, added,
// removed; learned flows are removed and learned again by traffic).
type TablePlan struct {
	Table     uint8
	Installed map[uint64]int // cookie -> flows
	Ours      int
	Same      int // same table/priority/match and actions: re-cookied in place
	Modify    int // same entry, other actions/flags/timeouts: replaced in place
	Add       int
	Remove    int
	Learned   int // of Remove: flows a learn action installed (hard_timeout)
}

// Totals sums the bridge plans.
func (p *TakeoverPlan) Totals() (same, modify, add, remove int) {
	for _, b := range p.Bridges {
		for _, t := range b.Tables {
			same += t.Same
			modify += t.Modify
			add += t.Add
			remove += t.Remove
		}
	}
	return
}

// PlanTakeover computes, as the agent would at start, the local VLANs,
// port tags and the complete flow set for the inputs, and compares that
// with what is installed. l2pop FDB entries only arrive from the server
// once the agent runs: br-tun flows toward other hosts show as removed
// here, and are re-installed from the FDB before the agent sweeps.
func PlanTakeover(opt Options, in TakeoverInputs) *TakeoverPlan {
	a := New(opt, Deps{Log: slog.New(slog.DiscardHandler), Features: in.Features})
	a.applyLayout(in.Layout)
	// Any cookie but 0: the learn action then names one, as installed ones do.
	a.ps.Int.Cookie = 1
	if a.ps.Tun != nil {
		a.ps.Tun.Cookie = 1
	}
	for _, pb := range a.ps.Phys {
		pb.Cookie = 1
	}
	var msgs []string
	a.log = slog.New(&msgHandler{out: &msgs})
	a.adopt(in.VIFs)
	a.overlay.AdoptPorts(in.Tunnels)
	vifs := append([]VIF(nil), in.VIFs...)
	sort.Slice(vifs, func(i, j int) bool { return vifs[i].Name < vifs[j].Name })
	plan := &TakeoverPlan{Tunnels: in.Tunnels, Controllers: in.Controllers, Managers: in.Managers}
	for _, v := range vifs {
		pp := PortPlan{Name: v.Name, PortID: v.PortID, OFPort: v.OFPort, Tag: v.Tag, NetUUID: v.OtherConfig["net_uuid"], NewTag: v.Tag, Wiring: "not ready (no ofport)"}
		if v.Ready() {
			p := a.port(v.PortID)
			d, ok := in.Devices[v.PortID]
			if !ok {
				d = Device{PortID: v.PortID}
			}
			p.vif, p.present, p.dev = v, true, &d
			a.wirePort(p)
			pp.Wiring = p.wired.String()
			pp.NewTag = DeadVLAN
			if p.wired == wiredUp {
				if vl, ok := a.maps.VLAN(p.net); ok {
					pp.NewTag = int(vl)
				}
			}
		}
		plan.Ports = append(plan.Ports, pp)
	}
	adoptedTag := map[pipeline.NetKey]map[int]bool{}
	for _, p := range a.ports {
		if p.hasNet {
			if adoptedTag[p.net] == nil {
				adoptedTag[p.net] = map[int]bool{}
			}
			adoptedTag[p.net][p.vif.Tag] = true
		}
	}
	for key, n := range a.ps.Networks {
		vp := VLANPlan{Network: key.NetworkID, VLAN: n.LocalVLAN, Ports: a.maps.Ports(key), NetType: string(n.Type), Physnet: n.PhysicalNetwork}
		if key.HasSeg {
			vp.SegValue = strconv.Itoa(int(key.SegID))
		}
		vp.Adopted = adoptedTag[key][int(n.LocalVLAN)]
		plan.VLANs = append(plan.VLANs, vp)
	}
	sort.Slice(plan.VLANs, func(i, j int) bool { return plan.VLANs[i].VLAN < plan.VLANs[j].VLAN })

	// The features' state as a first batch would leave it (the firewall's
	// conjunction ids recovered from the installed flows; built for a dry
	// run, their Sync changes nothing).
	a.adoptInstalled(func(br string) []openflow.Flow { return in.Installed[br] })
	a.syncFeatures(context.Background())
	// Every feature's owners, the pipeline's and the firewall's first.
	desired := map[string][]openflow.Flow{}
	flows, _ := a.computeFlows(a.features.AllOwners())
	for _, o := range slices.Sorted(maps.Keys(flows)) {
		for br, fs := range flows[o] {
			desired[br] = append(desired[br], fs...)
		}
	}
	if a.featErr != nil {
		msgs = append(msgs, a.featErr.Error())
	}
	for _, br := range in.Layout.Bridges() {
		plan.Bridges = append(plan.Bridges, planBridge(br, desired[br], in.Installed[br], referenceTables(in.Layout, br, opt.Pipeline.Distributed)))
	}
	plan.Messages = msgs
	return plan
}

func fwTableFlows(fs []openflow.Flow) []openflow.Flow {
	in := map[uint8]bool{}
	for _, t := range firewall.Tables {
		in[t] = true
	}
	var out []openflow.Flow
	for _, f := range fs {
		if in[f.Table] {
			out = append(out, f)
		}
	}
	return out
}

// sansCookie is a flow's content apart from its cookie: what decides
// whether re-installing it with our cookie changes how it forwards.
// A learn action embeds the bridge's cookie: that one is ignored too.
func sansCookie(f openflow.Flow) string {
	return strconv.Itoa(int(f.Flags)) + "|" + strconv.Itoa(int(f.IdleTimeout)) + "|" +
		strconv.Itoa(int(f.HardTimeout)) + "|" + learnCookie.ReplaceAllString(openflow.FormatActions(f.Actions), "cookie=*")
}

var learnCookie = regexp.MustCompile(`cookie=0x[0-9a-f]+`)

// planBridge counts what the start-up sweep does: it removes what no owner
// wants among the flows sweepable(refTables) allows, and no other.
func planBridge(br string, desired, installed []openflow.Flow, refTables []uint8) BridgePlan {
	mayDelete := sweepable(refTables)
	tables := map[uint8]*TablePlan{}
	tp := func(t uint8) *TablePlan {
		if tables[t] == nil {
			tables[t] = &TablePlan{Table: t, Installed: map[uint64]int{}}
		}
		return tables[t]
	}
	want := map[string]openflow.Flow{}
	for _, f := range desired {
		want[f.Key()] = f
	}
	have := map[string]openflow.Flow{}
	for _, f := range installed {
		have[f.Key()] = f
		tp(f.Table).Installed[f.Cookie]++
	}
	for k, f := range want {
		t := tp(f.Table)
		t.Ours++
		h, ok := have[k]
		switch {
		case !ok:
			t.Add++
		case sansCookie(h) == sansCookie(f):
			t.Same++
		default:
			t.Modify++
		}
	}
	for k, f := range have {
		if _, ok := want[k]; ok || !mayDelete(&f) {
			continue
		}
		t := tp(f.Table)
		t.Remove++
		if f.HardTimeout > 0 || f.IdleTimeout > 0 {
			t.Learned++
		}
	}
	bp := BridgePlan{Name: br}
	for _, t := range tables {
		bp.Tables = append(bp.Tables, *t)
	}
	sort.Slice(bp.Tables, func(i, j int) bool { return bp.Tables[i].Table < bp.Tables[j].Table })
	return bp
}

// Write prints the plan for an operator.
func (p *TakeoverPlan) Write(w io.Writer) error {
	var b strings.Builder
	b.WriteString("KEPT\n")
	fmt.Fprintf(&b, "  bridges: %s\n", strings.Join(bridgeNames(p.Bridges), ", "))
	for _, br := range slices.Sorted(maps.Keys(p.Controllers)) {
		fmt.Fprintf(&b, "  controllers on %s: %s (left as they are; ovs-agent uses the bridge's management socket)\n", br, orNone(strings.Join(p.Controllers[br], ", ")))
	}
	fmt.Fprintf(&b, "  managers: %s (left as they are)\n", orNone(strings.Join(p.Managers, ", ")))
	for _, t := range p.Tunnels {
		fmt.Fprintf(&b, "  tunnel port %s (%s to %s, ofport %d)\n", t.Name, t.Type, t.RemoteIP, t.OFPort)
	}
	for _, v := range p.VLANs {
		how := "adopted from the ports' tags"
		if !v.Adopted {
			how = "NEW (ports re-tagged)"
		}
		phys := ""
		if v.Physnet != "" {
			phys = " " + v.Physnet
		}
		seg := ""
		if v.SegValue != "" {
			seg = " segment " + v.SegValue
		}
		fmt.Fprintf(&b, "  local VLAN %d: network %s (%s%s%s), %d ports, %s\n", v.VLAN, v.Network, v.NetType, phys, seg, v.Ports, how)
	}
	retag := 0
	for _, pp := range p.Ports {
		mark := "kept"
		if pp.NewTag != pp.Tag {
			mark = fmt.Sprintf("RE-TAGGED %d -> %d", pp.Tag, pp.NewTag)
			retag++
		}
		fmt.Fprintf(&b, "  port %s (%s) ofport %d tag %d: %s, %s\n", pp.Name, pp.PortID, pp.OFPort, pp.Tag, pp.Wiring, mark)
	}
	for _, m := range p.Messages {
		fmt.Fprintf(&b, "  note: %s\n", m)
	}
	b.WriteString("REPLACED (one bundle per bridge: ours added or modified in place, the rest deleted)\n")
	for _, br := range p.Bridges {
		fmt.Fprintf(&b, "  %s\n", br.Name)
		fmt.Fprintf(&b, "    %5s %-28s %6s %6s %6s %6s %6s\n", "table", "installed (by cookie)", "ours", "same", "modify", "add", "remove")
		for _, t := range br.Tables {
			var cs []string
			for _, c := range sortedCookies(t.Installed) {
				cs = append(cs, fmt.Sprintf("%#x:%d", c, t.Installed[c]))
			}
			rm := strconv.Itoa(t.Remove)
			if t.Learned > 0 {
				rm += fmt.Sprintf(" (%d learned)", t.Learned)
			}
			fmt.Fprintf(&b, "    %5d %-28s %6d %6d %6d %6d %6s\n", t.Table, strings.Join(cs, " "), t.Ours, t.Same, t.Modify, t.Add, rm)
		}
	}
	same, modify, add, remove := p.Totals()
	b.WriteString("REMOVED\n")
	fmt.Fprintf(&b, "  %d flows no owner of ovs-agent wants (other cookies, other rounds, learned)\n", remove)
	fmt.Fprintf(&b, "summary: %d ports (%d re-tagged), %d local VLANs; flows: %d re-cookied unchanged; add %d, modify %d, remove %d\n",
		len(p.Ports), retag, len(p.VLANs), same, add, modify, remove)
	_, err := io.WriteString(w, b.String())
	return err
}

func bridgeNames(bs []BridgePlan) []string {
	out := make([]string, 0, len(bs))
	for _, b := range bs {
		out = append(out, b.Name)
	}
	return out
}

func sortedCookies(m map[uint64]int) []uint64 {
	out := make([]uint64, 0, len(m))
	for c := range m {
		out = append(out, c)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// msgHandler keeps the messages of warnings (VLAN adoption conflicts) for
// the plan.
type msgHandler struct{ out *[]string }

func (h *msgHandler) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelWarn }
func (h *msgHandler) Handle(_ context.Context, r slog.Record) error {
	*h.out = append(*h.out, r.Message)
	return nil
}
func (h *msgHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *msgHandler) WithGroup(string) slog.Handler      { return h }
