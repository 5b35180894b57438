//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestMixedBrokerReference: the release's reference agent and ovs-agent on one vhost, both
// configured as the server is (a refenv messaging variant: `RELEASE=2026.2 MESSAGING=quorum
// .ci/run` phase, or by hand with OVSAGENT_TRANSPORT_URL of that server), as a cloud in the
// middle of a migration runs them. The reference runs on a private OVS of its own
// (`refenv/release.sh agent` with the variant's MESSAGING: host refhv-<release>-<variant>),
// ovs-agent as hv1. Both must be alive at once, a port of one network on each host ACTIVE,
// and nobody may have been refused a declaration: no 406 / PRECONDITION_FAILED /
// "inequivalent arg" / channel error in the reference agent's log, the server's logs,
// ovs-agent's log or the broker's log for this vhost, ovs-agent's
// ovsagent_amqp_declare_failures_total absent and /readyz 200. The two declare the same
// shared names (exchanges, the topic queues without a host, the stream fanout queues): with
// an argument of ovs-agent's differing from oslo's, one side's declaration is refused and
// this test fails. With rabbit_quorum_queue, the broker's list of queues must show every
// quorum queue ovs-agent, the reference and the server consume carrying x-delivery-limit and
// x-max-in-memory-length/-bytes exactly as the server's options say (absent when unset), and
// ovs-agent's queues of each kind (topic, reply) the same arguments as the reference's and the
// server's (quorumArgsAlike; the quorumlimits variant sets all three). Then the reference agent
// is stopped (its pid checked gone).
func TestMixedBrokerReference(t *testing.T) {
	e := NewEnv(t)
	rel := refRelease()
	if refChroot() == "" {
		t.Fatalf("OVSAGENT_RELEASE=%s: this test runs a chroot release's reference agent (2025.1, 2026.2) beside ovs-agent", rel)
	}
	variant, ref := releaseVariant(t, rel)
	t.Logf("release %s, messaging variant %q ([oslo_messaging_rabbit] %s), vhost %s, reference host %s",
		rel, variant, ref["REFENV_MESSAGING"], ref["REFENV_VHOST"], ref["REFENV_AGENT_HOST"])
	releaseSh := func(ctx context.Context, verb string) (string, error) {
		setup, err := refenvSetup()
		if err != nil {
			return "", err
		}
		cmd := exec.CommandContext(ctx, filepath.Join(filepath.Dir(setup), "release.sh"), verb)
		cmd.Env = append(os.Environ(), "RELEASE="+rel, "MESSAGING="+variant)
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true} // its daemons must not share our session
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	pidFile := filepath.Join(ref["REFENV_RUN"], "ovs-agent.pid")
	if pid, alive := refPid(pidFile); alive {
		t.Fatalf("a reference agent of %s %s runs already (pid %d, %s): not this test's; stop it first "+
			"(RELEASE=%s MESSAGING=%s refenv/release.sh agent-stop)", rel, variant, pid, pidFile, rel, variant)
	}

	// Where each log stands now: only what is written from here on counts.
	logs := newLogMarks(t, ref)

	start := time.Now()
	out, err := releaseSh(e.Ctx, "agent")
	t.Cleanup(func() {
		ctx, cancel := cleanupCtx()
		defer cancel()
		if out, err := releaseSh(ctx, "agent-stop"); err != nil {
			t.Errorf("cleanup: release.sh agent-stop: %v\n%s", err, out)
		}
		// its row would stay in the server's agent list, dead
		if a, err := e.Neutron.OVSAgent(ctx, ref["REFENV_AGENT_HOST"]); err == nil && a != nil {
			if err := e.Neutron.Do(ctx, "DELETE", "/agents/"+a.ID, nil, nil); err != nil && !IsNotFound(err) {
				t.Errorf("cleanup: delete agent row %s: %v", a.ID, err)
			}
		}
	})
	if err != nil {
		t.Fatalf("release.sh agent: %v\n%s\n%s", err, out, tailFile(ref["REFENV_AGENT_LOG"], 30))
	}
	refPID, alive := refPid(pidFile)
	if !alive {
		t.Fatalf("reference agent not running after release.sh agent (%s)", pidFile)
	}
	t.Logf("reference agent pid %d alive in the API %s after start", refPID, time.Since(start).Round(10*time.Millisecond))

	agent, took := e.StartAgentAlive(AgentConfig{}, 60*time.Second)
	t.Logf("ovs-agent alive %s after start", took)

	nw := e.Network(NetworkSpec{Name: "mixed", NetworkType: "vxlan"})
	e.Subnet(nw.ID, "10.250.17.0/24")
	vm := e.VM(nw, "ovs")
	refPort := e.Port(PortSpec{Name: "ref", NetworkID: nw.ID, HostID: ref["REFENV_AGENT_HOST"]})
	refVM := e.Plug(PlugSpec{Port: refPort, MTU: nw.MTU, HostNS: ref["REFENV_OVS_NS"],
		OVS: OVS{DB: "unix:" + filepath.Join(ref["REFENV_OVS_DIR"], "db.sock")}})
	t.Logf("ovs-agent's port ACTIVE %s after plugging", e.WaitStatus(vm.Port, "ACTIVE", 30*time.Second))
	t.Logf("the reference's port ACTIVE %s after plugging", e.WaitStatus(refVM.Port, "ACTIVE", 60*time.Second))
	// a fanout both consume (security_groups_rule_updated), after both wired their port
	sg := e.SecurityGroup("mixed")
	e.Rule(RuleSpec{SecurityGroupID: sg.ID, Protocol: "tcp", PortMin: 22, PortMax: 22})
	for _, h := range []string{e.Host, ref["REFENV_AGENT_HOST"]} {
		if a, err := e.Neutron.OVSAgent(e.Ctx, h); err != nil || a == nil || !a.Alive {
			t.Errorf("agent %s not alive with both running: %+v %v", h, a, err)
		}
	}
	if ref["REFENV_MESSAGING"] != "" && strings.Contains(ref["REFENV_MESSAGING"], "rabbit_stream_fanout=true") {
		// both read the same stream fanout queues (one queue per topic, not one per agent)
		sharedStreams(t, e, ref["REFENV_VHOST"])
	}
	time.Sleep(3 * time.Second) // the rule's fanout consumed, any refusal logged
	if opts, err := parseMessaging(ref["REFENV_MESSAGING"]); err != nil {
		t.Fatal(err)
	} else if isTrue(opts["rabbit_quorum_queue"]) {
		// ovs-agent's own quorum queues (<topic>.<host>, its reply queue) are declared by
		// nobody else: only the broker's view shows that they carry the server's limits
		quorumArgsAlike(t, e, ref["REFENV_VHOST"], opts, agent.Pid(), refPID)
	}

	if n := declareFailures(t, e, agent); n != 0 {
		t.Errorf("ovs-agent: ovsagent_amqp_declare_failures_total = %v, want none", n)
	}
	readyz(t, e, agent)

	// Stop the reference (SIGTERM, SIGKILL after 20 s: it ignores SIGTERM), then read every log
	// through the end of its run.
	if out, err := releaseSh(e.Ctx, "ref-stop"); err != nil {
		t.Errorf("release.sh ref-stop: %v\n%s", err, out)
	}
	if _, alive := refPid(pidFile); alive || pidRuns(refPID, "neutron-openvswitch-agent") {
		t.Errorf("reference agent pid %d still runs after release.sh ref-stop", refPID)
	} else {
		t.Logf("reference agent pid %d stopped", refPID)
	}
	for _, f := range logs.refused(t, ref["REFENV_VHOST"], ref["REFENV_AGENT_LOG"]) {
		t.Errorf("refused declaration: %s", f)
	}
	for _, l := range strings.Split(agent.Log(), "\n") {
		if refusal.MatchString(l) || strings.Contains(l, "declare failed") {
			t.Errorf("ovs-agent's log: %s", l)
		}
	}
}

