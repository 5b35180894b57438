//go:build e2e

package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ovsagent/ovsagent/internal/testing/ovsdump"
)

// refTwoHostIni is the reference agent's ini for one twohost hypervisor:
// refenv's settings with this hypervisor's host, OVSDB socket and tunnel
// address, no physical bridge. ovs-agent is started with the very same
// --config-file arguments.
func refTwoHostIni(t *testing.T, h *Hypervisor, metrics string) (dir, ini string) {
	t.Helper()
	if err := os.MkdirAll(refTmpDir(), 0o755); err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp(refTmpDir(), "takeover-"+h.Name+"-")
	if err != nil {
		t.Fatal(err)
	}
	body := fmt.Sprintf(`[DEFAULT]
host = %s

[ovs]
integration_bridge = br-int
tunnel_bridge = br-tun
local_ip = %s
datapath_type = netdev
ovsdb_connection = %s
of_listen_address = 127.0.0.1
of_listen_port = 6633

[agent]
tunnel_types = vxlan
l2_population = True
arp_responder = False
# The reference runs ovs-ofctl (its OVS firewall's flows) in its privsep
# daemon. Through sudo (refenv's root_helper) the daemon loses OVS_RUNDIR and
# ovs-ofctl reaches the system OVS's br-int; the tests run as root, so
# rootwrap without sudo keeps the environment.
root_helper = neutron-rootwrap /etc/neutron/rootwrap.conf

[securitygroup]
enable_security_group = True
firewall_driver = openvswitch

# ovsagent only (the reference ignores unknown sections)
[ovsagent]
metrics_listen = %s
`, h.Name, h.LocalIP, h.OVS.DB, metrics)
	ini = filepath.Join(dir, "openvswitch_agent.ini")
	if err := os.WriteFile(ini, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir, ini
}

// hvCookies counts the flows of each cookie on a hypervisor's bridges.
func hvCookies(t *testing.T, e *Env, h *Hypervisor) map[string]int {
	t.Helper()
	c, err := flowCookies(e.Ctx, h.OVS, "br-int", "br-tun")
	if err != nil {
		t.Fatalf("%s: %v", h.Name, err)
	}
	return c
}

// refHV is a twohost hypervisor run by the reference agent, to be taken over by ovs-agent
// with the same --config-file arguments.
type refHV struct {
	h                 *Hypervisor
	dir, ini, metrics string
	ref               *refAgent
}

// startRefTwoHost starts the reference agent on each of th's hypervisors with the ini
// refTwoHostIni writes (changed by edit first, if not nil) and waits until the API shows
// each alive with a new started_at.
func startRefTwoHost(t *testing.T, e *Env, th *TwoHost, edit func(ini string) string) []*refHV {
	t.Helper()
	var runs []*refHV
	for _, h := range th.HV {
		metrics := fmt.Sprintf("127.0.0.1:%d", 9190+h.N)
		dir, ini := refTwoHostIni(t, h, metrics)
		if edit != nil {
			b, err := os.ReadFile(ini)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(ini, []byte(edit(string(b))), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		before := ""
		if ai, err := e.Neutron.OVSAgent(e.Ctx, h.Name); err == nil && ai != nil {
			before = ai.StartedAt
		}
		ref := startRefAgentIn(t, dir, ini, h.NS, "OVS_RUNDIR="+h.Dir)
		runs = append(runs, &refHV{h: h, dir: dir, ini: ini, metrics: metrics, ref: ref})
		took, err := e.WaitNewStart(h.Name, before, 240*time.Second)
		if err != nil {
			t.Fatalf("%s: reference agent not alive: %v\n%s", h.Name, err, ref.LogTail(30))
		}
		t.Logf("%s: reference agent alive %s after start (netns %s, log %s)", h.Name, took.Round(time.Millisecond), h.NS, ref.logPath)
	}
	return runs
}

// swapAgent is ovs-agent for r's hypervisor, configured by the reference's own files
// (not started).
func swapAgent(t *testing.T, r *refHV) *Agent {
	t.Helper()
	cfg := r.h.AgentConfig()
	cfg.MetricsListen = r.metrics
	a, err := NewAgent(cfg)
	if err != nil {
		t.Fatal(err)
	}
	a.NeutronConf, a.AgentIni = refNeutronConf(), r.ini
	return a
}

// takeOver stops r's reference agent (old: its flows by cookie, as it leaves them) and
// starts a in its place; it returns once ovs-agent is in sync (its metrics, polled inside
// the namespace) and the reference's cookies are gone from the hypervisor's bridges.
func takeOver(t *testing.T, e *Env, r *refHV, a *Agent, old map[string]int) (syncAfter, cleanAfter time.Duration) {
	t.Helper()
	h := r.h
	took, killed := r.ref.Stop(20 * time.Second)
	t.Logf("%s: reference agent stopped after %s (SIGKILL: %v); flows by cookie %v", h.Name, took.Round(time.Millisecond), killed, old)
	time.Sleep(500 * time.Millisecond)
	start := time.Now()
	if err := a.Start(); err != nil {
		t.Fatal(err)
	}
	h.Agent = a
	t.Cleanup(func() {
		if _, killed, err := a.Stop(20 * time.Second); err != nil || killed {
			t.Errorf("%s: ovs-agent stop: killed=%v err=%v", h.Name, killed, err)
		}
		if t.Failed() {
			t.Logf("%s: ovs-agent log tail:\n%s", h.Name, a.LogTail(60))
		}
	})
	for time.Since(start) < 120*time.Second && (syncAfter == 0 || cleanAfter == 0) {
		if syncAfter == 0 {
			out, err := h.inNS(e.Ctx, "curl", "-sf", "-m", "2", "http://"+r.metrics+"/metrics")
			if err == nil && strings.Contains(out, "\novsagent_in_sync 1\n") {
				syncAfter = time.Since(start)
			}
		}
		if cleanAfter == 0 {
			now := hvCookies(t, e, h)
			left := 0
			for c := range old {
				if strings.HasSuffix(c, "0a65") {
					continue // ovs-agent's tag: not the reference's
				}
				left += now[c]
			}
			if left == 0 {
				cleanAfter = time.Since(start)
			}
		}
		select {
		case <-a.Exited():
			t.Fatalf("%s: ovs-agent exited: %v\n%s", h.Name, a.ExitErr(), a.LogTail(40))
		case <-time.After(50 * time.Millisecond):
		}
	}
	if syncAfter == 0 || cleanAfter == 0 {
		t.Fatalf("%s: takeover not complete: in sync after %s, reference cookies gone after %s\n%s", h.Name, syncAfter, cleanAfter, a.LogTail(40))
	}
	t.Logf("%s: ovs-agent in sync %s after start, reference cookies gone after %s", h.Name, syncAfter.Round(time.Millisecond), cleanAfter.Round(time.Millisecond))
	return syncAfter, cleanAfter
}

// onlyOurCookies fails unless each of h's bridges holds flows of one cookie, ovs-agent's
// (its tag 0x0a65 in the low 16 bits).
func onlyOurCookies(t *testing.T, e *Env, h *Hypervisor, bridges ...string) {
	t.Helper()
	for _, br := range bridges {
		c, err := flowCookies(e.Ctx, h.OVS, br)
		if err != nil {
			t.Fatal(err)
		}
		for cookie := range c {
			if len(c) != 1 || !strings.HasSuffix(cookie, "0a65") {
				t.Errorf("%s %s: flows by cookie %v, want ovs-agent's only", h.Name, br, c)
				break
			}
		}
	}
}

// reportFlowDiff fails on lines only in the first (named a) or only in the second dump
// (named b) of what, and logs that the n flows are equal otherwise.
func reportFlowDiff(t *testing.T, what, a, b string, onlyA, onlyB []string, n int) {
	t.Helper()
	if len(onlyA)+len(onlyB) > 0 {
		t.Errorf("%s: flows differ\nonly %s:\n%s\nonly %s:\n%s", what, a, strings.Join(onlyA, "\n"), b, strings.Join(onlyB, "\n"))
	} else {
		t.Logf("%s: %s equal %s (%d flows)", what, b, a, n)
	}
}

// TestTakeoverTwoHosts: the reference agent runs on two hypervisors joined
// by VXLAN with l2population (tunnel ports, FDB flows toward the peer); a
// ping every 100 ms and a TCP session cross from a VM on one to a VM on the
// other while the hypervisors are swapped to ovs-agent one after the other,
// as an operator rolls a cloud. Nothing may be lost: on the swapped host the
// reference's br-tun flows toward the peer stay until ovs-agent has the
// peer's FDB, and on the other host the reference keeps forwarding to it.
func TestTakeoverTwoHosts(t *testing.T) {
	e := NewEnv(t)
	if _, err := AgentBinary(); err != nil { // built now, not on the swap's clock
		t.Fatal(err)
	}
	th := newTwoHostOVS(e)
	ha, hb := th.HV[0], th.HV[1]
	runs := startRefTwoHost(t, e, th, nil)

	nw := e.Network(NetworkSpec{Name: "vx2", NetworkType: "vxlan"})
	e.Subnet(nw.ID, "10.251.9.0/24")
	vmA, vmB := th.VM(ha, nw, "vma"), th.VM(hb, nw, "vmb")
	ports := []*Port{vmA.Port, vmB.Port}
	for _, x := range []struct {
		vm *VM
		h  *Hypervisor
	}{{vmA, ha}, {vmB, hb}} {
		refWire(t, e, x.vm, x.h)
	}
	toB, toA := tunnelPortName("vxlan", hb.LocalIP), tunnelPortName("vxlan", ha.LocalIP)
	for _, x := range []struct {
		h    *Hypervisor
		port string
	}{{ha, toB}, {hb, toA}} {
		if _, err := x.h.WaitTunnelPort(e.Ctx, x.port, true, twoHostConverge); err != nil {
			t.Fatal(err)
		}
	}
	if d, err := vmA.PingUntil(e.Ctx, vmB.IP, 60*time.Second); err != nil {
		t.Fatal(err)
	} else {
		t.Logf("reference on both: %s -> %s first reply after %s", vmA.NS, vmB.NS, d.Round(time.Millisecond))
	}
	sess := echoSession(t, vmA, vmB, 5011)
	pings := StartPings(t, PingPath{vmA.NS + " -> " + vmB.NS, vmA, vmB.IP})
	watch := e.watchStatusEvery(200*time.Millisecond, ports)
	time.Sleep(time.Second)

	for _, r := range runs {
		h := r.h
		old := hvCookies(t, e, h)
		// The reference's OVS firewall is in play on this hypervisor's
		// br-int (its port's flows in the firewall tables), so the swap
		// replaces a filtered path, as on a real host.
		refFlows := map[string]FlowDump{}
		for _, br := range []string{"br-int", "br-tun"} {
			d, err := h.Flows(e.Ctx, br)
			if err != nil {
				t.Fatal(err)
			}
			refFlows[br] = d
		}
		if n := countTables(refFlows["br-int"], 71, 72, 73, 81, 82); n == 0 {
			t.Fatalf("%s: the reference's br-int has no firewall flow:\n%s", h.Name, strings.Join(refFlows["br-int"].Normalized(), "\n"))
		} else {
			t.Logf("%s: reference's br-int: %d flows, %d in the firewall tables; br-tun %d flows", h.Name, len(refFlows["br-int"]), n, len(refFlows["br-tun"]))
		}
		takeOver(t, e, r, swapAgent(t, r), old)
		if ports, err := h.TunnelPorts(e.Ctx); err != nil || len(ports) != 1 {
			t.Errorf("%s: tunnel ports %v (%v) after the swap, want the reference's one", h.Name, ports, err)
		}
		// Entry for entry, ours are the reference's (cookies and counters aside).
		for _, br := range []string{"br-int", "br-tun"} {
			d, err := h.Flows(e.Ctx, br)
			if err != nil {
				t.Fatal(err)
			}
			onlyRef, onlyOurs := ovsdump.Diff(refFlows[br].Normalized(), d.Normalized())
			onlyRef, onlyOurs = dropZedPipelineDiffs(onlyRef, true), dropZedPipelineDiffs(onlyOurs, false)
			reportFlowDiff(t, h.Name+" "+br, "the reference's", "ours", onlyRef, onlyOurs, len(d))
		}
		time.Sleep(2 * time.Second)
	}

	st := pings.Stop(t, "across both swaps", 1)[0]
	polls, _, changes := watch.Stop()
	sent, got, maxRTT, failures := sess.Stop()
	t.Logf("TWO HOSTS: ping %s -> %s across both swaps: sent %d received %d lost %d; TCP: %d/%d echoed, max RTT %s; status polls %d, non-ACTIVE %d",
		vmA.NS, vmB.NS, st.Sent, st.Received, st.Lost(), got, sent, maxRTT.Round(time.Millisecond), polls, len(changes))
	if len(failures) > 0 {
		t.Errorf("TCP session: %v", failures)
	}
	if len(changes) > 0 {
		t.Errorf("ports left ACTIVE: %v", changes)
	}
	// Both hypervisors now run ovs-agent alone: each bridge holds flows of
	// one cookie, ovs-agent's (its tag 0x0a65 in the low 16 bits), and
	// traffic both ways still flows.
	for _, h := range th.HV {
		onlyOurCookies(t, e, h, "br-int", "br-tun")
	}
	for _, p := range [][2]*VM{{vmA, vmB}, {vmB, vmA}} {
		if st, err := p[0].Ping(e.Ctx, p[1].IP, 5); err != nil || st.Lost() != 0 {
			t.Errorf("ping %s -> %s after both swaps: %d/%d lost (%v)", p[0].NS, p[1].NS, st.Lost(), st.Sent, err)
		}
	}
	// Nothing of the reference reached the system OVS: a Manager row it
	// added there would take the hypervisors' db.sock paths over.
	if leaked := purgeSystemManagers(e.Ctx, t); len(leaked) > 0 {
		t.Errorf("the reference agent added Manager rows to the system OVS: %v", leaked)
	}
}

// refWire waits for the reference agent to turn vm's port ACTIVE. The
// reference can skip a port it learns of from its ovsdb-client monitor
// before its IDL has the row ("Port ... not present in bridge br-int",
// then "Skipped 1": its own race, seen here inside a namespace) and never
// looks at it again; the tap is then unplugged from br-int and plugged
// back, as a VM's reboot would, up to three times.
func refWire(t *testing.T, e *Env, vm *VM, h *Hypervisor) {
	t.Helper()
	for try := 0; ; try++ {
		_, _, err := e.Neutron.WaitPortStatus(e.Ctx, vm.Port.ID, "ACTIVE", 30*time.Second)
		if err == nil {
			return
		}
		if try == 3 {
			t.Fatalf("%s: reference agent did not wire %s: %v", h.Name, vm.NS, err)
		}
		t.Logf("%s: %s not ACTIVE after 30 s (the reference skipped it); plugging its tap again", h.Name, vm.NS)
		if _, err := h.OVS.Vsctl(e.Ctx, "--if-exists", "del-port", vm.Bridge, vm.Tap); err != nil {
			t.Fatal(err)
		}
		time.Sleep(3 * time.Second) // two polling intervals of the reference: it sees the delete
		if _, err := h.OVS.Vsctl(e.Ctx, "--", "--may-exist", "add-port", vm.Bridge, vm.Tap, "--", "set", "Interface", vm.Tap,
			"external_ids:iface-id="+vm.Port.ID, "external_ids:attached-mac="+vm.MAC,
			"external_ids:iface-status=active", "external_ids:vm-uuid="+vm.Port.DeviceID); err != nil {
			t.Fatal(err)
		}
	}
}

// countTables counts the flows of d in the given tables.
func countTables(d FlowDump, tables ...int) int {
	n := 0
	for _, f := range d {
		for _, tb := range tables {
			if strings.Contains(f, fmt.Sprintf("table=%d,", tb)) || strings.Contains(f, fmt.Sprintf("table=%d ", tb)) {
				n++
				break
			}
		}
	}
	return n
}

// dropZedPipelineDiffs removes the differences between Zed's reference pipeline and ours,
// which is 2026.2's (listed with reasons in internal/pipeline refenv_test.go and
// docs/reference/releases.md): the table 58 link in the chain (2023.2), table 60's NORMAL
// at priority 1 (2024.2) and the RARP flows of table 71 (2024.1). Anything else stays.
func dropZedPipelineDiffs(lines []string, zedSide bool) []string {
	var zed = []string{
		"priority=0 actions=goto_table:59", // table 0 (printed without its table)
		"table=30 priority=0 actions=goto_table:59",
		"table=31 priority=0 actions=goto_table:59",
		"table=60 priority=3 actions=NORMAL",
	}
	var ours = []string{
		"priority=0 actions=goto_table:58",
		"table=30 priority=0 actions=goto_table:58",
		"table=31 priority=0 actions=goto_table:58",
		"table=58 priority=0 actions=goto_table:59",
		"table=60 priority=1 actions=NORMAL",
	}
	var out []string
	for _, l := range lines {
		known := false
		if zedSide {
			known = slices.Contains(zed, l)
		} else {
			known = slices.Contains(ours, l) || (strings.HasPrefix(l, "table=71 priority=95,rarp,") && strings.HasSuffix(l, "actions=resubmit(,94)"))
		}
		if !known {
			out = append(out, l)
		}
	}
	return out
}
