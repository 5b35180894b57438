//go:build e2e

package e2e

// Restart with QoS and a trunk in place (issue 19, "Restart and takeover with QoS and trunks
// in place"): on the two-host harness (each hypervisor its own OVS, so the shared br-int is
// not involved), hv-a carries a VM with a 10 Mbit/s egress meter and a DSCP mark and a
// trunk VM (parent + VLAN 101/102 subports); its ovs-agent is killed with SIGKILL and
// started again while pings run from all three. Nothing may be lost, the limit must hold
// throughout (a sampler watches the meter and its flow) and after (measured), and no
// meter, flow or QoS row may be left over or missing.

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ovsagent/ovsagent/internal/testing/ovsdump"
	"github.com/ovsagent/ovsagent/internal/trunk"
)

// qosAgentSet is the configuration that turns the qos extension on with meters for
// bandwidth limits (what the 2026.2 reference does with the same options).
var qosAgentSet = map[string]map[string]string{
	"agent": {"extensions": "qos"},
	"ovs":   {"qos_meter_bandwidth": "true"},
}

// qosTrunkScene is what the QoS + trunk restart and takeover tests build on hv-a.
type qosTrunkScene struct {
	qvm, qpeer *VM // the limited VM and its peer (both on hv-a: the meter is hv-a's)
	tvm        *VM // the trunk VM (parent untagged, eth101, eth102)
	peers      []*VM
	parent     *Port
	subs       []*Port
	trunkID    string
	tbr        string
	policy     string
}

// buildQoSTrunk creates, on ha: a VM whose port has a policy (egress bandwidth_limit
// 10 Mbit/s, dscp_marking 26) and a peer; a trunk VM with two subports (VLAN 101, 102)
// and one VM per trunk network on hb. plugged runs after the ports exist and the VMs are
// plugged (the reference agent in the takeover test must be alive before ports are bound).
func buildQoSTrunk(t *testing.T, e *Env, ha, hb *Hypervisor) *qosTrunkScene {
	t.Helper()
	s := &qosTrunkScene{}
	s.policy = e.qosPolicy("qos")
	e.qosRule(s.policy, "bandwidth_limit_rules", map[string]any{"max_kbps": 10000, "direction": "egress"})
	e.qosRule(s.policy, "dscp_marking_rules", map[string]any{"dscp_mark": 26})

	qnet := e.Network(NetworkSpec{Name: "qosr"})
	e.Subnet(qnet.ID, "10.251.9.0/24")
	qp := e.Port(PortSpec{Name: "qvm", NetworkID: qnet.ID, HostID: ha.Name})
	if err := e.Neutron.Do(e.Ctx, "PUT", "/ports/"+qp.ID, map[string]any{"port": map[string]any{"qos_policy_id": s.policy}}, nil); err != nil {
		t.Fatal(err)
	}
	s.qvm = e.Plug(PlugSpec{Port: qp, MTU: qnet.MTU, HostNS: ha.NS, OVS: ha.OVS})
	pp := e.Port(PortSpec{Name: "qpeer", NetworkID: qnet.ID, HostID: ha.Name})
	s.qpeer = e.Plug(PlugSpec{Port: pp, MTU: qnet.MTU, HostNS: ha.NS, OVS: ha.OVS})

	nets := make([]*Network, 3)
	for i, cidr := range []string{"10.251.10.0/24", "10.251.11.0/24", "10.251.12.0/24"} {
		nets[i] = e.Network(NetworkSpec{Name: "qtrunk" + strconv.Itoa(i)})
		e.Subnet(nets[i].ID, cidr)
	}
	s.parent = e.unboundPort(nets[0], "parent")
	s.subs = []*Port{e.unboundPort(nets[1], "sub101"), e.unboundPort(nets[2], "sub102")}
	var created struct{ Trunk e2eTrunk }
	body := map[string]any{"trunk": map[string]any{"name": e.name("trunk"), "project_id": e.Neutron.Project, "port_id": s.parent.ID,
		"sub_ports": []map[string]any{
			{"port_id": s.subs[0].ID, "segmentation_type": "vlan", "segmentation_id": 101},
			{"port_id": s.subs[1].ID, "segmentation_type": "vlan", "segmentation_id": 102}}}}
	if err := e.Neutron.Do(e.Ctx, "POST", "/trunks", body, &created); err != nil {
		t.Fatalf("create trunk (is the trunk service plugin on?): %v", err)
	}
	s.trunkID = created.Trunk.ID
	parent := s.parent
	t.Cleanup(func() {
		ctx, cancel := cleanupCtx()
		defer cancel()
		_, _ = e.Neutron.UpdatePort(ctx, parent.ID, map[string]any{"binding:host_id": "", "device_owner": "", "device_id": ""})
		if err := e.Neutron.Do(ctx, "DELETE", "/trunks/"+s.trunkID, nil, nil); err != nil && !IsNotFound(err) {
			t.Errorf("cleanup trunk: %v", err)
		}
	})
	s.tbr = trunk.BridgeName(s.trunkID)
	parent.DeviceID = newUUID()
	if err := e.Neutron.Do(e.Ctx, "PUT", "/ports/"+parent.ID, map[string]any{"port": map[string]any{
		"binding:host_id": ha.Name, "device_owner": "compute:nova", "device_id": parent.DeviceID}}, nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := cleanupCtx()
		defer cancel()
		_, _ = ha.OVS.Vsctl(ctx, "--if-exists", "del-br", s.tbr)
	})
	guest := newTrunkGuest(t, e, ha, s.tbr, parent, nets[0].MTU)
	s.tvm = guest.vm
	guest.iface(101, s.subs[0], nets[1].MTU)
	guest.iface(102, s.subs[1], nets[2].MTU)
	for i, nw := range nets {
		p := e.Port(PortSpec{Name: "tpeer" + strconv.Itoa(i), NetworkID: nw.ID, HostID: hb.Name})
		s.peers = append(s.peers, e.Plug(PlugSpec{Port: p, MTU: nw.MTU, HostNS: hb.NS, OVS: hb.OVS}))
	}
	return s
}