// refusal: how oslo.messaging (kombu/amqp), ovs-agent and RabbitMQ write a refused
// declaration or a channel closed by the broker ("(406)": not a bare 406, which a millisecond
// field can hold).
var refusal = regexp.MustCompile(`(?i)precondition_failed|inequivalent arg|\(406\)|channel[ _]?(error|exception)`)

// releaseVariant finds which of refenv's servers of rel the suite runs against (the one whose
// transport_url is $OVSAGENT_TRANSPORT_URL) and returns its variant and `release.sh env`.
func releaseVariant(t *testing.T, rel string) (string, map[string]string) {
	t.Helper()
	want := os.Getenv("OVSAGENT_TRANSPORT_URL")
	for _, v := range []string{"", "quorum", "classic", "quorumlimits"} {
		env, err := releaseEnv(rel, v)
		if err != nil {
			t.Fatal(err)
		}
		if env["REFENV_TRANSPORT_URL"] == want {
			return v, env
		}
	}
	t.Fatalf("OVSAGENT_TRANSPORT_URL=%q is none of refenv's %s servers (RELEASE=%s MESSAGING=quorum|classic|quorumlimits refenv/release.sh env)", want, rel, rel)
	return "", nil
}

// releaseEnv is `RELEASE=rel MESSAGING=variant release.sh env`, evaluated by bash.
func releaseEnv(rel, variant string) (map[string]string, error) {
	setup, err := refenvSetup()
	if err != nil {
		return nil, err
	}
	keys := []string{"REFENV_TRANSPORT_URL", "REFENV_VHOST", "REFENV_MESSAGING", "REFENV_LOGS", "REFENV_AGENT_LOG",
		"REFENV_AGENT_HOST", "REFENV_OVS_NS", "REFENV_OVS_DIR", "REFENV_RUN"}
	script := `eval "$("$0" env)" || exit 1; for k in "$@"; do printf '%s=%s\n' "$k" "${!k}"; done`
	cmd := exec.Command("bash", append([]string{"-c", script, filepath.Join(filepath.Dir(setup), "release.sh")}, keys...)...)
	cmd.Env = append(os.Environ(), "RELEASE="+rel, "MESSAGING="+variant)
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("RELEASE=%s MESSAGING=%s release.sh env: %v", rel, variant, err)
	}
	m := map[string]string{}
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		k, v, _ := strings.Cut(l, "=")
		m[k] = v
	}
	for _, k := range keys {
		if m[k] == "" && k != "REFENV_MESSAGING" {
			return nil, fmt.Errorf("release.sh env (RELEASE=%s MESSAGING=%s) has no %s: an older refenv?", rel, variant, k)
		}
	}
	return m, nil
}

