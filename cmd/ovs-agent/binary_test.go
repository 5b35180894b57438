//go:build integration

package main

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ovsagent/ovsagent/internal/oslo"
	"github.com/ovsagent/ovsagent/internal/testing/ovstest"
)

func randID() string {
	b := make([]byte, 5)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

var (
	buildOnce sync.Once
	builtBin  string
	buildErr  error
)

// agentBinary builds ovs-agent once for the tests that run the real binary.
func agentBinary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "ovs-agent-bin")
		if err != nil {
			buildErr = err
			return
		}
		builtBin = filepath.Join(dir, "ovs-agent")
		out, err := exec.Command(filepath.Join(runtime.GOROOT(), "bin", "go"), "build", "-o", builtBin, ".").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return builtBin
}

// agentProc is the real binary run in its own session.
type agentProc struct {
	cmd     *exec.Cmd
	logPath string        // stdout and stderr
	exited  chan struct{} // closed when the process has been waited for
	err     error         // Wait's result, once exited
}

func (p *agentProc) output() string {
	b, _ := os.ReadFile(p.logPath)
	return string(b)
}

func startAgent(t *testing.T, conf string, env ...string) *agentProc {
	t.Helper()
	p := &agentProc{logPath: filepath.Join(t.TempDir(), "agent.out"), exited: make(chan struct{})}
	out, err := os.Create(p.logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	p.cmd = exec.Command(agentBinary(t), "--config-file", conf, "--debug")
	p.cmd.Env = append(os.Environ(), env...)
	p.cmd.Stdout, p.cmd.Stderr = out, out
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.err = p.cmd.Wait(); close(p.exited) }()
	t.Cleanup(func() {
		select {
		case <-p.exited:
		default:
			_ = p.cmd.Process.Kill() // our own child, by pid
			<-p.exited
		}
		if t.Failed() {
			t.Logf("agent output:\n%s", p.output())
		}
	})
	return p
}

// waitLog waits for the agent to log s.
func (p *agentProc) waitLog(t *testing.T, s string) {
	t.Helper()
	for deadline := time.Now().Add(60 * time.Second); !strings.Contains(p.output(), s); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("agent never logged %q", s)
		}
	}
}

// stop sends SIGTERM and returns the exit code.
func (p *agentProc) stop(t *testing.T) int {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.exited:
		var ee *exec.ExitError
		if errors.As(p.err, &ee) {
			return ee.ExitCode()
		}
		if p.err != nil {
			t.Fatal(p.err)
		}
		return 0
	case <-time.After(60 * time.Second):
		t.Fatal("agent did not stop on SIGTERM")
	}
	return -1
}

func writeConf(t *testing.T, body string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "agent.conf")
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// rabbitmqctl runs rabbitmqctl against the local node.
func rabbitmqctl(t *testing.T, args ...string) {
	t.Helper()
	host, _ := os.Hostname()
	host, _, _ = strings.Cut(host, ".")
	var last []byte
	for _, node := range []string{"rabbit@localhost", "rabbit@" + host} {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		out, err := exec.CommandContext(ctx, "rabbitmqctl", append([]string{"-n", node, "-q"}, args...)...).CombinedOutput()
		cancel()
		if err == nil {
			return
		}
		last = out
	}
	t.Fatalf("rabbitmqctl %v: %s", args, last)
}

// brokerAccount is a RabbitMQ user with a password holding a "$", alone on
// a virtual host of its own: nothing the test does reaches the queues of the
// real neutron-server on the same broker (queue names do not depend on the
// control exchange), and the user and vhost are deleted afterwards.
//
// The user is imported with its password hash: Debian's rabbitmqctl wrapper
// hands its arguments to "su -c" inside double quotes, so `add_user u pa$word`
// stores "pa" followed by whatever $word expands to.
func brokerAccount(t *testing.T) (user, password, vhost string) {
	t.Helper()
	id := randID()
	user, password, vhost = "ovsagent-test-"+id, "pa$word-"+id, "ovsagent-test-"+id
	salt := make([]byte, 4)
	_, _ = rand.Read(salt)
	sum := sha256.Sum256(append(append([]byte(nil), salt...), password...))
	defs, _ := json.Marshal(map[string]any{
		"users": []any{map[string]any{"name": user, "password_hash": base64.StdEncoding.EncodeToString(append(salt, sum[:]...)),
			"hashing_algorithm": "rabbit_password_hashing_sha256", "tags": []string{}}},
		"vhosts":      []any{map[string]any{"name": vhost}},
		"permissions": []any{map[string]any{"user": user, "vhost": vhost, "configure": ".*", "write": ".*", "read": ".*"}},
	})
	// rabbitmqctl reads the file as the rabbitmq user.
	dir, err := os.MkdirTemp("", "ovsagent-defs")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	os.Chmod(dir, 0o755)
	file := filepath.Join(dir, "defs.json")
	if err := os.WriteFile(file, defs, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rabbitmqctl(t, "delete_vhost", vhost) })
	t.Cleanup(func() { rabbitmqctl(t, "delete_user", user) })
	rabbitmqctl(t, "import_definitions", file)
	return user, password, vhost
}

