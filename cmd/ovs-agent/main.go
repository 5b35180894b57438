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
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
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
	sources []config.Source
	args    []string // positional arguments
	// overrides are oslo.log's command-line options, in command-line order
	// (the last one wins, as with argparse).
	overrides []config.Value
	version   bool
}

// loadOptions are config.Load's options for the command line.
func (o *cliOptions) loadOptions() config.Options {
	return config.Options{CommandLine: o.overrides}
}

// defaultConfigFiles are oslo.config's default search for project neutron,
// used only when no --config-file/--config-dir is given.
var defaultConfigFiles = []string{"/etc/neutron/neutron.conf", "/etc/neutron/plugins/ml2/openvswitch_agent.ini"}

// optFlag sets a [DEFAULT] option from the command line.
type optFlag struct {
	o     *cliOptions
	key   string
	value string // for a boolean flag: the value it sets ("True"/"False")
}

func (f optFlag) String() string { return "" }
func (f optFlag) IsBoolFlag() bool {
	return f.value != ""
}
func (f optFlag) Set(v string) error {
	if f.value != "" { // --use-syslog, --nouse-syslog, also --use-syslog=false
		b, err := strconv.ParseBool(v)
		if err != nil {
			return err
		}
		v = f.value
		if !b {
			v = map[string]string{"True": "False", "False": "True"}[f.value]
		}
	}
	f.o.overrides = append(f.o.overrides, config.Value{Section: "DEFAULT", Key: f.key, Value: v})
	return nil
}

const usageText = `usage: ovs-agent [--config-file FILE]... [--config-dir DIR]... [options]
       ovs-agent check-config [--config-file FILE]...    validate the configuration, print "configuration OK"
       ovs-agent explain [--config-file FILE]... PORT-ID how a port is wired, and why (read-only)
       ovs-agent takeover --dry-run [--config-file FILE]... what a start would keep, replace and remove (read-only)
       ovs-agent --version

ovs-agent is a drop-in replacement for neutron-openvswitch-agent: it reads the
same files and takes the same oslo.config and oslo.log options.

options:
`

func parseFlags(name string, args []string, stderr io.Writer) (*cliOptions, error) {
	o := &cliOptions{}
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprintf(stderr, "run %s --help for the options\n", name) }
	defineFlags(fs, o)
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
	if len(o.sources) == 0 {
		for _, f := range defaultConfigFiles {
			if _, err := os.Stat(f); err == nil {
				o.sources = append(o.sources, config.Source{Path: f})
			}
		}
	}
	return o, nil
}

func defineFlags(fs *flag.FlagSet, o *cliOptions) {
	fs.Var(sourceFlag{&o.sources, false}, "config-file", "configuration file (repeatable; later files win)")
	fs.Var(sourceFlag{&o.sources, true}, "config-dir", "directory of *.conf files read in lexical order (repeatable)")
	fs.BoolVar(&o.version, "version", false, "print the version and exit")
	// oslo.log's command-line options (oslo_log/_options.py), with the
	// deprecated spellings it still takes and argparse's --noX for booleans.
	for _, f := range []struct{ names, key, help string }{
		{"log-file logfile", "log_file", "log to this file (under --log-dir when relative)"},
		{"log-dir logdir", "log_dir", "log directory; alone, the file is <log-dir>/<program>.log"},
		{"syslog-log-facility", "syslog_log_facility", "syslog facility (LOG_USER)"},
		{"log-config-append log-config", "log_config_append", "a Python logging configuration (refused: not supported)"},
		{"log-date-format", "log_date_format", "date format of the log lines (refused: not supported)"},
	} {
		for _, n := range strings.Fields(f.names) {
			fs.Var(optFlag{o: o, key: f.key}, n, f.help)
		}
	}
	for _, f := range []struct{ name, key, help string }{
		{"debug", "debug", "log at debug level"},
		{"d", "debug", "shorthand for --debug"},
		{"use-syslog", "use_syslog", "log to syslog too"},
		{"use-journal", "use_journal", "log to the journal (native protocol)"},
		{"use-json", "use_json", "log lines as JSON"},
		{"watch-log-file", "watch_log_file", "reopen the log file when it moves (refused: SIGHUP reopens it)"},
	} {
		fs.Var(optFlag{o: o, key: f.key, value: "True"}, f.name, f.help)
		if f.name != "d" {
			fs.Var(optFlag{o: o, key: f.key, value: "False"}, "no"+f.name, "unset --"+f.name)
		}
	}
	fs.Func("log-format", "text or json (ovsagent's older spelling of --use-json)", func(v string) error {
		switch v {
		case "text", "json":
			o.overrides = append(o.overrides, config.Value{Section: "DEFAULT", Key: "use_json", Value: map[string]string{"text": "False", "json": "True"}[v]})
			return nil
		}
		return fmt.Errorf("must be text or json, not %q", v)
	})
}

