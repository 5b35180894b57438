//go:build ovs

package qos

// Real packets through the flows and meters this package decides, on a private
// ovs-vswitchd (userspace datapath, datapath_type=netdev) with two VM namespaces:
//
//	vmA: eth0 on br-int, native-untagged in VLAN 3, and a table-0 flow that tags
//	     what it sends with VLAN 3 — it stands for traffic that reaches br-int from
//	     another bridge, tagged with the local VLAN as the reference's table 0 tags
//	     it, which is what the reference's ingress meters match. (No 802.1Q devices
//	     on this kernel, so the VM cannot tag by itself.)
//	vmB: eth0 on br-int with tag 3 — the VM whose port carries the QoS policy.
//
// Run: go test -tags ovs -run TestQoSPackets -v ./internal/qos (root; about a minute).
// The numbers it logs are in bench/README.md.

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ovsagent/ovsagent/internal/neutron"
	of "github.com/ovsagent/ovsagent/internal/openflow"
	"github.com/ovsagent/ovsagent/internal/ovsdb"
	"github.com/ovsagent/ovsagent/internal/testing/ovstest"
)

func TestMain(m *testing.M) {
	if mode := os.Getenv("QOS_PKT_MODE"); mode != "" {
		if err := helper(mode, os.Getenv("QOS_PKT_ADDR")); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// result is what a receiver reports.
type result struct {
	Bytes   int64   `json:"bytes"`
	Packets int64   `json:"packets"`
	AvgBps  float64 `json:"avg_bps"`    // whole transfer, first to last byte
	Steady  float64 `json:"steady_bps"` // from 20 % to 100 % of the bytes (past the meter's initial bucket)
	PPS     float64 `json:"pps"`        // packets/s from 1.5 s to 4.5 s after the first
}

const (
	tcpBytes  = 10_000_000 // 8 s at 10 Mbit/s
	udpRate   = 5000       // packets/s sent
	udpLength = 5 * time.Second
)

func helper(mode, addr string) error {
	switch mode {
	case "tcprecv":
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			return err
		}
		fmt.Println("ready")
		c, err := ln.Accept()
		if err != nil {
			return err
		}
		buf := make([]byte, 64<<10)
		var n int64
		type mark struct {
			n int64
			t time.Time
		}
		var marks []mark
		for {
			k, err := c.Read(buf)
			if k > 0 {
				n += int64(k)
				marks = append(marks, mark{n, time.Now()})
			}
			if err == io.EOF {
				break
			}
			if err != nil {
				return err
			}
		}
		if len(marks) < 2 {
			return fmt.Errorf("received %d bytes", n)
		}
		r := result{Bytes: n}
		r.AvgBps = float64(n-marks[0].n) * 8 / marks[len(marks)-1].t.Sub(marks[0].t).Seconds()
		i := sort.Search(len(marks), func(i int) bool { return marks[i].n >= n/5 })
		r.Steady = float64(n-marks[i].n) * 8 / marks[len(marks)-1].t.Sub(marks[i].t).Seconds()
		return json.NewEncoder(os.Stdout).Encode(r)
	case "tcpsend":
		c, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err != nil {
			return err
		}
		buf := make([]byte, 64<<10)
		for left := tcpBytes; left > 0; {
			k := min(left, len(buf))
			if _, err := c.Write(buf[:k]); err != nil {
				return err
			}
			left -= k
		}
		return c.Close()
	case "udprecv":
		pc, err := net.ListenPacket("udp", addr)
		if err != nil {
			return err
		}
		fmt.Println("ready")
		buf := make([]byte, 2048)
		var times []time.Time
		deadline := time.Now().Add(15 * time.Second)
		for {
			wait := deadline
			if len(times) > 0 {
				wait = time.Now().Add(1500 * time.Millisecond)
			}
			_ = pc.SetReadDeadline(wait)
			if _, _, err := pc.ReadFrom(buf); err != nil {
				break
			}
			times = append(times, time.Now())
		}
		r := result{Packets: int64(len(times))}
		if len(times) > 0 {
			from, to := times[0].Add(1500*time.Millisecond), times[0].Add(4500*time.Millisecond)
			var k int
			for _, t := range times {
				if !t.Before(from) && t.Before(to) {
					k++
				}
			}
			r.PPS = float64(k) / 3
		}
		return json.NewEncoder(os.Stdout).Encode(r)
	case "udpsend":
		c, err := net.Dial("udp", addr)
		if err != nil {
			return err
		}
		payload := make([]byte, 64)
		start := time.Now()
		sent := 0
		for time.Since(start) < udpLength {
			due := int(time.Since(start).Seconds() * udpRate)
			for ; sent < due; sent++ {
				_, _ = c.Write(payload) // a full socket buffer is a drop, as on a wire
			}
			time.Sleep(time.Millisecond)
		}
		return nil
	}
	return fmt.Errorf("unknown helper mode %q", mode)
}

// lab is the private OVS, its br-int, the two VM namespaces and our flow and meter
// owners on it.
type lab struct {
	t      *testing.T
	o      *ovstest.OVS
	conn   *of.Conn
	db     *ovsdb.Client
	rec    *of.Reconciler
	nsA    string
	nsB    string
	portB  Port
	ipA    string
	ipB    string
	ids    map[string]uint32
	policy *neutron.QosPolicy
	opts   Options
}

func run(t *testing.T, name string, args ...string) string {
	t.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v: %s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

func newLab(t *testing.T) *lab {
	o := ovstest.Start(t)
	if err := o.AddBridge("br-int"); err != nil {
		t.Fatal(err)
	}
	suffix := strconv.FormatInt(time.Now().UnixNano()%1_000_000, 36)
	l := &lab{t: t, o: o, nsA: "qosa-" + suffix, nsB: "qosb-" + suffix, ipA: "10.93.0.1", ipB: "10.93.0.2"}
	macA, macB := "fa:16:3e:00:00:0a", "fa:16:3e:00:00:0b"
	for _, v := range []struct {
		ns, tap, mac, tag string
	}{{l.nsA, "qa" + suffix, macA, "native"}, {l.nsB, "qb" + suffix, macB, "3"}} {
		ns, tap := v.ns, v.tap
		run(t, "ip", "netns", "add", ns)
		t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", ns).Run() })
		run(t, "ip", "link", "add", tap, "type", "veth", "peer", "name", "p"+tap)
		run(t, "ip", "link", "set", tap, "netns", o.NetNS)
		run(t, "ip", "link", "set", "p"+tap, "netns", ns)
		run(t, "ip", "-n", ns, "link", "set", "p"+tap, "name", "eth0")
		run(t, "ip", "-n", ns, "link", "set", "eth0", "address", v.mac, "mtu", "1400", "up")
		run(t, "ip", "-n", ns, "link", "set", "lo", "up")
		run(t, "ip", "netns", "exec", ns, "ethtool", "-K", "eth0", "tx", "off")
		run(t, "ip", "netns", "exec", o.NetNS, "ethtool", "-K", tap, "tx", "off")
		run(t, "ip", "-n", o.NetNS, "link", "set", tap, "up")
		_ = exec.Command("ip", "netns", "exec", ns, "sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1").Run()
		args := []string{"add-port", "br-int", tap}
		switch v.tag {
		case "native":
			args = append(args, "tag=3", "vlan_mode=native-untagged")
		default:
			args = append(args, "tag="+v.tag)
		}
		if _, err := o.Vsctl(args...); err != nil {
			t.Fatal(err)
		}
	}
	run(t, "ip", "-n", l.nsA, "addr", "add", l.ipA+"/24", "dev", "eth0")
	outA, err := o.Vsctl("get", "Interface", "qa"+suffix, "ofport")
	if err != nil {
		t.Fatal(err)
	}
	ofportA, err := strconv.Atoi(strings.TrimSpace(outA))
	if err != nil {
		t.Fatal(err)
	}
	run(t, "ip", "-n", l.nsB, "addr", "add", l.ipB+"/24", "dev", "eth0")
	out, err := o.Vsctl("get", "Interface", "qb"+suffix, "ofport")
	if err != nil {
		t.Fatal(err)
	}
	ofport, err := strconv.Atoi(strings.TrimSpace(out))
	if err != nil {
		t.Fatal(err)
	}
	mac, _ := net.ParseMAC(macB)
	l.portB = Port{ID: "pb", Name: "qb" + suffix, MAC: mac, OFPort: uint32(ofport), LocalVLAN: 3, DeviceOwner: "compute:nova", PolicyID: "pol"}

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	l.conn, err = of.Dial(ctx, o.Mgmt("br-int"), of.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.conn.Close() })
	l.db, err = ovsdb.Dial(ctx, o.DB, ovsdb.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.db.Close)
	l.rec = of.NewReconciler(l.conn, 0x5a)
	// the 2026.2 reference's br-int defaults these flows pass through (setup_default_table)
	base := []of.Flow{
		{Table: 0, Priority: 0, Actions: []of.Action{of.GotoTable{Table: TablePacketRateLimit}}},
		{Table: TablePacketRateLimit, Priority: 0, Actions: []of.Action{of.GotoTable{Table: TableBandwidthRateLimit}}},
		{Table: TableBandwidthRateLimit, Priority: 0, Actions: []of.Action{of.GotoTable{Table: TableTransient}}},
		{Table: TableTransient, Priority: 1, Actions: []of.Action{of.Output{Port: of.PortNormal}}},
		// vmA's frames enter tagged with the local VLAN, as from a patch port
		{Table: 0, Priority: 10, Match: of.Match{of.InPort(uint32(ofportA)), of.Untagged()},
			Actions: []of.Action{of.PushVLAN{}, of.SetVLANVID(3), of.GotoTable{Table: TablePacketRateLimit}}},
	}
	if err := l.rec.Apply(ctx, map[string][]of.Flow{"base": base, "qos:base": BaseFlows()}); err != nil {
		t.Fatal(err)
	}
	l.ids = map[string]uint32{}
	return l
}

// setPolicy applies pol (nil: none) to vmB's port through Decide, AssignMeterIDs,
// Flows and SyncMeters: the path the agent takes.
func (l *lab) setPolicy(pol *neutron.QosPolicy, opts Options) {
	l.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	plan, err := Decide(l.portB, pol, opts)
	if err != nil {
		l.t.Fatal(err)
	}
	var keys []string
	for _, m := range plan.Meters {
		keys = append(keys, m.Key)
	}
	ids, err := AssignMeterIDs(keys, l.ids, 262144)
	if err != nil {
		l.t.Fatal(err)
	}
	want, err := MeterConfigs([]Plan{plan}, ids)
	if err != nil {
		l.t.Fatal(err)
	}
	flows := Flows(l.portB, plan, ids)
	if err := SyncMeters(ctx, l.conn, want, func(ctx context.Context) error {
		return l.rec.Apply(ctx, map[string][]of.Flow{"qos:" + l.portB.ID: flows})
	}); err != nil {
		l.t.Fatal(err)
	}
	l.ids = ids
	// the default mode's limits are OVSDB rows: the egress one an Interface's
	// ingress policing, the ingress one the port's linux-htb QoS with queue 0
	rate, burst := int64(0), int64(0)
	if plan.EgressPolicing != nil {
		rate, burst = plan.EgressPolicing.Rate, plan.EgressPolicing.Burst
	}
	if err := l.db.SetIngressPolicing(ctx, l.portB.Name, rate, burst); err != nil {
		l.t.Fatal(err)
	}
	if plan.IngressQueue != nil {
		err = l.db.EnsureQoS(ctx, IngressQoSSpec(l.portB.Name, plan.IngressQueue), l.portB.Name)
	} else {
		err = l.db.DeleteQoS(ctx, l.portB.Name, neutron.RuleBandwidthLimit)
	}
	if err != nil {
		l.t.Fatal(err)
	}
}

func (l *lab) helper(ns, mode, addr string) *exec.Cmd {
	cmd := exec.Command("ip", "netns", "exec", ns, os.Args[0])
	cmd.Env = append(os.Environ(), "QOS_PKT_MODE="+mode, "QOS_PKT_ADDR="+addr)
	cmd.Stderr = os.Stderr
	return cmd
}

// transfer runs a receiver in recvNS and a sender in sendNS and returns the result.
func (l *lab) transfer(proto, sendNS, recvNS, recvIP string) result {
	l.t.Helper()
	addr := recvIP + ":5201"
	recv := l.helper(recvNS, proto+"recv", addr)
	out, err := recv.StdoutPipe()
	if err != nil {
		l.t.Fatal(err)
	}
	if err := recv.Start(); err != nil {
		l.t.Fatal(err)
	}
	defer func() { _ = recv.Process.Kill(); _ = recv.Wait() }()
	br := bufio.NewReader(out)
	if line, err := br.ReadString('\n'); err != nil || strings.TrimSpace(line) != "ready" {
		l.t.Fatalf("receiver: %q %v", line, err)
	}
	send := l.helper(sendNS, proto+"send", addr)
	if b, err := send.Output(); err != nil {
		l.t.Fatalf("sender: %v: %s", err, b)
	}
	var r result
	if err := json.NewDecoder(br).Decode(&r); err != nil {
		l.t.Fatalf("receiver result: %v", err)
	}
	return r
}

// dscp captures a few UDP packets vmB sends and returns the TOS bytes tcpdump shows.
func (l *lab) dscp() []string {
	l.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	cap := exec.CommandContext(ctx, "ip", "netns", "exec", l.nsA, "tcpdump", "-l", "-nn", "-v", "-c", "3", "-i", "eth0", "udp", "and", "dst", "port", "5301")
	stdout, err := cap.StdoutPipe()
	if err != nil {
		l.t.Fatal(err)
	}
	stderr, _ := cap.StderrPipe()
	if err := cap.Start(); err != nil {
		l.t.Fatal(err)
	}
	// tcpdump says "listening on" once the capture is open
	if line, err := bufio.NewReader(stderr).ReadString('\n'); err != nil || !strings.Contains(line, "listening") {
		l.t.Fatalf("tcpdump: %q %v", line, err)
	}
	done := make(chan []string)
	go func() {
		var tos []string
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if i := strings.Index(sc.Text(), "(tos "); i >= 0 {
				f := strings.FieldsFunc(sc.Text()[i+5:], func(r rune) bool { return r == ',' || r == ' ' })
				tos = append(tos, f[0])
			}
		}
		done <- tos
	}()
	for i := 0; i < 5; i++ {
		run(l.t, "ip", "netns", "exec", l.nsB, "bash", "-c", "echo x > /dev/udp/"+l.ipA+"/5301")
		time.Sleep(100 * time.Millisecond)
	}
	_ = cap.Wait()
	return <-done
}

