package oslo

import (
	"strings"
	"testing"
)

func TestParseTransportURL(t *testing.T) {
	cases := []struct {
		in    string
		hosts []Host
		vhost string
		str   string
	}{
		{"rabbit://guest:guest@127.0.0.1:5672/", []Host{{"127.0.0.1", 5672, "guest", "guest"}}, "/", "rabbit://guest:***@127.0.0.1:5672/"},
		{"rabbit://u:p@h1:5673,u2:p%40ss@h2/neutron?ssl=1",
			[]Host{{"h1", 5673, "u", "p"}, {"h2", 5672, "u2", "p@ss"}}, "neutron",
			"rabbit://u:***@h1:5673,u2:***@h2:5672/neutron?ssl=1"},
		{"rabbit://h", []Host{{"h", 5672, "", ""}}, "/", "rabbit://h:5672/"},
		{"rabbit://u:p@[::1]:5671/%2F", []Host{{"::1", 5671, "u", "p"}}, "/", "rabbit://u:***@[::1]:5671/"},
		{"rabbit://openstack:s3cr:et@10.0.0.1:5672//", []Host{{"10.0.0.1", 5672, "openstack", "s3cr:et"}}, "/", "rabbit://openstack:***@10.0.0.1:5672/"},
	}
	for _, c := range cases {
		u, err := ParseTransportURL(c.in)
		if err != nil {
			t.Fatalf("%s: %v", c.in, err)
		}
		if len(u.Hosts) != len(c.hosts) {
			t.Fatalf("%s: hosts %+v", c.in, u.Hosts)
		}
		for i := range c.hosts {
			if u.Hosts[i] != c.hosts[i] {
				t.Errorf("%s: host %d = %+v, want %+v", c.in, i, u.Hosts[i], c.hosts[i])
			}
		}
		if u.VHost != c.vhost {
			t.Errorf("%s: vhost %q, want %q", c.in, u.VHost, c.vhost)
		}
		if got := u.String(); got != c.str {
			t.Errorf("%s: String() = %q, want %q", c.in, got, c.str)
		}
	}
}

func TestParseTransportURLErrors(t *testing.T) {
	cases := map[string]string{
		"":                         "empty",
		"guest@localhost":          "missing scheme",
		"http://h/":                "unsupported scheme",
		"rabbit:///vhost":          "no host",
		"rabbit://u:p@h:99999/":    "bad port",
		"rabbit://u:p@h:x/":        "bad port",
		"rabbit://u:p@h1,,h2/":     "host 2: empty host entry",
		"rabbit://u:p@[::1/":       "unterminated IPv6",
		"rabbit://u:secret@:5672/": "missing host name",
	}
	for in, want := range cases {
		_, err := ParseTransportURL(in)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: err %v, want %q", in, err, want)
		}
		if err != nil && strings.Contains(err.Error(), "secret") {
			t.Errorf("%q: error leaks the password: %v", in, err)
		}
	}
}
