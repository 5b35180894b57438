package metrics

import (
	"math"
	"sort"
	"strconv"
	"strings"
)

// The Prometheus text exposition format 0.0.4, as client_golang's expfmt
// wrote it for the agent: families sorted by name, each "# HELP" and
// "# TYPE" then its samples, children sorted by label values, labels sorted
// by name with a histogram's "le" (a summary's "quantile") last, values in
// Go's shortest 'g' form; a family with no children is left out.

// contentType is what promhttp answered a scraper that asked for nothing
// else (Prometheus accepts the text format whatever it asks first).
const contentType = "text/plain; version=0.0.4; charset=utf-8; escaping=underscores"

// family is one metric family: its name, help and type, and a writer of its
// samples (which writes nothing when the family has no children).
type family struct {
	name, help, typ string
	samples         func(b []byte) []byte
}

// appendFamilies writes fams sorted by name.
func appendFamilies(b []byte, fams []family) []byte {
	sort.Slice(fams, func(i, j int) bool { return fams[i].name < fams[j].name })
	for _, f := range fams {
		mark := len(b)
		b = append(b, "# HELP "...)
		b = append(b, f.name...)
		b = append(b, ' ')
		b = appendEscaped(b, f.help, false)
		b = append(b, "\n# TYPE "...)
		b = append(b, f.name...)
		b = append(b, ' ')
		b = append(b, f.typ...)
		b = append(b, '\n')
		head := len(b)
		if b = f.samples(b); len(b) == head {
			b = b[:mark]
		}
	}
	return b
}

// appendEscaped escapes a HELP text (backslash, newline) or a label value
// (also the double quote).
func appendEscaped(b []byte, s string, quote bool) []byte {
	if !strings.ContainsAny(s, "\\\n\"") {
		return append(b, s...)
	}
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '\\':
			b = append(b, `\\`...)
		case c == '\n':
			b = append(b, `\n`...)
		case c == '"' && quote:
			b = append(b, `\"`...)
		default:
			b = append(b, c)
		}
	}
	return b
}

// appendFloat writes a sample value as expfmt did.
func appendFloat(b []byte, f float64) []byte {
	switch {
	case f == 1:
		return append(b, '1')
	case f == 0:
		return append(b, '0')
	case f == -1:
		return append(b, "-1"...)
	case math.IsNaN(f):
		return append(b, "NaN"...)
	case math.IsInf(f, +1):
		return append(b, "+Inf"...)
	case math.IsInf(f, -1):
		return append(b, "-Inf"...)
	}
	return strconv.AppendFloat(b, f, 'g', -1, 64)
}

// appendName writes name+suffix and the labels of key (names in l's order),
// then extra="extraVal" when extra is not "", in braces when there are any.
func appendName(b []byte, name, suffix string, l labels, key [2]string, extra string, extraVal float64) []byte {
	b = append(b, name...)
	b = append(b, suffix...)
	if len(l.names) == 0 && extra == "" {
		return append(b, ' ')
	}
	b = append(b, '{')
	for i, n := range l.names {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, n...)
		b = append(b, `="`...)
		b = appendEscaped(b, key[i], true)
		b = append(b, '"')
	}
	if extra != "" {
		if len(l.names) > 0 {
			b = append(b, ',')
		}
		b = append(b, extra...)
		b = append(b, `="`...)
		b = appendFloat(b, extraVal)
		b = append(b, '"')
	}
	return append(b, "} "...)
}

func counterFamily(name, help string, v *vec[counter]) family {
	return scalarFamily(name, help, "counter", v, func(c *counter) float64 { return float64(c.n.Load()) })
}

func gaugeFamily(name, help string, v *vec[gauge]) family {
	return scalarFamily(name, help, "gauge", v, (*gauge).get)
}

func probeFamily(name, help string, v *vec[probe]) family {
	return scalarFamily(name, help, "gauge", v, (*probe).get)
}

// scalarFamily writes one sample per child: its labels and value(child).
func scalarFamily[T any](name, help, typ string, v *vec[T], value func(*T) float64) family {
	return family{name, help, typ, func(b []byte) []byte {
		keys, kids := v.sorted()
		for i, k := range kids {
			b = appendName(b, name, "", v.labels, keys[i], "", 0)
			b = appendFloat(b, value(k))
			b = append(b, '\n')
		}
		return b
	}}
}

func histogramFamily(name, help string, v *vec[histogram]) family {
	return family{name, help, "histogram", func(b []byte) []byte {
		keys, kids := v.sorted()
		for i, h := range kids {
			var cum uint64
			for j := range h.counts {
				cum += h.counts[j].Load()
				le := math.Inf(+1)
				if j < len(h.upper) {
					le = h.upper[j]
				}
				b = appendName(b, name, "_bucket", v.labels, keys[i], "le", le)
				b = strconv.AppendUint(b, cum, 10)
				b = append(b, '\n')
			}
			b = appendName(b, name, "_sum", v.labels, keys[i], "", 0)
			b = appendFloat(b, math.Float64frombits(h.sum.Load()))
			b = append(b, '\n')
			b = appendName(b, name, "_count", v.labels, keys[i], "", 0)
			b = strconv.AppendUint(b, cum, 10)
			b = append(b, '\n')
		}
		return b
	}}
}

// valueFamily is one unlabelled sample read at scrape time.
func valueFamily(name, help, typ string, v float64) family {
	return family{name, help, typ, func(b []byte) []byte {
		b = append(b, name...)
		b = append(b, ' ')
		b = appendFloat(b, v)
		return append(b, '\n')
	}}
}
