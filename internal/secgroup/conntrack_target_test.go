package secgroup

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestAppctlConntrackTarget: the control socket is ovs-vswitchd.<pid>.ctl
// (ovs-ctl's default) or ovs-vswitchd.ctl (--unixctl=...), re-resolved on
// every call so that a restarted ovs-vswitchd (new pid) is found.
func TestAppctlConntrackTarget(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	var got []string
	c := AppctlConntrack{RunDir: dir, Run: func(_ context.Context, args ...string) (string, error) {
		got = append(got, args[1])
		return "", nil
	}}
	if _, err := c.FlushMarked(context.Background(), 1, 1); err == nil || !strings.Contains(err.Error(), "pid") {
		t.Fatalf("no pid file: err %v", err)
	}
	write("ovs-vswitchd.pid", "2092\n")
	if _, err := c.FlushMarked(context.Background(), 1, 1); err == nil || !strings.Contains(err.Error(), "no control socket") {
		t.Fatalf("no socket: err %v", err)
	}
	write("ovs-vswitchd.ctl", "")
	write("ovs-vswitchd.2092.ctl", "")
	write("ovs-vswitchd.pid", "8806\n") // restarted: its own socket is not there yet
	if _, err := c.FlushMarked(context.Background(), 1, 1); err != nil {
		t.Fatal(err)
	}
	write("ovs-vswitchd.8806.ctl", "")
	if _, err := c.FlushMarked(context.Background(), 1, 1); err != nil {
		t.Fatal(err)
	}
	want := []string{filepath.Join(dir, "ovs-vswitchd.ctl"), filepath.Join(dir, "ovs-vswitchd.8806.ctl")}
	if len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("targets %v, want %v", got, want)
	}
}
