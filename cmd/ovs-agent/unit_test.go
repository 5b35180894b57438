package main

import (
	"bufio"
	"os"
	"strings"
	"testing"
)

// The systemd unit: readiness and watchdog by sd_notify, OVS found under
// the unit names both distribution families use, and no directive that makes
// systemd re-own a directory other services share (LogsDirectory= with
// User=root chowned /var/log/neutron to root on every start).
func TestSystemdUnit(t *testing.T) {
	f, err := os.Open("../../etc/systemd/ovs-agent.service")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	keys := map[string][]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		l := strings.TrimSpace(sc.Text())
		if l == "" || strings.HasPrefix(l, "#") || strings.HasPrefix(l, "[") {
			continue
		}
		k, v, _ := strings.Cut(l, "=")
		keys[k] = append(keys[k], strings.Fields(v)...)
	}
	has := func(k, v string) bool {
		for _, x := range keys[k] {
			if x == v {
				return true
			}
		}
		return false
	}
	for _, d := range []string{"LogsDirectory", "StateDirectory", "CacheDirectory", "RuntimeDirectory", "ConfigurationDirectory"} {
		if len(keys[d]) > 0 {
			t.Errorf("%s= makes systemd chown a directory the neutron services share", d)
		}
	}
	for _, u := range []string{"ovsdb-server.service", "ovs-vswitchd.service"} {
		if !has("Wants", u) || !has("After", u) {
			t.Errorf("not Wants= and After= %s", u)
		}
	}
	for _, u := range []string{"openvswitch-switch.service", "openvswitch.service"} {
		if has("Requires", u) || has("Wants", u) || has("BindsTo", u) {
			t.Errorf("binds to the distribution-specific %s", u)
		}
	}
	if !has("Type", "notify") || !has("NotifyAccess", "main") || len(keys["WatchdogSec"]) == 0 {
		t.Errorf("not Type=notify with NotifyAccess=main and WatchdogSec: %v %v %v", keys["Type"], keys["NotifyAccess"], keys["WatchdogSec"])
	}
}
