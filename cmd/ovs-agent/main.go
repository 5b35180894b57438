// Command ovs-agent is ovsagent, a drop-in replacement for
// neutron-openvswitch-agent. It takes the reference agent's flags:
//
//	ovs-agent --config-file /etc/neutron/neutron.conf \
//	          --config-file /etc/neutron/plugins/ml2/openvswitch_agent.ini \
//	          [--config-dir DIR] [--log-file FILE] [--debug]
//	ovs-agent check-config --config-file ...   # validate, print "configuration OK"
//	ovs-agent explain --config-file ... PORT-ID # how a port is wired, and why (read-only)
//
// Exit codes: 0 stopped by SIGTERM/SIGINT, 1 bad configuration or the agent
// failed, 2 bad command line.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"

	"github.com/ovsagent/ovsagent/internal/config"
)

func main() {
	os.Exit(realMain(os.Args[1:], os.Stdout, os.Stderr))
}

// sourceFlag appends to a shared list so that --config-file and --config-dir
// keep their command-line order, as oslo.config reads them.
type sourceFlag struct {
	list *[]config.Source
	dir  bool
}

func (f sourceFlag) String() string { return "" }
func (f sourceFlag) Set(v string) error {
	*f.list = append(*f.list, config.Source{Path: v, Dir: f.dir})
	return nil
}

type cliOptions struct {
	sources   []config.Source
	args      []string // positional arguments
	logFile   string
	logFormat string
	debug     bool
}

// defaultConfigFiles are oslo.config's default search for project neutron,
// used only when no --config-file/--config-dir is given.
var defaultConfigFiles = []string{"/etc/neutron/neutron.conf", "/etc/neutron/plugins/ml2/openvswitch_agent.ini"}

func parseFlags(name string, args []string, stderr io.Writer) (*cliOptions, error) {
	o := &cliOptions{}
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Var(sourceFlag{&o.sources, false}, "config-file", "configuration file (repeatable; later files win)")
	fs.Var(sourceFlag{&o.sources, true}, "config-dir", "directory of *.conf files read in lexical order (repeatable)")
	fs.StringVar(&o.logFile, "log-file", "", "log to this file instead of stderr")
	fs.StringVar(&o.logFormat, "log-format", "text", "log format: text or json (ovsagent addition)")
	fs.BoolVar(&o.debug, "debug", false, "log at debug level")
	fs.BoolVar(&o.debug, "d", false, "shorthand for --debug")
	// positional arguments may come before, between or after the flags
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		if fs.NArg() == 0 {
			break
		}
		o.args = append(o.args, fs.Arg(0))
		args = fs.Args()[1:]
	}
	if o.logFormat != "text" && o.logFormat != "json" {
		return nil, fmt.Errorf("--log-format must be text or json, not %q", o.logFormat)
	}
	if len(o.sources) == 0 {
		for _, f := range defaultConfigFiles {
			if _, err := os.Stat(f); err == nil {
				o.sources = append(o.sources, config.Source{Path: f})
			}
		}
	}
	return o, nil
}

