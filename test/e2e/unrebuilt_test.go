//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestTakeoverRefusesUnrebuiltState: a host carrying state of reference
// features ovs-agent does not have (a DVR flow, a trunk bridge, QoS rows)
// is refused by `takeover --dry-run` and by the agent's start, exit 1 and
// one line naming the state, and nothing is swept; once the state is gone
// the agent starts.
func TestTakeoverRefusesUnrebuiltState(t *testing.T) {
	e := NewEnv(t)
	run := func(a *Agent, args ...string) (int, string) {
		ctx, cancel := context.WithTimeout(e.Ctx, 90*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, a.Bin, args...)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
		err := cmd.Run()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return code, strings.TrimSpace(stderr.String())
	}
	// Bridges exist (a first start made them); then stop that agent.
	first, _ := e.StartAgentAlive(AgentConfig{}, 90*time.Second)
	if _, _, err := first.Stop(30 * time.Second); err != nil {
		t.Fatal(err)
	}

	dvr := "cookie=0x5eed0001,table=1,priority=1,actions=drop"
	cases := []struct {
		name, want, why string
		add, del        func() error
		set             map[string]map[string]string
	}{
		{"DVR flow", "DVR flows (1 on br-int tables 1,2,3,4)", "enable_distributed_routing is off",
			func() error { _, err := e.OVS.Ofctl(e.Ctx, "add-flow", "br-int", dvr); return err },
			func() error {
				_, err := e.OVS.Ofctl(e.Ctx, "del-flows", "br-int", "cookie=0x5eed0001/-1,table=1")
				return err
			}, nil},
		{"trunk bridge", "trunk bridges (tbr-e2e0001-aa)", "trunk_enabled = False",
			func() error {
				_, err := e.OVS.Vsctl(e.Ctx, "add-br", "tbr-e2e0001-aa", "--", "set", "Bridge", "tbr-e2e0001-aa", "datapath_type=netdev")
				return err
			},
			func() error { _, err := e.OVS.Vsctl(e.Ctx, "--if-exists", "del-br", "tbr-e2e0001-aa"); return err },
			// The trunk handler rebuilds trunk bridges; without it (as the reference
			// without trunk_enabled) one is state nobody rebuilds.
			map[string]map[string]string{"ovs": {"trunk_enabled": "False"}}},
		// Without [agent] extensions = qos (with it, the rows are adopted).
		{"QoS rows", "1 QoS and 0 Queue rows", "the qos extension is not enabled",
			func() error {
				_, err := e.OVS.Vsctl(e.Ctx, "create", "QoS", "type=linux-htb", "external_ids:e2e=unrebuilt")
				return err
			},
			func() error {
				out, err := e.OVS.Vsctl(e.Ctx, "--bare", "--columns=_uuid", "find", "QoS", "external_ids:e2e=unrebuilt")
				if err != nil {
					return err
				}
				for _, u := range strings.Fields(out) {
					if _, err := e.OVS.Vsctl(e.Ctx, "destroy", "QoS", u); err != nil {
						return err
					}
				}
				return nil
			}, nil},
	}
	for _, c := range cases {
		if err := c.add(); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		t.Cleanup(func() { _ = c.del() })
		a, err := NewAgent(AgentConfig{Set: c.set})
		if err != nil {
			t.Fatal(err)
		}
		code, line := run(a, "takeover", "--dry-run", "--config-file", a.NeutronConf, "--config-file", a.AgentIni)
		if code != 1 || !strings.Contains(line, c.want) || !strings.Contains(line, c.why) {
			t.Errorf("%s: takeover --dry-run: exit %d, %q; want exit 1 naming %q", c.name, code, line, c.want)
		}
		code, line = run(a, append(a.args(), "--log-file", a.LogPath)...)
		if code != 1 || !strings.Contains(line, c.want) || strings.Count(line, "\n") != 0 {
			t.Errorf("%s: start: exit %d, %q; want exit 1 and one line naming %q", c.name, code, line, c.want)
		} else {
			t.Logf("%s: refused: %s", c.name, line)
		}
		if c.name == "DVR flow" {
			flows, err := e.OVS.DumpFlows(e.Ctx, "br-int")
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(strings.Join(flows, "\n"), "cookie=0x5eed0001") {
				t.Errorf("the refused start swept the DVR flow")
			}
		}
		if err := c.del(); err != nil {
			t.Fatalf("%s: remove: %v", c.name, err)
		}
	}
	// Nothing left: the agent starts and comes alive.
	e.StartAgentAlive(AgentConfig{}, 90*time.Second)
}
