package config

import (
	"os"
	"strings"
	"testing"
)

// FuzzParse feeds arbitrary bytes to the config loader. Every input gives a
// Config or an error naming where the problem is; never a panic. A file is
// small (a ConfigMap is at most 1 MiB), so inputs are capped there: the
// fuzzer looks for crashes and blow-ups per byte, not for large inputs.
func FuzzParse(f *testing.F) {
	example, err := os.ReadFile("../../examples/config.yaml")
	if err != nil {
		f.Fatal(err)
	}
	for _, seed := range []string{
		string(example), "", "{}", "[]", "null", "workers: 3\n---\nworkers: 4\n",
		"workloads: [{group: apps, version: v1, resource: deployments, podTemplatePath: \"spec[*]\"}]",
		"references: [{source: configmap, from: [\"a[*].b\"], name: n, keys: \"k[*]\"}]",
		"restartGracePeriod: 1e400", "annotations: {optIn: a, appliedChecksums: a}", "&a [*a, *a]", billionLaughs,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > 1<<20 {
			t.Skip("larger than a ConfigMap can hold")
		}
		c, err := Parse(data)
		if err == nil {
			if c == nil || len(c.Sources) == 0 || len(c.Workloads) == 0 || len(c.Extractors) == 0 {
				t.Fatalf("Parse accepted %q but built an unusable config: %+v", data, c)
			}
			return
		}
		if !strings.HasPrefix(err.Error(), "parsing config: ") {
			t.Fatalf("error does not say what was being done: %v", err)
		}
	})
}

// billionLaughs expands to 9^9 strings if aliases are followed naively.
const billionLaughs = "a: &a [x,x,x,x,x,x,x,x,x]\nb: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]\n" +
	"c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]\nd: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]\n" +
	"e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]\nf: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]\n" +
	"g: &g [*f,*f,*f,*f,*f,*f,*f,*f,*f]\nh: &h [*g,*g,*g,*g,*g,*g,*g,*g,*g]\n" +
	"i: &i [*h,*h,*h,*h,*h,*h,*h,*h,*h]\n"

// Alias expansion is bounded by the YAML parser; a file of a few hundred
// bytes must not take the process's memory.
func TestAliasBombIsRejected(t *testing.T) {
	if _, err := Parse([]byte(billionLaughs)); err == nil || !strings.Contains(err.Error(), "aliasing") {
		t.Fatalf("want an excessive-aliasing error, got %v", err)
	}
}
