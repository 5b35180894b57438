package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"log/syslog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/ovsagent/ovsagent/internal/config"
)

// Logging follows oslo.log (oslo_log/log.py _setup_logging_from_conf):
//
//   - the log file is log_file, under log_dir when relative; log_dir alone
//     is <log_dir>/<binary>.log, binary being the program's name as started
//     (oslo: the basename of the outermost script, sys.argv[0]). Installed
//     as /usr/local/bin/ovs-agent that is ovs-agent.log, next to the
//     reference's neutron-openvswitch-agent.log; installed under the
//     reference's name it is the reference's file.
//   - use_stderr adds stderr; use_journal adds the journal (native
//     protocol); without a file, use_stderr or use_journal the lines go to
//     stdout; use_syslog adds syslog (facility syslog_log_facility).
//   - every line has oslo's default format,
//     "2006-01-02 15:04:05.000 PID LEVEL NAME [-] message", so the parsers
//     that read OpenStack logs read ours (the attributes follow the message
//     as key=value); use_json makes every line a JSON object instead.

// loggerName is oslo's %(name)s: one token, as parsers expect.
const loggerName = "ovsagent"

// binaryName is oslo.log's binary name: the program as started.
func binaryName() string { return filepath.Base(os.Args[0]) }

// logPath is the log file in force ("" = none), as oslo.log's _get_log_file_path.
func logPath(cfg *config.Config) string {
	file, dir := cfg.Default.LogFile, cfg.Default.LogDir
	switch {
	case file != "" && dir == "":
		return file
	case file != "":
		return filepath.Join(dir, file)
	case dir != "":
		return filepath.Join(dir, binaryName()+".log")
	}
	return ""
}

// reopenLog reopens the log file (SIGHUP); a no-op when there is none.
var reopenLog = func() error { return nil }

// syslogAddr and journalSocket are where syslog and journal lines go; tests
// point them at sockets of their own. "" for syslog is the local syslog
// daemon (/dev/log).
var (
	syslogAddr    = ""
	journalSocket = "/run/systemd/journal/socket"
)

// newLogger builds the logger of cfg. out is where lines go when oslo.log
// would write to stdout (the agent passes stdout; the subcommands, whose
// stdout is their answer, pass stderr).
func newLogger(cfg *config.Config, out, stderr io.Writer) (*slog.Logger, func(), error) {
	d := cfg.Default
	level := slog.LevelInfo
	if d.Debug {
		level = slog.LevelDebug
	}
	var sinks []sink
	var closers []func()
	closeAll := func() {
		for _, c := range closers {
			c()
		}
	}
	path := logPath(cfg)
	if path != "" {
		lf := &logFile{path: path}
		if err := lf.reopen(); err != nil {
			return nil, nil, fmt.Errorf("log file: %w", err)
		}
		sinks = append(sinks, writerSink{lf})
		closers = append(closers, lf.close)
		reopenLog = lf.reopen
	}
	if d.UseStderr {
		sinks = append(sinks, writerSink{stderr})
	}
	if d.UseJournal {
		j, err := dialJournal(journalSocket, facilityCode(d.SyslogLogFacility))
		if err != nil {
			closeAll()
			return nil, nil, fmt.Errorf("use_journal: %w", err)
		}
		sinks = append(sinks, j)
		closers = append(closers, j.close)
	}
	if path == "" && !d.UseStderr && !d.UseJournal {
		sinks = append(sinks, writerSink{out})
	}
	if d.UseSyslog {
		network := ""
		if syslogAddr != "" {
			network = "unixgram"
		}
		w, err := syslog.Dial(network, syslogAddr, syslog.Priority(facilityCode(d.SyslogLogFacility)<<3)|syslog.LOG_INFO, binaryName())
		if err != nil {
			closeAll()
			return nil, nil, fmt.Errorf("use_syslog: %w", err)
		}
		sinks = append(sinks, syslogSink{w})
		closers = append(closers, func() { w.Close() })
	}
	h := newLineHandler(level, d.UseJSON, sinks)
	return slog.New(h), closeAll, nil
}

// facilityCode is syslog_log_facility as a facility number (config checked
// the name when use_syslog or use_journal is set).
func facilityCode(name string) int {
	n, _ := config.SyslogFacility(name)
	return n
}

// levelName is Python's level name.
func levelName(l slog.Level) string {
	switch {
	case l < slog.LevelInfo:
		return "DEBUG"
	case l < slog.LevelWarn:
		return "INFO"
	case l < slog.LevelError:
		return "WARNING"
	case l == slog.LevelError:
		return "ERROR"
	}
	return "CRITICAL"
}

// syslogPriority is oslo's SYSLOG_MAP.
func syslogPriority(l slog.Level) int {
	switch levelName(l) {
	case "DEBUG":
		return 7
	case "INFO":
		return 6
	case "WARNING":
		return 4
	case "ERROR":
		return 3
	}
	return 2
}

// A sink receives each formatted line (with its trailing newline).
type sink interface {
	emit(level slog.Level, line []byte) error
}

type writerSink struct{ w io.Writer }

func (s writerSink) emit(_ slog.Level, line []byte) error {
	_, err := s.w.Write(line)
	return err
}