// ips are the addresses of the scene's ports.
func (s *qosTrunkScene) ips() []string {
	out := []string{s.qvm.IP, s.qpeer.IP, s.parent.IP(), s.subs[0].IP(), s.subs[1].IP()}
	for _, p := range s.peers {
		out = append(out, p.IP)
	}
	return out
}

// ready waits until every port is ACTIVE, the trunk too, and every path passes.
func (s *qosTrunkScene) ready(t *testing.T, e *Env) {
	t.Helper()
	ports := []*Port{s.qvm.Port, s.qpeer.Port, s.parent, s.subs[0], s.subs[1]}
	for _, p := range s.peers {
		ports = append(ports, p.Port)
	}
	for _, p := range ports {
		e.WaitStatus(p, "ACTIVE", 90*time.Second)
	}
	t.Logf("trunk ACTIVE after %s more", e.waitTrunkStatus(s.trunkID, "ACTIVE", 60*time.Second))
	pingFrom(t, e.Ctx, s.qvm, s.qpeer.IP, 20*time.Second)
	for i, p := range s.peers {
		t.Logf("trunk VM -> network %d (%s): %s", i, p.IP, pingFrom(t, e.Ctx, s.tvm, p.IP, 20*time.Second))
	}
}

// checkQoS measures the limited VM's transfer (10 Mbit/s ±20 %) and its DSCP mark.
func (s *qosTrunkScene) checkQoS(t *testing.T, e *Env, what string, port int) float64 {
	t.Helper()
	var last float64
	for i := 0; i < 3; i++ {
		r, err := sendBytes(e.Ctx, s.qvm, s.qpeer, port+i, 10_000_000)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		last = r
		t.Logf("%s: qvm -> qpeer %.2f Mbit/s (limit 10)", what, r/1e6)
		if r >= 8e6 && r <= 12e6 {
			break
		}
		time.Sleep(2 * time.Second)
	}
	if last < 8e6 || last > 12e6 {
		t.Errorf("%s: %.2f Mbit/s under a 10 Mbit/s egress limit", what, last/1e6)
	}
	tos, err := tosOf(e.Ctx, s.qvm, s.qpeer, port+10)
	t.Logf("%s: dscp 26: tos %v", what, tos)
	if err != nil || tos[len(tos)-1] != "0x68" {
		t.Errorf("%s: tos %v %v, want 0x68", what, tos, err)
	}
	return last
}

