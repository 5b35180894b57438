// Package ovstest starts a private Open vSwitch (ovsdb-server + ovs-vswitchd)
// for tests that need the real thing.
//
// Each instance lives in a temporary run directory (OVS_RUNDIR, so its
// <bridge>.mgmt sockets are created there and never in /var/run/openvswitch)
// and, by default, runs ovs-vswitchd inside a network namespace of its own, so
// its netdev bridges' tap devices cannot collide with the system OVS or with
// another test: a test may name its bridges br-int and br-tun freely.
//
// The daemons are started detached with recorded pids; Stop checks that a
// recorded pid is still the daemon it started (/proc/PID/cmdline) before it
// signals it. It never kills by name.
package ovstest

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Schema is the vswitchd schema Debian installs.
const Schema = "/usr/share/openvswitch/vswitch.ovsschema"

// OVS is one private Open vSwitch instance.
type OVS struct {
	Dir   string // run, db and log directory
	NetNS string // namespace ovs-vswitchd runs in ("" = root namespace)
	DB    string // "unix:<Dir>/db.sock", the ovsdb_connection for the agent
}

// Options tunes Start.
type Options struct {
	// RootNetNS runs ovs-vswitchd in the caller's namespace instead of a new
	// one (needed when the test plugs veths whose other end it keeps in the
	// root namespace). Bridge names must then be unique on the machine.
	RootNetNS bool
}

// Start starts a private OVS for t and stops it when t ends. It fails the test
// (it never skips) when Open vSwitch is not installed: CI installs it.
func Start(t testing.TB, opts ...Options) *OVS {
	t.Helper()
	o, err := StartDir(t.TempDir(), opts...)
	if err != nil {
		t.Fatalf("ovstest: %v", err)
	}
	t.Cleanup(func() {
		if err := o.Stop(); err != nil {
			t.Logf("ovstest: stop: %v", err)
		}
	})
	return o
}

// StartDir starts a private OVS in dir (which must exist). For callers outside
// `go test` (benchmarks harnesses); they must call Stop.
func StartDir(dir string, opts ...Options) (*OVS, error) {
	var opt Options
	if len(opts) > 0 {
		opt = opts[0]
	}
	for _, bin := range []string{"ovsdb-tool", "ovsdb-server", "ovs-vswitchd", "ovs-vsctl", "ip"} {
		if _, err := exec.LookPath(bin); err != nil {
			return nil, fmt.Errorf("%s not found (install openvswitch-switch and iproute2): %w", bin, err)
		}
	}
	o := &OVS{Dir: dir, DB: "unix:" + filepath.Join(dir, "db.sock")}
	if !opt.RootNetNS {
		o.NetNS = "ovt-" + randHex(4)
		if out, err := exec.Command("ip", "netns", "add", o.NetNS).CombinedOutput(); err != nil {
			return nil, fmt.Errorf("ip netns add %s: %v: %s", o.NetNS, err, out)
		}
		_ = exec.Command("ip", "-n", o.NetNS, "link", "set", "lo", "up").Run()
	}
	if out, err := exec.Command("ovsdb-tool", "create", filepath.Join(dir, "conf.db"), Schema).CombinedOutput(); err != nil {
		o.Stop()
		return nil, fmt.Errorf("ovsdb-tool create: %v: %s", err, out)
	}
	if err := o.run("ovsdb-server", filepath.Join(dir, "conf.db"),
		"--remote=punix:"+filepath.Join(dir, "db.sock"),
		"--pidfile="+filepath.Join(dir, "ovsdb-server.pid"),
		"--unixctl="+filepath.Join(dir, "ovsdb-server.ctl"),
		"--log-file="+filepath.Join(dir, "ovsdb-server.log"),
		"-vconsole:off", "--detach", "--no-chdir"); err != nil {
		o.Stop()
		return nil, err
	}
	if out, err := exec.Command("ovs-vsctl", "--db="+o.DB, "--no-wait", "init").CombinedOutput(); err != nil {
		o.Stop()
		return nil, fmt.Errorf("ovs-vsctl init: %v: %s", err, out)
	}
	if err := o.StartVswitchd(); err != nil {
		o.Stop()
		return nil, err
	}
	return o, nil
}

