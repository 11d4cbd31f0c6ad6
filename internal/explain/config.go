// Package explain answers, from the cluster as it is, what the controller
// would do and why: for a workload, which sources it reads, through which
// reference, with which checksums, and whether it would restart; for a source
// (ConfigMap, Secret), which opted-in workloads read it and which of them a
// change of a key would restart. It reads with the caller's credentials and
// never writes; it reuses the controller's own code (config, refs, catalog's
// transforms, and the decision of package decision, on a snapshot read from
// the cluster: holds and records from the workloads' annotations, and a
// due restart paced by the controller's own pacing state (package pacing)
// over the workloads listed, a Fleet) so its answers cannot drift from the
// controller's behaviour. Package status decides every workload of a
// listing with the same code. No source value is ever printed, only checksums.
package explain

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"strings"

	"github.com/restart-controller/restart-controller/internal/checksum"
	"github.com/restart-controller/restart-controller/internal/config"
	"github.com/restart-controller/restart-controller/internal/refs"
)

// DefaultConfigFile is where the controller reads its config file by default.
const DefaultConfigFile = "/etc/restart-controller/config.yaml"

// Config is the controller's configuration as explain needs it: the compiled
// Config the controller runs with, and the reference forms as the file writes
// them, to name the form and place that matched.
type Config struct {
	*config.Config
	// File is the config file read; empty for the built-in defaults.
	File string
	// Sums computes checksums as the controller does. Without the key (the
	// caller may not read its Secret) the keyed ones cannot be compared.
	Sums checksum.Hasher
	// SourceNames lists the names of the sources of a kind in a namespace,
	// for regex source lists (Cluster.SourceNames); nil when they cannot be
	// listed, and a workload with such lists is then not decided.
	SourceNames func(kind config.SourceKind, namespace string) ([]string, error)
	// NamespaceLabels reads a namespace's labels, for a namespaceSelector
	// (Cluster.NamespaceLabels); nil when they cannot be read.
	NamespaceLabels func(namespace string) (map[string]string, error)
	forms           []form
}

// form is one references[i] entry: its from paths, each split at its [*]
// steps so that the place a reference sits can be named, and an extractor of
// the same name/keys/optional paths applied to one reference object.
type form struct {
	index int
	spec  refs.Spec
	from  []splitPath
	leaf  *refs.Extractor
}

// splitPath is a from path cut at every "[*]": "containers[*].env[*].x"
// becomes containers / env / x. steps[i] is wildcard-free and may be empty
// (the element itself) for the last step.
type splitPath struct {
	steps []step
}

type step struct {
	label string // canonical text of the step, "" for none
	path  refs.Path
}

// leafField holds a single reference object so that a one-step extractor can
// read it with the same name/keys/optional paths as the configured one.
const leafField = "ref"

// LoadConfig reads the config file like the controller does: path if given,
// else $RESTART_CONTROLLER_CONFIG, else DefaultConfigFile. Only when no path
// was given and the default file does not exist are the built-in defaults
// used (File stays empty), so that explain also works from a laptop.
func LoadConfig(path string, lookupEnv func(string) (string, bool)) (*Config, error) {
	explicit := path != ""
	if !explicit {
		if v, ok := lookupEnv("RESTART_CONTROLLER_CONFIG"); ok && v != "" {
			path, explicit = v, true
		} else {
			path = DefaultConfigFile
		}
	}
	data, err := os.ReadFile(path)
	switch {
	case err == nil:
	case !explicit && errors.Is(err, fs.ErrNotExist):
		return ParseConfig(nil, "")
	default:
		return nil, fmt.Errorf("reading config file: %w", err)
	}
	c, err := ParseConfig(data, path)
	if err != nil {
		return nil, fmt.Errorf("loading config from %s: %w", path, err)
	}
	return c, nil
}