func realMain(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && args[0] == "explain" {
		o, err := parseFlags("ovs-agent explain", args[1:], stderr)
		if err == nil && len(o.args) != 1 {
			err = fmt.Errorf("usage: ovs-agent explain [--config-file FILE]... PORT-ID")
			fmt.Fprintln(stderr, err)
		}
		if err != nil {
			return 2
		}
		cfg, err := config.Load(o.sources, config.Options{})
		if err != nil {
			fmt.Fprintln(stderr, err)
			return 1
		}
		log, closeLog, err := newLogger(o, cfg, stderr)
		if err != nil {
			fmt.Fprintln(stderr, "ovs-agent:", err)
			return 1
		}
		defer closeLog()
		ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
		defer stop()
		if err := explain(ctx, cfg, log, o.args[0], stdout); err != nil {
			fmt.Fprintln(stderr, "ovs-agent explain:", err)
			return 1
		}
		return 0
	}
	if len(args) > 0 && args[0] == "takeover" {
		return takeoverMain(args[1:], stdout, stderr)
	}
	if len(args) > 0 && args[0] == "check-config" {
		o, err := parseFlags("ovs-agent check-config", args[1:], stderr)
		if err == nil && len(o.args) > 0 {
			err = fmt.Errorf("unexpected argument %q", o.args[0])
			fmt.Fprintln(stderr, "ovs-agent check-config:", err)
		}
		if err != nil {
			return 2
		}
		cfg, err := config.Load(o.sources, config.Options{})
		if err != nil {
			fmt.Fprintln(stderr, err)
			return 1
		}
		for _, w := range cfg.Warnings {
			fmt.Fprintln(stdout, "warning:", w)
		}
		fmt.Fprintln(stdout, "configuration OK")
		return 0
	}

	o, err := parseFlags("ovs-agent", args, stderr)
	if err == nil && len(o.args) > 0 {
		err = fmt.Errorf("unexpected argument %q (subcommands: check-config, explain)", o.args[0])
	}
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		fmt.Fprintln(stderr, "ovs-agent:", err)
		return 2
	}
	cfg, err := config.Load(o.sources, config.Options{})
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	stopMemProfiling(cfg)
	log, closeLog, err := newLogger(o, cfg, stderr)
	if err != nil {
		fmt.Fprintln(stderr, "ovs-agent:", err)
		return 1
	}
	defer closeLog()

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	// SIGHUP must not kill the agent (its default action): reopen the log
	// file instead, for logrotate.
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	go func() {
		for range hup {
			if err := reopenLog(); err != nil {
				log.Error("SIGHUP: reopen log file", "err", err)
			} else {
				log.Info("SIGHUP: log file reopened")
			}
		}
	}()
	log.Info("starting", "host", cfg.Default.Host, "transport_url", cfg.Default.Transport.String(),
		"files", strings.Join(cfg.Files, ","))
	for _, w := range cfg.Warnings {
		log.Warn(w)
	}
	applyMemoryLimit(cfg, log)
	if err := run(ctx, cfg, log); err != nil && !errors.Is(err, context.Canceled) {
		log.Error("agent stopped", "err", err)
		if logPath(o, cfg) != "" {
			// What only the running agent can find wrong (a mapped bridge that does
			// not exist, an unreadable CA file) is a configuration error too: one
			// line on stderr, as for the errors Load reports.
			fmt.Fprintln(stderr, "ovs-agent:", err)
		}
		return 1
	}
	log.Info("stopped")
	return 0
}

// newLogger honours --log-file and --debug first, then [DEFAULT] log_file,
// log_dir and debug, like oslo.log.
func newLogger(o *cliOptions, cfg *config.Config, stderr io.Writer) (*slog.Logger, func(), error) {
	level := slog.LevelInfo
	if o.debug || cfg.Default.Debug {
		level = slog.LevelDebug
	}
	path := logPath(o, cfg)
	var w io.Writer = stderr
	closeFn := func() {}
	if path != "" {
		lf := &logFile{path: path}
		if err := lf.reopen(); err != nil {
			return nil, nil, fmt.Errorf("log file: %w", err)
		}
		w, closeFn = lf, lf.close
		reopenLog = lf.reopen
	}
	hopts := &slog.HandlerOptions{Level: level}
	var h slog.Handler = slog.NewTextHandler(w, hopts)
	if o.logFormat == "json" {
		h = slog.NewJSONHandler(w, hopts)
	}
	return slog.New(h), closeFn, nil
}

// logPath is the log file in force ("" = stderr): --log-file, else [DEFAULT] log_file
// under log_dir.
func logPath(o *cliOptions, cfg *config.Config) string {
	path := o.logFile
	if path == "" {
		path = cfg.Default.LogFile
	}
	if path != "" && cfg.Default.LogDir != "" && !strings.HasPrefix(path, "/") {
		path = cfg.Default.LogDir + "/" + path
	}
	return path
}

// reopenLog reopens the log file (SIGHUP); a no-op when logging to stderr.
var reopenLog = func() error { return nil }

// logFile is an append-only log file that can be reopened after rotation.
type logFile struct {
	mu   sync.Mutex
	path string
	f    *os.File
}

func (l *logFile) reopen() error {
	f, err := os.OpenFile(l.path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o640)
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
