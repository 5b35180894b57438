//go:build e2e

package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// rabbitNode finds the local RabbitMQ node rabbitmqctl should address, as
// refenv/rmq.sh does.
func rabbitNode(ctx context.Context) (string, error) {
	host, _ := os.Hostname()
	if i := strings.IndexByte(host, '.'); i > 0 {
		host = host[:i]
	}
	for _, n := range []string{"rabbit@localhost", "rabbit@" + host} {
		c, cancel := context.WithTimeout(ctx, 20*time.Second)
		err := exec.CommandContext(c, "rabbitmqctl", "-n", n, "-q", "status").Run()
		cancel()
		if err == nil {
			return n, nil
		}
	}
	return "", fmt.Errorf("no local RabbitMQ node answers rabbitmqctl")
}

// rabbitmqctl runs rabbitmqctl -q against node.
func rabbitmqctl(ctx context.Context, node string, args ...string) (string, error) {
	c, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	return sh(c, "rabbitmqctl", append([]string{"-n", node, "-q"}, args...)...)
}

// tsvRows parses rabbitmqctl's tab-separated listing (the header row skipped).
func tsvRows(out string) [][]string {
	var rows [][]string
	for i, l := range strings.Split(strings.TrimSpace(out), "\n") {
		if i == 0 || l == "" {
			continue
		}
		rows = append(rows, strings.Split(l, "\t"))
	}
	return rows
}

// agentQueues lists the queues the agent process pid consumes, found through
// its connection name (ovsagent:<host>:<pid>:...), its channels and their
// consumers: queue name -> true.
func agentQueues(ctx context.Context, node string, pid int) ([]string, error) {
	conns, err := rabbitmqctl(ctx, node, "list_connections", "pid", "client_properties")
	if err != nil {
		return nil, err
	}
	mine := map[string]bool{}
	marker := fmt.Sprintf(":%d:", pid)
	for _, r := range tsvRows(conns) {
		if len(r) == 2 && strings.Contains(r[1], "ovsagent:") && strings.Contains(r[1], marker) {
			mine[r[0]] = true
		}
	}
	if len(mine) == 0 {
		return nil, fmt.Errorf("no RabbitMQ connection of ovs-agent pid %d", pid)
	}
	chans, err := rabbitmqctl(ctx, node, "list_channels", "pid", "connection")
	if err != nil {
		return nil, err
	}
	myChans := map[string]bool{}
	for _, r := range tsvRows(chans) {
		if len(r) == 2 && mine[r[1]] {
			myChans[r[0]] = true
		}
	}
	cons, err := rabbitmqctl(ctx, node, "list_consumers", "-p", TransportVHost(), "queue_name", "channel_pid")
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	var qs []string
	for _, r := range tsvRows(cons) {
		if len(r) == 2 && myChans[r[1]] && !seen[r[0]] && !strings.HasPrefix(r[0], "reply_") {
			seen[r[0]] = true
			qs = append(qs, r[0])
		}
	}
	sort.Strings(qs)
	return qs, nil
}

// queueTopic is the oslo topic a consumer queue belongs to: <topic>,
// <topic>.<host> or <topic>_fanout_<id>.
func queueTopic(q, host string) string {
	if i := strings.Index(q, "_fanout_"); i > 0 {
		return q[:i]
	}
	return strings.TrimSuffix(q, "."+host)
}

// publishRaw publishes body to queue through the default exchange (only that
// queue gets it; nobody else's agent sees the message).
func publishRaw(ctx context.Context, url string, bodies map[string][][]byte) error {
	conn, err := amqp.Dial(url)
	if err != nil {
		return err
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		return err
	}
	defer ch.Close()
	for q, bs := range bodies {
		for _, b := range bs {
			if err := ch.PublishWithContext(ctx, "", q, true, false, amqp.Publishing{ContentType: "application/json", ContentEncoding: "utf-8", Body: b}); err != nil {
				return fmt.Errorf("publish to %s: %w", q, err)
			}
		}
	}
	return nil
}

// osloCast renders an oslo.messaging 2.0 cast.
func osloCast(method, version string, args any) []byte {
	inner := map[string]any{
		"method": method, "version": version, "args": args,
		"_unique_id": strings.ReplaceAll(newUUID(), "-", ""), "_context_is_admin": true,
		"_context_request_id": "req-" + newUUID(), "_context_project_id": nil, "_context_user_id": nil,
	}
	msg, _ := json.Marshal(inner)
	out, _ := json.Marshal(map[string]string{"oslo.version": "2.0", "oslo.message": string(msg)})
	return out
}