// The real binary, with a transport_url whose password is written pa$$word
// for the broker user whose password is pa$word, connects: a fake
// neutron-server (logged in as that user, on that vhost) receives its
// report_state. Under a fake systemd it sends READY=1 only once a state
// report was answered; SIGTERM then exits 0.
func TestBinaryPasswordDollarAndReady(t *testing.T) {
	ovs := ovstest.Start(t)
	user, password, vhost := brokerAccount(t)
	u, err := oslo.ParseTransportURL("rabbit://" + user + ":" + password + "@127.0.0.1:5672/" + vhost)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	srv, err := oslo.Dial(ctx, oslo.Config{URL: u, Host: "fake-server", ControlExchange: "neutron", Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	if !srv.Connected() {
		t.Fatalf("the fake server cannot log in as %s with %q", user, password)
	}
	reports := make(chan struct{}, 16)
	answer := make(chan struct{})
	if err := srv.Serve("q-reports-plugin", oslo.Endpoint{Version: "1.2", Methods: map[string]oslo.Handler{
		"report_state": func(ctx context.Context, _ *oslo.Request) (any, error) {
			reports <- struct{}{}
			select { // held until the test has seen that nothing was notified yet
			case <-answer:
			case <-ctx.Done():
			}
			return "alive", nil
		},
	}}); err != nil {
		t.Fatal(err)
	}
	c, sock := listenUnixgram(t)
	escaped := strings.ReplaceAll(password, "$", "$$")
	conf := writeConf(t, fmt.Sprintf(`[DEFAULT]
transport_url = rabbit://%s:%s@127.0.0.1:5672/%s
host = ovsagent-test-%s
[agent]
report_interval = 30
[ovs]
ovsdb_connection = %s
datapath_type = netdev
[ovsagent]
metrics_listen =
`, user, escaped, vhost, randID(), ovs.DB))
	p := startAgent(t, conf, "NOTIFY_SOCKET="+sock)
	select {
	case <-reports:
	case <-time.After(60 * time.Second):
		t.Fatal("no report_state reached the fake server: the agent did not log in")
	}
	c.SetReadDeadline(time.Now().Add(time.Second))
	if n, err := c.Read(make([]byte, 256)); err == nil {
		t.Fatalf("notified before any report was answered (%d bytes)", n)
	}
	close(answer)
	if got := readDatagram(t, c); !strings.HasPrefix(got, "READY=1\n") {
		t.Fatalf("notify: %q", got)
	}
	if rc := p.stop(t); rc != 0 {
		t.Fatalf("SIGTERM: exit %d", rc)
	}
}

// SIGTERM while the agent waits: for OVSDB (nothing listens on the socket),
// for the broker (nothing on the port): exit 0.
func TestBinarySIGTERMWhileWaiting(t *testing.T) {
	ovs := ovstest.Start(t)
	for _, c := range []struct{ name, conf, waiting string }{
		{"ovsdb", "[DEFAULT]\ntransport_url = rabbit://guest:guest@127.0.0.1:1/\n[ovs]\novsdb_connection = unix:" + filepath.Join(t.TempDir(), "none.sock") + "\n[ovsagent]\nmetrics_listen =\n", "starting"},
		{"broker", "[DEFAULT]\ntransport_url = rabbit://guest:guest@127.0.0.1:1/\nhost = sigterm-" + randID() + "\n[ovs]\novsdb_connection = " + ovs.DB + "\ndatapath_type = netdev\n[ovsagent]\nmetrics_listen =\n", "broker not reachable"},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := startAgent(t, writeConf(t, c.conf))
			p.waitLog(t, c.waiting)
			time.Sleep(500 * time.Millisecond) // into the wait, past the first attempt
			if rc := p.stop(t); rc != 0 {
				t.Fatalf("SIGTERM while waiting for %s: exit %d", c.name, rc)
			}
		})
	}
}
