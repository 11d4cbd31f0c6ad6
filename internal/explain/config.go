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
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/restart-controller/restart-controller/internal/checksum"
	"github.com/restart-controller/restart-controller/internal/config"
)

// Config is the controller's configuration as explain needs it: the compiled
// Config the controller runs with, whose extractors (references[i] in the
// file's order) also name the form and place that matched.
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
}

// LoadConfig reads the config file like the controller does: path if given,
// else $RESTART_CONTROLLER_CONFIG, else config.DefaultPath. Only when no path
// was given and the default file does not exist are the built-in defaults
// used (File stays empty), so that explain also works from a laptop.
func LoadConfig(path string, lookupEnv func(string) (string, bool)) (*Config, error) {
	explicit := path != ""
	if !explicit {
		if v, ok := lookupEnv(config.PathEnv); ok && v != "" {
			path, explicit = v, true
		} else {
			path = config.DefaultPath
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
// the controller does.
func ParseConfig(data []byte, file string) (*Config, error) {
	k, err := config.FileLayers(data)
	if err != nil {
		return nil, err
	}
	compiled, err := config.Decode(k, nil, nil)
	if err != nil {
		return nil, err
	}
	return &Config{Config: compiled, File: file}, nil
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

// sourceKind returns the configured source kind of the given name.
func (c *Config) sourceKind(name string) (config.SourceKind, bool) {
	for _, k := range c.Sources {
		if k.Name == name {
			return k, true
		}
	}
	return config.SourceKind{}, false
}