// refPid reads a pid file release.sh wrote; alive: that pid runs the reference agent.
func refPid(file string) (int, bool) {
	b, err := os.ReadFile(file)
	if err != nil {
		return 0, false
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 0 {
		return 0, false
	}
	return pid, pidRuns(pid, "neutron-openvswitch-agent")
}

// pidRuns: pid is alive and its command line holds word.
func pidRuns(pid int, word string) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	return err == nil && strings.Contains(string(b), word)
}

func tailFile(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	l := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(l) > n {
		l = l[len(l)-n:]
	}
	return path + ":\n" + strings.Join(l, "\n")
}

// logMarks remembers the size of the reference's and the server's logs (REFENV_LOGS) and
// of the broker's, so that only what this test's run writes is searched.
type logMarks struct {
	files  map[string]int64
	broker []string
}

func newLogMarks(t *testing.T, ref map[string]string) *logMarks {
	t.Helper()
	m := &logMarks{files: map[string]int64{}}
	server, _ := filepath.Glob(ref["REFENV_LOGS"])
	broker, _ := filepath.Glob("/var/log/rabbitmq/rabbit@*.log")
	for _, f := range broker {
		if !strings.HasSuffix(f, "_upgrade.log") {
			m.broker = append(m.broker, f)
		}
	}
	if len(m.broker) == 0 {
		t.Fatal("no RabbitMQ log in /var/log/rabbitmq: the broker's side cannot be checked")
	}
	for _, f := range append(append(server, ref["REFENV_AGENT_LOG"]), m.broker...) {
		var size int64
		if st, err := os.Stat(f); err == nil {
			size = st.Size()
		}
		m.files[f] = size
	}
	return m
}

// since is what f holds past its mark (the whole file if it was made after the mark).
func (m *logMarks) since(f string) (string, error) {
	fh, err := os.Open(f)
	if err != nil {
		return "", err
	}
	defer fh.Close()
	off := m.files[f]
	if st, err := fh.Stat(); err == nil && st.Size() < off {
		off = 0 // rotated
	}
	if _, err := fh.Seek(off, io.SeekStart); err != nil {
		return "", err
	}
	b, err := io.ReadAll(fh)
	return string(b), err
}

