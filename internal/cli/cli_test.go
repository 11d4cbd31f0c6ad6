package cli

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/restart-controller/restart-controller/internal/config"
	"github.com/spf13/pflag"
)

func newFlagSet() *pflag.FlagSet {
	fs := pflag.NewFlagSet("restart-controller", pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	Flags(fs)
	return fs
}

func writeFile(t *testing.T, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// load runs Load with a config file holding file, the environment env and args.
func load(t *testing.T, file string, env map[string]string, args ...string) (*config.Config, error) {
	t.Helper()
	path := writeFile(t, file)
	lookup := func(name string) (string, bool) {
		if name == "RESTART_CONTROLLER_CONFIG" {
			if v, ok := env[name]; ok {
				return v, true
			}
			return path, true
		}
		v, ok := env[name]
		return v, ok
	}
	return Load(newFlagSet(), args, lookup)
}

func TestLoadPrecedence(t *testing.T) {
	const file = `
workers: 6
logFormat: json
restartGracePeriod: 7
leaderElection: {namespace: file-ns, leaseName: file-lease}
ignoredErrors: [from-file]
`
	tests := []struct {
		name  string
		file  string
		env   map[string]string
		args  []string
		check func(t *testing.T, s config.Settings)
	}{
		{
			name: "defaults",
			file: "{}",
			check: func(t *testing.T, s config.Settings) {
				if s.Workers != 16 || s.LogFormat != "text" || s.GracePeriod != 5*time.Second || s.LeaseNamespace != "default" {
					t.Errorf("got %+v", s)
				}
			},
		},
		{
			name: "file over defaults",
			file: file,
			check: func(t *testing.T, s config.Settings) {
				if s.Workers != 6 || s.LogFormat != "json" || s.GracePeriod != 7*time.Second || s.LeaseNamespace != "file-ns" ||
					s.LeaseName != "file-lease" || !reflect.DeepEqual(s.IgnoredErrors, []string{"from-file"}) || s.KubeAPIBurst != 400 {
					t.Errorf("got %+v", s)
				}
			},
		},
		{
			name: "env over file",
			file: file,
			env:  map[string]string{"WORKERS": "7", "POD_NAMESPACE": "env-ns", "IGNORED_ERRORS": "a;b;;c", "VERBOSE": "true", "KUBE_API_QPS": "2.5", "LOG_FORMAT": ""},
			check: func(t *testing.T, s config.Settings) {
				if s.Workers != 7 || s.LeaseNamespace != "env-ns" || !reflect.DeepEqual(s.IgnoredErrors, []string{"a", "b", "c"}) ||
					!s.Verbose || s.KubeAPIQPS != 2.5 || s.LogFormat != "json" || s.GracePeriod != 7*time.Second {
					t.Errorf("got %+v", s)
				}
			},
		},
		{
			name: "flags over env",
			file: file,
			env:  map[string]string{"WORKERS": "7", "POD_NAMESPACE": "env-ns", "RESTART_GRACE_PERIOD": "9"},
			args: []string{"--workers=8", "-r", "500ms", "--leader-election-id", "flag-lease", "--log-format=text", "--ignored-errors", "x;;y", "-v"},
			check: func(t *testing.T, s config.Settings) {
				if s.Workers != 8 || s.LeaseNamespace != "env-ns" || s.GracePeriod != 500*time.Millisecond || s.LeaseName != "flag-lease" ||
					s.LogFormat != "text" || !reflect.DeepEqual(s.IgnoredErrors, []string{"x", "y"}) || !s.Verbose {
					t.Errorf("got %+v", s)
				}
			},
		},
		{
			name: "unset flags keep lower layers",
			file: file,
			args: []string{"--kube-api-burst=7"},
			check: func(t *testing.T, s config.Settings) {
				if s.Workers != 6 || s.KubeAPIBurst != 7 || s.LogFormat != "json" {
					t.Errorf("got %+v", s)
				}
			},
		},
		{
			name: "check period",
			file: "{}",
			env:  map[string]string{"RESTART_CHECK_PERIOD": "250ms"},
			check: func(t *testing.T, s config.Settings) {
				if s.CheckPeriod != 250*time.Millisecond {
					t.Errorf("check period %v", s.CheckPeriod)
				}
			},
		},
		{
			name: "check period flag",
			file: "{}",
			args: []string{"-c", "100"},
			check: func(t *testing.T, s config.Settings) {
				if s.CheckPeriod != 100*time.Millisecond {
					t.Errorf("check period %v", s.CheckPeriod)
				}
			},
		},
		{
			name: "grace period zero",
			file: "{}",
			args: []string{"--restart-grace-period=0"},
			check: func(t *testing.T, s config.Settings) {
				if s.GracePeriod != 0 {
					t.Errorf("grace period %v", s.GracePeriod)
				}
			},
		},
		{
			name: "leader election",
			file: "{}",
			env:  map[string]string{"LEADER_ELECT": "true", "POD_NAME": "pod-1", "KUBECONFIG": "/kube/config"},
			check: func(t *testing.T, s config.Settings) {
				if !s.LeaderElect || s.LeaderIdentity != "pod-1" || s.Kubeconfig != "/kube/config" {
					t.Errorf("got %+v", s)
				}
			},
		},
		{
			name: "flag-only settings from flags",
			file: "{}",
			env:  map[string]string{"POD_NAME": "pod-1", "KUBECONFIG": "/kube/config"},
			args: []string{"--leader-elect", "--leader-election-identity=me", "--kubeconfig", "/my/config"},
			check: func(t *testing.T, s config.Settings) {
				if !s.LeaderElect || s.LeaderIdentity != "me" || s.Kubeconfig != "/my/config" {
					t.Errorf("got %+v", s)
				}
			},
		},
		{
			name: "identity defaults to the host name",
			file: "{}",
			check: func(t *testing.T, s config.Settings) {
				host, err := os.Hostname()
				if err != nil || s.LeaderIdentity != host || s.Kubeconfig != "" {
					t.Errorf("got %+v, host name %q (%v)", s, host, err)
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := load(t, tt.file, tt.env, tt.args...)
			if err != nil {
				t.Fatal(err)
			}
			tt.check(t, c.Settings)
		})
	}
}

func TestLoadErrors(t *testing.T) {
	tests := []struct {
		name string
		file string // default "workers: 3"
		env  map[string]string
		args []string
		is   error
		want string
	}{
		{name: "help", args: []string{"-h"}, is: pflag.ErrHelp},
		{name: "long help", args: []string{"--help"}, is: pflag.ErrHelp},
		{name: "version", args: []string{"--version"}, is: ErrVersion},
		{name: "unknown flag", args: []string{"--nope"}, want: "parsing command line: unknown flag: --nope"},
		{name: "bad int flag", args: []string{"--workers=x"}, want: `parsing command line: invalid argument "x" for "--workers" flag`},
		{name: "positional argument", args: []string{"extra"}, want: `parsing command line: unexpected arguments ["extra"]`},
		{
			name: "missing config file from flag",
			args: []string{"--config", "/nonexistent/restart.yaml"},
			want: "reading config file: open /nonexistent/restart.yaml: no such file or directory",
		},
		{
			name: "missing config file from env",
			env:  map[string]string{"RESTART_CONTROLLER_CONFIG": "/nonexistent/env.yaml"},
			want: "reading config file: open /nonexistent/env.yaml: no such file or directory",
		},
		{
			name: "invalid flag value names the flag",
			args: []string{"-r", "-1s", "--log-format=xml"},
			want: "logFormat (flag --log-format): must be text or json, got \"xml\"\nrestartGracePeriod (flag --restart-grace-period): must be between 0s and 24h0m0s, got -1s",
		},
		{
			name: "invalid env values name the variable",
			env:  map[string]string{"WORKERS": "many", "LEADER_ELECT": "sure", "RESTART_CHECK_PERIOD": "-5"},
			want: "leaderElection.enabled (env LEADER_ELECT): cannot parse \"sure\": invalid syntax\n" +
				"restartCheckPeriod (env RESTART_CHECK_PERIOD): must be between 10ms and 1h0m0s, got -5ms\n" +
				"workers (env WORKERS): cannot parse \"many\": invalid syntax",
		},
		{
			name: "a bad env value leaves the file's value in place",
			file: "workers: x",
			env:  map[string]string{"WORKERS": "many"},
			want: "workers (env WORKERS): cannot parse \"many\": invalid syntax\n" +
				"workers: must be an integer, got string \"x\"",
		},
		{
			name: "flags win over bad env",
			env:  map[string]string{"WORKERS": "0"},
			args: []string{"--workers", "-2"},
			want: "workers (flag --workers): must be between 1 and 1000, got -2",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			file := tt.file
			if file == "" {
				file = "workers: 3"
			}
			_, err := load(t, file, tt.env, tt.args...)
			switch {
			case err == nil:
				t.Fatal("Load succeeded")
			case tt.is != nil:
				if !errors.Is(err, tt.is) {
					t.Fatalf("error = %v, want %v", err, tt.is)
				}
			case !strings.Contains(err.Error(), tt.want):
				t.Fatalf("error:\n%v\nwant it to contain:\n%s", err, tt.want)
			}
		})
	}
}

func TestLoadNamesTheFileInErrors(t *testing.T) {
	path := writeFile(t, "workers: 0")
	_, err := Load(newFlagSet(), []string{"--config", path}, func(string) (string, bool) { return "", false })
	if want := "loading config from " + path + ": workers: must be between 1 and 1000, got 0"; err == nil || err.Error() != want {
		t.Fatalf("error = %v, want %q", err, want)
	}
}

// Passing every flag's shown default must change nothing, or --help lies.
func TestFlagDefaultsAreTheDefaults(t *testing.T) {
	base, err := load(t, "{}", nil)
	if err != nil {
		t.Fatal(err)
	}
	newFlagSet().VisitAll(func(f *pflag.Flag) {
		switch f.Name {
		case "version", "config", "kubeconfig", "leader-election-identity":
			return
		}
		if f.DefValue == "" && f.Value.Type() != "string" {
			t.Errorf("--%s shows no default", f.Name)
		}
		t.Run(f.Name, func(t *testing.T) {
			c, err := load(t, "{}", nil, "--"+f.Name+"="+f.DefValue)
			if err != nil {
				t.Fatal(err)
			}
			c.Settings.ConfigFile = base.Settings.ConfigFile
			if !reflect.DeepEqual(c.Settings, base.Settings) {
				t.Errorf("--%s=%s changed settings:\n%+v\n%+v", f.Name, f.DefValue, c.Settings, base.Settings)
			}
		})
	})
	if got := newFlagSet().Lookup("config").DefValue; got != "/etc/restart-controller/config.yaml" {
		t.Errorf("--config default %q", got)
	}
}
