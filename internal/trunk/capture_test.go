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
// private OVS's socket is reached through the chroot's /tmp (bind-mounted by refenv).

import (
	"bytes"
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
		// The chroot sees the OVS socket under its own copy of the directory.
		dir := filepath.Join(root, "tmp", "trunkcapture")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		sock := filepath.Join(dir, "db.sock")
		_ = os.Remove(sock)
		if err := os.Symlink(filepath.Join(o.Dir, "db.sock"), sock); err != nil {
			t.Fatal(err)
		}
		b, _ := os.ReadFile(script)
		if err := os.WriteFile(filepath.Join(dir, "trunk_reference.py"), b, 0o755); err != nil {
			t.Fatal(err)
		}
		cmd = exec.Command("chroot", root, py, "/tmp/trunkcapture/trunk_reference.py", "unix:/tmp/trunkcapture/db.sock")
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