// refused lists the refusals logged since the marks: lines of the reference's and the
// server's logs, entries of the broker's log (an entry's first line names the vhost, the next
// ones the reason) that name vhost. It fails the test if those are not the logs being written:
// the reference's log or the server's did not grow, or the broker logged no connection to vhost.
func (m *logMarks) refused(t *testing.T, vhost, refLog string) []string {
	t.Helper()
	var found []string
	grew := map[string]bool{}
	granted := false
	isBroker := map[string]bool{}
	for _, f := range m.broker {
		isBroker[f] = true
	}
	stamp := regexp.MustCompile(`^\d{4}-\d\d-\d\d[ T]`)
	for f := range m.files {
		text, err := m.since(f)
		if err != nil {
			if f == m.broker[0] || !os.IsNotExist(err) {
				t.Errorf("log %s: %v", f, err)
			}
			continue
		}
		if text != "" {
			grew[f] = true
		}
		if !isBroker[f] {
			for _, l := range strings.Split(text, "\n") {
				if refusal.MatchString(l) {
					found = append(found, filepath.Base(f)+": "+l)
				}
			}
			continue
		}
		var entry []string
		flush := func() {
			s := strings.Join(entry, " | ")
			granted = granted || strings.Contains(s, "granted access to vhost '"+vhost+"'")
			if strings.Contains(s, "vhost: '"+vhost+"'") && refusal.MatchString(s) {
				found = append(found, filepath.Base(f)+": "+s)
			}
			entry = entry[:0]
		}
		for _, l := range strings.Split(text, "\n") {
			if stamp.MatchString(l) {
				flush()
			}
			entry = append(entry, strings.TrimSpace(l))
		}
		flush()
	}
	server := 0
	for f := range m.files {
		if grew[f] && !isBroker[f] && f != refLog {
			server++
		}
	}
	if !grew[refLog] || server == 0 || !granted {
		t.Errorf("not the logs being written: the reference's %s grew %v, %d server log(s) grew, "+
			"the broker logged a connection to vhost %s: %v", refLog, grew[refLog], server, vhost, granted)
	}
	return found
}

// declareFailures sums ovs-agent's ovsagent_amqp_declare_failures_total samples (one per
// queue and reason; none at all when nothing was refused).
func declareFailures(t *testing.T, e *Env, a *Agent) float64 {
	t.Helper()
	body := httpGet(t, e, a.MetricsURL())
	var n float64
	for _, l := range strings.Split(body, "\n") {
		if strings.HasPrefix(l, "ovsagent_amqp_declare_failures_total") {
			f := strings.Fields(l)
			v, err := strconv.ParseFloat(f[len(f)-1], 64)
			if err != nil {
				t.Fatalf("metric line %q: %v", l, err)
			}
			n += v
		}
	}
	return n
}

// readyz: ovs-agent's /readyz answers 200 (a failing declaration makes it 503, naming the queue).
func readyz(t *testing.T, e *Env, a *Agent) {
	t.Helper()
	u := strings.TrimSuffix(a.MetricsURL(), "/metrics") + "/readyz"
	req, err := http.NewRequestWithContext(e.Ctx, "GET", u, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Errorf("ovs-agent /readyz = %d %s", resp.StatusCode, b)
	}
}

