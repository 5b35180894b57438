package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/ovsagent/ovsagent/internal/config"
	"github.com/ovsagent/ovsagent/internal/oslo"
)

// dialBroker is the one way every subcommand (the agent, explain, takeover)
// reaches RabbitMQ: transport_url and the TLS decision come from cfg, the
// rest of oc from the caller.
func dialBroker(ctx context.Context, cfg *config.Config, oc oslo.Config) (*oslo.Transport, error) {
	tlsCfg, err := rabbitTLS(cfg)
	if err != nil {
		return nil, err
	}
	oc.URL, oc.TLS = cfg.Default.Transport, tlsCfg
	oc.Queues = cfg.RabbitQueues() // declared as oslo.messaging declares them
	tr, err := oslo.Dial(ctx, oc)
	if err != nil {
		return nil, fmt.Errorf("transport_url %s: %w", cfg.Default.Transport.String(), err)
	}
	return tr, nil
}

// rabbitTLS decides TLS to RabbitMQ as the reference's oslo.messaging 14
// with py-amqp 5 does ([oslo_messaging_rabbit] plus the transport_url query,
// merged by internal/config):
//   - ssl = False: plain AMQP, whatever the other ssl_* options say.
//   - The broker's certificate chain is always verified: against ssl_ca_file
//     when set, else the system CAs (py-amqp: CERT_REQUIRED and
//     load_default_certs).
//   - The broker's name is checked only with ssl_ca_file and
//     ssl_enforce_hostname_verification = True; oslo.Transport then checks
//     each broker against its own name (kombu >= 5.2 does the same).
//   - ssl_version: SSLv23 is TLS 1.2 or 1.3, TLSv1_2 is TLS 1.2 only (the
//     option table refuses the rest). py-amqp verifies nothing at all when
//     ssl_version is set without ssl_ca_file (CERT_NONE); ovs-agent still
//     verifies the chain, failing closed.
//   - ssl_cert_file (and ssl_key_file, else the key in the same file): the
//     client certificate.
func rabbitTLS(cfg *config.Config) (*tls.Config, error) {
	r := cfg.Rabbit
	if !r.SSL {
		return nil, nil
	}
	tc := &tls.Config{MinVersion: tls.VersionTLS12}
	switch strings.ToLower(r.SSLVersion) {
	case "", "sslv23":
	case "tlsv1_2":
		tc.MaxVersion = tls.VersionTLS12
	default: // refused at load; kept here so a new caller cannot widen it
		return nil, fmt.Errorf("oslo_messaging_rabbit.ssl_version %q: not supported", r.SSLVersion)
	}
	var roots *x509.CertPool // nil: the system CAs
	if r.SSLCAFile != "" {
		pem, err := os.ReadFile(r.SSLCAFile)
		if err != nil {
			return nil, fmt.Errorf("oslo_messaging_rabbit.ssl_ca_file %s: %w", r.SSLCAFile, err)
		}
		roots = x509.NewCertPool()
		if !roots.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("oslo_messaging_rabbit.ssl_ca_file %s: no certificate found", r.SSLCAFile)
		}
	}
	if r.SSLCertFile != "" {
		key := r.SSLKeyFile
		if key == "" {
			key = r.SSLCertFile
		}
		cert, err := tls.LoadX509KeyPair(r.SSLCertFile, key)
		if err != nil {
			return nil, fmt.Errorf("oslo_messaging_rabbit.ssl_cert_file %s: %w", r.SSLCertFile, err)
		}
		tc.Certificates = []tls.Certificate{cert}
	}
	if r.SSLCAFile != "" && r.SSLEnforceHostnameVerification {
		tc.RootCAs = roots // Go's own verification: chain and name
		return tc, nil
	}
	// The chain without the name: Go verifies both or neither, so its
	// verification is off and the chain is verified here.
	tc.InsecureSkipVerify = true
	tc.VerifyConnection = func(cs tls.ConnectionState) error {
		if len(cs.PeerCertificates) == 0 {
			return errors.New("tls: the broker sent no certificate")
		}
		opts := x509.VerifyOptions{Roots: roots, Intermediates: x509.NewCertPool(),
			KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
		for _, c := range cs.PeerCertificates[1:] {
			opts.Intermediates.AddCert(c)
		}
		if _, err := cs.PeerCertificates[0].Verify(opts); err != nil {
			return fmt.Errorf("tls: failed to verify the broker's certificate: %w", err)
		}
		return nil
	}
	return tc, nil
}
