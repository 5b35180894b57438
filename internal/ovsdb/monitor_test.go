//go:build integration

package ovsdb

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ovsagent/ovsagent/internal/testing/ovstest"
)

// eventLog reads a monitor's batches in order.
type eventLog struct {
	t   testing.TB
	m   *PortMonitor
	all []PortEvent
}

// until reads events until one matches want, returning everything read up to
// and including it. The deadline only guards against a hang.
func (l *eventLog) until(want func(PortEvent) bool) []PortEvent {
	l.t.Helper()
	var got []PortEvent
	timeout := time.After(15 * time.Second)
	for {
		select {
		case batch, ok := <-l.m.Events():
			if !ok {
				l.t.Fatalf("events closed; got %v", got)
			}
			for _, e := range batch {
				got = append(got, e)
				l.all = append(l.all, e)
			}
			for _, e := range batch {
				if want(e) {
					return got
				}
			}
		case <-timeout:
			l.t.Fatalf("event not seen in 15s; got %v", describe(got))
		}
	}
}

func is(typ PortEventType, name string) func(PortEvent) bool {
	return func(e PortEvent) bool { return e.Type == typ && e.Port.Name == name }
}

func describe(evs []PortEvent) string {
	var s []string
	for _, e := range evs {
		s = append(s, fmt.Sprintf("%s %s ofport=%d tag=%d", e.Type, e.Port.Name, e.Port.Ofport, e.Port.Tag))
	}
	return "[" + strings.Join(s, "; ") + "]"
}

// addVM plugs a VM port the way os-vif does (internal type: the netdev
// datapath then creates the device itself).
func addVM(t testing.TB, o *ovstest.OVS, br, name, id string, extra ...string) {
	t.Helper()
	args := []string{"add-port", br, name, "--", "set", "Interface", name, "type=internal",
		"external_ids:iface-id=" + id, "external_ids:attached-mac=fa:16:3e:00:00:01",
		"external_ids:vm-uuid=vm-" + id}
	vsctl(t, o, append(args, extra...)...)
}

