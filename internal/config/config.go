// Package config is the controller's config file: its documented schema
// (schema.go), strict decoding with koanf (decode.go) with every problem
// named by its path (problems.go), and compilation into the immutable
// Config the rest of the program reads (compile.go). Where values come from (the file, the
// environment, flags) is package cli's concern; this package decodes the one
// tree they are layered into.
package config

import (
	"bytes"
	_ "embed"
	"errors"
	"fmt"
	"io"

	"github.com/knadh/koanf/parsers/yaml"
	"github.com/knadh/koanf/providers/rawbytes"
	"github.com/knadh/koanf/v2"
	yamlv3 "go.yaml.in/yaml/v3"
)

// Where the controller and its subcommands find the config file: the path
// --config gives, else the one PathEnv names, else DefaultPath.
const (
	DefaultPath = "/etc/restart-controller/config.yaml"
	PathEnv     = "RESTART_CONTROLLER_CONFIG"
)

// defaultsYAML is a string, not []byte, so that nothing can change it.
//
//go:embed defaults.yaml
var defaultsYAML string

// FileLayers returns the lower layers of every configuration: the built-in
// defaults, and over them the config file's bytes. Callers add upper layers
// (environment, flags) to the result before decoding it.
func FileLayers(data []byte) (*koanf.Koanf, error) {
	k := koanf.New(".")
	if err := k.Load(rawbytes.Provider([]byte(defaultsYAML)), yaml.Parser()); err != nil {
		return nil, fmt.Errorf("loading built-in defaults: %w", err)
	}
	if err := singleDocument(data); err != nil {
		return nil, fmt.Errorf("parsing YAML: %w", err)
	}
	if err := k.Load(rawbytes.Provider(data), yaml.Parser()); err != nil {
		return nil, fmt.Errorf("parsing YAML: %w", err)
	}
	return k, nil
}

// singleDocument rejects a file of several YAML documents: the parser would
// silently use the first, and whatever the operator meant by the others
// would be dropped.
func singleDocument(data []byte) error {
	dec := yamlv3.NewDecoder(bytes.NewReader(data))
	var first, second yamlv3.Node
	if err := dec.Decode(&first); err != nil {
		return nil // empty, or invalid: the parser reports it
	}
	if err := dec.Decode(&second); errors.Is(err, io.EOF) {
		return nil
	} else if err != nil {
		return nil // the parser reports it
	}
	return fmt.Errorf("line %d: a second YAML document; the config file must hold exactly one", second.Line)
}

// Decode decodes a layered tree strictly into the schema and compiles it,
// reporting every problem at once. origins maps the keys whose value came
// from an upper layer to where it came from (e.g. "env WORKERS"), and earlier
// holds problems already found while layering; both end up in the error.
func Decode(k *koanf.Koanf, origins map[string]string, earlier []Problem) (*Config, error) {
	p := newProblems(origins, earlier)
	var f File
	if err := decodeFile(k, &f, p.decodeFailed); err != nil {
		return nil, err
	}
	c := compile(&f, p)
	if err := p.err(); err != nil {
		return nil, err
	}
	return c, nil
}

// Parse compiles a config file's bytes layered over the built-in defaults.
// The settings that only flags and the environment set stay empty.
func Parse(data []byte) (*Config, error) {
	k, err := FileLayers(data)
	if err == nil {
		var c *Config
		if c, err = Decode(k, nil, nil); err == nil {
			return c, nil
		}
	}
	return nil, fmt.Errorf("parsing config: %w", err)
}