// StartVswitchd starts ovs-vswitchd (again, after StopVswitchd).
func (o *OVS) StartVswitchd() error {
	return o.run("ovs-vswitchd", o.DB,
		"--pidfile="+filepath.Join(o.Dir, "ovs-vswitchd.pid"),
		"--unixctl="+filepath.Join(o.Dir, "ovs-vswitchd.ctl"),
		"--log-file="+filepath.Join(o.Dir, "ovs-vswitchd.log"),
		"-vconsole:off", "--detach", "--no-chdir")
}

// StopVswitchd kills ovs-vswitchd as a crash would (SIGKILL), leaving the
// database and the bridges' configuration in place.
func (o *OVS) StopVswitchd() error { return o.kill("ovs-vswitchd", syscall.SIGKILL) }

// PauseVswitchd stops ovs-vswitchd with SIGSTOP: a hung switch that keeps
// its sockets open and answers nothing. ResumeVswitchd (SIGCONT) undoes it;
// Stop resumes it first, so a failing test does not leave it stopped.
func (o *OVS) PauseVswitchd() error { return o.signal("ovs-vswitchd", syscall.SIGSTOP) }

// ResumeVswitchd continues an ovs-vswitchd that PauseVswitchd stopped.
func (o *OVS) ResumeVswitchd() error { return o.signal("ovs-vswitchd", syscall.SIGCONT) }

// signal sends sig to daemon bin, checked by its recorded pid.
func (o *OVS) signal(bin string, sig syscall.Signal) error {
	pid, err := o.pid(bin)
	if err != nil {
		return fmt.Errorf("signal %s: %w", bin, err)
	}
	if err := syscall.Kill(pid, sig); err != nil {
		return fmt.Errorf("signal %s %d: %w", bin, pid, err)
	}
	return nil
}

// StopOvsdbServer kills ovsdb-server (SIGKILL); StartOvsdbServer restarts it on the same db.
func (o *OVS) StopOvsdbServer() error { return o.kill("ovsdb-server", syscall.SIGKILL) }

// StartOvsdbServer restarts ovsdb-server on the existing database.
func (o *OVS) StartOvsdbServer() error {
	return o.run("ovsdb-server", filepath.Join(o.Dir, "conf.db"),
		"--remote=punix:"+filepath.Join(o.Dir, "db.sock"),
		"--pidfile="+filepath.Join(o.Dir, "ovsdb-server.pid"),
		"--unixctl="+filepath.Join(o.Dir, "ovsdb-server.ctl"),
		"--log-file="+filepath.Join(o.Dir, "ovsdb-server.log"),
		"-vconsole:off", "--detach", "--no-chdir")
}

// Mgmt is the unix socket path of bridge br's OpenFlow management socket.
func (o *OVS) Mgmt(br string) string { return filepath.Join(o.Dir, br+".mgmt") }

// Env is the environment that points OVS tools and daemons at this instance.
func (o *OVS) Env() []string {
	return append(os.Environ(), "OVS_RUNDIR="+o.Dir, "OVS_DBDIR="+o.Dir, "OVS_LOGDIR="+o.Dir)
}

// Vsctl runs ovs-vsctl against this instance.
func (o *OVS) Vsctl(args ...string) (string, error) {
	return o.tool("ovs-vsctl", append([]string{"--db=" + o.DB, "--timeout=10"}, args...)...)
}

// Ofctl runs `ovs-ofctl -O OpenFlow13 CMD unix:<br>.mgmt ARGS...`.
func (o *OVS) Ofctl(cmd, br string, args ...string) (string, error) {
	return o.tool("ovs-ofctl", append([]string{"-O", "OpenFlow13", cmd, "unix:" + o.Mgmt(br)}, args...)...)
}

// Appctl runs ovs-appctl against this instance's ovs-vswitchd.
func (o *OVS) Appctl(args ...string) (string, error) {
	return o.tool("ovs-appctl", append([]string{"-t", filepath.Join(o.Dir, "ovs-vswitchd.ctl")}, args...)...)
}