type syslogSink struct{ w *syslog.Writer }

func (s syslogSink) emit(level slog.Level, line []byte) error {
	m := string(bytes.TrimSuffix(line, []byte("\n")))
	switch syslogPriority(level) {
	case 7:
		return s.w.Debug(m)
	case 6:
		return s.w.Info(m)
	case 4:
		return s.w.Warning(m)
	case 3:
		return s.w.Err(m)
	}
	return s.w.Crit(m)
}

// lineHandler formats each record once (oslo's text line or JSON) and hands
// the line to every sink. The attributes are rendered by slog's own text or
// JSON handler (quoting, groups), writing into a buffer under mu.
type lineHandler struct {
	shared *lineShared
	inner  slog.Handler
}

type lineShared struct {
	mu    sync.Mutex
	buf   bytes.Buffer
	level slog.Leveler
	json  bool
	pid   string
	sinks []sink
}

func newLineHandler(level slog.Leveler, json bool, sinks []sink) *lineHandler {
	sh := &lineShared{level: level, json: json, pid: strconv.Itoa(os.Getpid()), sinks: sinks}
	var inner slog.Handler
	if json {
		host, _ := os.Hostname()
		inner = slog.NewJSONHandler(&sh.buf, &slog.HandlerOptions{Level: slog.LevelDebug - 8, ReplaceAttr: osloJSONKeys}).
			WithAttrs([]slog.Attr{slog.String("name", loggerName), slog.Int("process", os.Getpid()), slog.String("hostname", host)}).
			WithGroup("extra")
	} else {
		inner = slog.NewTextHandler(&sh.buf, &slog.HandlerOptions{Level: slog.LevelDebug - 8, ReplaceAttr: dropBuiltins})
	}
	return &lineHandler{shared: sh, inner: inner}
}

// dropBuiltins leaves the text handler only the attributes; time, level and
// message are in oslo's prefix.
func dropBuiltins(groups []string, a slog.Attr) slog.Attr {
	if len(groups) == 0 && (a.Key == slog.TimeKey || a.Key == slog.LevelKey || a.Key == slog.MessageKey) {
		return slog.Attr{}
	}
	return a
}

// osloJSONKeys names the built-in keys as oslo.log's JSONFormatter does.
func osloJSONKeys(groups []string, a slog.Attr) slog.Attr {
	if len(groups) > 0 {
		return a
	}
	switch a.Key {
	case slog.TimeKey:
		return slog.String("asctime", a.Value.Time().Local().Format("2006-01-02 15:04:05.000"))
	case slog.LevelKey:
		return slog.String("levelname", levelName(a.Value.Any().(slog.Level)))
	case slog.MessageKey:
		return slog.String("message", a.Value.String())
	}
	return a
}

func (h *lineHandler) Enabled(_ context.Context, l slog.Level) bool {
	return l >= h.shared.level.Level()
}

func (h *lineHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return &lineHandler{shared: h.shared, inner: h.inner.WithAttrs(as)}
}

func (h *lineHandler) WithGroup(name string) slog.Handler {
	return &lineHandler{shared: h.shared, inner: h.inner.WithGroup(name)}
}

func (h *lineHandler) Handle(ctx context.Context, r slog.Record) error {
	sh := h.shared
	sh.mu.Lock()
	defer sh.mu.Unlock()
	sh.buf.Reset()
	if err := h.inner.Handle(ctx, r); err != nil {
		return err
	}
	var line []byte
	if sh.json {
		line = append([]byte(nil), sh.buf.Bytes()...)
	} else {
		attrs := bytes.TrimSuffix(sh.buf.Bytes(), []byte("\n"))
		t := r.Time
		if t.IsZero() {
			t = time.Now()
		}
		var b bytes.Buffer
		b.WriteString(t.Local().Format("2006-01-02 15:04:05.000"))
		b.WriteByte(' ')
		b.WriteString(sh.pid)
		b.WriteByte(' ')
		b.WriteString(levelName(r.Level))
		b.WriteString(" " + loggerName + " [-] ")
		// One record, one line: a newline in a message would start what
		// parsers take for a new record.
		b.WriteString(strings.ReplaceAll(r.Message, "\n", `\n`))
		if len(attrs) > 0 {
			b.WriteByte(' ')
			b.Write(attrs)
		}
		b.WriteByte('\n')
		line = b.Bytes()
	}
	var first error
	for _, s := range sh.sinks {
		if err := s.emit(r.Level, line); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// logFile is an append-only log file that can be reopened after rotation.
// It is opened with O_NOFOLLOW: the log directory may be writable by others
// (group adm, the neutron user), and a symlink planted at the log path must
// not make the root agent append to, or create, a file elsewhere.
type logFile struct {
	mu   sync.Mutex
	path string
	f    *os.File
}

func (l *logFile) reopen() error {
	f, err := os.OpenFile(l.path, os.O_CREATE|os.O_WRONLY|os.O_APPEND|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0o640)
	if err != nil {
		return err
	}
	l.mu.Lock()
	old := l.f
	l.f = f
	l.mu.Unlock()
	if old != nil {
		old.Close()
	}
	return nil
}

func (l *logFile) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.f.Write(p)
}

func (l *logFile) close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.f.Close()
}