// metricSum fetches /metrics and sums every sample of the metric name (all label sets);
// 0 when none exists yet.
func metricSum(ctx context.Context, a *Agent, name string) (float64, map[string]float64, error) {
	req, err := http.NewRequestWithContext(ctx, "GET", a.MetricsURL(), nil)
	if err != nil {
		return 0, nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, nil, err
	}
	sum := 0.0
	by := map[string]float64{}
	for _, l := range strings.Split(string(body), "\n") {
		if strings.HasPrefix(l, name+" ") || strings.HasPrefix(l, name+"{") {
			f := strings.Fields(l)
			v, err := strconv.ParseFloat(f[len(f)-1], 64)
			if err == nil {
				sum += v
				by[strings.Join(f[:len(f)-1], " ")] = v
			}
		}
	}
	return sum, by, nil
}

// ovsState is what must not change when an agent refuses its configuration:
// ovs-vsctl show plus every bridge's flows.
func ovsState(ctx context.Context, o OVS) (string, error) {
	show, err := o.Vsctl(ctx, "show")
	if err != nil {
		return "", err
	}
	var b strings.Builder
	b.WriteString(show)
	brs, err := o.Vsctl(ctx, "list-br")
	if err != nil {
		return "", err
	}
	for _, br := range strings.Fields(brs) {
		fl, err := o.DumpFlows(ctx, br)
		if err != nil {
			return "", err
		}
		sort.Strings(fl)
		fmt.Fprintf(&b, "\n== %s\n%s", br, strings.Join(fl, "\n"))
	}
	return b.String(), nil
}

// logLines returns the agent log lines matching re.
func logLines(a *Agent, re *regexp.Regexp) []string {
	var out []string
	sc := bufio.NewScanner(strings.NewReader(a.Log()))
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		if re.MatchString(sc.Text()) {
			out = append(out, sc.Text())
		}
	}
	return out
}

// waitFor polls cond every 100 ms until it holds or timeout passes; it
// returns the time taken and whether cond held.
func waitFor(ctx context.Context, timeout time.Duration, cond func() bool) (time.Duration, bool) {
	start := time.Now()
	for {
		if cond() {
			return time.Since(start), true
		}
		if time.Since(start) > timeout {
			return time.Since(start), false
		}
		select {
		case <-ctx.Done():
			return time.Since(start), false
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// Daemon is a helper process (socat relay) a test runs in its own session.
type Daemon struct {
	cmd  *exec.Cmd
	argv []string
	done chan struct{}
	Out  *strings.Builder
}

// StartDaemon runs argv with setsid; the cleanup stops it.
func StartDaemon(t testing.TB, argv ...string) *Daemon {
	t.Helper()
	d := &Daemon{argv: argv}
	if err := d.Start(); err != nil {
		t.Fatalf("start %v: %v", argv, err)
	}
	t.Cleanup(d.Stop)
	return d
}

// Start (re)starts the process.
func (d *Daemon) Start() error {
	cmd := exec.Command(d.argv[0], d.argv[1:]...)
	d.Out = &strings.Builder{}
	cmd.Stdout, cmd.Stderr = d.Out, d.Out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return err
	}
	d.cmd, d.done = cmd, make(chan struct{})
	done := d.done
	go func() { _ = cmd.Wait(); close(done) }()
	return nil
}

// Stop kills the process's session (it and the children it forked), after
// checking the pid still runs our command.
func (d *Daemon) Stop() {
	if d.cmd == nil {
		return
	}
	select {
	case <-d.done:
		return
	default:
	}
	pid := d.cmd.Process.Pid
	if cl, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid)); err == nil && strings.HasPrefix(string(cl), d.argv[0]) {
		_ = syscall.Kill(-pid, syscall.SIGTERM)
	}
	select {
	case <-d.done:
	case <-time.After(5 * time.Second):
		_ = syscall.Kill(-pid, syscall.SIGKILL)
		<-d.done
	}
}

// BulkPort is a port plugged without a namespace: a veth pair tap<id[:11]> /
// v<id[:11]> in the root namespace, the tap on br-int with os-vif's
// external_ids. Enough for the agent to wire it.
type BulkPort struct {
	Port *Port
	Tap  string
	peer string
}

