package agent

import "github.com/ovsagent/ovsagent/internal/openflow"

// ownerDigest is what the agent keeps of an owner's flows once applied:
// enough to skip an owner whose recomputed flows did not change and to
// count flows per table for metrics. The flows themselves are kept once,
// by the bridge's reconciler (explain reads them there): keeping them here
// too held ~56k flows at 1,000 ports for nothing else.
type ownerDigest struct {
	sum    [16]byte     // openflow.Digest of the flows, in order
	tables []tableCount // flows per table
}

type tableCount struct {
	table uint8
	n     int32
}

// digestOf summarises the flows (openflow.Digest: their encoding, cookie
// included, so two lists with one digest send the same flow_mods) and
// counts them per table.
func digestOf(fs []openflow.Flow) ownerDigest {
	d := ownerDigest{sum: openflow.Digest(fs)}
	for i := range fs {
		d.count(fs[i].Table)
	}
	return d
}

func (d *ownerDigest) count(table uint8) {
	for i := range d.tables {
		if d.tables[i].table == table {
			d.tables[i].n++
			return
		}
	}
	d.tables = append(d.tables, tableCount{table: table, n: 1})
}

// unchanged: the owner's flows on one bridge are still sum (no flows and
// no digest count as equal).
func unchanged(applied map[string]ownerDigest, owner string, fs []openflow.Flow) (ownerDigest, bool) {
	old, ok := applied[owner]
	if len(fs) == 0 {
		return ownerDigest{}, !ok
	}
	d := digestOf(fs)
	return d, ok && old.sum == d.sum
}

// tableCounts sums the per-table flow counts of a bridge's owners.
func tableCounts(m map[string]ownerDigest) map[uint8]int {
	out := map[uint8]int{}
	for _, d := range m {
		for _, tc := range d.tables {
			out[tc.table] += int(tc.n)
		}
	}
	return out
}
