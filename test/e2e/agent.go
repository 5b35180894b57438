//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

var (
	buildOnce sync.Once
	buildBin  string
	buildErr  error
)

// moduleRoot is the repository root (where go.mod is).
func moduleRoot() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	gomod := strings.TrimSpace(string(out))
	if gomod == "" || gomod == os.DevNull {
		return "", fmt.Errorf("not inside the ovsagent module")
	}
	return filepath.Dir(gomod), nil
}

// AgentBinary builds cmd/ovs-agent once per test process into a temp dir.
func AgentBinary() (string, error) {
	buildOnce.Do(func() {
		root, err := moduleRoot()
		if err != nil {
			buildErr = err
			return
		}
		dir, err := os.MkdirTemp("", "ovsagent-e2e-bin-")
		if err != nil {
			buildErr = err
			return
		}
		bin := filepath.Join(dir, "ovs-agent")
		cmd := exec.Command("go", "build", "-o", bin, "./cmd/ovs-agent")
		cmd.Dir = root
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0") // as installed: static, no libc mapped
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build ./cmd/ovs-agent: %w: %s", err, out)
			return
		}
		buildBin = bin
	})
	return buildBin, buildErr
}

// AgentConfig is what the harness writes into neutron.conf and
// openvswitch_agent.ini. The defaults are refenv's values for host hv1.
type AgentConfig struct {
	Host           string // hv1
	TransportURL   string // rabbit://guest:guest@127.0.0.1:5672/
	LocalIP        string // 127.0.0.1
	TunnelTypes    string // vxlan ("none" for no tunnels)
	BridgeMappings string // physnet1:br-phys ("none" for no mappings)
	Firewall       string // openvswitch
	OVSDB          string // unix:/var/run/openvswitch/db.sock
	L2Population   *bool  // true
	MetricsListen  string // a free 127.0.0.1 port; "off" disables
	Debug          bool
	// NetNS runs the agent inside this network namespace (twohost: hv1, hv2),
	// Env adds environment variables (e.g. OVS_RUNDIR=/tmp/twohost/hv1).
	NetNS string
	Env   []string
	// Set adds or overrides options: section -> key -> value.
	Set map[string]map[string]string
}

// DefaultTransportURL is $OVSAGENT_TRANSPORT_URL (the vhost of a newer
// release's server: refenv/release.sh env) or refenv Zed's broker, vhost /.
func DefaultTransportURL() string {
	if u := os.Getenv("OVSAGENT_TRANSPORT_URL"); u != "" {
		return u
	}
	return "rabbit://guest:guest@127.0.0.1:5672/"
}

// TransportVia is DefaultTransportURL through another broker address (a relay on
// 127.0.0.1:port) and, when user is set, as another user: the vhost stays the
// one of the release's server.
func TransportVia(port int, user, pass string) string {
	u, err := url.Parse(DefaultTransportURL())
	if err != nil {
		return fmt.Sprintf("rabbit://guest:guest@127.0.0.1:%d/", port)
	}
	u.Host = fmt.Sprintf("127.0.0.1:%d", port)
	if user != "" {
		u.User = url.UserPassword(user, pass)
	}
	return u.String()
}

// TransportVHost is the vhost of DefaultTransportURL ("/" for Zed's).
func TransportVHost() string {
	u, err := url.Parse(DefaultTransportURL())
	if err != nil || strings.TrimPrefix(u.Path, "/") == "" {
		return "/"
	}
	v, err := url.PathUnescape(strings.TrimPrefix(u.Path, "/"))
	if err != nil {
		return "/"
	}
	return v
}

// MessagingOptions is $OVSAGENT_E2E_MESSAGING: [oslo_messaging_rabbit] options every agent
// the harness starts gets, "key=value,key=value" (a server of refenv's MESSAGING variants has
// them in its neutron.conf: `refenv/release.sh env` prints them as REFENV_MESSAGING), so that
// the same tests run with ovs-agent declaring its queues as that server's oslo.messaging does.
// A test's own AgentConfig.Set wins over them.
func MessagingOptions() (map[string]string, error) {
	return parseMessaging(os.Getenv("OVSAGENT_E2E_MESSAGING"))
}

func parseMessaging(s string) (map[string]string, error) {
	opts := map[string]string{}
	for _, kv := range strings.Split(s, ",") {
		kv = strings.TrimSpace(kv)
		if kv == "" {
			continue
		}
		k, v, ok := strings.Cut(kv, "=")
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		if !ok || k == "" {
			return nil, fmt.Errorf("OVSAGENT_E2E_MESSAGING: %q is not key=value", kv)
		}
		opts[k] = v
	}
	return opts, nil
}

