package main

import (
	"bytes"
	"encoding/binary"
	"errors"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ovsagent/ovsagent/internal/config"
)

// withBase adds the transport_url every Load needs to opts.
func withBase(t *testing.T, opts config.Options) config.Options {
	t.Helper()
	opts.CommandLine = append([]config.Value{{Section: "DEFAULT", Key: "transport_url", Value: "rabbit://guest:guest@127.0.0.1:5672/"}}, opts.CommandLine...)
	opts.HostAddrs = func() ([]net.IP, error) { return nil, nil }
	return opts
}

// loadArgs loads the configuration the way the agent does for args (an
// empty file first: the host's /etc/neutron is not read).
func loadArgs(t *testing.T, args ...string) *config.Config {
	t.Helper()
	empty := filepath.Join(t.TempDir(), "empty.conf")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	args = append([]string{"--config-file", empty}, args...)
	o, err := parseFlags("ovs-agent", args, os.Stderr)
	if err != nil {
		t.Fatalf("%v: %v", args, err)
	}
	cfg, err := config.Load(o.sources, withBase(t, o.loadOptions()))
	if err != nil {
		t.Fatalf("%v: %v", args, err)
	}
	return cfg
}

func TestVersionAndHelp(t *testing.T) {
	var out, errb bytes.Buffer
	if rc := realMain([]string{"--version"}, &out, &errb); rc != 0 || strings.Count(out.String(), "\n") != 1 || strings.TrimSpace(out.String()) == "" {
		t.Fatalf("--version: rc=%d out=%q err=%q", rc, out.String(), errb.String())
	}
	version = "9.9.9"
	defer func() { version = "" }()
	out.Reset()
	if rc := realMain([]string{"--version"}, &out, &errb); rc != 0 || out.String() != "9.9.9\n" {
		t.Fatalf("--version with -ldflags version: rc=%d out=%q", rc, out.String())
	}
	for _, h := range []string{"--help", "-h"} {
		out.Reset()
		if rc := realMain([]string{h}, &out, &errb); rc != 0 {
			t.Fatalf("%s: rc=%d", h, rc)
		}
		for _, want := range []string{"check-config", "explain", "takeover --dry-run", "--version", "--config-dir", "--use-syslog", "--nouse-journal", "--log-dir"} {
			if !strings.Contains(out.String(), want) {
				t.Errorf("%s does not mention %s:\n%s", h, want, out.String())
			}
		}
	}
}

// oslo.log's command-line options, as oslo accepts them; the last one wins.
func TestOsloLogFlags(t *testing.T) {
	dir := t.TempDir()
	conf := filepath.Join(dir, "a.conf")
	os.WriteFile(conf, []byte("[DEFAULT]\ntransport_url = rabbit://guest:guest@127.0.0.1:5672/\ndebug = True\nuse_journal = True\n"), 0o600)
	var out, errb bytes.Buffer
	if rc := realMain([]string{"check-config", "--config-file", conf, "--use-syslog", "--syslog-log-facility", "local0"}, &out, &errb); rc != 0 {
		t.Fatalf("--use-syslog: rc=%d err=%q", rc, errb.String())
	}
	c := loadArgs(t, "--config-file", conf, "--use-syslog", "--nodebug", "--nouse-journal", "--log-dir", dir, "--logfile", "x.log", "--use-json", "-d")
	d := c.Default
	if !d.UseSyslog || !d.Debug || d.UseJournal || d.LogDir != dir || d.LogFile != "x.log" || !d.UseJSON {
		t.Fatalf("flags: %+v", d)
	}
	c = loadArgs(t, "--config-file", conf, "--use-syslog", "--nouse-syslog", "--nodebug")
	if c.Default.UseSyslog || c.Default.Debug || !c.Default.UseJournal {
		t.Fatalf("--noX after X: %+v", c.Default)
	}
	c = loadArgs(t, "--config-dir", dir)
	if !c.Default.UseJournal {
		t.Fatal("--config-dir not read")
	}
	// oslo.log checks the facility when syslog is used; what it refuses, so
	// does ovs-agent, and log_config_append stays refused from the command line too.
	for _, args := range [][]string{
		{"--use-syslog", "--syslog-log-facility", "LOG_NOPE"},
		{"--log-config-append", "/etc/neutron/logging.conf"},
	} {
		errb.Reset()
		if rc := realMain(append([]string{"check-config", "--config-file", conf}, args...), &out, &errb); rc != 1 || strings.Count(errb.String(), "\n") != 1 {
			t.Errorf("%v: rc=%d err=%q", args, rc, errb.String())
		}
	}
}

// log_dir without log_file: <log_dir>/<program>.log, as oslo.log.
func TestLogDirAlone(t *testing.T) {
	dir := t.TempDir()
	conf := filepath.Join(dir, "a.conf")
	os.WriteFile(conf, []byte("[DEFAULT]\nlog_dir = "+dir+"\n"), 0o600)
	cfg := loadArgs(t, "--config-file", conf)
	log, closeLog, err := newLogger(cfg, os.Stdout, os.Stderr)
	if err != nil {
		t.Fatal(err)
	}
	log.Info("hello from log_dir")
	closeLog()
	want := filepath.Join(dir, filepath.Base(os.Args[0])+".log")
	data, err := os.ReadFile(want)
	if err != nil || !strings.Contains(string(data), "hello from log_dir") {
		t.Fatalf("%s: %q %v", want, data, err)
	}
}

