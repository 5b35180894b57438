package config

import (
	"errors"
	"strings"
	"testing"
)

// The transport_url query overrides [oslo_messaging_rabbit] as in
// oslo.messaging's rabbit driver, through the same parsing and option table.
func TestTransportQueryOverridesRabbit(t *testing.T) {
	c := mustLoad(t, "[DEFAULT]\ntransport_url = rabbit://u:p@h:5671/?ssl=1&ssl_ca_file=%2Fetc%2Fca.pem&ssl_version=TLSv1_2\n"+
		"[oslo_messaging_rabbit]\nssl_ca_file = /other.pem\n")
	if !c.Rabbit.SSL || c.Rabbit.SSLCAFile != "/etc/ca.pem" || c.Rabbit.SSLVersion != "TLSv1_2" {
		t.Fatalf("rabbit options %+v, want ssl from the URL query", c.Rabbit)
	}
	if c := mustLoad(t, "[DEFAULT]\ntransport_url = rabbit://u:p@h/?ssl=false\n[oslo_messaging_rabbit]\nssl = True\n"); c.Rabbit.SSL {
		t.Fatal("the query's ssl=false did not win over the file")
	}
	for body, want := range map[string]string{
		"rabbit://u:p@h/?ssl=maybe":            `oslo_messaging_rabbit.ssl (transport_url query) "maybe": not a boolean`,
		"rabbit://u:p@h/?kombu_compression=gz": `oslo_messaging_rabbit.kombu_compression (transport_url query) = "gz" is not supported`,
		"rabbit://u:p@h/?ssl_version=TLSv1":    `oslo_messaging_rabbit.ssl_version (transport_url query) = "TLSv1" is not supported`,
		"rabbit://u:p@h/?nosuch=1":             `query parameter "nosuch" is not an option of [oslo_messaging_rabbit]`,
	} {
		_, err := load(t, "[DEFAULT]\ntransport_url = "+body+"\n")
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: err %v, want %q", body, err, want)
		}
	}
}

// ssl_version maps to TLS versions Go offers; ssl_enforce_hostname_verification
// is read (False by default, as the reference's oslo.messaging).
func TestRabbitSSLOptions(t *testing.T) {
	c := mustLoad(t, base)
	if c.Rabbit.SSLEnforceHostnameVerification || c.Rabbit.SSLVersion != "" {
		t.Fatalf("defaults %+v", c.Rabbit)
	}
	c = mustLoad(t, base, "[oslo_messaging_rabbit]\nssl = True\nssl_version = sslv23\nssl_enforce_hostname_verification = yes\n")
	if !c.Rabbit.SSLEnforceHostnameVerification || c.Rabbit.SSLVersion != "sslv23" {
		t.Fatalf("parsed %+v", c.Rabbit)
	}
	for _, v := range []string{"TLSv1", "TLSv1_1", "SSLv3", "TLSv1_3"} {
		_, err := load(t, base, "[oslo_messaging_rabbit]\nssl_version = "+v+"\n")
		var re *RefusedError
		if !errors.As(err, &re) || re.Option != "oslo_messaging_rabbit.ssl_version" {
			t.Errorf("ssl_version %s: err %v, want refused", v, err)
		}
	}
	if _, err := load(t, base, "[oslo_messaging_rabbit]\nssl_enforce_fips_mode = True\n"); err == nil {
		t.Error("ssl_enforce_fips_mode = True accepted")
	}
}