// qosState is what QoS keeps on a hypervisor: br-int's meters and every flow using
// one, the QoS and Queue rows, and the meter ids in the limited port's other_config.
type qosState struct {
	Meters     []string
	MeterFlows []string
	QoSRows    int
	QueueRows  int
	PortIDs    string
}

var meterStatsRe = regexp.MustCompile(`\s*(duration|flow_count|packet_in_count|byte_in_count|packet_count|byte_count)[:=][^\s,]*,?`)

func readQoSState(ctx context.Context, h *Hypervisor, tap string) (qosState, error) {
	var st qosState
	out, err := h.OVS.Ofctl(ctx, "dump-meters", "br-int")
	if err != nil {
		return st, err
	}
	for _, l := range strings.Split(out, "\n") {
		l = strings.TrimSpace(meterStatsRe.ReplaceAllString(l, ""))
		if strings.HasPrefix(l, "meter=") {
			st.Meters = append(st.Meters, l)
		} else if strings.HasPrefix(l, "type=") && len(st.Meters) > 0 {
			st.Meters[len(st.Meters)-1] += " " + l
		}
	}
	sort.Strings(st.Meters)
	flows, err := h.Flows(ctx, "br-int")
	if err != nil {
		return st, err
	}
	for _, f := range flows.Normalized() {
		if strings.Contains(f, "meter:") {
			st.MeterFlows = append(st.MeterFlows, f)
		}
	}
	sort.Strings(st.MeterFlows)
	for tbl, n := range map[string]*int{"QoS": &st.QoSRows, "Queue": &st.QueueRows} {
		o, err := h.OVS.Vsctl(ctx, "--bare", "--columns=_uuid", "list", tbl)
		if err != nil {
			return st, err
		}
		*n = len(strings.Fields(o))
	}
	st.PortIDs, err = h.OVS.Vsctl(ctx, "get", "Port", tap, "other_config")
	return st, err
}

func (s qosState) String() string {
	return fmt.Sprintf("meters %v; meter flows %v; %d QoS, %d Queue rows; port other_config %s",
		s.Meters, s.MeterFlows, s.QoSRows, s.QueueRows, s.PortIDs)
}

// meterWatch samples br-int's meters and the limited port's meter flow every 50 ms
// and keeps the samples in which either was missing (the limit lifted) and, apart, the
// ones with more than one (a meter or flow replaced beside the old one).
type meterWatch struct {
	stop    chan struct{}
	done    chan struct{}
	mu      sync.Mutex
	samples int
	bad     []string
	extra   int
}

func watchMeters(ctx context.Context, h *Hypervisor, mac string) *meterWatch {
	w := &meterWatch{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(w.done)
		for {
			select {
			case <-w.stop:
				return
			case <-time.After(50 * time.Millisecond):
			}
			m, merr := h.OVS.Ofctl(ctx, "dump-meters", "br-int")
			f, ferr := h.OVS.Ofctl(ctx, "dump-flows", "br-int", "table=59", "--no-stats")
			meters := strings.Count(m, "meter=")
			flows := 0
			for _, l := range strings.Split(f, "\n") {
				if strings.Contains(l, "meter:") && strings.Contains(l, "dl_src="+mac) {
					flows++
				}
			}
			w.mu.Lock()
			w.samples++
			switch {
			case merr != nil || ferr != nil:
			case meters < 1 || flows < 1:
				w.bad = append(w.bad, fmt.Sprintf("%s: %d meters, %d meter flows of the port",
					time.Now().Format("15:04:05.000"), meters, flows))
			case meters > 1 || flows > 1:
				w.extra++
			}
			w.mu.Unlock()
		}
	}()
	return w
}