// messaging adds MessagingOptions to c.Set's [oslo_messaging_rabbit] (a test's own values
// stay). With use_queue_manager, queue names are <hostname>:<processname>:<n>, hostname
// defaulting to the machine's name, and the counter (oslo's too) is per process group: two
// agents on one machine (hv1 and hv2 here) would declare the same reply and fanout queues and
// take each other's replies, so each gets hostname = its host, as two machines would have.
func (c *AgentConfig) messaging() error {
	opts, err := MessagingOptions()
	if err != nil || len(opts) == 0 {
		return err
	}
	set := map[string]map[string]string{}
	for s, kv := range c.Set {
		set[s] = map[string]string{}
		for k, v := range kv {
			set[s][k] = v
		}
	}
	if set["oslo_messaging_rabbit"] == nil {
		set["oslo_messaging_rabbit"] = map[string]string{}
	}
	r := set["oslo_messaging_rabbit"]
	for k, v := range opts {
		if _, ok := r[k]; !ok {
			r[k] = v
		}
	}
	if qm := strings.ToLower(r["use_queue_manager"]); (qm == "true" || qm == "1" || qm == "yes" || qm == "on") && r["hostname"] == "" {
		r["hostname"] = c.Host
	}
	c.Set = set
	return nil
}

func (c *AgentConfig) defaults() error {
	def := func(p *string, v string) {
		if *p == "" {
			*p = v
		}
	}
	def(&c.Host, "hv1")
	def(&c.TransportURL, DefaultTransportURL())
	def(&c.LocalIP, "127.0.0.1")
	def(&c.TunnelTypes, "vxlan")
	def(&c.BridgeMappings, "physnet1:br-phys")
	def(&c.Firewall, "openvswitch")
	def(&c.OVSDB, "unix:/var/run/openvswitch/db.sock")
	if err := c.messaging(); err != nil {
		return err
	}
	if c.L2Population == nil {
		t := true
		c.L2Population = &t
	}
	if c.MetricsListen == "" {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return err
		}
		c.MetricsListen = l.Addr().String()
		l.Close()
	}
	return nil
}

// files renders the two configuration files.
func (c *AgentConfig) files() (neutronConf, agentIni string) {
	secs := map[string]map[string]string{
		"DEFAULT":       {"host": c.Host, "debug": strconv.FormatBool(c.Debug)},
		"agent":         {"l2_population": strconv.FormatBool(*c.L2Population), "arp_responder": "False"},
		"ovs":           {"integration_bridge": "br-int", "tunnel_bridge": "br-tun", "datapath_type": "netdev", "ovsdb_connection": c.OVSDB, "of_listen_address": "127.0.0.1", "of_listen_port": "6633"},
		"securitygroup": {"enable_security_group": "True", "firewall_driver": c.Firewall},
		"ovsagent":      {"metrics_listen": c.MetricsListen},
	}
	if c.TunnelTypes != "none" {
		secs["agent"]["tunnel_types"] = c.TunnelTypes
		secs["ovs"]["local_ip"] = c.LocalIP
	}
	if c.BridgeMappings != "none" {
		secs["ovs"]["bridge_mappings"] = c.BridgeMappings
	}
	if c.MetricsListen == "off" {
		secs["ovsagent"]["metrics_listen"] = ""
	}
	for s, kv := range c.Set {
		if secs[s] == nil {
			secs[s] = map[string]string{}
		}
		for k, v := range kv {
			secs[s][k] = v
		}
	}
	neutronConf = "# written by the ovsagent e2e harness\n[DEFAULT]\ntransport_url = " + c.TransportURL + "\n\n[agent]\nreport_interval = 30\n"
	return neutronConf, renderINI(secs)
}

func renderINI(secs map[string]map[string]string) string {
	var b strings.Builder
	b.WriteString("# written by the ovsagent e2e harness\n")
	names := make([]string, 0, len(secs))
	for s := range secs {
		if s != "DEFAULT" {
			names = append(names, s)
		}
	}
	sort.Strings(names)
	for _, s := range append([]string{"DEFAULT"}, names...) {
		fmt.Fprintf(&b, "\n[%s]\n", s)
		keys := make([]string, 0, len(secs[s]))
		for k := range secs[s] {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			fmt.Fprintf(&b, "%s = %s\n", k, secs[s][k])
		}
	}
	return b.String()
}

