package config

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestHonouredProofsExist checks that each Proof of the option table names a
// test function that exists in the repository, and that only Honoured rows
// carry one (issue 15: a test of each honoured option's effect), and that every
// Honoured row has one: adding an option as honoured needs its effect test.
func TestHonouredProofsExist(t *testing.T) {
	funcs := map[string]bool{}
	decl := regexp.MustCompile(`(?m)^func (Test\w+)\(t \*testing\.T\)`)
	err := filepath.WalkDir("../..", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && d.Name() == ".git" {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(p, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		for _, m := range decl.FindAllSubmatch(b, -1) {
			funcs[string(m[1])] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if !funcs["TestHonouredProofsExist"] {
		t.Fatal("the walk did not find this very test: wrong root")
	}
	var missing []string
	for _, o := range OptionTable() {
		id := o.Section + "." + o.Name
		switch {
		case o.Proof != "" && o.Status != Honoured:
			t.Errorf("%s is %s but names a proof %s", id, o.Status, o.Proof)
		case o.Proof != "" && !funcs[o.Proof]:
			t.Errorf("%s: proof %s is not a func %s(t *testing.T) in any *_test.go", id, o.Proof, o.Proof)
		case o.Proof == "" && o.Status == Honoured:
			missing = append(missing, id)
		}
	}
	for k := range optionProofs {
		found := false
		for _, o := range optionTable {
			found = found || o.Section+"."+o.Name == k
		}
		if !found {
			t.Errorf("optionProofs names %s, which is no row of the table", k)
		}
	}
	if len(missing) > 0 {
		t.Errorf("%d honoured rows name no test of their effect (optionProofs in options.go): %s", len(missing), strings.Join(missing, " "))
	}
}