// Stop ends the sampling: samples taken, the ones without the limit, the ones with
// more than one meter or meter flow.
func (w *meterWatch) Stop() (int, []string, int) {
	close(w.stop)
	<-w.done
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.samples, w.bad, w.extra
}

// startPings pings from the limited VM, the trunk parent and the two subports.
func (s *qosTrunkScene) startPings(t *testing.T) *PingSet {
	t.Helper()
	return StartPings(t, PingPath{"qos VM", s.qvm, s.qpeer.IP}, PingPath{"trunk parent", s.tvm, s.peers[0].IP},
		PingPath{"subport 101", s.tvm, s.peers[1].IP}, PingPath{"subport 102", s.tvm, s.peers[2].IP})
}

// TestQoSTrunkRestart: ovs-agent (qos extension, meters) on hv-a is killed with SIGKILL
// and started again with a limited VM and a trunk VM in place.
func TestQoSTrunkRestart(t *testing.T) {
	e := NewEnv(t)
	th := newTwoHostOVS(e)
	ha, hb := th.HV[0], th.HV[1]
	for _, h := range th.HV {
		cfg := h.AgentConfig()
		cfg.Set = qosAgentSet
		a, took := e.StartAgentAlive(cfg, 90*time.Second)
		h.Agent = a
		t.Logf("%s: agent alive %s after start (log %s)", h.Name, took.Round(time.Millisecond), a.LogPath)
	}
	s := buildQoSTrunk(t, e, ha, hb)
	s.ready(t, e)
	s.checkQoS(t, e, "before the restart", 5601)

	before, err := readQoSState(e.Ctx, ha, s.qvm.Tap)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("before: %s", before)
	if len(before.Meters) != 1 || len(before.MeterFlows) != 1 {
		t.Fatalf("before the restart: want one meter and its flow: %s", before)
	}
	flowsBefore, err := ha.Flows(e.Ctx, "br-int")
	if err != nil {
		t.Fatal(err)
	}
	cookiesBefore := hvCookies(t, e, ha)

	pings := s.startPings(t)
	meters := watchMeters(e.Ctx, ha, s.qvm.MAC)
	watch := e.WatchStatus(s.qvm.Port, s.parent, s.subs[0], s.subs[1])
	time.Sleep(time.Second)
	if err := ha.Agent.Kill(); err != nil {
		t.Fatal(err)
	}
	t.Logf("hv-a agent killed (SIGKILL)")
	time.Sleep(2 * time.Second)
	startAt := time.Now()
	if err := ha.Agent.Start(); err != nil {
		t.Fatal(err)
	}
	if d, err := ha.WaitHealthy(e.Ctx, 60*time.Second); err != nil {
		t.Fatalf("restart: not healthy after %s: %v\n%s", d, err, ha.Agent.LogTail(30))
	} else {
		t.Logf("restart: /healthz 200 %s after start", d.Round(time.Millisecond))
	}
	time.Sleep(3 * time.Second) // the new run's reports and status updates
	samples, bad, extra := meters.Stop()
	t.Logf("restart: meter and meter flow sampled %d times every 50 ms across kill+start: %d without the limit, %d with more than one", samples, len(bad), extra)
	if len(bad) > 0 || extra > 0 {
		t.Errorf("restart: the limit was not in place all the time: %v", bad)
	}
	pings.Stop(t, "restart", 50)
	polls, perrs, flaps := watch.Stop()
	t.Logf("restart: port status polled %d times (%d errors), %d non-ACTIVE", polls, perrs, len(flaps))
	if len(flaps) > 0 {
		t.Errorf("restart: ports not ACTIVE in the API: %s", strings.Join(flaps, "; "))
	}

	after, err := readQoSState(e.Ctx, ha, s.qvm.Tap)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("after: %s", after)
	if before.String() != after.String() {
		t.Errorf("restart: QoS state changed:\nbefore %s\nafter  %s", before, after)
	}
	flowsAfter, err := ha.Flows(e.Ctx, "br-int")
	if err != nil {
		t.Fatal(err)
	}
	onlyBefore, onlyAfter := ovsdump.Diff(flowsBefore.Normalized(), flowsAfter.Normalized())
	reportFlowDiff(t, "restart: "+ha.Name+" br-int", "before", "after", onlyBefore, onlyAfter, len(flowsAfter))
	cookiesAfter := hvCookies(t, e, ha)
	if len(cookiesAfter) != len(cookiesBefore) {
		t.Errorf("restart: cookies %v, before %v (stale flows?)", cookiesAfter, cookiesBefore)
	}
	t.Logf("restart: cookies before %v, after %v (%s after start)", cookiesBefore, cookiesAfter, time.Since(startAt).Round(time.Millisecond))

	s.checkQoS(t, e, "after the restart", 5621)
	for i, p := range s.peers {
		if st, err := s.tvm.Ping(e.Ctx, p.IP, 3); err != nil || st.Lost() > 0 {
			t.Errorf("after the restart: trunk network %d: %+v %v", i, st, err)
		}
	}
	if tr, err := e.getTrunk(s.trunkID); err != nil || tr.Status != "ACTIVE" {
		t.Errorf("after the restart: trunk %+v %v", tr, err)
	}
}

