//go:build integration

package oslo

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// These tests run the real oslo.messaging against the RabbitMQ on 127.0.0.1:5672, each
// in a vhost of its own: the newest one and the Zed one installed with python3-oslo.messaging.
// The newest is, in this order: HEAD of the git repository $OSLO_MESSAGING_SRC; the one of
// refenv's 2026.2 chroot (python3-oslo.messaging 18.x, what the 2026.2 server and reference
// agent run: refenv/release.sh makes it, .ci/run sets it up before the unit tests); HEAD of
// a mirror of the repository at /work/.mirror/openstack+oslo.messaging/repo. Only its
// oslo_messaging package is put on PYTHONPATH: kombu and amqp stay the host's.

// testVhost creates a vhost for guest and deletes it (and all in it) after the test.
func testVhost(t *testing.T) string {
	t.Helper()
	node := rmqNode(t)
	vh := uniq("ovsagent-rm")
	rabbitmqctl(t, node, "-q", "add_vhost", vh)
	t.Cleanup(func() {
		// A loaded broker sometimes fails the first attempt.
		var out []byte
		var err error
		for i := 0; i < 3; i++ {
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			out, err = exec.CommandContext(ctx, "rabbitmqctl", "-n", node, "-q", "delete_vhost", vh).CombinedOutput()
			cancel()
			if err == nil {
				return
			}
			time.Sleep(2 * time.Second)
		}
		t.Errorf("rabbitmqctl delete_vhost %s: %v: %s", vh, err, out)
	})
	rabbitmqctl(t, node, "-q", "set_permissions", "-p", vh, "guest", ".*", ".*", ".*")
	return vh
}

// newestOsloChroot is where refenv's 2026.2 chroot has oslo.messaging.
const newestOsloChroot = "/var/lib/ovsagent-refenv/2026.2/usr/lib/python3/dist-packages/oslo_messaging"

// newestOslo makes, once per test binary, a directory whose oslo_messaging is the newest.
var newestOslo = sync.OnceValues(func() (string, error) {
	src := os.Getenv("OSLO_MESSAGING_SRC")
	dir, err := os.MkdirTemp("", "oslo-messaging-head-")
	if err != nil {
		return "", err
	}
	if src == "" {
		if _, err := os.Stat(filepath.Join(newestOsloChroot, "__init__.py")); err == nil {
			return dir, os.Symlink(newestOsloChroot, filepath.Join(dir, "oslo_messaging"))
		}
		src = "/work/.mirror/openstack+oslo.messaging/repo"
		if _, err := os.Stat(src); err != nil {
			return "", fmt.Errorf("no newest oslo.messaging: neither %s (RELEASE=2026.2 AGENT=none refenv/setup.sh) nor %s; "+
				"OSLO_MESSAGING_SRC=<a git clone of openstack/oslo.messaging>", newestOsloChroot, src)
		}
	}
	cmd := exec.Command("sh", "-c", `git -C "$1" archive HEAD oslo_messaging | tar -x -C "$2"`, "sh", src, dir)
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("git archive %s: %v: %s", src, err, out)
	}
	return dir, nil
})

func TestMain(m *testing.M) {
	code := m.Run()
	if newestOsloUsed.Load() {
		if dir, err := newestOslo(); err == nil {
			os.RemoveAll(dir)
		}
	}
	os.Exit(code)
}

var newestOsloUsed atomic.Bool

// osloPeer is oslo_peer.py running: an RPC server on a topic that has called itself.
type osloPeer struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stderr *strings.Builder
	done   chan struct{}
}

// startOslo runs oslo_peer.py with ini as its configuration; newest picks the newest
// oslo.messaging, else the installed Zed one. It fails the test on a 406.
func startOslo(t *testing.T, newest bool, vhost, exchange, ini, topic, host string) *osloPeer {
	t.Helper()
	dir := t.TempDir()
	conf := filepath.Join(dir, "peer.conf")
	if err := os.WriteFile(conf, []byte("[DEFAULT]\ncontrol_exchange = "+exchange+"\n[oslo_messaging_rabbit]\n"+ini), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("/usr/bin/python3", "testdata/oslo_peer.py", conf, "rabbit://guest:guest@127.0.0.1:5672/"+vhost, topic, host)
	env := append(os.Environ(), "OSLO_LOCK_PATH="+dir)
	if newest {
		newestOsloUsed.Store(true)
		src, err := newestOslo()
		if err != nil {
			t.Fatal(err)
		}
		env = append(env, "PYTHONPATH="+src)
	}
	cmd.Env = env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	p := &osloPeer{cmd: cmd, stderr: &strings.Builder{}, done: make(chan struct{})}
	cmd.Stderr = p.stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if p.stdin, err = cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	t.Cleanup(func() {
		p.stdin.Close()
		select {
		case <-p.done:
		case <-time.After(30 * time.Second):
			if b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid)); strings.Contains(string(b), "oslo_peer.py") {
				_ = syscall.Kill(-pid, syscall.SIGKILL)
			}
			<-p.done
		}
	})
	lines := make(chan string, 8)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
		_ = cmd.Wait()
		close(p.done)
		close(lines)
	}()
	which := "Zed oslo.messaging"
	if newest {
		which = "newest oslo.messaging"
	}
	select {
	case l, ok := <-lines:
		switch {
		case strings.HasPrefix(l, "READY"):
			t.Logf("%s: %s", which, l)
			return p
		case strings.HasPrefix(l, "ERROR406"):
			t.Fatalf("%s refused by the broker: %s", which, l)
		default:
			<-p.done
			t.Fatalf("%s failed (%q, ok %v): %s", which, l, ok, p.stderr.String())
		}
	case <-time.After(90 * time.Second):
		t.Fatalf("%s not ready in 90 s: %s", which, p.stderr.String())
	}
	return nil
}

