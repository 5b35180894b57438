package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ovsagent/ovsagent/internal/config"
	"github.com/ovsagent/ovsagent/internal/ovsdb"
)

// vhostuser_socket_dir and log_agent_heartbeats take effect through
// report_state, as in the reference: the server binds vhost-user ports
// with the socket directory the agent reports and logs heartbeats when
// asked; both must reach the report exactly as configured.
func TestReportCarriesOptions(t *testing.T) {
	path := filepath.Join(t.TempDir(), "agent.ini")
	body := "[DEFAULT]\ntransport_url = rabbit://u:p@127.0.0.1:5672/\n[agent]\nlog_agent_heartbeats = True\n[ovs]\nvhostuser_socket_dir = /run/vhu-e2e\n"
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(config.Files(path), config.Options{})
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(agentConfigurations(cfg, ovsdb.SystemInfo{}, "hv", 0))
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	if got["vhostuser_socket_dir"] != "/run/vhu-e2e" || got["log_agent_heartbeats"] != true {
		t.Errorf("report configurations: vhostuser_socket_dir %v, log_agent_heartbeats %v", got["vhostuser_socket_dir"], got["log_agent_heartbeats"])
	}
}

// [DEFAULT] use_stderr sends the lines to stderr as well (oslo.log); without
// it, and without a log file, they go to stdout only.
func TestUseStderrLines(t *testing.T) {
	for _, useStderr := range []bool{false, true} {
		cfg := config.Defaults()
		cfg.Default.UseStderr = useStderr
		var out, errOut bytes.Buffer
		log, closeLog, err := newLogger(cfg, &out, &errOut)
		if err != nil {
			t.Fatal(err)
		}
		log.Info("to the sinks")
		closeLog()
		onStderr := strings.Contains(errOut.String(), "to the sinks")
		if onStderr != useStderr {
			t.Errorf("use_stderr=%v: line on stderr = %v (stdout %q, stderr %q)", useStderr, onStderr, out.String(), errOut.String())
		}
	}
}