// bulkPorts creates n ports on the network (8 API calls at a time); they are
// deleted (and unplugged) at cleanup.
func (e *Env) bulkPorts(nw *Network, prefix string, n int) []*BulkPort {
	e.T.Helper()
	out := make([]*BulkPort, n)
	errs := make([]error, n)
	sem := make(chan struct{}, 8)
	done := make(chan struct{})
	for i := 0; i < n; i++ {
		go func(i int) {
			defer func() { done <- struct{}{} }()
			sem <- struct{}{}
			defer func() { <-sem }()
			p, err := e.Neutron.CreatePort(e.Ctx, PortSpec{Name: e.name(fmt.Sprintf("%s%03d", prefix, i)), NetworkID: nw.ID, HostID: e.Host})
			if err != nil {
				errs[i] = err
				return
			}
			out[i] = &BulkPort{Port: p, Tap: "tap" + p.ID[:11], peer: "v" + p.ID[:11]}
		}(i)
	}
	for i := 0; i < n; i++ {
		<-done
	}
	e.T.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		for _, b := range out {
			if b != nil {
				_ = b.Unplug(ctx, e.OVS)
				if err := e.Neutron.DeletePort(ctx, b.Port.ID); err != nil && !IsNotFound(err) {
					e.T.Errorf("cleanup: %v", err)
				}
			}
		}
	})
	for i, err := range errs {
		if err != nil {
			e.T.Fatalf("port %d: %v", i, err)
		}
	}
	return out
}

// Plug creates the veth pair and adds the tap to br-int as os-vif does.
func (b *BulkPort) Plug(ctx context.Context, o OVS) error {
	_, _ = sh(ctx, "ip", "link", "del", b.Tap)
	if _, err := sh(ctx, "ip", "link", "add", b.Tap, "type", "veth", "peer", "name", b.peer); err != nil {
		return err
	}
	for _, l := range []string{b.Tap, b.peer} {
		if _, err := sh(ctx, "ip", "link", "set", l, "up"); err != nil {
			return err
		}
	}
	_, err := o.Vsctl(ctx, "--", "--may-exist", "add-port", "br-int", b.Tap, "--", "set", "Interface", b.Tap,
		"external_ids:iface-id="+b.Port.ID, "external_ids:attached-mac="+b.Port.MACAddress,
		"external_ids:iface-status=active", "external_ids:vm-uuid="+b.Port.DeviceID)
	return err
}

// Unplug removes the tap from br-int and deletes the veth pair.
func (b *BulkPort) Unplug(ctx context.Context, o OVS) error {
	_, err := o.Vsctl(ctx, "--if-exists", "del-port", "br-int", b.Tap)
	_, _ = sh(ctx, "ip", "link", "del", b.Tap)
	return err
}

// plugAll plugs ports, par at a time, and returns the first error.
func plugAll(ctx context.Context, o OVS, ports []*BulkPort, par int) error {
	sem := make(chan struct{}, par)
	errc := make(chan error, len(ports))
	for _, b := range ports {
		b := b
		sem <- struct{}{}
		go func() {
			defer func() { <-sem }()
			errc <- b.Plug(ctx, o)
		}()
	}
	var first error
	for range ports {
		if err := <-errc; err != nil && first == nil {
			first = err
		}
	}
	return first
}

// portStatuses returns status -> count for the ports of the network, and
// the ids of those not in want.
func (e *Env) portStatuses(ctx context.Context, netID string, ids map[string]bool, want string) (map[string]int, []string, error) {
	ps, err := e.Neutron.ListPorts(ctx, url.Values{"network_id": {netID}})
	if err != nil {
		return nil, nil, err
	}
	st := map[string]int{}
	var off []string
	for _, p := range ps {
		if ids != nil && !ids[p.ID] {
			continue
		}
		st[p.Status]++
		if p.Status != want {
			off = append(off, p.ID)
		}
	}
	return st, off, nil
}

// staleFlows lists flows on the agent's bridges whose cookie is not the
// current run's (learned br-tun table 20 flows excluded: they expire).
func staleFlows(ctx context.Context, o OVS, a *Agent) ([]string, error) {
	cookies := a.Cookies()
	var stale []string
	for br, c := range cookies {
		fl, err := o.DumpFlows(ctx, br)
		if err != nil {
			return nil, err
		}
		for _, f := range fl {
			if strings.Contains(f, "table=20") && strings.Contains(f, "hard_timeout=") {
				continue
			}
			if m := cookieRe.FindStringSubmatch(f); m == nil || m[1] != c {
				stale = append(stale, br+": "+f)
			}
		}
	}
	return stale, nil
}

// tagsOf returns the VLAN tag of each tap (0 = none) in one ovs-vsctl call.
func tagsOf(ctx context.Context, o OVS) (map[string]int, error) {
	out, err := o.Vsctl(ctx, "--format=csv", "--data=bare", "--no-headings", "--columns=name,tag", "list", "Port")
	if err != nil {
		return nil, err
	}
	tags := map[string]int{}
	for _, l := range strings.Split(out, "\n") {
		f := strings.Split(l, ",")
		if len(f) == 2 {
			n, _ := strconv.Atoi(f[1])
			tags[f[0]] = n
		}
	}
	return tags, nil
}