// startGo is ovs-agent's side with the same settings: a server on topic that can call.
// It fails the test on any declaration failure.
func startGo(t *testing.T, vhost, exchange string, q Queues, topic, host string) *testTransport {
	t.Helper()
	tr := newTransport(t, exchange, host, func(c *Config) { c.URL.VHost = vhost; c.Queues = q })
	if err := tr.Serve(topic, echoEndpoint(host, make(chan *Request, 4))); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := tr.ensureReply(ctx); err != nil {
		t.Fatalf("ovs-agent: reply queue: %v", err)
	}
	if n := tr.Stats().DeclareFailures; n != 0 || tr.DeclareCheck() != nil {
		t.Fatalf("ovs-agent: %d declaration failures: %v", n, tr.DeclareCheck())
	}
	return tr
}

var (
	uniqueName = regexp.MustCompile(`^(reply_|[^\t]*_fanout_)(?:[0-9a-f]{32}|[^\t:]+:[^\t:]+:[0-9]+)\t`)
	tableArgs  = regexp.MustCompile(`\[(.*)\]$`)
)

// brokerObjects lists a vhost's queues and exchanges (but amq.* and the default one),
// one line each: name, [type,] durable, auto_delete, arguments sorted.
func brokerObjects(t *testing.T, vhost string) (queues, exchanges []string) {
	t.Helper()
	node := rmqNode(t)
	norm := func(out string) []string {
		var r []string
		for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
			if l == "" || strings.HasPrefix(l, "amq.") || strings.HasPrefix(l, "\t") {
				continue
			}
			l = tableArgs.ReplaceAllStringFunc(l, func(a string) string {
				in := strings.TrimSuffix(strings.TrimPrefix(a, "[{"), "}]")
				if in == "[]" || in == "" {
					return "[]"
				}
				kv := strings.Split(in, "},{")
				sort.Strings(kv)
				return "[{" + strings.Join(kv, "},{") + "}]"
			})
			r = append(r, l)
		}
		sort.Strings(r)
		return r
	}
	queues = norm(rabbitmqctl(t, node, "-q", "list_queues", "--no-table-headers", "-p", vhost, "name", "durable", "auto_delete", "arguments"))
	exchanges = norm(rabbitmqctl(t, node, "-q", "list_exchanges", "--no-table-headers", "-p", vhost, "name", "type", "durable", "auto_delete", "arguments"))
	return queues, exchanges
}

// sameAsOslo checks that every queue ovs-agent declared under a name of its own (reply
// and fanout queues) has a twin from oslo.messaging with the same flags and arguments.
func sameAsOslo(t *testing.T, queues []string, goNames ...string) {
	t.Helper()
	class := map[string][]string{}
	for _, l := range queues {
		k := uniqueName.ReplaceAllString(l, "${1}<unique>\t")
		name, rest, _ := strings.Cut(k, "\t")
		class[name] = append(class[name], rest)
	}
	for _, g := range goNames {
		var mine string
		for _, l := range queues {
			if strings.HasPrefix(l, g+"\t") {
				mine = l
			}
		}
		if mine == "" {
			t.Errorf("broker has no queue %s", g)
			continue
		}
		k := uniqueName.ReplaceAllString(mine, "${1}<unique>\t")
		name, rest, _ := strings.Cut(k, "\t")
		if name == g {
			continue // a shared name (a stream fanout queue): one queue, declared by both
		}
		twins := class[name]
		if len(twins) < 2 {
			t.Errorf("no oslo.messaging queue like %s to compare with", g)
		}
		for _, o := range twins {
			if o != rest {
				t.Errorf("%s: ovs-agent declares %q, oslo.messaging %q", name, rest, o)
			}
		}
	}
}

type rabbitMode struct {
	name string
	q    Queues
	ini  string
	zed  bool // Zed's oslo.messaging (14.0) has these options
}

