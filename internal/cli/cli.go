// Package cli turns the command line and the environment into the
// controller's configuration: it defines the flags and their environment
// variables, reads the config file they name, and layers built-in defaults <
// config file < environment < flags into one tree with koanf, which package
// config then decodes strictly.
package cli

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/knadh/koanf/providers/confmap"
	"github.com/knadh/koanf/providers/posflag"
	"github.com/knadh/koanf/v2"
	"github.com/spf13/pflag"

	"github.com/restart-controller/restart-controller/internal/config"
)

// ErrVersion is returned by Load when --version was given.
var ErrVersion = errors.New("version requested")

// kind says how an environment variable or flag string becomes a config value.
type kind int

const (
	kindString kind = iota
	kindBool
	kindInt
	kindFloat
	kindList // separated by ';'
)

// setting binds a flag and an environment variable to a key of the config
// file. Settings with no key are flag/env only: they say where to find the
// file or differ per replica, so a shared file is the wrong place for them.
type setting struct {
	key   string // file key; "" when not layered through koanf
	flag  string
	short string
	env   string
	kind  kind
	usage string
}

func settings() []setting {
	return []setting{
		{key: "restartCheckPeriod", flag: "restart-check-period", short: "c", env: "RESTART_CHECK_PERIOD",
			usage: "how often pending changes are swept and the waiting gauge refreshed: milliseconds, or a Go duration such as 250ms"},
		{key: "restartGracePeriod", flag: "restart-grace-period", short: "r", env: "RESTART_GRACE_PERIOD",
			usage: "how long to wait after a source (ConfigMap, Secret) change before restarting: seconds, or a Go duration such as 500ms"},
		{key: "ignoredErrors", flag: "ignored-errors", env: "IGNORED_ERRORS", kind: kindList,
			usage: "errors to ignore, separated by ';'"},
		{key: "verbose", flag: "verbose", short: "v", env: "VERBOSE", kind: kindBool,
			usage: "log debug messages, including client-go's"},
		{key: "enableProfiling", flag: "enable-profiling", env: "ENABLE_PROFILING", kind: kindBool,
			usage: "serve pprof under /debug/pprof/ on the metrics address"},
		{key: "dryRun", flag: "dry-run", env: "DRY_RUN", kind: kindBool,
			usage: "decide, log and report as usual but patch nothing (Events say \"would restart\")"},
		{key: "metricsAddress", flag: "metrics-address", env: "METRICS_ADDRESS",
			usage: "host:port to serve metrics on"},
		{key: "kubeAPIQPS", flag: "kube-api-qps", env: "KUBE_API_QPS", kind: kindFloat,
			usage: "queries per second to the Kubernetes API"},
		{key: "kubeAPIBurst", flag: "kube-api-burst", env: "KUBE_API_BURST", kind: kindInt,
			usage: "burst of queries to the Kubernetes API"},
		{key: "workers", flag: "workers", env: "WORKERS", kind: kindInt,
			usage: "number of workloads processed concurrently"},
		{key: "logFormat", flag: "log-format", env: "LOG_FORMAT",
			usage: "log format: text or json"},
		{key: "leaderElection.enabled", flag: "leader-elect", env: "LEADER_ELECT", kind: kindBool,
			usage: "run only while holding the leader election lease"},
		{key: "leaderElection.namespace", flag: "leader-election-namespace", env: "POD_NAMESPACE",
			usage: "namespace of the leader election lease"},
		{key: "leaderElection.leaseName", flag: "leader-election-id",
			usage: "name of the leader election lease"},
		{flag: "leader-election-identity", env: "POD_NAME",
			usage: "this replica's leader election identity (default: the host name)"},
		{flag: "config", env: config.PathEnv,
			usage: "config file"},
		{flag: "kubeconfig", env: "KUBECONFIG",
			usage: "kubeconfig file; empty means in-cluster"},
		{flag: "version", kind: kindBool,
			usage: "print the version and exit"},
	}
}

// Flags registers the command-line flags on fs. Their defaults, shown by
// --help, are read from the built-in defaults so the two cannot disagree.
func Flags(fs *pflag.FlagSet) {
	defaults, err := config.FileLayers(nil)
	if err != nil {
		panic(fmt.Sprintf("cli: embedded defaults.yaml: %v", err)) // tests catch this
	}
	for _, s := range settings() {
		usage := s.usage
		if s.env != "" {
			usage += " [$" + s.env + "]"
		}
		switch s.kind {
		case kindBool:
			fs.BoolP(s.flag, s.short, false, usage)
		case kindInt:
			fs.IntP(s.flag, s.short, 0, usage)
		case kindFloat:
			fs.Float32P(s.flag, s.short, 0, usage)
		default:
			fs.StringP(s.flag, s.short, "", usage)
		}
		def := ""
		switch {
		case s.flag == "config":
			def = config.DefaultPath
		case s.key != "":
			def = flagString(defaults.Get(s.key))
		}
		if def != "" {
			f := fs.Lookup(s.flag)
			if err := f.Value.Set(def); err != nil {
				panic(fmt.Sprintf("cli: default %q of --%s: %v", def, s.flag, err))
			}
			f.DefValue = f.Value.String()
		}
	}
}