func within(got, want, tol float64) bool { return got >= want*(1-tol) && got <= want*(1+tol) }

func TestQoSPackets(t *testing.T) {
	l := newLab(t)
	// warm up ARP/MAC learning both ways
	run(t, "ip", "netns", "exec", l.nsB, "ping", "-c", "2", "-i", "0.2", "-W", "2", l.ipA)

	const limit = 10_000 // kbps
	bw := func(dir string) *neutron.QosPolicy {
		return &neutron.QosPolicy{ID: "pol", Rules: []neutron.QosRule{{Type: neutron.RuleBandwidthLimit, ID: "r", QosPolicyID: "pol",
			Direction: dir, MaxKbps: i64(limit)}}}
	}
	mbit := func(bps float64) string { return fmt.Sprintf("%.1f Mbit/s", bps/1e6) }

	free := l.transfer("tcp", l.nsB, l.nsA, l.ipA)
	t.Logf("no policy, B->A: avg %s steady %s", mbit(free.AvgBps), mbit(free.Steady))

	l.setPolicy(bw(neutron.DirectionEgress), Options{MeterBandwidth: true})
	eg := l.transfer("tcp", l.nsB, l.nsA, l.ipA)
	t.Logf("egress meter 10 Mbit/s, B->A: avg %s steady %s", mbit(eg.AvgBps), mbit(eg.Steady))
	if !within(eg.Steady, limit*1000, 0.2) {
		t.Errorf("egress limit: %s, want 10 Mbit/s ±20 %%", mbit(eg.Steady))
	}

	l.setPolicy(bw(neutron.DirectionIngress), Options{MeterBandwidth: true})
	in := l.transfer("tcp", l.nsA, l.nsB, l.ipB)
	t.Logf("ingress meter 10 Mbit/s, A->B: avg %s steady %s", mbit(in.AvgBps), mbit(in.Steady))
	if !within(in.Steady, limit*1000, 0.2) {
		t.Errorf("ingress limit: %s, want 10 Mbit/s ±20 %%", mbit(in.Steady))
	}
	if got := l.transfer("tcp", l.nsB, l.nsA, l.ipA); got.Steady < 2*limit*1000 {
		t.Errorf("egress limited by an ingress rule: %s", mbit(got.Steady))
	}

	l.setPolicy(nil, Options{MeterBandwidth: true})
	meters, err := l.conn.DumpMeters(context.Background())
	if err != nil || len(meters) != 0 {
		t.Errorf("meters left after the policy went: %v %v", meters, err)
	}
	again := l.transfer("tcp", l.nsB, l.nsA, l.ipA)
	t.Logf("policy removed, B->A: avg %s steady %s", mbit(again.AvgBps), mbit(again.Steady))
	if again.Steady < 3*limit*1000 {
		t.Errorf("still limited after the rule went: %s", mbit(again.Steady))
	}

	// the default mode's egress limit: Interface ingress_policing on a userspace-datapath veth
	l.setPolicy(bw(neutron.DirectionEgress), Options{})
	pol := l.transfer("tcp", l.nsB, l.nsA, l.ipA)
	t.Logf("egress ingress_policing 10 Mbit/s (qos_meter_bandwidth=false), B->A: avg %s steady %s", mbit(pol.AvgBps), mbit(pol.Steady))
	l.setPolicy(bw(neutron.DirectionIngress), Options{})
	htb := l.transfer("tcp", l.nsA, l.nsB, l.ipB)
	t.Logf("ingress linux-htb queue 10 Mbit/s (qos_meter_bandwidth=false), A->B: avg %s steady %s", mbit(htb.AvgBps), mbit(htb.Steady))
	if !within(htb.Steady, limit*1000, 0.2) {
		t.Errorf("ingress limit by the linux-htb queue: %s, want 10 Mbit/s ±20 %%", mbit(htb.Steady))
	}
	l.setPolicy(nil, Options{})
	if n, err := l.db.CountRows(context.Background(), "QoS"); err != nil || n != 0 {
		t.Errorf("QoS rows left: %d %v", n, err)
	}

	// packet rate: 1 kpps egress while vmB sends 5 kpps
	freeU := l.transfer("udp", l.nsB, l.nsA, l.ipA)
	t.Logf("no policy, UDP B->A at %d pps: received %.0f pps", udpRate, freeU.PPS)
	l.setPolicy(&neutron.QosPolicy{ID: "pol", Rules: []neutron.QosRule{{Type: neutron.RulePacketRateLimit, ID: "r", QosPolicyID: "pol",
		Direction: neutron.DirectionEgress, MaxKpps: i64(1)}}}, Options{})
	pps := l.transfer("udp", l.nsB, l.nsA, l.ipA)
	t.Logf("packet_rate_limit 1 kpps egress: received %.0f pps (%d packets)", pps.PPS, pps.Packets)
	if !within(pps.PPS, 1000, 0.2) {
		t.Errorf("packet rate %.0f pps, want 1000 ±20 %%", pps.PPS)
	}
	l.setPolicy(nil, Options{})

	// DSCP marking, changed live, then removed
	mark := func(m int) *neutron.QosPolicy {
		return &neutron.QosPolicy{ID: "pol", Rules: []neutron.QosRule{{Type: neutron.RuleDSCPMarking, ID: "d", QosPolicyID: "pol", DSCPMark: m}}}
	}
	for _, c := range []struct {
		pol *neutron.QosPolicy
		tos string
	}{{mark(26), "0x68"}, {mark(46), "0xb8"}, {nil, "0x0"}} {
		l.setPolicy(c.pol, Options{})
		got := l.dscp()
		t.Logf("dscp rule %v: tos %v", c.pol != nil, got)
		if len(got) == 0 {
			t.Fatalf("captured nothing")
		}
		for _, g := range got {
			if g != c.tos {
				t.Errorf("tos %s, want %s", g, c.tos)
			}
		}
	}
}
