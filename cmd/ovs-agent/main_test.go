package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ovsagent/ovsagent/internal/config"
)

func TestCheckConfig(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.conf")
	os.WriteFile(good, []byte("[DEFAULT]\ntransport_url = rabbit://guest:pw@127.0.0.1:5672/\nhost = hv1\n"), 0o600)
	bad := filepath.Join(dir, "bad.ini")
	os.WriteFile(bad, []byte("[ovs]\nbridge_mappings = physnet1\n"), 0o600)

	var out, errb bytes.Buffer
	if rc := realMain([]string{"check-config", "--config-file", good}, &out, &errb); rc != 0 || strings.TrimSpace(out.String()) != "configuration OK" {
		t.Fatalf("good: rc=%d out=%q err=%q", rc, out.String(), errb.String())
	}
	out.Reset()
	errb.Reset()
	rc := realMain([]string{"check-config", "--config-file=" + good, "--config-file", bad}, &out, &errb)
	msg := errb.String()
	if rc != 1 || strings.Count(msg, "\n") != 1 || !strings.Contains(msg, "ovs.bridge_mappings") || strings.Contains(msg, "pw@") {
		t.Fatalf("bad: rc=%d err=%q", rc, msg)
	}
	if rc := realMain([]string{"check-config", "--nope"}, &out, &errb); rc != 2 {
		t.Fatalf("bad flag: rc=%d", rc)
	}
	if rc := realMain([]string{"check-config", "--config-file", good, "extra"}, &out, &errb); rc != 2 {
		t.Fatalf("extra argument: rc=%d", rc)
	}
	if rc := realMain([]string{"explain", "--config-file", good}, &out, &errb); rc != 2 {
		t.Fatalf("explain without a port: rc=%d", rc)
	}
	o, err := parseFlags("x", []string{"PORT", "--config-file", good, "--debug"}, &errb)
	if err != nil || len(o.args) != 1 || o.args[0] != "PORT" || len(o.sources) != 1 || len(o.overrides) != 1 || o.overrides[0] != (config.Value{Section: "DEFAULT", Key: "debug", Value: "True"}) {
		t.Fatalf("positional before flags: %+v %v", o, err)
	}
}

func TestLogger(t *testing.T) {
	dir := t.TempDir()
	logf := filepath.Join(dir, "agent.log")
	o, err := parseFlags("x", []string{"--log-file", logf, "--debug", "--log-format", "json"}, os.Stderr)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(nil, withBase(t, o.loadOptions()))
	if err != nil {
		t.Fatal(err)
	}
	log, closeLog, err := newLogger(cfg, os.Stdout, os.Stderr)
	if err != nil {
		t.Fatal(err)
	}
	log.Debug("hello", "k", 1)
	// logrotate: the file is moved away, SIGHUP reopens the path
	if err := os.Rename(logf, logf+".1"); err != nil {
		t.Fatal(err)
	}
	if err := reopenLog(); err != nil {
		t.Fatal(err)
	}
	log.Info("after rotation")
	closeLog()
	old, _ := os.ReadFile(logf + ".1")
	data, _ := os.ReadFile(logf)
	if !strings.Contains(string(old), `"levelname":"DEBUG","message":"hello","name":"ovsagent"`) || !strings.Contains(string(old), `"extra":{"k":1}`) ||
		!strings.Contains(string(data), "after rotation") || strings.Contains(string(data), "hello") {
		t.Fatalf("log: %s / rotated: %s", data, old)
	}
}

// The canary is checked every polling_interval as the reference's
// rpc_loop does: a flow wipe without an OpenFlow reconnect is found within
// seconds, not report_interval's 30 s.
func TestAgentOptionsCanaryInterval(t *testing.T) {
	cfg := config.Defaults()
	cfg.Agent.PollingInterval = 2 * time.Second
	cfg.Agent.ReportInterval = 30 * time.Second
	if got := agentOptions(cfg).CanaryInterval; got != 2*time.Second {
		t.Fatalf("CanaryInterval = %s, want polling_interval (2s)", got)
	}
}
