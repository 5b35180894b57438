//go:build e2e

package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// The reference agent the takeover tests start and hand over from is the
// one of the release the suite runs against: $OVSAGENT_RELEASE (.ci/run
// exports it with OVSAGENT_NEUTRON_URL and OVSAGENT_TRANSPORT_URL). zed (the
// default) is Debian 12's agent on the host; 2025.1 and 2026.2 are the
// agents of refenv's chroots (refenv/release.sh), started with chroot(8) in
// a mount namespace of their own where the OVS directories they need are
// bound into the chroot (the system OVS's /run/openvswitch, a private OVS's
// OVS_RUNDIR), so the chroot's tools reach the same sockets as ovs-agent.
// Their files live inside the chroot: ovs-agent reads them through the
// chroot's path on the host, the reference through the path inside it.

// refChrootBase is where refenv/release.sh makes the chroots.
const refChrootBase = "/var/lib/ovsagent-refenv"

// refRelease is the release whose reference agent the tests run.
func refRelease() string {
	if r := os.Getenv("OVSAGENT_RELEASE"); r != "" {
		return r
	}
	return "zed"
}

// refChroot is the release's chroot directory ("" for zed: the host).
func refChroot() string {
	if r := refRelease(); r != "zed" {
		return filepath.Join(refChrootBase, r)
	}
	return ""
}

// refNeutronConf is the neutron.conf the release's server and both agents
// read, as a host path.
func refNeutronConf() string {
	return refChroot() + "/etc/neutron/refenv/neutron.conf"
}

// inChroot turns a host path under the chroot into the path the chroot's
// processes see; other paths are returned as they are.
func inChroot(p string) string {
	c := refChroot()
	if c == "" {
		return p
	}
	if rel, ok := strings.CutPrefix(p, c+"/"); ok {
		return "/" + rel
	}
	return p
}

// refBaseIni is refenv's openvswitch_agent.ini for the release: the file
// refenv/setup.sh installed for zed; refenv's own copy (the one release.sh
// derives its agent's from) with a root_helper that works as root inside a
// chroot (rootwrap without sudo) for the others.
func refBaseIni() (string, error) {
	if refChroot() == "" {
		b, err := os.ReadFile(refAgentIniPath)
		if err != nil {
			return "", fmt.Errorf("refenv ini: %w (run refenv/setup.sh)", err)
		}
		return string(b), nil
	}
	if _, err := os.Stat(filepath.Join(refChroot(), ".refenv-ready")); err != nil {
		return "", fmt.Errorf("release %s: no chroot at %s (run RELEASE=%s AGENT=none refenv/setup.sh)", refRelease(), refChroot(), refRelease())
	}
	setup, err := refenvSetup()
	if err != nil {
		return "", fmt.Errorf("refenv: %w", err)
	}
	b, err := os.ReadFile(filepath.Join(filepath.Dir(setup), "etc", "neutron", "openvswitch_agent.ini"))
	if err != nil {
		return "", fmt.Errorf("refenv ini: %w", err)
	}
	s := strings.Replace(string(b), "\n[agent]\n", "\n[agent]\n# root inside the chroot: rootwrap without sudo\nroot_helper = neutron-rootwrap /etc/neutron/rootwrap.conf\n", 1)
	if s == string(b) {
		return "", fmt.Errorf("refenv ini has no [agent] section")
	}
	return s, nil
}

// refTmpDir is where a test's files for the reference agent go: under the
// chroot's /tmp for a chroot release, so that both agents can read them.
func refTmpDir() string {
	return refChroot() + "/tmp/ovsagent-e2e"
}

// refAgentArgv is the command line that starts the reference agent with
// the given --config-file arguments and log file (host paths), plus the
// directories binds that the agent must see at the same place.
// extraBinds are host directories the chroot's agent must see at the
// same path (a private OVS's OVS_RUNDIR).
func refAgentArgv(confs []string, logPath string, extraBinds []string) []string {
	args := []string{refAgentBin}
	for _, c := range confs {
		args = append(args, "--config-file", inChroot(c))
	}
	args = append(args, "--log-file", inChroot(logPath))
	c := refChroot()
	if c == "" {
		return args
	}
	// sh -c: mount the binds (in the namespace unshare made: nothing
	// propagates to the host), then exec chroot, which execs the agent: the
	// pid started is the agent's.
	script := `c=$0; mkdir -p "$c/run/openvswitch" && mount --bind /run/openvswitch "$c/run/openvswitch" || exit 1
while [ "$1" != -- ]; do mkdir -p "$c$1" && mount --bind "$1" "$c$1" || exit 1; shift; done; shift
exec chroot "$c" "$@"`
	argv := []string{"unshare", "-m", "--propagation", "private", "sh", "-c", script, c}
	argv = append(argv, extraBinds...)
	argv = append(argv, "--")
	return append(argv, args...)
}