// ParseConfig compiles a config file's bytes (nil: the built-in defaults) as
// the controller does, and keeps the reference forms as written.
func ParseConfig(data []byte, file string) (*Config, error) {
	k, err := config.FileLayers(data)
	if err != nil {
		return nil, err
	}
	compiled, err := config.Decode(k, nil, nil)
	if err != nil {
		return nil, err
	}
	// The file compiled, so the shape of its references list is known good.
	var specs []refs.Spec
	raw, err := json.Marshal(k.Raw()["references"])
	if err == nil {
		err = json.Unmarshal(raw, &specs)
	}
	if err != nil {
		return nil, fmt.Errorf("references: %w", err)
	}
	if len(specs) != len(compiled.Extractors) {
		return nil, fmt.Errorf("config has %d reference forms but %d compiled extractors", len(specs), len(compiled.Extractors))
	}
	c := &Config{Config: compiled, File: file}
	for i, spec := range specs {
		f := form{index: i, spec: spec}
		leaf, err := refs.Compile(refs.Spec{Source: spec.Source, From: []string{leafField}, Name: spec.Name, Keys: spec.Keys, Optional: spec.Optional})
		if err != nil {
			return nil, fmt.Errorf("references[%d]: %w", i, err)
		}
		f.leaf = leaf
		for j, from := range spec.From {
			sp, err := split(from)
			if err != nil {
				return nil, fmt.Errorf("references[%d].from[%d]: %w", i, j, err)
			}
			f.from = append(f.from, sp)
		}
		c.forms = append(c.forms, f)
	}
	return c, nil
}

func split(from string) (splitPath, error) {
	p, err := refs.ParsePath(from)
	if err != nil {
		return splitPath{}, err
	}
	var sp splitPath
	for _, part := range strings.Split(p.String(), "[*]") {
		part = strings.TrimPrefix(part, ".")
		s := step{label: part}
		if part != "" {
			if s.path, err = refs.ParsePath(part); err != nil {
				return splitPath{}, err
			}
		}
		sp.steps = append(sp.steps, s)
	}
	return sp, nil
}

// Use is one place in a pod spec that names a source.
type Use struct {
	// Reference is the config file's reference form that matched, e.g.
	// "references[3]".
	Reference string `json:"reference"`
	// Path is the place in the pod spec, list elements named by their "name"
	// field or else their index: "containers[app].env[COLOR].valueFrom.configMapKeyRef".
	Path string `json:"path"`
	// Keys read; empty with AllKeys when every key is read.
	Keys     []string `json:"keys,omitempty"`
	AllKeys  bool     `json:"allKeys"`
	Optional bool     `json:"optional"`
}

// found is one reference with the place it was found.
type found struct {
	ref refs.Ref
	use Use
}

// uses finds every reference in podSpec with the place it sits, in the order
// of the config's reference forms, then of their from paths, then of the pod
// spec. The references are those the configured extractors find, because
// each form's own name/keys/optional paths read each reference object.
func (c *Config) uses(podSpec map[string]interface{}) []found {
	var out []found
	for _, f := range c.forms {
		for _, sp := range f.from {
			walkSteps(podSpec, sp.steps, "", func(place string, obj interface{}) {
				m, ok := obj.(map[string]interface{})
				if !ok {
					return
				}
				for _, r := range f.leaf.Extract(map[string]interface{}{leafField: m}, nil) {
					out = append(out, found{ref: r, use: Use{
						Reference: fmt.Sprintf("references[%d]", f.index),
						Path:      place,
						Keys:      r.Keys,
						AllKeys:   r.Keys == nil,
						Optional:  r.Optional,
					}})
				}
			})
		}
	}
	return out
}

// walkSteps visits what the steps reach from v, naming the place it reached.
func walkSteps(v interface{}, steps []step, place string, fn func(string, interface{})) {
	s := steps[0]
	at := v
	if s.label != "" {
		at = nil
		s.path.Each(v, func(x interface{}) { at = x })
		place = joinPlace(place, s.label)
	}
	if at == nil {
		return
	}
	if len(steps) == 1 {
		fn(place, at)
		return
	}
	list, ok := at.([]interface{})
	if !ok {
		return
	}
	for i, elem := range list {
		id := strconv.Itoa(i)
		if m, ok := elem.(map[string]interface{}); ok {
			if name, ok := m["name"].(string); ok && name != "" {
				id = name
			}
		}
		walkSteps(elem, steps[1:], place+"["+id+"]", fn)
	}
}

func joinPlace(place, label string) string {
	if place == "" {
		return label
	}
	return place + "." + label
}

// sourceKind returns the configured source kind of the given name.
func (c *Config) sourceKind(name string) (config.SourceKind, bool) {
	for _, k := range c.Sources {
		if k.Name == name {
			return k, true
		}
	}
	return config.SourceKind{}, false
}
