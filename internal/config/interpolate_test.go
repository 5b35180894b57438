package config

import (
	"errors"
	"strings"
	"testing"
)

// The expected values are what oslo.config 9.0 (Debian bookworm, the
// reference installed here) gives for the same files, with the reference's
// groups (AGENT, OVS, ...) registered.
func TestSubstitutionAsOsloConfig(t *testing.T) {
	file := `[DEFAULT]
host = myhost
state_path = /srv/neutron
log_dir = a$$b$$$$c\$d$
log_file = $1|$ |${foo|$-|${ ovs.local_ip}|x$
transport_url = rabbit://u:pa$$word@127.0.0.1:5672/
[ovs]
local_ip = 192.0.2.1
integration_bridge = ${OVS.local_ip}
tunnel_bridge = $OVS.local_ip
int_peer_patch_port = $integration_bridge-$local_ip
tun_peer_patch_port = ${tunnel_bridge}x
datapath_type = $host-$state_path/
ssl_key_file = /k
ssl_cert_file = $ssl_key_file
vhostuser_socket_dir = $ovsdb_connection
[oslo_messaging_rabbit]
ssl_cert_file = [$ssl_key_file]
ssl_ca_file = ${OVS.ssl_key_file}
`
	raw, err := ParseBytes([]byte(file))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ sec, key, want string }{
		{"DEFAULT", "log_dir", `a$b$$c$d$`},                           // $$ and \$ are "$"; a trailing $ stays
		{"DEFAULT", "log_file", `$1|$ |${foo|$-|${ ovs.local_ip}|x$`}, // not placeholders: kept
		{"DEFAULT", "transport_url", "rabbit://u:pa$word@127.0.0.1:5672/"},
		{"ovs", "integration_bridge", "192.0.2.1"},
		{"ovs", "tunnel_bridge", "192.0.2.1"},
		{"ovs", "int_peer_patch_port", "192.0.2.1-192.0.2.1"}, // substituted values are substituted
		{"ovs", "tun_peer_patch_port", "192.0.2.1x"},
		{"ovs", "datapath_type", "myhost-/srv/neutron/"},      // not in [ovs]: [DEFAULT]
		{"ovs", "ssl_cert_file", "/k"},                        // the group's own option first
		{"ovs", "vhostuser_socket_dir", "tcp:127.0.0.1:6640"}, // unset: its default
		{"oslo_messaging_rabbit", "ssl_cert_file", "[]"},      // rabbit's own ssl_key_file, unset
		{"oslo_messaging_rabbit", "ssl_ca_file", "/k"},
	} {
		got, ok := raw.Lookup(c.sec, c.key)
		if !ok || got != c.want || raw.err != nil {
			t.Errorf("%s.%s = %q (set %v, err %v), want %q", c.sec, c.key, got, ok, raw.err, c.want)
		}
	}
	raw.SetCommandLine("DEFAULT", "state_path", "/cli")
	if got, _ := raw.Lookup("ovs", "datapath_type"); got != "myhost-/cli/" {
		t.Errorf("command line not substituted: %q", got)
	}
}

// Each of these makes the reference fail at start (NoSuchOptError,
// NoSuchGroupError, RecursionError); Load fails with one line naming the
// option being read.
func TestSubstitutionFailures(t *testing.T) {
	for _, c := range []struct{ body, option, says string }{
		{"[ovs]\nintegration_bridge = ${ovs.local_ip}\n", "ovs.integration_bridge", `no group "ovs"`},
		{"[ovs]\nintegration_bridge = ${DEFAULT.host}\n", "ovs.integration_bridge", `no group "DEFAULT"`},
		{"[ovs]\nintegration_bridge = $OVS.nope\n", "ovs.integration_bridge", "$OVS.nope: no such option"},
		{"[ovs]\nintegration_bridge = $Host\n", "ovs.integration_bridge", "$Host: no such option"}, // names are case-sensitive
		{"[ovs]\nintegration_bridge = $bind_host\n", "ovs.integration_bridge", "no such option"},
		{"[ovs]\nintegration_bridge = br$\u212aelvin\n", "ovs.integration_bridge", "no such option"}, // K folds to k in Python's pattern
		{"[ovs]\nintegration_bridge = $debug\n", "ovs.integration_bridge", "non-string"},
		{"[ovs]\nintegration_bridge = $tunnel_bridge\ntunnel_bridge = $integration_bridge\n", "ovs.integration_bridge", "loop"},
		{"[DEFAULT]\nstate_path = $state_path\n[agent]\nroot_helper = $state_path\n[ovs]\nintegration_bridge = $state_path\n", "ovs.integration_bridge", "loop"},
		{"[securitygroup]\nfirewall_driver = $nope\n", "securitygroup.firewall_driver", "$nope"}, // checkSupport reads it too
	} {
		_, err := load(t, base+c.body)
		var ce *Error
		if !errors.As(err, &ce) || ce.Option != c.option || !strings.Contains(err.Error(), c.says) || !strings.Contains(err.Error(), "$$") || strings.Contains(err.Error(), "\n") {
			t.Errorf("%q: got %v, want an error on %s saying %q", c.body, err, c.option, c.says)
		}
	}
	// A password with a lone "$": refused (the reference: NoSuchOptError),
	// and neither the password nor the name after "$" is shown.
	_, err := load(t, "[DEFAULT]\ntransport_url = rabbit://guest:pa$wOrd@127.0.0.1:5672/\n")
	if err == nil || !strings.Contains(err.Error(), "DEFAULT.transport_url") || strings.Contains(err.Error(), "wOrd") || !strings.Contains(err.Error(), "$$") {
		t.Fatalf("pa$wOrd: %v", err)
	}
	_, err = load(t, "[DEFAULT]\ntransport_url = rabbit://guest:pa$w.Ord@127.0.0.1:5672/\n")
	if err == nil || strings.Contains(err.Error(), "Ord") || strings.Contains(err.Error(), `"w"`) {
		t.Fatalf("pa$w.Ord: %v", err)
	}
	c := mustLoad(t, "[DEFAULT]\ntransport_url = rabbit://guest:pa$$word@127.0.0.1:5672/\n")
	if c.Default.Transport.Hosts[0].Password != "pa$word" {
		t.Fatalf("password = %q, want pa$word", c.Default.Transport.Hosts[0].Password)
	}
}
