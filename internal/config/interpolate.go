package config

import (
	"fmt"
	"os"
	"strings"
	"unicode/utf8"
)

// oslo.config substitutes $name and ${name} in every value it reads, with the
// value of another registered option (oslo_config/cfg.py ConfigOpts._substitute,
// a string.Template with idpattern [_a-z][\._a-z0-9]* matched ignoring case).
// What it does, and so what ovs-agent does:
//
//   - "$$" is a literal "$", and so is "\$" (rewritten to "$$" first): a
//     RabbitMQ password written pa$$word is pa$word.
//   - $name is first the option name of the group being read, then name in
//     [DEFAULT]; $group.name and ${group.name} name another group's option,
//     with the group spelt as the reference registers it: AGENT, OVS,
//     SECURITYGROUP, network_log, oslo_messaging_rabbit (so ${ovs.local_ip}
//     fails in the reference and here, ${OVS.local_ip} works). "DEFAULT" is no
//     group there: ${DEFAULT.host} fails too; write $host.
//   - A name that is no option (pa$word: "word") fails the start with
//     NoSuchOptError in the reference; here it is a configuration error that
//     names the option being read and says to write $$.
//   - A "$" followed by anything else ("$1", "${ x}", a trailing "$") is kept.
//   - The value substituted is itself substituted; an unset option gives its
//     default, None gives "".
//
// ovs-agent's registry is its option table: a name outside it is refused even
// where the reference registers it (neutron's core [DEFAULT] options such as
// bind_host). Only string options are substituted; the reference would put
// Python's rendering of a boolean, list or dict there ("True", "['a']"), and
// that is refused rather than imitated.

// refGroups maps the group names a reference may use to our sections.
var refGroups = map[string]string{
	"AGENT": "agent", "OVS": "ovs", "SECURITYGROUP": "securitygroup", "network_log": "network_log",
	"oslo_messaging_rabbit": "oslo_messaging_rabbit", "ovsagent": "ovsagent",
}

// stringOptions are the table's string options (StrOpt, HostAddress,
// IPAddress in the reference) with the default a reference to them gives
// when they are unset. "" stands for the reference's None.
var stringOptions = map[string]func() string{
	"DEFAULT.host":                                  func() string { h, _ := os.Hostname(); return h },
	"DEFAULT.transport_url":                         fixed("rabbit://"),
	"DEFAULT.control_exchange":                      fixed("neutron"),
	"DEFAULT.state_path":                            fixed("/var/lib/neutron"),
	"DEFAULT.log_dir":                               fixed(""),
	"DEFAULT.log_file":                              fixed(""),
	"DEFAULT.log_config_append":                     fixed(""),
	"DEFAULT.log_date_format":                       fixed("%Y-%m-%d %H:%M:%S"),
	"DEFAULT.log_rotation_type":                     fixed("none"),
	"DEFAULT.log_rotate_interval_type":              fixed("days"),
	"DEFAULT.rate_limit_except_level":               fixed("CRITICAL"),
	"DEFAULT.syslog_log_facility":                   fixed("LOG_USER"),
	"agent.root_helper":                             fixed("sudo"),
	"agent.root_helper_daemon":                      fixed(""),
	"ovs.integration_bridge":                        fixed("br-int"),
	"ovs.tunnel_bridge":                             fixed("br-tun"),
	"ovs.int_peer_patch_port":                       fixed("patch-tun"),
	"ovs.tun_peer_patch_port":                       fixed("patch-int"),
	"ovs.local_ip":                                  fixed(""),
	"ovs.datapath_type":                             fixed("system"),
	"ovs.vhostuser_socket_dir":                      fixed("/var/run/openvswitch"),
	"ovs.of_listen_address":                         fixed("127.0.0.1"),
	"ovs.ovsdb_connection":                          fixed("tcp:127.0.0.1:6640"),
	"ovs.ssl_key_file":                              fixed(""),
	"ovs.ssl_cert_file":                             fixed(""),
	"ovs.ssl_ca_cert_file":                          fixed(""),
	"ovs.resource_provider_default_hypervisor":      fixed(""),
	"securitygroup.firewall_driver":                 fixed(""),
	"network_log.local_output_log_base":             fixed(""),
	"oslo_messaging_rabbit.ssl_ca_file":             fixed(""),
	"oslo_messaging_rabbit.ssl_cert_file":           fixed(""),
	"oslo_messaging_rabbit.ssl_key_file":            fixed(""),
	"oslo_messaging_rabbit.ssl_version":             fixed(""),
	"oslo_messaging_rabbit.kombu_compression":       fixed(""),
	"oslo_messaging_rabbit.kombu_failover_strategy": fixed("round-robin"),
	"oslo_messaging_rabbit.rabbit_login_method":     fixed("AMQPLAIN"),
	"ovsagent.metrics_listen":                       fixed("127.0.0.1:9177"),
}

