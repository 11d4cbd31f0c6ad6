// Package budgets holds the controller's binary and memory budgets, read by
// the tests that enforce them; budgets.yaml says why each number.
package budgets

import (
	_ "embed"
	"fmt"

	"sigs.k8s.io/yaml"
)

//go:embed budgets.yaml
var raw []byte

// Budgets are the limits in budgets.yaml.
type Budgets struct {
	Binary struct {
		ForbiddenPackages []string `json:"forbiddenPackages"`
		MaxStrippedBytes  int64    `json:"maxStrippedBytes"`
		// MaxDefaultBytes bounds a plain `go build` (cgo on, symbols kept).
		MaxDefaultBytes int64 `json:"maxDefaultBytes"`
	} `json:"binary"`
	Memory struct {
		MaxPeakRSSRatio float64 `json:"maxPeakRSSRatio"`
	} `json:"memory"`
}

// Load parses budgets.yaml strictly and rejects a budget left at zero, so a
// misspelt key cannot switch a guard off.
func Load() (Budgets, error) {
	var b Budgets
	if err := yaml.UnmarshalStrict(raw, &b); err != nil {
		return b, fmt.Errorf("budgets.yaml: %w", err)
	}
	switch {
	case len(b.Binary.ForbiddenPackages) == 0:
		return b, fmt.Errorf("budgets.yaml: binary.forbiddenPackages is empty")
	case b.Binary.MaxStrippedBytes <= 0:
		return b, fmt.Errorf("budgets.yaml: binary.maxStrippedBytes must be positive")
	case b.Binary.MaxDefaultBytes <= 0:
		return b, fmt.Errorf("budgets.yaml: binary.maxDefaultBytes must be positive")
	case b.Memory.MaxPeakRSSRatio <= 1:
		return b, fmt.Errorf("budgets.yaml: memory.maxPeakRSSRatio must be above 1 (the floor is the least any controller needs)")
	}
	return b, nil
}
