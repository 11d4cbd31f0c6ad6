package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/restart-controller/restart-controller/internal/cli"
	"github.com/restart-controller/restart-controller/internal/config"
	"github.com/restart-controller/restart-controller/internal/metrics"
)

var update = flag.Bool("update", false, "rewrite the generated blocks of README.md")

const readmePath = "../../README.md"

// The README's examples and reference tables are written by this test from
// the code itself, so they cannot drift: run with -update after a change,
// and the test fails whenever the README and the code disagree.
func TestREADME(t *testing.T) {
	// Absolute, since a block may change the working directory.
	path, err := filepath.Abs(readmePath)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	blocks := map[string]func(*testing.T) string{
		"config-errors": configErrorsBlock,
		"flags":         flagsBlock,
		"metrics":       metricsBlock,
		"strategies":    strategiesBlock,
	}
	got := string(raw)
	for name, build := range blocks {
		re := regexp.MustCompile(`(?s)(<!-- BEGIN generated:` + name + `[^>]*-->\n).*?(<!-- END generated:` + name + ` -->)`)
		if !re.MatchString(got) {
			t.Fatalf("README.md has no generated block %q", name)
		}
		body := build(t)
		got = re.ReplaceAllStringFunc(got, func(m string) string {
			parts := re.FindStringSubmatch(m)
			return parts[1] + body + parts[2]
		})
	}
	if got == string(raw) {
		return
	}
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Fatalf("README.md's generated blocks are out of date: run go test ./cmd/restart-controller -run TestREADME -update\n%s",
		firstDifference(string(raw), got))
}

func firstDifference(a, b string) string {
	al, bl := strings.Split(a, "\n"), strings.Split(b, "\n")
	for i := 0; i < len(al) && i < len(bl); i++ {
		if al[i] != bl[i] {
			return fmt.Sprintf("line %d:\n  README: %s\n  code:   %s", i+1, al[i], bl[i])
		}
	}
	return fmt.Sprintf("lengths differ: %d vs %d lines", len(al), len(bl))
}

// configErrorsBlock runs the real entry point on testdata/bad.yaml with a bad
// environment variable, as a user would, and shows what it prints.
func configErrorsBlock(t *testing.T) string {
	src, err := os.ReadFile("testdata/bad.yaml")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "bad.yaml"), src, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Chdir(dir)
	env := map[string]string{"WORKERS": "0"}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{"--config", "bad.yaml"}, lookup, &stdout, &stderr, func() {})
	if code != 2 {
		t.Fatalf("exit code %d, want 2; stderr: %s", code, stderr.String())
	}
	return "```console\n$ cat bad.yaml\n" + string(src) +
		"$ WORKERS=0 restart-controller --config bad.yaml\n" + stderr.String() + "$ echo $?\n2\n```\n"
}

var envInUsage = regexp.MustCompile(` \[\$([A-Z_]+)\]$`)