// TestQoSTrunkTakeover: the reference agent of the release (qos extension with
// qos_meter_bandwidth, as REFENV_AGENT_SET="agent.extensions=qos
// ovs.qos_meter_bandwidth=True" gives refenv's) wires hv-a's limited VM and trunk VM;
// it is stopped and ovs-agent started with the same --config-file arguments while
// pings run. Nothing may be lost; the reference's meter must be in force throughout
// (adopted with its id, or replaced without a gap), the limit measured after, and
// nothing of the reference left over (its cookies, a second meter, a QoS row).
func TestQoSTrunkTakeover(t *testing.T) {
	if refRelease() == "zed" {
		// Zed's agent has no [ovs] qos_meter_bandwidth (ingress policing only, which
		// did not limit a veth VM on the userspace datapath: issue 19).
		t.Skip("the reference's meter bandwidth limits need 2023.1 or later; run with OVSAGENT_RELEASE=2026.2")
	}
	e := NewEnv(t)
	if _, err := AgentBinary(); err != nil { // built now, not on the swap's clock
		t.Fatal(err)
	}
	th := newTwoHostOVS(e)
	ha, hb := th.HV[0], th.HV[1]
	runs := startRefTwoHost(t, e, th, func(ini string) string {
		return strings.Replace(strings.Replace(ini, "\n[agent]\n", "\n[agent]\nextensions = qos\n", 1),
			"\n[ovs]\n", "\n[ovs]\nqos_meter_bandwidth = True\n", 1)
	})
	s := buildQoSTrunk(t, e, ha, hb)
	s.ready(t, e)
	s.checkQoS(t, e, "under the reference", 5701)
	ref, err := readQoSState(e.Ctx, ha, s.qvm.Tap)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("the reference's: %s", ref)
	if len(ref.Meters) != 1 || len(ref.MeterFlows) != 1 {
		t.Fatalf("the reference should limit with one meter and its flow: %s", ref)
	}

	r := runs[0] // ha
	a := swapAgent(t, r)
	// The dry run on the reference's host, with the same files: QoS meters and rows
	// and a trunk bridge are adopted (the qos extension is on, the trunk handler
	// too), not refused as state ovs-agent would not rebuild.
	dry := func(when string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(e.Ctx, 60*time.Second)
		defer cancel()
		out, err := sh(ctx, "ip", "netns", "exec", ha.NS, "env", "OVS_RUNDIR="+ha.Dir, a.Bin, "takeover", "--dry-run",
			"--config-file", a.NeutronConf, "--config-file", a.AgentIni)
		m := dryRunSummary.FindAllString(out, -1)
		if err != nil || len(m) == 0 {
			t.Errorf("takeover --dry-run %s: %v\n%s", when, err, out)
			return
		}
		t.Logf("takeover --dry-run %s: %s", when, m[len(m)-1])
	}
	dry("before the swap")

	pings := s.startPings(t)
	meters := watchMeters(e.Ctx, ha, s.qvm.MAC)
	watch := e.WatchStatus(s.qvm.Port, s.parent, s.subs[0], s.subs[1])
	time.Sleep(time.Second)
	// the reference's flows as it leaves them
	refFlows, err := ha.Flows(e.Ctx, "br-int")
	if err != nil {
		t.Fatal(err)
	}
	old := hvCookies(t, e, ha)
	takeOver(t, e, r, a, old)
	time.Sleep(3 * time.Second)
	samples, bad, extra := meters.Stop()
	t.Logf("takeover: meter and meter flow sampled %d times every 50 ms across the swap: %d without the limit, %d with more than one", samples, len(bad), extra)
	if len(bad) > 0 {
		t.Errorf("takeover: the limit was not in place all the time: %v", bad)
	}
	pings.Stop(t, "takeover", 50)
	polls, perrs, flaps := watch.Stop()
	t.Logf("takeover: port status polled %d times (%d errors), %d non-ACTIVE", polls, perrs, len(flaps))
	if len(flaps) > 0 {
		t.Errorf("takeover: ports not ACTIVE in the API: %s", strings.Join(flaps, "; "))
	}

	ours, err := readQoSState(e.Ctx, ha, s.qvm.Tap)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("ovs-agent's: %s", ours)
	if ref.String() != ours.String() {
		t.Errorf("takeover: QoS state is not the reference's:\nreference %s\nours      %s", ref, ours)
	}
	d, err := ha.Flows(e.Ctx, "br-int")
	if err != nil {
		t.Fatal(err)
	}
	onlyRef, onlyOurs := ovsdump.Diff(refFlows.Normalized(), d.Normalized())
	// The 2026.2 reference can miss remote-group members: in 2 of 3 runs the addresses
	// of the trunk parent and of a subport (bound last) were absent from the limited
	// VM's network's conjunction flows, which it had refreshed after their member
	// updates, still when it was stopped 20 s later. Ours have them (every port of the
	// group is a member). Such flows of ours, for a port of this scene, are logged,
	// not failed; any other difference fails.
	var lag []string
	onlyOurs = slices.DeleteFunc(onlyOurs, func(l string) bool {
		if !strings.Contains(l, "actions=conjunction(") || !(strings.HasPrefix(l, "table=72 ") || strings.HasPrefix(l, "table=82 ")) {
			return false
		}
		for _, ip := range s.ips() {
			if strings.Contains(l, "nw_src="+ip+" ") || strings.Contains(l, "nw_dst="+ip+" ") {
				lag = append(lag, l)
				return true
			}
		}
		return false
	})
	if len(lag) > 0 {
		t.Logf("hv-a br-int: remote-group member flows of ours the reference lacked when it stopped (its miss, not a takeover change):\n%s", strings.Join(lag, "\n"))
	}
	reportFlowDiff(t, ha.Name+" br-int", "the reference's", "ours", onlyRef, onlyOurs, len(d))
	onlyOurCookies(t, e, ha, "br-int", "br-tun")
	dry("after the swap")
	s.checkQoS(t, e, "after the takeover", 5721)
	for i, p := range s.peers {
		if st, err := s.tvm.Ping(e.Ctx, p.IP, 3); err != nil || st.Lost() > 0 {
			t.Errorf("after the takeover: trunk network %d: %+v %v", i, st, err)
		}
	}
	if tr, err := e.getTrunk(s.trunkID); err != nil || tr.Status != "ACTIVE" {
		t.Errorf("after the takeover: trunk %+v %v", tr, err)
	}
	if leaked := purgeSystemManagers(e.Ctx, t); len(leaked) > 0 {
		t.Errorf("the reference agent added Manager rows to the system OVS: %v", leaked)
	}
}
