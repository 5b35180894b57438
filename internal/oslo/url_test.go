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
		{"rabbit://u:p@ss@h1:5673,u:p@ss@h2/neutron?ssl=1",
			[]Host{{"h1", 5673, "u", "p@ss"}, {"h2", 5672, "u", "p@ss"}}, "neutron",
			"rabbit://u:***@h1:5673,u:***@h2:5672/neutron?ssl=1"},
		// Python's unquote: a '%' not followed by two hex digits is kept
		{"rabbit://u:50%off%2F@h/v%zz", []Host{{"h", 5672, "u", "50%off/"}}, "v%zz", "rabbit://u:***@h:5672/v%25zz"},
		{"rabbit://h", []Host{{"h", 5672, "", ""}}, "/", "rabbit://h:5672/"},
		{"rabbit://u:p@[::1]:5671/%2F", []Host{{"::1", 5671, "u", "p"}}, "/", "rabbit://u:***@[::1]:5671/"},
		{"rabbit://u:p@[fe80::1%eth0]/", []Host{{"fe80::1%eth0", 5672, "u", "p"}}, "/", "rabbit://u:***@[fe80::1%eth0]:5672/"},
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
		// unescaped '/', '?', '#', ',' in a password: refused, nothing echoed
		"rabbit://u:sec/ret@h/":          "'@' after the broker list",
		"rabbit://u:12?secret@h/":        "'@' after the broker list",
		"rabbit://u:secret#1@h/":         "'@' after the broker list",
		"rabbit://u:12/secret@h:5672/vh": "'@' after the broker list",
		"rabbit://u:1,secret@h/":         "different (or missing) user:password",
		"rabbit://u:x@secret,y:z@h/":     "different (or missing) user:password",
		"rabbit://u:p@h1,u2:secret@h2/":  "different (or missing) user:password",
		"rabbit://u:p@h1,h2/":            "different (or missing) user:password",
		"rabbit://u:secret":              "bad port",
		"rabbit://u:p@[::1]secret/":      "after an IPv6 literal",
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

// oslo.messaging reads the query with parse_qs: blank values are dropped, a
// repeated name keeps every value (the reader joins them with ",").
func TestParseTransportURLQuery(t *testing.T) {
	u, err := ParseTransportURL("rabbit://u:p@h:5671/?ssl=1&ssl_ca_file=%2Fetc%2Fca.pem&x=&y&kombu_failover_strategy=round-robin&a=1&a=2#frag")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"ssl": "1", "ssl_ca_file": "/etc/ca.pem", "kombu_failover_strategy": "round-robin", "a": "1,2"}
	if len(u.Query) != len(want) {
		t.Fatalf("query %v, want %v", u.Query, want)
	}
	for k, v := range want {
		if got := strings.Join(u.Query[k], ","); got != v {
			t.Errorf("query %s = %q, want %q", k, got, v)
		}
	}
}
