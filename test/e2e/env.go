//go:build e2e

// Package e2e holds the end-to-end scenarios and their harness: the real
// neutron-server (refenv, AGENT=none), the system Open vSwitch, RabbitMQ and
// "VMs" that are network namespaces plugged into br-int as nova/os-vif plugs
// them. The agent under test runs as host hv1. Run with
//
//	go test -tags e2e -count=1 ./test/e2e/...
//
// A scenario is a Test function that calls NewEnv(t) and uses its helpers;
// every object a helper creates is removed by t.Cleanup. TestMain (Main)
// serialises runs on the machine and sweeps leftovers of aborted runs.
package e2e

import (
	"context"
	"fmt"
	"maps"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Project is the neutron project every e2e object belongs to; names start
// with NamePrefix so that leftovers can be found.
const (
	Project    = "e2e"
	NamePrefix = "e2e-"
	lockPath   = "/run/ovsagent-e2e.lock"
	// besideLockPath serialises the beside runs among themselves (see besideSafe)
	besideLockPath = "/run/ovsagent-e2e-beside.lock"
)

// besideSafe are the tests that bring their own neutron-server, broker or OVS
// and touch neither host hv1, the system OVS nor the phase's server. .ci/run
// runs them with OVSAGENT_E2E_BESIDE=1 in a second go test beside the other
// releases' phases (after the phase that restarts the shared broker), which
// takes their minutes off the run's length. Beside mode takes its own lock
// and sweeps nothing of the phase's server; any other test fails in it.
var besideSafe = map[string]string{
	"TestDVR":                   "its own 2026.2 server (refenv-dvr: database, vhost, port), L3 agents and three OVS in namespaces",
	"TestRabbitClusterFailover": "its own three-node RabbitMQ, Zed server on :9697 (database neutron_rmqc) and OVS in netns e2e-rmqc",
}

// Beside reports whether this run is a beside run (OVSAGENT_E2E_BESIDE=1).
func Beside() bool { return os.Getenv("OVSAGENT_E2E_BESIDE") == "1" }

// RequireBesideSafe fails a test that is not in besideSafe when the run is a
// beside run: it would share hv1, the system OVS or the phase's server with the
// phase running at the same time.
func RequireBesideSafe(t testing.TB) {
	t.Helper()
	if !Beside() {
		return
	}
	top, _, _ := strings.Cut(t.Name(), "/")
	if _, ok := besideSafe[top]; !ok {
		t.Fatalf("%s is not safe beside another e2e run (OVSAGENT_E2E_BESIDE=1 is for %v only)", top, slices.Sorted(maps.Keys(besideSafe)))
	}
}

// Env is one test's view of the environment.
type Env struct {
	T       testing.TB
	Ctx     context.Context // cancelled when the test ends; cleanups use their own
	Neutron *Neutron
	OVS     OVS // the system Open vSwitch
	Host    string
}

// NewEnv checks that the real parts are there and that nothing else owns
// host hv1, and returns the helpers. It fails the test loudly otherwise.
func NewEnv(t testing.TB) *Env {
	t.Helper()
	RequireBesideSafe(t)
	e := &Env{T: t, Ctx: t.Context(), Neutron: NewNeutron(Project), Host: "hv1"}
	if err := Preflight(e.Ctx); err != nil {
		t.Fatalf("e2e preflight: %v", err)
	}
	return e
}

// Preflight checks neutron-server, OVS, RabbitMQ and that no other agent
// serves hv1 (refenv's Python agent or a demo ovs-agent).
func Preflight(ctx context.Context) error {
	n := NewNeutron(Project)
	if _, err := n.ListNetworks(ctx, url.Values{"limit": {"1"}}); err != nil {
		return fmt.Errorf("neutron-server is not answering at %s (start it with AGENT=none refenv/setup.sh): %w", n.URL, err)
	}
	if _, err := (OVS{}).Vsctl(ctx, "show"); err != nil {
		return fmt.Errorf("Open vSwitch is not answering: %w", err)
	}
	if _, err := sh(ctx, "bash", "-c", "exec 3<>/dev/tcp/127.0.0.1/5672"); err != nil {
		return fmt.Errorf("RabbitMQ is not answering on 127.0.0.1:5672")
	}
	for _, o := range []struct{ pidfile, cmd, stop string }{
		{"/run/refenv/ovs-agent.pid", "neutron-openvswitch-agent", "refenv/teardown.sh"},
		{"/run/ovsagent/ovs-agent.pid", "ovs-agent", "scripts/demo.sh stop"},
	} {
		if pid, ok := alivePid(o.pidfile, o.cmd); ok {
			return fmt.Errorf("%s (pid %d, %s) is running and owns host hv1; stop it first (%s)", o.cmd, pid, o.pidfile, o.stop)
		}
	}
	return nil
}

// alivePid reads a pid file and reports whether that pid still runs a
// command line containing name.
func alivePid(pidfile, name string) (int, bool) {
	data, err := os.ReadFile(pidfile)
	if err != nil {
		return 0, false
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil || pid <= 0 {
		return 0, false
	}
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil || !strings.Contains(string(cmdline), name) {
		return pid, false
	}
	if st, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); err == nil {
		if f := strings.Fields(string(st)); len(f) > 2 && f[2] == "Z" {
			return pid, false
		}
	}
	return pid, true
}

// Main is the TestMain of the e2e package: one run at a time on a machine
// (flock), leftovers of aborted runs removed before and after.
func Main(m *testing.M) int {
	lock := lockPath
	if Beside() {
		lock = besideLockPath
	}
	f, err := os.OpenFile(lock, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e: lock:", err)
		return 1
	}
	defer f.Close()
	deadline := time.Now().Add(15 * time.Minute)
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			fmt.Fprintln(os.Stderr, "e2e: another e2e run holds", lock, "for 15 min; giving up")
			return 1
		}
		fmt.Fprintln(os.Stderr, "e2e: waiting for another e2e run (", lock, ")")
		time.Sleep(5 * time.Second)
	}
	if opts, err := MessagingOptions(); err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	} else if len(opts) > 0 {
		fmt.Fprintf(os.Stderr, "e2e: every agent gets [oslo_messaging_rabbit] %v (OVSAGENT_E2E_MESSAGING)\n", opts)
	}
	if Beside() {
		// the phase beside us owns the server's e2e objects; the beside tests sweep their own servers
		fmt.Fprintf(os.Stderr, "e2e: beside run (%s): no sweep of the phase's server\n", lock)
		return m.Run()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	if err := Sweep(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "e2e: sweep:", err)
	}
	cancel()
	code := m.Run()
	ctx, cancel = context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := Sweep(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "e2e: sweep:", err)
	}
	return code
}