func TestPortMonitorLifecycle(t *testing.T) {
	o := ovstest.Start(t)
	c := dial(t, o)
	ctx := testCtx(t)
	p := uniq(t)
	br := p + "-int"
	other := p + "-tun"
	if _, err := c.EnsureBridges(ctx, BridgeSpec{Name: br, DatapathType: DatapathNetdev},
		BridgeSpec{Name: other, DatapathType: DatapathNetdev}); err != nil {
		t.Fatal(err)
	}
	pre := "t" + p[3:] + "a" // tap names unique per test
	addVM(t, o, br, pre, "id-pre")

	m := c.WatchPorts(ctx, br)
	defer m.Stop()
	l := &eventLog{t: t, m: m}
	got := l.until(is(PortAdded, pre))
	select {
	case <-m.Synced():
	case <-time.After(10 * time.Second):
		t.Fatal("not synced")
	}
	if len(got) != 1 || got[0].Port.Ofport <= 0 || got[0].Port.IfaceID != "id-pre" ||
		got[0].Port.VMUUID != "vm-id-pre" || got[0].Port.AttachedMAC != "fa:16:3e:00:00:01" || got[0].Port.Tag != NoTag {
		t.Fatalf("initial: %+v", got)
	}

	// Not VM ports: a port without attached-mac, a port on another bridge, a
	// port whose device cannot be opened (ofport -1).
	vsctl(t, o, "add-port", br, "t"+p[3:]+"n", "--", "set", "Interface", "t"+p[3:]+"n", "type=internal",
		"external_ids:iface-id=no-mac")
	addVM(t, o, other, "t"+p[3:]+"o", "id-other")
	failed := "t" + p[3:] + "f"
	vsctl(t, o, "add-port", br, failed, "--", "set", "Interface", failed,
		"external_ids:iface-id=id-failed", "external_ids:attached-mac=fa:16:3e:00:00:02")
	if got := vsctl(t, o, "get", "Interface", failed, "ofport"); got != "-1" {
		t.Fatalf("failed port ofport %q", got)
	}

	// Add: the ofport comes in a later update than the row; Added carries it.
	vm := "t" + p[3:] + "b"
	addVM(t, o, br, vm, "id-b")
	got = l.until(is(PortAdded, vm))
	if len(got) != 1 || got[0].Port.Ofport <= 0 {
		t.Fatalf("add: %s", describe(got))
	}
	ofport := got[0].Port.Ofport

	// Update: nova marks it active; the agent binds it.
	vsctl(t, o, "set", "Interface", vm, "external_ids:iface-status=active")
	got = l.until(is(PortUpdated, vm))
	if len(got) != 1 || got[0].Port.IfaceStatus != "active" || got[0].Old.IfaceStatus != "" || got[0].Port.Ofport != ofport {
		t.Fatalf("update: %+v", got)
	}
	seg := 892
	if _, _, err := c.SetPortBindings(ctx, []PortBinding{{Name: vm, Tag: 3,
		OtherConfig:      BindingOtherConfig("net", "vxlan", "", &seg, 3),
		IfaceOtherConfig: map[string]string{"tx-steering": "hash"}}}); err != nil {
		t.Fatal(err)
	}
	got = l.until(is(PortUpdated, vm))
	if len(got) != 1 || got[0].Port.Tag != 3 || got[0].Port.OtherConfig["segmentation_id"] != "892" ||
		got[0].Port.IfaceOtherConfig["tx-steering"] != "hash" {
		t.Fatalf("bind: %+v", got)
	}

	// Snapshot: both VM ports, nothing else.
	snap, err := m.Snapshot(ctx)
	if err != nil || len(snap) != 2 || snap[0].Name != pre || snap[1].Name != vm {
		t.Fatalf("snapshot %+v %v", snap, err)
	}

	// Re-plugged under the same name in one step (same ofport, new row):
	// removed then added, so the agent reports it down and up again.
	vsctl(t, o, "del-port", br, vm, "--", "add-port", br, vm, "--", "set", "Interface", vm, "type=internal",
		"external_ids:iface-id=id-b", "external_ids:attached-mac=fa:16:3e:00:00:01", "external_ids:vm-uuid=vm-id-b")
	got = l.until(is(PortAdded, vm))
	if len(got) != 2 || got[0].Type != PortRemoved || got[0].Port.Name != vm || got[1].Port.IfaceUUID == got[0].Port.IfaceUUID {
		t.Fatalf("re-add: %s", describe(got))
	}
	ofport = got[1].Port.Ofport

	// Remove.
	vsctl(t, o, "del-port", br, vm)
	got = l.until(is(PortRemoved, vm))
	if len(got) != 1 || got[0].Port.Ofport != ofport {
		t.Fatalf("remove: %s", describe(got))
	}
	for _, e := range l.all {
		if strings.HasSuffix(e.Port.Name, "n") || strings.HasSuffix(e.Port.Name, "o") || e.Port.Name == failed {
			t.Errorf("event for a non-VM port: %s", describe([]PortEvent{e}))
		}
	}
	t.Logf("%d scans for %d events", m.Scans(), len(l.all))
}

// After an ovsdb-server restart the cache is refilled from scratch: the
// monitor must stay silent for unchanged ports and report the ones deleted
// while the connection was down.
func TestPortMonitorOvsdbRestart(t *testing.T) {
	o := ovstest.Start(t)
	c := dial(t, o)
	ctx := testCtx(t)
	p := uniq(t)
	br := p + "-int"
	if _, err := c.EnsureBridges(ctx, BridgeSpec{Name: br, DatapathType: DatapathNetdev}); err != nil {
		t.Fatal(err)
	}
	names := []string{"t" + p[3:] + "a", "t" + p[3:] + "b", "t" + p[3:] + "c"}
	for i, n := range names {
		addVM(t, o, br, n, fmt.Sprint("id-", i))
	}
	reconnected := make(chan struct{}, 1)
	c.OnReconnect(func() { reconnected <- struct{}{} })
	m := c.WatchPorts(ctx, br)
	defer m.Stop()
	l := &eventLog{t: t, m: m}
	seen := map[string]bool{}
	l.until(func(e PortEvent) bool { seen[e.Port.Name] = true; return len(seen) == 3 })

	gone := vsctl(t, o, "get", "Port", names[1], "_uuid")
	if err := o.StopOvsdbServer(); err != nil {
		t.Fatal(err)
	}
	// While the server is down, the database loses port b (offline edit).
	txn := fmt.Sprintf(`["Open_vSwitch",{"op":"mutate","table":"Bridge","where":[["name","==","%s"]],`+
		`"mutations":[["ports","delete",["uuid","%s"]]]}]`, br, gone)
	if out, err := execOut("ovsdb-tool", "transact", filepath.Join(o.Dir, "conf.db"), txn); err != nil {
		t.Fatalf("ovsdb-tool transact: %v: %s", err, out)
	}
	if err := o.StartOvsdbServer(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-reconnected:
	case <-time.After(20 * time.Second):
		t.Fatal("no reconnect in 20s")
	}
	// A marker port added after the reconnect: everything before its Added is
	// what the reconnect produced.
	marker := "t" + p[3:] + "m"
	addVM(t, o, br, marker, "id-marker")
	got := l.until(is(PortAdded, marker))
	if len(got) != 2 || got[0].Type != PortRemoved || got[0].Port.Name != names[1] {
		t.Fatalf("after restart: %s; want [removed %s; added %s]", describe(got), names[1], marker)
	}
	if c.Reconnects() != 1 {
		t.Errorf("reconnects %d", c.Reconnects())
	}
	// Writes work on the new connection.
	if _, _, err := c.SetPortBindings(ctx, []PortBinding{{Name: marker, Tag: 9}}); err != nil {
		t.Fatal(err)
	}
	got = l.until(is(PortUpdated, marker))
	if len(got) != 1 || got[0].Port.Tag != 9 {
		t.Fatalf("bind after restart: %s", describe(got))
	}
}