// flagString writes a default value the way a user would pass it.
func flagString(v interface{}) string {
	if list, ok := v.([]interface{}); ok {
		parts := make([]string, len(list))
		for i, x := range list {
			parts[i] = fmt.Sprint(x)
		}
		return strings.Join(parts, ";")
	}
	if v == nil {
		return ""
	}
	return fmt.Sprint(v)
}

// Load parses args (without the program name) with fs, on which Flags was
// called, reads the config file named by --config, and layers the environment
// (looked up with lookupEnv) and the flags the user set over it. An empty
// environment variable counts as unset. -h/--help returns pflag.ErrHelp.
func Load(fs *pflag.FlagSet, args []string, lookupEnv func(string) (string, bool)) (*config.Config, error) {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return nil, err
		}
		return nil, fmt.Errorf("parsing command line: %w", err)
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("parsing command line: unexpected arguments %q", fs.Args())
	}
	if v, _ := fs.GetBool("version"); v {
		return nil, ErrVersion
	}
	getenv := func(name string) (string, bool) {
		v, ok := lookupEnv(name)
		return v, ok && v != ""
	}
	flagOrEnv := func(flag, env string) string {
		f := fs.Lookup(flag)
		if v, ok := getenv(env); ok && !f.Changed {
			return v
		}
		return f.Value.String()
	}

	path := flagOrEnv("config", config.PathEnv)
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading config file: %w", err)
	}
	c, err := layerAndDecode(data, fs, getenv)
	if err != nil {
		return nil, fmt.Errorf("loading config from %s: %w", path, err)
	}
	c.Settings.ConfigFile = path
	c.Settings.Kubeconfig = flagOrEnv("kubeconfig", "KUBECONFIG")
	c.Settings.LeaderIdentity = flagOrEnv("leader-election-identity", "POD_NAME")
	if c.Settings.LeaderIdentity == "" {
		if c.Settings.LeaderIdentity, err = os.Hostname(); err != nil {
			return nil, fmt.Errorf("finding the leader election identity: %w", err)
		}
	}
	return c, nil
}

// layerAndDecode layers the environment and the flags the user set over the
// file, then decodes the result once.
func layerAndDecode(data []byte, fs *pflag.FlagSet, getenv func(string) (string, bool)) (*config.Config, error) {
	k, err := config.FileLayers(data)
	if err != nil {
		return nil, err
	}
	l := layering{origins: map[string]string{}}
	if err := l.envAndFlags(k, fs, getenv); err != nil {
		return nil, err
	}
	return config.Decode(k, l.origins, l.problems)
}

// layering records, while upper layers are loaded, where each key's value came
// from and which values could not be converted.
type layering struct {
	origins  map[string]string
	problems []config.Problem
}

// envAndFlags loads the environment, then the flags the user set, over the
// file. A value that does not convert is reported under its file key and
// origin, and leaves the lower layer's value in place.
func (l *layering) envAndFlags(k *koanf.Koanf, fs *pflag.FlagSet, getenv func(string) (string, bool)) error {
	byFlag := map[string]setting{}
	env := map[string]interface{}{}
	for _, s := range settings() {
		if s.key == "" {
			continue
		}
		byFlag[s.flag] = s
		if s.env == "" {
			continue
		}
		raw, ok := getenv(s.env)
		if !ok {
			continue
		}
		if v, ok := l.convert(s, raw, "env "+s.env); ok {
			env[s.key] = v
		}
	}
	if err := k.Load(confmap.Provider(env, "."), nil); err != nil {
		return fmt.Errorf("layering environment variables: %w", err)
	}
	// Only flags the user set are layered, so that flag defaults never mask
	// the file or the environment. posflag skips the others too, but only
	// after calling us.
	flags := posflag.ProviderWithValue(fs, ".", nil, func(flag, raw string) (string, interface{}) {
		s, ok := byFlag[flag]
		if !ok || !fs.Lookup(flag).Changed {
			return "", nil
		}
		v, ok := l.convert(s, raw, "flag --"+flag)
		if !ok {
			return "", nil
		}
		return s.key, v
	})
	if err := k.Load(flags, nil); err != nil {
		return fmt.Errorf("layering flags: %w", err)
	}
	return nil
}

// convert turns a flag or environment string into the type the file uses,
// recording its origin so errors about the key say where its value came from.
func (l *layering) convert(s setting, raw, origin string) (interface{}, bool) {
	var (
		v   interface{}
		err error
	)
	switch s.kind {
	case kindString:
		v = raw
	case kindBool:
		v, err = strconv.ParseBool(raw)
	case kindInt:
		v, err = strconv.Atoi(raw)
	case kindFloat:
		v, err = strconv.ParseFloat(raw, 64)
	case kindList:
		list := []interface{}{}
		for _, part := range strings.Split(raw, ";") {
			if part != "" {
				list = append(list, part)
			}
		}
		v = list
	}
	if err != nil {
		l.problems = append(l.problems, config.Problem{Path: s.key, Origin: origin,
			Err: fmt.Errorf("cannot parse %q: %w", raw, errors.Unwrap(err))})
		return nil, false
	}
	l.origins[s.key] = origin
	return v, true
}