// Sweep removes what earlier runs left: ports, security groups and networks
// of project e2e named e2e-*, and the namespaces and taps derived from those
// ports.
func Sweep(ctx context.Context) error { return SweepNeutron(ctx, NewNeutron(Project)) }

// SweepNeutron is Sweep against one server (the cluster test's own server too).
func SweepNeutron(ctx context.Context, n *Neutron) error {
	ports, err := n.ListPorts(ctx, url.Values{"project_id": {Project}})
	if err != nil {
		return err
	}
	for _, p := range ports {
		if !strings.HasPrefix(p.Name, NamePrefix) || len(p.ID) < 11 {
			continue
		}
		vm := &VM{NS: "vm-" + p.ID[:8], Tap: "tap" + p.ID[:11], Bridge: "br-int"}
		_ = vm.Unplug(ctx)
		if err := n.DeletePort(ctx, p.ID); err != nil && !IsNotFound(err) {
			return err
		}
	}
	sgs, err := n.ListSecurityGroups(ctx, url.Values{"project_id": {Project}})
	if err != nil {
		return err
	}
	for _, sg := range sgs {
		if strings.HasPrefix(sg.Name, NamePrefix) {
			if err := n.DeleteSecurityGroup(ctx, sg.ID); err != nil && !IsNotFound(err) {
				return err
			}
		}
	}
	nets, err := n.ListNetworks(ctx, url.Values{"project_id": {Project}})
	if err != nil {
		return err
	}
	for _, nw := range nets {
		if strings.HasPrefix(nw.Name, NamePrefix) {
			if err := n.DeleteNetwork(ctx, nw.ID); err != nil && !IsNotFound(err) {
				return err
			}
		}
	}
	return nil
}

// cleanupCtx is for t.Cleanup work, which runs after the test's context ends.
func cleanupCtx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), time.Minute)
}

// name makes an object name unique to the test.
func (e *Env) name(s string) string {
	t := strings.NewReplacer("/", "-", " ", "_").Replace(e.T.Name())
	return NamePrefix + t + "-" + s
}

// Network creates a network (deleted at cleanup).
func (e *Env) Network(s NetworkSpec) *Network {
	e.T.Helper()
	s.Name = e.name(s.Name)
	nw, err := e.Neutron.CreateNetwork(e.Ctx, s)
	if err != nil {
		e.T.Fatalf("create network: %v", err)
	}
	e.T.Cleanup(func() {
		ctx, cancel := cleanupCtx()
		defer cancel()
		if err := e.Neutron.DeleteNetwork(ctx, nw.ID); err != nil && !IsNotFound(err) {
			e.T.Errorf("cleanup: %v", err)
		}
	})
	return nw
}