func TestWatchStops(t *testing.T) {
	o := ovstest.Start(t)
	c := dial(t, o)
	ctx, cancel := context.WithCancel(context.Background())
	m := c.WatchPorts(ctx, "absent-br")
	<-m.Synced() // nothing to deliver: synced after the first scan
	cancel()
	for range m.Events() {
	}
	m.Stop()
}

func execOut(bin string, args ...string) (string, error) {
	out, err := exec.Command(bin, args...).CombinedOutput()
	return string(out), err
}

// Dial waits for an ovsdb-server that is not up yet, and fails (does not
// hang) when it never comes.
func TestDialRetries(t *testing.T) {
	o := ovstest.Start(t)
	if err := o.StopOvsdbServer(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if _, err := Dial(ctx, o.DB, Options{}); err == nil {
		t.Fatal("dial to a stopped server succeeded")
	}
	done := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		c, err := Dial(ctx, o.DB, Options{})
		if err == nil {
			c.Close()
		}
		done <- err
	}()
	if err := o.StartOvsdbServer(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

func TestDialRejectsUnsupported(t *testing.T) {
	if _, err := Dial(context.Background(), "ssl:127.0.0.1:6640", Options{}); err == nil {
		t.Fatal("ssl accepted")
	}
}

// The reference's default ovsdb_connection is tcp:127.0.0.1:6640; with tcp
// the run directory comes from Open_vSwitch external_ids:rundir (ovs-ctl sets it).
func TestDialTCP(t *testing.T) {
	// ovsdb-server must be in our namespace for 127.0.0.1 to reach it; a
	// second ovs-vswitchd in the root namespace is not wanted (it would
	// contend with the system one for the netdev datapath), so it is stopped
	// before it has anything to do.
	o := ovstest.Start(t, ovstest.Options{RootNetNS: true})
	if err := o.StopVswitchd(); err != nil {
		t.Fatal(err)
	}
	var port int
	for i := 0; ; i++ {
		port = 20000 + int(time.Now().UnixNano()%30000)
		out, err := execOut("ovs-appctl", "-t", filepath.Join(o.Dir, "ovsdb-server.ctl"),
			"ovsdb-server/add-remote", fmt.Sprintf("ptcp:%d:127.0.0.1", port))
		if err == nil && !strings.Contains(out, "error") {
			break
		}
		if i == 5 {
			t.Fatalf("add-remote: %v %s", err, out)
		}
	}
	vsctl(t, o, "--no-wait", "set", "Open_vSwitch", ".", "external_ids:rundir="+o.Dir)
	ctx := testCtx(t)
	var c *Client
	var err error
	for i := 0; i < 50; i++ { // the listener opens on ovsdb-server's next loop
		if c, err = Dial(ctx, fmt.Sprintf("tcp:127.0.0.1:%d", port), Options{Timeout: time.Second}); err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	t.Setenv("OVS_RUNDIR", "")
	if c.RunDir() != o.Dir {
		t.Fatalf("RunDir %s, want %s", c.RunDir(), o.Dir)
	}
	if si, err := c.System(ctx); err != nil || si.ExternalIDs["rundir"] != o.Dir {
		t.Fatalf("system %+v %v", si, err)
	}
}

func TestWatchBridges(t *testing.T) {
	o := ovstest.Start(t)
	c := dial(t, o)
	ctx := testCtx(t)
	p := uniq(t)
	phys, absent := p+"-ph", p+"-no"
	vsctl(t, o, "add-br", phys, "--", "set", "Bridge", phys, "datapath_type=netdev")
	ch := c.WatchBridges(ctx, phys, absent)
	next := func() []BridgeEvent {
		t.Helper()
		select {
		case b := <-ch:
			return b
		case <-time.After(15 * time.Second):
			t.Fatal("no bridge event")
		}
		return nil
	}
	if b := next(); len(b) != 1 || b[0].Name != phys || b[0].Removed {
		t.Fatalf("initial %+v", b)
	}
	// Re-created by an operator: removed + added (new row).
	vsctl(t, o, "del-br", phys, "--", "add-br", phys, "--", "set", "Bridge", phys, "datapath_type=netdev")
	if b := next(); len(b) != 2 || !b[0].Removed || b[1].Removed || b[0].UUID == b[1].UUID {
		t.Fatalf("re-created %+v", b)
	}
	vsctl(t, o, "del-br", phys)
	if b := next(); len(b) != 1 || !b[0].Removed {
		t.Fatalf("deleted %+v", b)
	}
}

// Fifty VM ports plugged in one command, ovs-vswitchd killed and restarted,
// then all unplugged: each port is added once and removed once, and the
// vswitchd restart produces no port events when ofports are kept.
func TestPortMonitorBurstAndVswitchdRestart(t *testing.T) {
	o := ovstest.Start(t)
	c := dial(t, o)
	ctx := testCtx(t)
	p := uniq(t)
	br := p + "-int"
	if _, err := c.EnsureBridges(ctx, BridgeSpec{Name: br, DatapathType: DatapathNetdev}); err != nil {
		t.Fatal(err)
	}
	m := c.WatchPorts(ctx, br)
	defer m.Stop()
	<-m.Synced()
	l := &eventLog{t: t, m: m}
	const n = 50
	var add, del []string
	for i := 0; i < n; i++ {
		name := fmt.Sprintf("t%s%d", p[3:], i)
		add = append(add, "--", "add-port", br, name, "--", "set", "Interface", name, "type=internal",
			"external_ids:iface-id="+name, "external_ids:attached-mac=fa:16:3e:00:00:01")
		del = append(del, "--", "del-port", br, name)
	}
	vsctl(t, o, add[1:]...)
	added := map[string]int{}
	l.until(func(e PortEvent) bool {
		if e.Type != PortAdded || e.Port.Ofport <= 0 {
			t.Fatalf("unexpected %s", describe([]PortEvent{e}))
		}
		added[e.Port.Name]++
		return len(added) == n
	})
	before, _ := m.Snapshot(ctx)

	if err := o.StopVswitchd(); err != nil {
		t.Fatal(err)
	}
	if err := o.StartVswitchd(); err != nil {
		t.Fatal(err)
	}
	if err := c.WaitApplied(ctx); err != nil {
		t.Fatal(err)
	}
	after, _ := m.Snapshot(ctx)
	kept := len(before) == len(after)
	for i := range before {
		kept = kept && before[i].Ofport == after[i].Ofport
	}
	t.Logf("ofports kept across ovs-vswitchd restart: %v", kept)

	vsctl(t, o, del[1:]...)
	removed := map[string]int{}
	got := l.until(func(e PortEvent) bool {
		if e.Type == PortRemoved {
			removed[e.Port.Name]++
		}
		return len(removed) == n
	})
	for name, k := range added {
		if k != 1 || removed[name] != 1 {
			t.Errorf("%s: added %d removed %d", name, k, removed[name])
		}
	}
	if kept {
		for _, e := range got {
			if e.Type != PortRemoved {
				t.Errorf("event across vswitchd restart: %s", describe([]PortEvent{e}))
			}
		}
	}
	t.Logf("%d scans for %d events", m.Scans(), len(l.all))
}