// The default line is oslo.log's: "%(asctime)s.%(msecs)03d %(process)d
// %(levelname)s %(name)s [-] %(instance)s%(message)s".
var osloLine = regexp.MustCompile(`^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3} (\d+) (DEBUG|INFO|WARNING|ERROR|CRITICAL) ovsagent \[-\] (.*)$`)

func TestOsloTextLine(t *testing.T) {
	var out bytes.Buffer
	cfg := config.Defaults()
	log, closeLog, err := newLogger(cfg, &out, os.Stderr)
	if err != nil {
		t.Fatal(err)
	}
	defer closeLog()
	log.With("component", "x").Warn("bridge setup failed; retrying", "err", errors.New("no such\nbridge"), "n", 3)
	log.Info("two\nlines")
	log.Debug("not at info")
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	if len(lines) != 2 {
		t.Fatalf("lines: %q", out.String())
	}
	m := osloLine.FindStringSubmatch(lines[0])
	if m == nil || m[1] != strconv.Itoa(os.Getpid()) || m[2] != "WARNING" || m[3] != `bridge setup failed; retrying component=x err="no such\nbridge" n=3` {
		t.Fatalf("line: %q", lines[0])
	}
	if m := osloLine.FindStringSubmatch(lines[1]); m == nil || m[3] != `two\nlines` {
		t.Fatalf("line: %q", lines[1])
	}
}

// listenUnixgram is a datagram socket the test reads.
func listenUnixgram(t *testing.T) (*net.UnixConn, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "s")
	c, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c, path
}

func readDatagram(t *testing.T, c *net.UnixConn) string {
	t.Helper()
	buf := make([]byte, 1<<16)
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	n, err := c.Read(buf)
	if err != nil {
		t.Fatal(err)
	}
	return string(buf[:n])
}

// use_syslog: every line also goes to syslog with the facility asked for,
// tagged with the program name, at oslo.log's priority for its level.
func TestUseSyslog(t *testing.T) {
	c, path := listenUnixgram(t)
	syslogAddr = path
	defer func() { syslogAddr = "" }()
	var out bytes.Buffer
	cfg := loadArgs(t, "--use-syslog", "--syslog-log-facility", "LOG_LOCAL0")
	log, closeLog, err := newLogger(cfg, &out, os.Stderr)
	if err != nil {
		t.Fatal(err)
	}
	defer closeLog()
	log.Warn("to syslog")
	got := readDatagram(t, c)
	// <local0(16)*8 + warning(4)>
	if !strings.HasPrefix(got, "<132>") || !strings.Contains(got, filepath.Base(os.Args[0])+"[") || !strings.Contains(got, "WARNING ovsagent [-] to syslog") {
		t.Fatalf("syslog datagram: %q", got)
	}
	if !strings.Contains(out.String(), "to syslog") {
		t.Fatalf("stdout lost the line: %q", out.String())
	}
}

// use_journal: the native protocol, and no stdout copy (as oslo.log).
func TestUseJournal(t *testing.T) {
	c, path := listenUnixgram(t)
	journalSocket = path
	defer func() { journalSocket = "/run/systemd/journal/socket" }()
	var out bytes.Buffer
	cfg := loadArgs(t, "--use-journal")
	log, closeLog, err := newLogger(cfg, &out, os.Stderr)
	if err != nil {
		t.Fatal(err)
	}
	defer closeLog()
	log.Error("to the journal", "err", "a\nb")
	got := readDatagram(t, c)
	fields := map[string]string{}
	for rest := got; rest != ""; {
		nl := strings.IndexByte(rest, '\n')
		k, v, ok := strings.Cut(rest[:nl], "=")
		if !ok { // binary form: KEY\n<len u64 le><value>\n
			n := binary.LittleEndian.Uint64([]byte(rest[nl+1 : nl+9]))
			k, v = rest[:nl], rest[nl+9:nl+9+int(n)]
			rest = rest[nl+9+int(n)+1:]
		} else {
			rest = rest[nl+1:]
		}
		fields[k] = v
	}
	if fields["PRIORITY"] != "3" || fields["SYSLOG_IDENTIFIER"] != filepath.Base(os.Args[0]) || fields["SYSLOG_FACILITY"] != "1" ||
		!osloLine.MatchString(fields["MESSAGE"]) || !strings.Contains(fields["MESSAGE"], `to the journal err="a\nb"`) {
		t.Fatalf("journal fields: %q", fields)
	}
	if out.Len() != 0 {
		t.Fatalf("stdout with use_journal: %q", out.String())
	}
}

// The log file is opened with O_NOFOLLOW: a symlink planted at the log path
// (the log directory is writable by the neutron user) is refused, and the
// file it points to is neither created nor written.
func TestLogFileNoFollow(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "elsewhere")
	link := filepath.Join(dir, "ovs-agent.log")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	cfg := loadArgs(t, "--log-file", link)
	_, _, err := newLogger(cfg, os.Stdout, os.Stderr)
	if !errors.Is(err, syscall.ELOOP) {
		t.Fatalf("symlinked log file: %v", err)
	}
	if _, err := os.Stat(target); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the symlink's target was created: %v", err)
	}
}
