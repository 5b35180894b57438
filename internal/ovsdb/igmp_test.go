package ovsdb

import (
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/ovsagent/ovsagent/internal/testing/ovsdump"
)

// vsctlRows reads `ovs-vsctl list <table>` output: row name -> other_config,
// values unquoted (ovs-vsctl quotes strings that look like keywords).
func vsctlRows(t *testing.T, path string) map[string]map[string]string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string]map[string]string{}
	for _, r := range ovsdump.Records(string(b)) {
		rows[strings.Trim(r["name"], `"`)] = ovsdump.Map(r["other_config"])
	}
	return rows
}

// igmpDifference is a key whose value in an older release's rows differs from
// what we (2026.2) write with default options.
type igmpDifference struct {
	row, key, value, reason string
}

const whyIGMP = "neutron 24.0.0 (2024.1) made the IGMP flood settings options (igmp_flood, " +
	"igmp_flood_reports=True, igmp_flood_unregistered); Zed wrote disable-flood-unregistered=false " +
	"and str(igmp_snooping_enable) for both port keys"

// TestReferenceIGMPRows: the mcast-snooping-* other_config that the reference
// agent left on br-int and its patch ports in the refenv scenario (default
// options) equals ReferenceBridge/IGMP's with DefaultIGMP, except for the
// listed release differences; any other difference, or a listed one that does
// not occur, fails.
func TestReferenceIGMPRows(t *testing.T) {
	captures := []struct {
		release, dir string
		known        []igmpDifference
	}{
		{"2026.2", "testdata/refenv-2026.2", nil},
		{"zed", "testdata/refenv-zed", []igmpDifference{
			{"br-int", "mcast-snooping-disable-flood-unregistered", "false", whyIGMP},
			{"patch-tun", "mcast-snooping-flood", "False", whyIGMP},
			{"patch-tun", "mcast-snooping-flood-reports", "False", whyIGMP},
			{"int-br-phys", "mcast-snooping-flood", "False", whyIGMP},
			{"int-br-phys", "mcast-snooping-flood-reports", "False", whyIGMP},
		}},
	}
	g := DefaultIGMP()
	want := map[string]map[string]string{
		"br-int":      ReferenceBridge("br-int", DatapathSystem, 50000, true, g).OtherConfig,
		"patch-tun":   g.PortOtherConfig(),
		"int-br-phys": g.PortOtherConfig(),
		// br-int's peers carry none of it.
		"patch-int": {}, "phy-br-phys": {},
	}
	for _, c := range captures {
		t.Run(c.release, func(t *testing.T) {
			rows := vsctlRows(t, filepath.Join(c.dir, "ovsdb-Bridge.txt"))
			for n, m := range vsctlRows(t, filepath.Join(c.dir, "ovsdb-Port.txt")) {
				if _, isBridge := rows[n]; !isBridge {
					rows[n] = m
				}
			}
			var diffs []string
			for row, w := range want {
				got, ok := rows[row]
				if !ok {
					t.Fatalf("%s: no row %s in the capture", c.dir, row)
				}
				keys := map[string]bool{}
				for k := range got {
					if strings.HasPrefix(k, "mcast-") {
						keys[k] = true
					}
				}
				for k := range w {
					if strings.HasPrefix(k, "mcast-") {
						keys[k] = true
					}
				}
				for k := range keys {
					gv, gok := got[k]
					wv, wok := w[k]
					if gok == wok && gv == wv {
						continue
					}
					d := row + " " + k + ": reference " + gv + ", ours " + wv
					matched := false
					for _, kd := range c.known {
						if kd.row == row && kd.key == k && kd.value == gv && gok {
							t.Logf("expected difference %s (%s)", d, kd.reason)
							matched = true
						}
					}
					if !matched {
						diffs = append(diffs, d)
					}
				}
			}
			for _, kd := range c.known {
				if v, ok := rows[kd.row][kd.key]; !ok || v != kd.value || v == want[kd.row][kd.key] {
					t.Errorf("listed difference did not occur: %s %s=%s", kd.row, kd.key, kd.value)
				}
			}
			sort.Strings(diffs)
			for _, d := range diffs {
				t.Errorf("unexpected difference: %s", d)
			}
		})
	}
}
