package config

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"gopkg.in/ini.v1"
)

// Source is one configuration source in command-line order: a file
// (--config-file) or a directory (--config-dir) whose *.conf files are read
// in lexical order at that position.
type Source struct {
	Path string
	Dir  bool
}

// Files turns --config-file paths into sources.
func Files(paths ...string) []Source {
	out := make([]Source, 0, len(paths))
	for _, p := range paths {
		out = append(out, Source{Path: p})
	}
	return out
}

// Raw holds every value read, oslo.config style: section -> key -> the last
// value seen. Section names are lower-cased except DEFAULT (oslo.config
// normalises group names the same way); key names are kept as written.
type Raw struct {
	sections map[string]map[string]string
	// env is oslo.config's environment source: OS_<GROUP>__<OPTION>
	// (e.g. OS_DEFAULT__TRANSPORT_URL, OS_OVS__LOCAL_IP) overrides the files.
	env func(string) (string, bool)
	// cli holds the command-line options (oslo.log's --debug, --log-file,
	// ...): section -> key -> value; they win over the environment and files.
	cli map[string]map[string]string
	// err is the first substitution that failed (interpolate.go); Parse and
	// checkSupport return it.
	err error
	// Files lists the files actually read, in order.
	Files []string
	// asked, when set (tests), sees every option looked up.
	asked func(section, key string)
	// rabbitQuery holds the transport_url query, which overrides
	// [oslo_messaging_rabbit] (see applyTransportQuery).
	rabbitQuery map[string]string
}

// Lookup returns the value of section.key, with oslo.config's $name
// substitution done, and whether it was set. A substitution that fails is
// recorded (Parse and checkSupport return it) and the value is returned as
// written.
func (r *Raw) Lookup(section, key string) (string, bool) {
	if r == nil {
		return "", false
	}
	if r.asked != nil {
		r.asked(section, key)
	}
	v, ok := r.lookupRaw(section, key)
	if !ok {
		return v, ok
	}
	out, serr := r.expand(normSection(section), key, v, map[string]bool{optName(normSection(section), key): true})
	if serr != nil {
		if r.err == nil {
			r.err = substitutionError(normSection(section), key, v, serr)
		}
		return v, true
	}
	return out, true
}

// SetCommandLine records a command-line option (oslo.config: the command
// line wins over the environment and the files).
func (r *Raw) SetCommandLine(section, key, value string) {
	if r.cli == nil {
		r.cli = map[string]map[string]string{}
	}
	sec := normSection(section)
	if r.cli[sec] == nil {
		r.cli[sec] = map[string]string{}
	}
	r.cli[sec][key] = value
}

// lookupRaw is Lookup without substitution: the transport_url query (oslo
// reads [oslo_messaging_rabbit] through it first), the command line, the
// environment, the files.
func (r *Raw) lookupRaw(section, key string) (string, bool) {
	if v, ok := r.rabbitQuery[key]; ok && normSection(section) == rabbitSection {
		return v, true
	}
	if v, ok := r.cli[normSection(section)][key]; ok {
		return v, true
	}
	if r.env != nil {
		if v, ok := r.env("OS_" + strings.ToUpper(section) + "__" + strings.ToUpper(key)); ok {
			return v, true
		}
	}
	s, ok := r.sections[normSection(section)]
	if !ok {
		return "", false
	}
	v, ok := s[key]
	return v, ok
}

func normSection(name string) string {
	if strings.EqualFold(name, ini.DefaultSection) {
		return ini.DefaultSection
	}
	return strings.ToLower(name)
}

// iniOptions mirror oslo.config's parser: repeated keys are kept (the last
// one wins, applied by us), continuation lines are accepted, '#' and ';'
// inside a value are part of the value, and empty or duplicate values are
// not dropped (an empty value after a non-empty one must still win).
var iniOptions = ini.LoadOptions{
	AllowShadows:               true,
	AllowPythonMultilineValues: true,
	IgnoreInlineComment:        true,
	AllowDuplicateShadowValues: true,
	PreserveEmptyShadowValues:  true,
	AllowNonUniqueSections:     false,
	SpaceBeforeInlineComment:   false,
}

// ReadSources reads the sources in order; a later value replaces an earlier
// one for the same section and key, within a file and across files.
func ReadSources(sources []Source) (*Raw, error) {
	raw := &Raw{sections: map[string]map[string]string{}, env: os.LookupEnv}
	for _, src := range sources {
		if !src.Dir {
			if err := raw.readFile(src.Path); err != nil {
				return nil, err
			}
			continue
		}
		files, err := confFiles(src.Path)
		if err != nil {
			return nil, err
		}
		for _, f := range files {
			if err := raw.readFile(f); err != nil {
				return nil, err
			}
		}
	}
	return raw, nil
}

func confFiles(dir string) ([]string, error) {
	st, err := os.Stat(dir)
	if err != nil {
		return nil, fmt.Errorf("config-dir %s: %s", dir, oneLine(err.Error()))
	}
	if !st.IsDir() {
		return nil, fmt.Errorf("config-dir %s: not a directory", dir)
	}
	matches, err := filepath.Glob(filepath.Join(dir, "*.conf"))
	if err != nil {
		return nil, fmt.Errorf("config-dir %s: %s", dir, oneLine(err.Error()))
	}
	sort.Strings(matches)
	return matches, nil
}

func (r *Raw) readFile(path string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("config-file %s: %s", path, oneLine(err.Error()))
	}
	return r.readData(path, data)
}

// ParseBytes reads one in-memory file (tests, fuzzing); the environment is
// not consulted.
func ParseBytes(data []byte) (*Raw, error) {
	raw := &Raw{sections: map[string]map[string]string{}}
	return raw, raw.readData("<bytes>", data)
}

func (r *Raw) readData(path string, data []byte) error {
	f, err := ini.LoadSources(iniOptions, data)
	if err != nil {
		return fmt.Errorf("config-file %s: cannot parse: %s", path, oneLine(err.Error()))
	}
	for _, sec := range f.Sections() {
		name := normSection(sec.Name())
		m := r.sections[name]
		if m == nil {
			m = map[string]string{}
			r.sections[name] = m
		}
		for _, k := range sec.Keys() {
			vals := k.ValueWithShadows()
			if len(vals) == 0 {
				m[k.Name()] = ""
				continue
			}
			m[k.Name()] = stripContinuation(vals[len(vals)-1])
		}
	}
	r.Files = append(r.Files, path)
	return nil
}

// stripContinuation removes the indentation ini keeps on continuation lines;
// oslo.config joins them with "\n" after stripping each.
func stripContinuation(v string) string {
	if !strings.Contains(v, "\n") {
		return strings.TrimSpace(v)
	}
	lines := strings.Split(v, "\n")
	out := lines[:0]
	for _, l := range lines {
		out = append(out, strings.TrimSpace(l))
	}
	return strings.TrimSpace(strings.Join(out, "\n"))
}

func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}