// flagsBlock lists every flag as --help defines it: name, environment
// variable, default and meaning.
func flagsBlock(*testing.T) string {
	fs := pflag.NewFlagSet("restart-controller", pflag.ContinueOnError)
	cli.Flags(fs)
	var b strings.Builder
	b.WriteString("| flag | env | default | meaning |\n|---|---|---|---|\n")
	fs.VisitAll(func(f *pflag.Flag) {
		name := "`--" + f.Name + "`"
		if f.Shorthand != "" {
			name = "`-" + f.Shorthand + "`, " + name
		}
		usage, env := f.Usage, ""
		if m := envInUsage.FindStringSubmatch(usage); m != nil {
			env = "`" + m[1] + "`"
			usage = strings.TrimSuffix(usage, m[0])
		}
		def := ""
		if f.DefValue != "" && f.DefValue != "false" && f.DefValue != "0" {
			def = "`" + f.DefValue + "`"
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", name, env, def, strings.ReplaceAll(usage, "|", "\\|"))
	})
	return b.String()
}

// metricsBlock lists every metric the controller registers, Reloader's
// names (metrics.reloaderCompatible) included.
func metricsBlock(*testing.T) string {
	m := metrics.New(func() (int, int) { return 0, 0 })
	m.ExportReloaderNames(true)
	var b strings.Builder
	b.WriteString("| metric | type | meaning |\n|---|---|---|\n")
	for _, d := range m.Docs() {
		name := d.Name
		if len(d.Labels) > 0 {
			name += "{" + strings.Join(d.Labels, ",") + "}"
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s |\n", name, d.Type, d.Help)
	}
	return b.String()
}

// The README's hand-written parts are checked instead: its config file
// snippets compile, and its annotation table names the default keys.
func TestREADMESnippetsAndAnnotations(t *testing.T) {
	raw, err := os.ReadFile(readmePath)
	if err != nil {
		t.Fatal(err)
	}
	readme := string(raw)
	snippets := regexp.MustCompile("(?s)```yaml\n(.*?)```").FindAllStringSubmatch(readme, -1)
	compiled := 0
	for _, s := range snippets {
		if !strings.HasPrefix(s[1], "workloads:") {
			continue // a Kubernetes object, not a config file
		}
		// "# ... the default kinds, then:" stands for the default list.
		file := strings.Replace(s[1], "workloads:\n", "workloads:\n"+defaultWorkloads(t), 1)
		if _, err := config.Parse([]byte(file)); err != nil {
			t.Errorf("README config snippet does not compile: %v\n%s", err, s[1])
		}
		compiled++
	}
	if compiled == 0 {
		t.Error("README has no config file snippet; this test checks nothing")
	}
	// Numbers the README states that are constants here.
	for _, claim := range []string{
		fmt.Sprintf("(%d/s, bursts of %d)", eventsPerSecond, eventBurst),
		fmt.Sprintf("read again every %d seconds", int(configPollInterval/time.Second)),
	} {
		if !strings.Contains(strings.Join(strings.Fields(readme), " "), claim) {
			t.Errorf("README does not say %q, which is what the code does", claim)
		}
	}
	c, err := config.Parse(nil)
	if err != nil {
		t.Fatal(err)
	}
	a := c.Annotations
	for _, key := range []string{a.OptIn, a.AppliedChecksums, a.AppliedTemplateHash, a.RestartTimestamp} {
		if !strings.Contains(readme, "| `"+key) {
			t.Errorf("README's annotation table lacks the default key %s", key)
		}
	}
}

// defaultWorkloads renders the default workload kinds as YAML list items.
func defaultWorkloads(t *testing.T) string {
	c, err := config.Parse(nil)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, w := range c.Workloads {
		fmt.Fprintf(&b, "  - {group: %q, version: %s, resource: %s, podTemplatePath: %s}\n",
			w.GVR.Group, w.GVR.Version, w.GVR.Resource, w.PodTemplatePath)
	}
	return b.String()
}

// The README's restart-window example is a valid config file: the block
// after its "checked" marker parses, windows and intervals as it says.
func TestREADMEWindowsExample(t *testing.T) {
	raw, err := os.ReadFile(readmePath)
	if err != nil {
		t.Fatal(err)
	}
	re := regexp.MustCompile("(?s)<!-- checked: cmd/restart-controller TestREADMEWindowsExample -->\n```yaml\n(.*?)```")
	m := re.FindSubmatch(raw)
	if m == nil {
		t.Fatal("README.md has no checked restart-window example")
	}
	cfg, err := config.Parse(m[1])
	if err != nil {
		t.Fatalf("the README's example: %v", err)
	}
	if len(cfg.Windows) != 1 || cfg.Windows[0].Name != "nights" || cfg.Windows[0].Duration != 3*time.Hour ||
		cfg.Windows[0].Location.String() != "Europe/Berlin" || cfg.Windows[0].Namespaces == nil {
		t.Fatalf("windows %+v", cfg.Windows)
	}
	if cfg.Workloads[0].MinInterval != 10*time.Minute {
		t.Fatalf("minInterval %v", cfg.Workloads[0].MinInterval)
	}
}