// Agent is an ovs-agent process the test started, in its own session.
type Agent struct {
	Bin         string
	Dir         string // config, pid and log files; kept after the test
	NeutronConf string
	AgentIni    string
	LogPath     string
	Config      AgentConfig

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
	err  error
}

// NewAgent builds the binary and writes the configuration; Start runs it.
func NewAgent(cfg AgentConfig) (*Agent, error) {
	bin, err := AgentBinary()
	if err != nil {
		return nil, err
	}
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	if err := os.MkdirAll("/tmp/ovsagent-e2e", 0o755); err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("/tmp/ovsagent-e2e", "agent-")
	if err != nil {
		return nil, err
	}
	a := &Agent{Bin: bin, Dir: dir, Config: cfg,
		NeutronConf: filepath.Join(dir, "neutron.conf"), AgentIni: filepath.Join(dir, "openvswitch_agent.ini"),
		LogPath: filepath.Join(dir, "ovs-agent.log")}
	nc, ai := cfg.files()
	if err := os.WriteFile(a.NeutronConf, []byte(nc), 0o600); err != nil {
		return nil, err
	}
	if err := os.WriteFile(a.AgentIni, []byte(ai), 0o600); err != nil {
		return nil, err
	}
	return a, nil
}

func (a *Agent) args() []string {
	return []string{"--config-file", a.NeutronConf, "--config-file", a.AgentIni}
}

// CheckConfig runs "ovs-agent check-config" on the written files.
func (a *Agent) CheckConfig(ctx context.Context) (string, error) {
	out, err := exec.CommandContext(ctx, a.Bin, append([]string{"check-config"}, a.args()...)...).CombinedOutput()
	return strings.TrimSpace(string(out)), err
}

// Metric fetches /metrics and returns the value of the first sample whose
// name (with labels, if given: `ovsagent_flows{bridge="br-int"`) starts the line.
func (a *Agent) Metric(ctx context.Context, prefix string) (float64, error) {
	u := a.MetricsURL()
	if u == "" {
		return 0, fmt.Errorf("metrics are off")
	}
	req, err := http.NewRequestWithContext(ctx, "GET", u, nil)
	if err != nil {
		return 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, err
	}
	for _, l := range strings.Split(string(body), "\n") {
		if strings.HasPrefix(l, prefix+" ") || strings.HasPrefix(l, prefix+"{") || (strings.Contains(prefix, "{") && strings.HasPrefix(l, prefix)) {
			f := strings.Fields(l)
			return strconv.ParseFloat(f[len(f)-1], 64)
		}
	}
	return 0, fmt.Errorf("metric %s not found", prefix)
}

// MetricsURL is http://<metrics_listen>/metrics ("" when off).
func (a *Agent) MetricsURL() string {
	if a.Config.MetricsListen == "off" {
		return ""
	}
	return "http://" + a.Config.MetricsListen + "/metrics"
}

// Start runs the agent in a new session, stdout/stderr appended to
// Dir/stdout.log, its pid recorded in Dir/ovs-agent.pid.
func (a *Agent) Start() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.cmd != nil && !a.exited() {
		return fmt.Errorf("agent already running (pid %d)", a.cmd.Process.Pid)
	}
	out, err := os.OpenFile(filepath.Join(a.Dir, "stdout.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	argv := append([]string{a.Bin}, append(a.args(), "--log-file", a.LogPath)...)
	if a.Config.NetNS != "" {
		argv = append([]string{"ip", "netns", "exec", a.Config.NetNS}, argv...)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), a.Config.Env...)
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		out.Close()
		return err
	}
	done := make(chan struct{})
	a.cmd, a.done, a.err = cmd, done, nil
	go func() {
		err := cmd.Wait()
		out.Close()
		a.mu.Lock()
		a.err = err
		a.mu.Unlock()
		close(done)
	}()
	return os.WriteFile(filepath.Join(a.Dir, "ovs-agent.pid"), []byte(strconv.Itoa(cmd.Process.Pid)+"\n"), 0o644)
}

func (a *Agent) exited() bool {
	select {
	case <-a.done:
		return true
	default:
		return false
	}
}

// Pid of the running agent (0 if none).
func (a *Agent) Pid() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.cmd == nil || a.exited() {
		return 0
	}
	return a.cmd.Process.Pid
}

// Exited is closed when the current process exits.
func (a *Agent) Exited() <-chan struct{} {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.done
}

// ExitErr is the exit status of the last run (nil = exit 0).
func (a *Agent) ExitErr() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.err
}

