package charts

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

// docs/operations.md shows what `helm install` says of a bad value: the
// block between the markers below, written by the charts tests (go test
// ./charts -run TestOperationsExamples -update) and run for real against a
// cluster by test/e2e, which checks Helm prints exactly that.

// ExampleCommand is the install every example runs, before its value flags.
const ExampleCommand = "helm install restart-controller charts/restart-controller -n restart-controller --create-namespace"

const examplesBlock = "schema-errors"

var examplesRe = regexp.MustCompile("(?s)(<!-- BEGIN generated:" + examplesBlock + "[^>]*-->\n)```console\n(.*?)```\n(<!-- END generated:" + examplesBlock + " -->)")

// Example is one command of the block: the install with Args (--set flags)
// and what Helm prints, trailing blank lines left out.
type Example struct {
	Args   []string
	Output string
}

// OperationsDoc is the path of docs/operations.md.
func OperationsDoc(root string) string { return filepath.Join(root, "docs", "operations.md") }

// ReadExamples reads the examples of docs/operations.md.
func ReadExamples(root string) ([]Example, error) {
	raw, err := os.ReadFile(OperationsDoc(root))
	if err != nil {
		return nil, fmt.Errorf("reading the Helm examples: %w", err)
	}
	m := examplesRe.FindSubmatch(raw)
	if m == nil {
		return nil, fmt.Errorf("docs/operations.md has no generated:%s block", examplesBlock)
	}
	var examples []Example
	for _, line := range strings.SplitAfter(string(m[2]), "\n") {
		if cmd, ok := strings.CutPrefix(line, "$ "); ok {
			args, ok := strings.CutPrefix(strings.TrimSpace(cmd), ExampleCommand+" ")
			if !ok {
				return nil, fmt.Errorf("docs/operations.md: %q does not start with %q", cmd, ExampleCommand)
			}
			examples = append(examples, Example{Args: strings.Fields(args)})
			continue
		}
		if len(examples) == 0 {
			return nil, fmt.Errorf("docs/operations.md: output %q before any command", line)
		}
		examples[len(examples)-1].Output += line
	}
	for i := range examples {
		examples[i].Output = strings.TrimRight(examples[i].Output, "\n")
	}
	return examples, nil
}

// WriteExamples returns docs/operations.md's text with the block's
// examples replaced, and whether it changed.
func WriteExamples(root string, examples []Example) (string, bool, error) {
	raw, err := os.ReadFile(OperationsDoc(root))
	if err != nil {
		return "", false, fmt.Errorf("reading the Helm examples: %w", err)
	}
	if !examplesRe.Match(raw) {
		return "", false, fmt.Errorf("docs/operations.md has no generated:%s block", examplesBlock)
	}
	var b strings.Builder
	for _, e := range examples {
		fmt.Fprintf(&b, "$ %s %s\n%s\n", ExampleCommand, strings.Join(e.Args, " "), e.Output)
	}
	out := examplesRe.ReplaceAllStringFunc(string(raw), func(s string) string {
		m := examplesRe.FindStringSubmatch(s)
		return m[1] + "```console\n" + b.String() + "```\n" + m[3]
	})
	return out, out != string(raw), nil
}
