package config

import (
	"errors"
	"strconv"
	"strings"
	"testing"
)

const reasonWords = " unsupported scheme expected rabbit:// missing host name bad port percent-encoding unterminated IPv6 literal virtual host empty query"

// FuzzConfig: no input panics, and every error is one line without the
// transport_url password.
func FuzzConfig(f *testing.F) {
	f.Add([]byte(base + "[ovs]\nbridge_mappings = physnet1:br-phys,\n  physnet2:br-2\nlocal_ip = 127.0.0.1\n[agent]\ntunnel_types = vxlan\n"))
	f.Add([]byte("[DEFAULT]\ntransport_url = rabbit://u:s3cret@[::1]:5672,v:s3cret@h/vh?x=1\n"))
	f.Add([]byte("[agent]\npolling_interval = 2\npolling_interval = x\n[securitygroup]\nfirewall_driver = openvswitch\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		raw, err := ParseBytes(data)
		if err != nil {
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("multi-line error: %q", err)
			}
			return
		}
		c, err := Parse(raw)
		if err == nil {
			err = c.Validate(fakeAddrs)
		}
		if err != nil {
			msg := err.Error()
			if strings.Contains(msg, "\n") {
				t.Fatalf("multi-line error: %q", msg)
			}
			var ce *Error
			if v, ok := raw.Lookup("DEFAULT", "transport_url"); ok && errors.As(err, &ce) && ce.Option == "DEFAULT.transport_url" {
				// a value that is itself the mask ("***") shows as the mask
				if shown := strings.TrimSpace(v); !strings.Contains(v, "://") && shown != "" && shown != MaskTransportURL(shown) && strings.Contains(msg, strconv.Quote(shown)) {
					t.Fatalf("unparsable transport_url shown: %q", msg)
				}
				for _, pw := range transportPasswords(v) {
					// a password that also appears elsewhere in the URL, in our
					// own wording, or in the quoted (escaped) rest of the URL
					// (byte 0 then "00" quotes as \x0000) cannot be told apart
					// from those
					if strings.Contains(strconv.Quote(strings.ReplaceAll(v, pw, "***")), pw) {
						continue
					}
					if len(pw) >= 4 && strings.Count(v, pw) == 1 && !strings.Contains(strings.ToLower(msg[:strings.Index(msg, "\"")]+reasonWords), strings.ToLower(pw)) && strings.Contains(msg, pw) {
						t.Fatalf("password %q in error: %q", pw, msg)
					}
				}
			}
		}
	})
}

// transportPasswords lists the passwords of a transport_url as a naive
// reader sees them (the text between the first ':' and the last '@' of each
// broker of the part before the first '/', '?' or '#').
func transportPasswords(raw string) []string {
	_, rest, found := strings.Cut(strings.TrimSpace(raw), "://")
	if !found {
		return nil
	}
	netloc := rest
	if i := strings.IndexAny(rest, "/?#"); i >= 0 {
		netloc = rest[:i]
	}
	var out []string
	for _, h := range strings.Split(netloc, ",") {
		if at := strings.LastIndex(h, "@"); at >= 0 {
			if _, pass, ok := strings.Cut(h[:at], ":"); ok && pass != "" {
				out = append(out, pass)
			}
		}
	}
	return out
}
