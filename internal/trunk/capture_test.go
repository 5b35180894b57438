//go:build refcapture

package trunk

// Captures the golden file testdata/reference-<release>.json by running the reference
// agent's trunk handler (refenv/trunk_reference.py, the installed neutron's own
// OVSDBHandler and TrunkManager) against a private OVS:
//
//	REFCAPTURE_PYTHON=/usr/bin/python3 REFCAPTURE_RELEASE=zed \
//	  go test -tags refcapture -count=1 -run TestCaptureReference ./internal/trunk
//
// For a release in a chroot, REFCAPTURE_CHROOT=/var/lib/ovsagent-refenv/2026.2: the
// script is copied into the chroot's /tmp and reaches the private OVSDB over loopback TCP.

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/ovsagent/ovsagent/internal/testing/ovstest"
)

func TestCaptureReference(t *testing.T) {
	release := os.Getenv("REFCAPTURE_RELEASE")
	if release == "" {
		t.Fatal("REFCAPTURE_RELEASE not set")
	}
	py := os.Getenv("REFCAPTURE_PYTHON")
	if py == "" {
		py = "/usr/bin/python3"
	}
	o := ovstest.Start(t)
	script, err := filepath.Abs("../../refenv/trunk_reference.py")
	if err != nil {
		t.Fatal(err)
	}
	var cmd *exec.Cmd
	if root := os.Getenv("REFCAPTURE_CHROOT"); root != "" {
		// The chroot does not see the private OVS's directory: the ovsdb-server gets a
		// loopback TCP remote, reached from the OVS's network namespace.
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		port := l.Addr().(*net.TCPAddr).Port
		l.Close()
		ctl, _ := filepath.Glob(filepath.Join(o.Dir, "ovsdb-server*.ctl"))
		if len(ctl) != 1 {
			t.Fatalf("ovsdb-server control socket: %v", ctl)
		}
		if out, err := exec.Command("ovs-appctl", "-t", ctl[0], "ovsdb-server/add-remote", fmt.Sprintf("ptcp:%d:127.0.0.1", port)).CombinedOutput(); err != nil {
			t.Fatalf("add-remote: %v %s", err, out)
		}
		dir := filepath.Join(root, "tmp", "trunkcapture")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		b, _ := os.ReadFile(script)
		if err := os.WriteFile(filepath.Join(dir, "trunk_reference.py"), b, 0o755); err != nil {
			t.Fatal(err)
		}
		args := []string{"chroot", root, py, "/tmp/trunkcapture/trunk_reference.py", fmt.Sprintf("tcp:127.0.0.1:%d", port)}
		if o.NetNS != "" { // the OVS (and its loopback) is in its own namespace
			args = append([]string{"ip", "netns", "exec", o.NetNS}, args...)
		}
		cmd = exec.Command(args[0], args[1:]...)
	} else {
		cmd = exec.Command(py, script, o.DB)
	}
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("%v\n%s", err, errb.String())
	}
	dst := filepath.Join("testdata", "reference-"+release+".json")
	if err := os.WriteFile(dst, out.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("wrote %s (%d bytes)", dst, out.Len())
}