func httpGet(t *testing.T, e *Env, u string) string {
	t.Helper()
	req, err := http.NewRequestWithContext(e.Ctx, "GET", u, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// sharedStreams: with rabbit_stream_fanout the fanout queues are streams named <topic>_fanout,
// one per topic for every agent: the agents' notifier topics must be read by both from the
// same streams.
func sharedStreams(t *testing.T, e *Env, vhost string) {
	t.Helper()
	node, err := rabbitNode(e.Ctx)
	if err != nil {
		t.Fatal(err)
	}
	out, err := rabbitmqctl(e.Ctx, node, "list_queues", "-p", vhost, "name", "type", "consumers")
	if err != nil {
		t.Fatalf("list_queues: %v", err)
	}
	var shared, one []string
	for _, r := range tsvRows(out) {
		if len(r) == 3 && r[1] == "stream" && strings.HasPrefix(r[0], "q-agent-notifier-") {
			if n, _ := strconv.Atoi(r[2]); n >= 2 {
				shared = append(shared, r[0])
			} else {
				one = append(one, r[0]+" ("+r[2]+")") // a topic only one of them listens to (dvr-update without DVR)
			}
		}
	}
	t.Logf("stream fanout queues with one consumer: %s", strings.Join(one, ", "))
	if len(shared) == 0 {
		t.Errorf("no q-agent-notifier-*_fanout stream with both agents on vhost %s:\n%s", vhost, out)
	}
	t.Logf("stream fanout queues both agents read: %s", strings.Join(shared, ", "))
}

func isTrue(v string) bool {
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "true", "1", "yes", "on":
		return true
	}
	return false
}

// quorumLimitArgs: the queue arguments oslo.messaging adds to a quorum queue for each
// [oslo_messaging_rabbit] option (sent only when the option is not 0).
var quorumLimitArgs = []struct{ option, arg string }{
	{"rabbit_quorum_delivery_limit", "x-delivery-limit"},
	{"rabbit_quorum_max_memory_length", "x-max-in-memory-length"},
	{"rabbit_quorum_max_memory_bytes", "x-max-in-memory-bytes"},
}

// brokerQueue is one row of `rabbitmqctl list_queues --formatter json name type arguments`:
// each argument is [name, AMQP type, value].
type brokerQueue struct {
	Name      string  `json:"name"`
	Type      string  `json:"type"`
	Arguments [][]any `json:"arguments"`
}

// arg returns the value of argument name as the broker holds it, and its AMQP type.
func (q brokerQueue) arg(name string) (val, typ string, ok bool) {
	for _, a := range q.Arguments {
		if len(a) == 3 && fmt.Sprint(a[0]) == name {
			return fmt.Sprint(a[2]), fmt.Sprint(a[1]), true
		}
	}
	return "", "", false
}

// signature is the queue's arguments, sorted, with their AMQP types (signedint vs long
// differ to the broker's equivalence check as much as the values do).
func (q brokerQueue) signature() string {
	var l []string
	for _, a := range q.Arguments {
		if len(a) == 3 {
			l = append(l, fmt.Sprintf("%v=%v (%v)", a[0], a[2], a[1]))
		} else {
			l = append(l, fmt.Sprint(a))
		}
	}
	sort.Strings(l)
	return q.Type + " [" + strings.Join(l, ", ") + "]"
}

// queueKind: a reply queue (reply_<uuid>, or <hostname>:<processname>:<n> with
// use_queue_manager), a stream fanout queue, or a topic queue (<topic>, <topic>.<host>).
func queueKind(q brokerQueue) string {
	switch {
	case q.Type == "stream":
		return "stream"
	case strings.HasPrefix(q.Name, "reply_") || strings.Contains(q.Name, ":"):
		return "reply"
	}
	return "topic"
}

// quorumArgsAlike reads the broker's queues of vhost and who consumes them: ovs-agent (its
// connections are named ovsagent:<host>:<pid>:...), the reference agent
// (neutron-openvswitch-agent:<pid>:<uuid>, oslo's connection name) and the server's RPC
// workers (neutron-rpc-server: or neutron-server:). Every quorum queue of the three must
// carry the limit arguments opts (the server's options) ask for, with those values and none
// other; ovs-agent must consume quorum topic and reply queues, and each kind's arguments
// must be the reference's and the server's for that kind.
func quorumArgsAlike(t *testing.T, e *Env, vhost string, opts map[string]string, ovsPid, refPid int) {
	t.Helper()
	node, err := rabbitNode(e.Ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{}
	for _, l := range quorumLimitArgs {
		if v := strings.TrimSpace(opts[l.option]); v != "" && v != "0" {
			want[l.arg] = v
		}
	}
	owners := map[string]func(string) bool{
		"ovs-agent": func(p string) bool {
			return strings.Contains(p, "ovsagent:") && strings.Contains(p, fmt.Sprintf(":%d:", ovsPid))
		},
		"reference": func(p string) bool {
			return strings.Contains(p, fmt.Sprintf("neutron-openvswitch-agent:%d:", refPid))
		},
		"server": func(p string) bool {
			return strings.Contains(p, "neutron-rpc-server:") || strings.Contains(p, "neutron-server:")
		},
	}
	consumed, err := queuesByOwner(e.Ctx, node, vhost, owners)
	if err != nil {
		t.Fatal(err)
	}
	out, err := rabbitmqctl(e.Ctx, node, "list_queues", "-p", vhost, "--formatter", "json", "name", "type", "arguments")
	if err != nil {
		t.Fatalf("list_queues: %v", err)
	}
	var queues []brokerQueue
	if i := strings.IndexByte(out, '['); i > 0 {
		out = out[i:] // a warning on stderr before the listing
	}
	dec := json.NewDecoder(strings.NewReader(out))
	dec.UseNumber() // 8388608, not 8.388608e+06
	if err := dec.Decode(&queues); err != nil {
		t.Fatalf("list_queues -p %s --formatter json: %v\n%s", vhost, err, out)
	}
	byName := map[string]brokerQueue{}
	for _, q := range queues {
		byName[q.Name] = q
	}
	// owner -> kind -> signatures (one per distinct argument set)
	sigs := map[string]map[string]map[string][]string{}
	for owner, names := range consumed {
		sigs[owner] = map[string]map[string][]string{}
		for _, n := range names {
			q, ok := byName[n]
			if !ok || q.Type != "quorum" {
				continue
			}
			for _, l := range quorumLimitArgs {
				v, typ, has := q.arg(l.arg)
				w, wanted := want[l.arg]
				switch {
				case wanted && !has:
					t.Errorf("%s's queue %s has no %s (%s = %s): %s", owner, n, l.arg, l.option, w, q.signature())
				case wanted && v != w:
					t.Errorf("%s's queue %s: %s = %s (%s), %s = %s", owner, n, l.arg, v, typ, l.option, w)
				case !wanted && has:
					t.Errorf("%s's queue %s: %s = %s, but %s is not set", owner, n, l.arg, v, l.option)
				}
			}
			k := queueKind(q)
			if sigs[owner][k] == nil {
				sigs[owner][k] = map[string][]string{}
			}
			sigs[owner][k][q.signature()] = append(sigs[owner][k][q.signature()], n)
		}
	}
	for _, owner := range []string{"ovs-agent", "reference", "server"} {
		for k, m := range sigs[owner] {
			for sig, names := range m {
				t.Logf("%s's quorum %s queues (%d, e.g. %s): %s", owner, k, len(names), names[0], sig)
			}
		}
	}
	for _, k := range []string{"topic", "reply"} {
		mine := sigs["ovs-agent"][k]
		if len(mine) == 0 {
			t.Errorf("ovs-agent consumes no quorum %s queue on vhost %s (queues it consumes: %v)", k, vhost, consumed["ovs-agent"])
			continue
		}
		for _, other := range []string{"reference", "server"} {
			theirs := sigs[other][k]
			if len(theirs) == 0 {
				if other == "reference" {
					t.Errorf("the reference agent consumes no quorum %s queue on vhost %s (queues it consumes: %v)", k, vhost, consumed[other])
				}
				continue
			}
			for sig, names := range mine {
				if _, ok := theirs[sig]; !ok || len(theirs) != 1 || len(mine) != 1 {
					t.Errorf("ovs-agent's quorum %s queues (%s ...) have %s; the %s's: %v", k, names[0], sig, other, keys(theirs))
				}
			}
		}
	}
	if len(sigs["server"]) == 0 {
		t.Errorf("no quorum queue of the server's on vhost %s (queues it consumes: %v)", vhost, consumed["server"])
	}
}

func keys(m map[string][]string) []string {
	var l []string
	for k := range m {
		l = append(l, k)
	}
	sort.Strings(l)
	return l
}

// queuesByOwner lists the queues of vhost consumed through each owner's connections (an
// owner matches a connection's client properties, where its connection name is).
func queuesByOwner(ctx context.Context, node, vhost string, owners map[string]func(string) bool) (map[string][]string, error) {
	conns, err := rabbitmqctl(ctx, node, "list_connections", "pid", "vhost", "client_properties")
	if err != nil {
		return nil, err
	}
	ownerOf := map[string]string{} // connection pid -> owner
	for _, r := range tsvRows(conns) {
		if len(r) != 3 || r[1] != vhost {
			continue
		}
		for o, match := range owners {
			if match(r[2]) {
				ownerOf[r[0]] = o
			}
		}
	}
	chans, err := rabbitmqctl(ctx, node, "list_channels", "pid", "connection")
	if err != nil {
		return nil, err
	}
	chanOwner := map[string]string{}
	for _, r := range tsvRows(chans) {
		if len(r) == 2 && ownerOf[r[1]] != "" {
			chanOwner[r[0]] = ownerOf[r[1]]
		}
	}
	cons, err := rabbitmqctl(ctx, node, "list_consumers", "-p", vhost, "queue_name", "channel_pid")
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	res := map[string][]string{}
	for _, r := range tsvRows(cons) {
		if len(r) == 2 && chanOwner[r[1]] != "" && !seen[chanOwner[r[1]]+" "+r[0]] {
			seen[chanOwner[r[1]]+" "+r[0]] = true
			res[chanOwner[r[1]]] = append(res[chanOwner[r[1]]], r[0])
		}
	}
	for o := range owners {
		sort.Strings(res[o])
	}
	return res, nil
}
