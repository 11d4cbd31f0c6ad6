package migrate

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
)

// Usage is the subcommand's help; %[1]s is how the CLI is invoked.
const Usage = `Usage:
  %[1]s migrate [--values FILE]... [--set KEY=VALUE]... [--namespace NS] [--reloader-pace] [--openshift] [-o FILE] [--strict]
  %[1]s migrate [--env NAME=VALUE]... [--reloader-pace] [--openshift] [-o FILE] [--strict] -- RELOADER-FLAGS...

Writes the restart-controller config file that gives a stakater/Reloader
installation's behaviour, from its Helm values (as "helm install" takes
them: values files, then --set) or from Reloader's own flags and
environment. Settings whose behaviour does not carry over are listed on
standard error and at the top of the file.

Flags:
  --values FILE      a Helm values file of Reloader's chart (repeatable, later ones win)
  --set KEY=VALUE    a Helm --set value, e.g. reloader.autoReloadAll=true (repeatable)
  --namespace NS     the namespace the Helm release is installed in (watchGlobally: false watches it)
  --env NAME=VALUE   an environment variable Reloader reads, with flags after "--" (repeatable)
  --reloader-pace    restart on every change at once, as Reloader does: no grace period,
                     waves or breaker (by default the controller's pacing stays)
  --openshift        Reloader restarted OpenShift DeploymentConfigs (its releases that did
                     found OpenShift by themselves; Helm: reloader.isOpenshift=true)
  -o FILE            write the config file here instead of standard output
  --strict           exit 1 when any of Reloader's behaviour is lost

Exit status: 0 written; 1 written, but behaviour is lost and --strict was
given; 2 the input could not be read (nothing written).
`

// listFlag collects a repeatable flag.
type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ",") }
func (l *listFlag) Set(s string) error { *l = append(*l, s); return nil }

// Main runs "migrate" with its arguments and returns the exit status.
func Main(name string, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("migrate", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var valuesFiles, sets, envs listFlag
	fs.Var(&valuesFiles, "values", "")
	fs.Var(&sets, "set", "")
	fs.Var(&envs, "env", "")
	namespace := fs.String("namespace", "", "")
	output := fs.String("o", "", "")
	strict := fs.Bool("strict", false, "")
	reloaderPace := fs.Bool("reloader-pace", false, "")
	openshift := fs.Bool("openshift", false, "")
	usage := func(err error) int {
		if err != nil && !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintf(stderr, "migrate: %v\n\n", err)
		}
		fmt.Fprintf(stderr, Usage, name)
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if err := fs.Parse(args); err != nil {
		return usage(err)
	}
	// flag stops at "--" and drops it: Reloader's flags follow it.
	rest := fs.Args()
	dashdash := len(rest) < len(args) && args[len(args)-len(rest)-1] == "--"
	o, err := options(rest, valuesFiles, sets, envs, *namespace, dashdash)
	if err != nil {
		return usage(err)
	}
	o.IsOpenshift = o.IsOpenshift || *openshift
	res, err := Config(o, *reloaderPace)
	if err != nil {
		fmt.Fprintf(stderr, "migrate: %v\n", err)
		return 2
	}
	if err := write(*output, res.File, stdout); err != nil {
		fmt.Fprintf(stderr, "migrate: %v\n", err)
		return 2
	}
	for _, f := range res.Findings {
		kind := "differs"
		if f.Lost {
			kind = "lost"
		}
		fmt.Fprintf(stderr, "%s: %s\n", kind, f)
	}
	if *strict && res.Lost() {
		return 1
	}
	return 0
}

// options reads Options from whichever form was given: Reloader's flags
// after "--", or Helm values.
func options(rest, valuesFiles, sets, envs []string, namespace string, dashdash bool) (Options, error) {
	if len(rest) > 0 && !dashdash {
		return Options{}, fmt.Errorf("unexpected argument %q (Reloader's flags go after \"--\")", rest[0])
	}
	if dashdash {
		if len(valuesFiles)+len(sets) > 0 {
			return Options{}, errors.New("give Helm values or Reloader's flags, not both")
		}
		env := map[string]string{}
		for _, e := range envs {
			k, v, ok := strings.Cut(e, "=")
			if !ok {
				return Options{}, fmt.Errorf("--env %q: want NAME=VALUE", k)
			}
			env[k] = v
		}
		return FromFlags(rest, func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	}
	if len(envs) > 0 {
		return Options{}, errors.New("--env goes with Reloader's flags (after \"--\"); Helm values set the environment themselves")
	}
	v := Values{}
	for _, f := range valuesFiles {
		data, err := os.ReadFile(f)
		if err != nil {
			return Options{}, fmt.Errorf("reading values: %w", err)
		}
		if err := v.ReadValues(data); err != nil {
			return Options{}, fmt.Errorf("%s: %w", f, err)
		}
	}
	for _, s := range sets {
		if err := v.Set(s); err != nil {
			return Options{}, err
		}
	}
	if namespace == "" && v.get("reloader.watchGlobally") != nil && !v.isTrue("reloader.watchGlobally") {
		return Options{}, errors.New("reloader.watchGlobally is false: --namespace must name the release's namespace")
	}
	return FromHelmValues(v, namespace)
}

func write(path string, data []byte, stdout io.Writer) error {
	if path == "" {
		_, err := stdout.Write(data)
		return err
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		return fmt.Errorf("writing the config file: %w", err)
	}
	return nil
}