// signal sends sig after checking /proc/PID/cmdline still names our binary.
func (a *Agent) signal(sig syscall.Signal) error {
	pid := a.Pid()
	if pid == 0 {
		return nil
	}
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil || !bytes.HasPrefix(cmdline, []byte(a.Bin+"\x00")) {
		return nil // gone, or the pid is someone else's now
	}
	return syscall.Kill(pid, sig)
}

// Stop sends SIGTERM and waits up to timeout, then SIGQUIT (stack dump in
// Dir/stdout.log) and SIGKILL. It returns how
// long the agent took to exit after SIGTERM and whether it had to be killed.
func (a *Agent) Stop(timeout time.Duration) (time.Duration, bool, error) {
	done := a.Exited()
	if done == nil {
		return 0, false, nil
	}
	start := time.Now()
	if err := a.signal(syscall.SIGTERM); err != nil {
		return 0, false, err
	}
	select {
	case <-done:
		return time.Since(start), false, nil
	case <-time.After(timeout):
	}
	// SIGQUIT first: the Go runtime writes every goroutine's stack to
	// stdout.log, which shows what the shutdown waits for.
	if err := a.signal(syscall.SIGQUIT); err != nil {
		return 0, true, err
	}
	select {
	case <-done:
		return time.Since(start), true, nil
	case <-time.After(3 * time.Second):
	}
	if err := a.signal(syscall.SIGKILL); err != nil {
		return 0, true, err
	}
	<-done
	return time.Since(start), true, nil
}

// Kill sends SIGKILL (a crash) and waits for the exit.
func (a *Agent) Kill() error {
	done := a.Exited()
	if done == nil {
		return nil
	}
	if err := a.signal(syscall.SIGKILL); err != nil {
		return err
	}
	<-done
	return nil
}

// Restart stops the agent gracefully and starts it again with the same files.
func (a *Agent) Restart(timeout time.Duration) error {
	if _, _, err := a.Stop(timeout); err != nil {
		return err
	}
	return a.Start()
}

// Log returns the agent's log so far.
func (a *Agent) Log() string {
	data, _ := os.ReadFile(a.LogPath)
	out, _ := os.ReadFile(filepath.Join(a.Dir, "stdout.log"))
	return string(data) + string(out)
}

// LogTail returns the last n lines of the log.
func (a *Agent) LogTail(n int) string {
	lines := strings.Split(strings.TrimRight(a.Log(), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// StartAgentAlive starts the agent and waits until neutron shows it alive
// with a new started_at (the first report_state of this run carries
// start_flag); it returns the time from start to that point.
func (e *Env) StartAgentAlive(cfg AgentConfig, timeout time.Duration) (*Agent, time.Duration) {
	e.T.Helper()
	host := cfg.Host
	if host == "" {
		host = "hv1"
	}
	before := ""
	if ai, err := e.Neutron.OVSAgent(e.Ctx, host); err == nil && ai != nil {
		before = ai.StartedAt
	}
	start := time.Now()
	a := e.StartAgent(cfg)
	ctx, cancel := context.WithTimeout(e.Ctx, timeout)
	defer cancel()
	for {
		ai, err := e.Neutron.OVSAgent(ctx, host)
		if err == nil && ai != nil && ai.Alive && ai.StartedAt != before {
			return a, time.Since(start)
		}
		select {
		case <-a.Exited():
			e.T.Fatalf("agent exited before it was alive: %v\n%s", a.ExitErr(), a.LogTail(40))
		case <-ctx.Done():
			e.T.Fatalf("agent %s not alive with a new started_at within %s\n%s", host, timeout, a.LogTail(40))
		case <-time.After(pollEvery):
		}
	}
}

// StartAgent creates, starts and registers the cleanup of an agent: on
// failure the log tail is printed; the agent is stopped at the end.
func (e *Env) StartAgent(cfg AgentConfig) *Agent {
	e.T.Helper()
	a, err := NewAgent(cfg)
	if err != nil {
		e.T.Fatalf("agent: %v", err)
	}
	if err := a.Start(); err != nil {
		e.T.Fatalf("agent start: %v", err)
	}
	e.T.Logf("agent pid %d, files and log in %s", a.Pid(), a.Dir)
	e.T.Cleanup(func() {
		if _, killed, err := a.Stop(20 * time.Second); err != nil || killed {
			e.T.Errorf("agent stop: killed=%v err=%v", killed, err)
		}
		if e.T.Failed() {
			e.T.Logf("agent log tail (%s):\n%s", a.LogPath, a.LogTail(60))
		}
	})
	return a
}