func rabbitModes(qmHost string) []rabbitMode {
	return []rabbitMode{
		{"default", Queues{}, "", true},
		{"amqp_durable_queues", Queues{Durable: true}, "amqp_durable_queues = true\n", true},
		{"amqp_auto_delete", Queues{AutoDelete: true}, "amqp_auto_delete = true\n", true},
		{"rabbit_ha_queues", Queues{HA: true}, "rabbit_ha_queues = true\n", true},
		{"quorum", Queues{Quorum: true, QuorumDeliveryLimit: 5, QuorumMaxMemoryLength: 100, QuorumMaxMemoryBytes: 1 << 20},
			"rabbit_quorum_queue = true\nrabbit_quorum_delivery_limit = 5\nrabbit_quorum_max_memory_length = 100\nrabbit_quorum_max_memory_bytes = 1048576\n" +
				"rabbit_quroum_max_memory_length = 100\nrabbit_quroum_max_memory_bytes = 1048576\n", true},
		{"transient_quorum", Queues{Quorum: true, TransientQuorum: true},
			"rabbit_quorum_queue = true\nrabbit_transient_quorum_queue = true\n", false},
		{"queue_manager", Queues{UseQueueManager: true, Hostname: qmHost, ProcessName: "ovs-agent"},
			"use_queue_manager = true\nhostname = " + qmHost + "\nprocessname = oslo\n", false},
		{"kolla", Queues{Quorum: true, TransientQuorum: true, StreamFanout: true, Prefetch: 10, UseQueueManager: true, Hostname: qmHost, ProcessName: "ovs-agent"},
			"rabbit_quorum_queue = true\nrabbit_transient_quorum_queue = true\nrabbit_stream_fanout = true\nrabbit_qos_prefetch_count = 10\n" +
				"use_queue_manager = true\nhostname = " + qmHost + "\nprocessname = oslo\n", false},
	}
}

// TestDeclareModesMatchOslo: for every messaging mode, ovs-agent and oslo.messaging with
// the same settings share one vhost without a 406, whichever comes first, and the queues
// and exchanges are the same (flags and arguments).
//
// The modes run in parallel (-parallel, GOMAXPROCS by default): each has its own vhost and
// queue manager names, and most of a mode's time is one process starting (a Python peer
// importing oslo.messaging, rabbitmqctl booting an Erlang VM) on one core.
func TestDeclareModesMatchOslo(t *testing.T) {
	for i := range rabbitModes("") {
		t.Run(rabbitModes("")[i].name, func(t *testing.T) {
			t.Parallel()
			base := uniq("qm")
			t.Cleanup(func() {
				for _, h := range []string{base + "-a", base + "-b"} {
					for _, p := range []string{"oslo", "ovs-agent"} {
						_ = os.Remove("/dev/shm/" + h + "_" + p + "_qmanager")
					}
				}
			})
			vh := testVhost(t)
			type side struct {
				tr    *testTransport
				topic string
				m     rabbitMode
			}
			var sides []side
			// Both orders in one vhost, each with its own control exchange, topic
			// and queue manager name (rabbitmqctl is slow).
			for _, osloFirst := range []bool{true, false} {
				qmHost, exchange := base+"-a", "neutron-a"
				if !osloFirst {
					qmHost, exchange = base+"-b", "neutron-b"
				}
				m := rabbitModes(qmHost)[i]
				topic := uniq("q-agent-notifier-port-update")
				var tr *testTransport
				if osloFirst {
					startOslo(t, true, vh, exchange, m.ini, topic, "hv1")
					tr = startGo(t, vh, exchange, m.q, topic, "hv1")
				} else {
					tr = startGo(t, vh, exchange, m.q, topic, "hv1")
					startOslo(t, true, vh, exchange, m.ini, topic, "hv1")
					if m.zed {
						startOslo(t, false, vh, exchange, m.ini, topic, "hv1")
					}
				}
				sides = append(sides, side{tr, topic, m})
			}
			queues, exchanges := brokerObjects(t, vh)
			t.Logf("queues:\n%s\nexchanges:\n%s", strings.Join(queues, "\n"), strings.Join(exchanges, "\n"))
			for _, sd := range sides {
				tr, topic, q := sd.tr, sd.topic, sd.m.q
				// oslo declared before READY; ovs-agent, declaring first or second,
				// must have had no failure either.
				if n := tr.Stats().DeclareFailures; n != 0 {
					t.Fatalf("ovs-agent: %d declaration failures: %v", n, tr.DeclareCheck())
				}
				sameAsOslo(t, queues, tr.ReplyQueue(), tr.FanoutQueue(topic))
				if q.UseQueueManager {
					if want := "reply_" + q.Hostname + ":ovs-agent:1"; tr.ReplyQueue() != want {
						t.Errorf("reply queue %s, want %s", tr.ReplyQueue(), want)
					}
					if want := topic + "_fanout_" + q.Hostname + ":ovs-agent:2"; !q.StreamFanout && tr.FanoutQueue(topic) != want {
						t.Errorf("fanout queue %s, want %s", tr.FanoutQueue(topic), want)
					}
				}
				if q.StreamFanout && tr.FanoutQueue(topic) != topic+"_fanout" {
					t.Errorf("stream fanout queue %s, want %s_fanout", tr.FanoutQueue(topic), topic)
				}
			}
		})
	}
}