// Subnet creates a subnet without DHCP or gateway on the network.
func (e *Env) Subnet(networkID, cidr string) *Subnet {
	e.T.Helper()
	sn, err := e.Neutron.CreateSubnet(e.Ctx, SubnetSpec{Name: e.name("subnet"), NetworkID: networkID, CIDR: cidr})
	if err != nil {
		e.T.Fatalf("create subnet: %v", err)
	}
	return sn // deleted with its network
}

// Port creates a port bound to e.Host unless s.HostID says otherwise.
func (e *Env) Port(s PortSpec) *Port {
	e.T.Helper()
	s.Name = e.name(s.Name)
	if s.HostID == "" {
		s.HostID = e.Host
	}
	p, err := e.Neutron.CreatePort(e.Ctx, s)
	if err != nil {
		e.T.Fatalf("create port: %v", err)
	}
	e.T.Cleanup(func() {
		ctx, cancel := cleanupCtx()
		defer cancel()
		if err := e.Neutron.DeletePort(ctx, p.ID); err != nil && !IsNotFound(err) {
			e.T.Errorf("cleanup: %v", err)
		}
	})
	return p
}

// SecurityGroup creates a group (deleted at cleanup).
func (e *Env) SecurityGroup(name string) *SecurityGroup {
	e.T.Helper()
	sg, err := e.Neutron.CreateSecurityGroup(e.Ctx, e.name(name))
	if err != nil {
		e.T.Fatalf("create security group: %v", err)
	}
	e.T.Cleanup(func() {
		ctx, cancel := cleanupCtx()
		defer cancel()
		if err := e.Neutron.DeleteSecurityGroup(ctx, sg.ID); err != nil && !IsNotFound(err) {
			e.T.Errorf("cleanup: %v", err)
		}
	})
	return sg
}

// Rule adds a rule (removed with its group).
func (e *Env) Rule(s RuleSpec) *SecurityGroupRule {
	e.T.Helper()
	r, err := e.Neutron.CreateSecurityGroupRule(e.Ctx, s)
	if err != nil {
		e.T.Fatalf("create rule: %v", err)
	}
	return r
}

// Bridge creates a netdev bridge for the test if it is missing and removes
// it at cleanup if this call created it.
func (e *Env) Bridge(name string) {
	e.T.Helper()
	if e.OVS.BridgeExists(e.Ctx, name) {
		return
	}
	if _, err := e.OVS.Vsctl(e.Ctx, "add-br", name, "--", "set", "Bridge", name, "datapath_type=netdev"); err != nil {
		e.T.Fatalf("bridge: %v", err)
	}
	e.T.Cleanup(func() {
		ctx, cancel := cleanupCtx()
		defer cancel()
		if _, err := e.OVS.Vsctl(ctx, "--if-exists", "del-br", name); err != nil {
			e.T.Errorf("cleanup: %v", err)
		}
	})
}

// Plug plugs the port into s.Bridge (br-int by default) as os-vif does; the
// MTU defaults to the network's. Unplugged at cleanup.
func (e *Env) Plug(s PlugSpec) *VM {
	e.T.Helper()
	if s.MTU == 0 {
		if nw, err := e.Neutron.GetNetwork(e.Ctx, s.Port.NetworkID); err == nil && nw.MTU > 0 {
			s.MTU = nw.MTU
		}
	}
	if s.OVS == (OVS{}) {
		s.OVS = e.OVS
	}
	vm, err := PlugVM(e.Ctx, s)
	if vm != nil {
		e.T.Cleanup(func() {
			ctx, cancel := cleanupCtx()
			defer cancel()
			if err := vm.Unplug(ctx); err != nil {
				e.T.Errorf("cleanup: %v", err)
			}
		})
	}
	if err != nil {
		e.T.Fatalf("plug: %v", err)
	}
	return vm
}

// VM creates a port on the network and plugs it into br-int.
func (e *Env) VM(nw *Network, name string) *VM {
	e.T.Helper()
	return e.Plug(PlugSpec{Port: e.Port(PortSpec{Name: name, NetworkID: nw.ID}), MTU: nw.MTU})
}

// WaitStatus waits until the port has the status and returns how long it took.
func (e *Env) WaitStatus(p *Port, status string, timeout time.Duration) time.Duration {
	e.T.Helper()
	_, d, err := e.Neutron.WaitPortStatus(e.Ctx, p.ID, status, timeout)
	if err != nil {
		e.T.Fatal(err)
	}
	return d
}