// printUsage prints --help: the subcommands, then every option.
func printUsage(w io.Writer) {
	fmt.Fprint(w, usageText)
	fs := flag.NewFlagSet("ovs-agent", flag.ContinueOnError)
	defineFlags(fs, &cliOptions{})
	fs.VisitAll(func(f *flag.Flag) {
		dash, arg := "--", " VALUE"
		if len(f.Name) == 1 {
			dash = "-"
		}
		if b, ok := f.Value.(interface{ IsBoolFlag() bool }); ok && b.IsBoolFlag() {
			arg = ""
		}
		fmt.Fprintf(w, "  %s%s%s\n        %s\n", dash, f.Name, arg, f.Usage)
	})
}

// wantsHelp reports whether args ask for --help (before a "--").
func wantsHelp(args []string) bool {
	for _, a := range args {
		switch a {
		case "--":
			return false
		case "-h", "-help", "--help":
			return true
		}
	}
	return false
}

func realMain(args []string, stdout, stderr io.Writer) int {
	// SIGTERM and SIGINT are caught from the very start: a stop asked for
	// while the configuration is read, the bridges are set up or the broker
	// is awaited is a clean stop (exit 0), never a kill by the default action.
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if wantsHelp(args) {
		printUsage(stdout)
		return 0
	}
	if len(args) > 0 && args[0] == "explain" {
		o, err := parseFlags("ovs-agent explain", args[1:], stderr)
		if err == nil && len(o.args) != 1 {
			err = fmt.Errorf("usage: ovs-agent explain [--config-file FILE]... PORT-ID")
			fmt.Fprintln(stderr, err)
		}
		if err != nil {
			return 2
		}
		cfg, err := config.Load(o.sources, o.loadOptions())
		if err != nil {
			fmt.Fprintln(stderr, err)
			return 1
		}
		log, closeLog, err := newLogger(cfg, stderr, stderr)
		if err != nil {
			fmt.Fprintln(stderr, "ovs-agent:", err)
			return 1
		}
		defer closeLog()
		if err := explain(ctx, cfg, log, o.args[0], stdout); err != nil {
			fmt.Fprintln(stderr, "ovs-agent explain:", err)
			return 1
		}
		return 0
	}
	if len(args) > 0 && args[0] == "takeover" {
		stop() // takeover --dry-run only reads: the default actions end it
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
		cfg, err := config.Load(o.sources, o.loadOptions())
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
		err = fmt.Errorf("unexpected argument %q (subcommands: check-config, explain, takeover; see --help)", o.args[0])
	}
	if err != nil {
		fmt.Fprintln(stderr, "ovs-agent:", err)
		return 2
	}
	if o.version {
		fmt.Fprintln(stdout, versionString())
		return 0
	}
	cfg, err := config.Load(o.sources, o.loadOptions())
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	stopMemProfiling(cfg)
	log, closeLog, err := newLogger(cfg, stdout, stderr)
	if err != nil {
		fmt.Fprintln(stderr, "ovs-agent:", err)
		return 1
	}
	defer closeLog()

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
	log.Info("starting", "version", versionString(), "host", cfg.Default.Host, "transport_url", cfg.Default.Transport.String(),
		"files", strings.Join(cfg.Files, ","))
	for _, w := range cfg.Warnings {
		log.Warn(w)
	}
	applyMemoryLimit(cfg, log)
	if err := run(ctx, cfg, log); err != nil && ctx.Err() == nil {
		log.Error("agent stopped", "err", err)
		if !cfg.Default.UseStderr {
			// What only the running agent can find wrong (a mapped bridge that does
			// not exist, an unreadable CA file) is a configuration error too: one
			// line on stderr, as for the errors Load reports (unless the log
			// line just went there).
			fmt.Fprintln(stderr, "ovs-agent:", err)
		}
		return 1
	}
	log.Info("stopped")
	return 0
}