func fixed(s string) func() string { return func() string { return s } }

// tableNames is every option with a row: ovs-agent's registry. Filled by
// init, as optionTable's Accept functions themselves call Lookup.
var tableNames map[string]bool

func init() {
	tableNames = map[string]bool{}
	for _, o := range optionTable {
		tableNames[optName(o.Section, o.Name)] = true
	}
}

// inTable reports whether section.name (optName form) has a row.
func inTable(full string) bool { return tableNames[full] }

// substError is a reference that cannot be substituted.
type substError struct {
	ref    string // the name after "$"; never shown for a secret option
	reason string
}

// expand substitutes v, the value of section.key, as oslo.config does.
func (r *Raw) expand(section, key, v string, visiting map[string]bool) (string, *substError) {
	if !strings.Contains(v, "$") {
		return v, nil
	}
	v = strings.ReplaceAll(v, `\$`, "$$")
	var b strings.Builder
	for i := 0; i < len(v); {
		if v[i] != '$' {
			b.WriteByte(v[i])
			i++
			continue
		}
		rest := v[i+1:]
		name, n := "", 0
		switch {
		case strings.HasPrefix(rest, "$"):
			b.WriteByte('$')
			i += 2
			continue
		case idLen(rest) > 0:
			n = idLen(rest)
			name = rest[:n]
		case strings.HasPrefix(rest, "{"):
			if m := idLen(rest[1:]); m > 0 && len(rest) > m+1 && rest[1+m] == '}' {
				name, n = rest[1:1+m], m+2
			}
		}
		if name == "" { // not a placeholder: the "$" stays
			b.WriteByte('$')
			i++
			continue
		}
		val, err := r.reference(section, name, visiting)
		if err != nil {
			return "", err
		}
		b.WriteString(val)
		i += 1 + n
	}
	return b.String(), nil
}

// reference resolves one $name read from an option of section.
func (r *Raw) reference(section, name string, visiting map[string]bool) (string, *substError) {
	var full string
	if g, opt, dotted := strings.Cut(name, "."); dotted {
		sec, ok := refGroups[g]
		if !ok {
			why := fmt.Sprintf("no group %q (the reference names its groups AGENT, OVS, SECURITYGROUP, network_log, oslo_messaging_rabbit; a [DEFAULT] option is $name)", g)
			return "", &substError{ref: name, reason: why}
		}
		full = optName(sec, opt)
	} else if inTable(optName(section, name)) {
		full = optName(section, name)
	} else {
		full = optName("DEFAULT", name)
	}
	if !inTable(full) {
		return "", &substError{ref: name, reason: "no such option"}
	}
	def, isString := stringOptions[full]
	if !isString {
		return "", &substError{ref: name, reason: "substituting a non-string option is " + notYet}
	}
	if visiting[full] {
		return "", &substError{ref: name, reason: "substitution loop"}
	}
	visiting[full] = true
	defer delete(visiting, full)
	sec, opt, _ := strings.Cut(full, ".")
	v, ok := r.lookupRaw(sec, opt)
	if !ok {
		return def(), nil
	}
	return r.expand(sec, opt, v, visiting)
}

// idLen is the length of the identifier at the start of s: Python's
// [_a-z][\._a-z0-9]* with re.IGNORECASE, which also lets in the four
// non-ASCII letters that fold to ASCII ones (U+0130, U+0131, U+017F, U+212A).
func idLen(s string) int {
	n := 0
	for n < len(s) {
		c, size := utf8.DecodeRuneInString(s[n:])
		ok := c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
			c == '\u0130' || c == '\u0131' || c == '\u017f' || c == '\u212a'
		if n > 0 {
			ok = ok || c == '.' || (c >= '0' && c <= '9')
		}
		if !ok {
			break
		}
		n += size
	}
	return n
}

// substitutionError turns a substError into the configuration error for
// section.key. transport_url's value carries the password, and a "$" in the
// password names part of it: neither is shown.
func substitutionError(section, key, v string, e *substError) error {
	opt := optName(section, key)
	hint := "oslo.config substitutes $name and ${group.name} with another option's value; write $$ for a literal $"
	if opt == "DEFAULT.transport_url" {
		return &Error{Option: opt, Value: MaskTransportURL(v), Reason: "a $ starts a substitution that fails; " + hint}
	}
	return &Error{Option: opt, Value: v, Reason: fmt.Sprintf("$%s: %s; %s", e.ref, e.reason, hint)}
}