func (o *OVS) tool(bin string, args ...string) (string, error) {
	cmd := exec.Command(bin, args...)
	cmd.Env = o.Env()
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return string(out), fmt.Errorf("%s %s: %v: %s", bin, strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return string(out), nil
}

// run starts a daemon detached (in o.NetNS when set) and waits for its pidfile.
func (o *OVS) run(bin string, args ...string) error {
	var cmd *exec.Cmd
	if o.NetNS != "" {
		cmd = exec.Command("ip", append([]string{"netns", "exec", o.NetNS, bin}, args...)...)
	} else {
		cmd = exec.Command(bin, args...)
	}
	cmd.Env = o.Env()
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("start %s: %v: %s", bin, err, out)
	}
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if _, err := o.pid(bin); err == nil {
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("start %s: no live pid in %s", bin, o.Dir)
}

// pid returns the recorded pid of daemon bin if it is alive and still that
// daemon of this instance (its cmdline names bin and our directory).
func (o *OVS) pid(bin string) (int, error) {
	b, err := os.ReadFile(filepath.Join(o.Dir, bin+".pid"))
	if err != nil {
		return 0, err
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 1 {
		return 0, fmt.Errorf("bad pidfile for %s: %q", bin, b)
	}
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return 0, fmt.Errorf("%s pid %d gone", bin, pid)
	}
	c := string(cmdline)
	if !strings.Contains(c, bin) || !strings.Contains(c, o.Dir) {
		return 0, fmt.Errorf("pid %d is not our %s (cmdline %q)", pid, bin, strings.ReplaceAll(c, "\x00", " "))
	}
	return pid, nil
}

func (o *OVS) kill(bin string, sig syscall.Signal) error {
	pid, err := o.pid(bin)
	if err != nil {
		return nil // not running: nothing to do
	}
	if err := syscall.Kill(pid, sig); err != nil {
		return fmt.Errorf("kill %s %d: %w", bin, pid, err)
	}
	for i := 0; i < 250; i++ {
		if _, err := os.Stat(fmt.Sprintf("/proc/%d", pid)); err != nil {
			return nil
		}
		// a zombie child of ours is gone for our purpose, once its other threads are: the
		// leader of a multi-threaded daemon shows Z while the others still exit, and they hold
		// the files (the pid file's lock: a new ovs-vswitchd then said "already running as pid
		// N, aborting" on a loaded machine)
		if st, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); err == nil && strings.Contains(string(st), ") Z ") {
			if tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid)); err != nil || len(tasks) <= 1 {
				return nil
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("%s pid %d did not exit", bin, pid)
}

// Stop stops both daemons (removing the netdev tap devices with exit --cleanup
// first) and deletes the namespace.
func (o *OVS) Stop() error {
	var errs []string
	if _, err := o.pid("ovs-vswitchd"); err == nil {
		_ = o.signal("ovs-vswitchd", syscall.SIGCONT) // a paused one would not answer exit
		_, _ = o.Appctl("exit", "--cleanup")
		if err := o.kill("ovs-vswitchd", syscall.SIGTERM); err != nil {
			errs = append(errs, err.Error())
		}
	}
	if err := o.kill("ovsdb-server", syscall.SIGTERM); err != nil {
		errs = append(errs, err.Error())
	}
	if o.NetNS != "" {
		if out, err := exec.Command("ip", "netns", "del", o.NetNS).CombinedOutput(); err != nil {
			errs = append(errs, fmt.Sprintf("ip netns del %s: %v: %s", o.NetNS, err, out))
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("%s", strings.Join(errs, "; "))
	}
	return nil
}

// AddBridge creates a netdev bridge with fail_mode secure and OpenFlow 1.0–1.5.
func (o *OVS) AddBridge(name string) error {
	_, err := o.Vsctl("--may-exist", "add-br", name, "--", "set", "Bridge", name,
		"datapath_type=netdev", "fail_mode=secure",
		"protocols=OpenFlow10,OpenFlow11,OpenFlow12,OpenFlow13,OpenFlow14,OpenFlow15")
	if err != nil {
		return err
	}
	// the mgmt socket appears asynchronously
	for i := 0; i < 250; i++ {
		if _, err := os.Stat(o.Mgmt(name)); err == nil {
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("bridge %s: %s did not appear", name, o.Mgmt(name))
}

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
