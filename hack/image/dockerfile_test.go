package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// dockerStage is what a Dockerfile's stage declares, parsed simply: one
// instruction per logical line (after joining '\' continuations).
type dockerStage struct {
	from       string
	args       map[string]string // ARG name -> default
	labels     map[string]string // raw, before ${ARG} substitution
	user       string
	expose     []string
	entrypoint []string
	runs       []string
	copies     []string // destinations of COPY
}

func parseDockerfile(t *testing.T, path string) []*dockerStage {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var stages []*dockerStage
	var logical []string
	var cur strings.Builder
	for _, line := range strings.Split(string(raw), "\n") {
		trimmed := strings.TrimSpace(line)
		if strings.HasPrefix(trimmed, "#") {
			continue
		}
		if strings.HasSuffix(trimmed, `\`) {
			cur.WriteString(strings.TrimSuffix(trimmed, `\`) + " ")
			continue
		}
		cur.WriteString(trimmed)
		if s := strings.TrimSpace(cur.String()); s != "" {
			logical = append(logical, s)
		}
		cur.Reset()
	}
	for _, l := range logical {
		instr, rest, _ := strings.Cut(l, " ")
		rest = strings.TrimSpace(rest)
		instr = strings.ToUpper(instr)
		if instr == "FROM" {
			stages = append(stages, &dockerStage{from: rest, args: map[string]string{}, labels: map[string]string{}})
			continue
		}
		if len(stages) == 0 {
			t.Fatalf("%s: %s before any FROM", path, instr)
		}
		s := stages[len(stages)-1]
		switch instr {
		case "ARG":
			k, v, _ := strings.Cut(rest, "=")
			s.args[k] = v
		case "LABEL":
			for _, kv := range splitWords(t, rest) {
				k, v, ok := strings.Cut(kv, "=")
				if !ok {
					t.Fatalf("LABEL %q: not key=value", kv)
				}
				s.labels[k] = v
			}
		case "USER":
			s.user = rest
		case "EXPOSE":
			s.expose = append(s.expose, strings.Fields(rest)...)
		case "ENTRYPOINT":
			if err := json.Unmarshal([]byte(rest), &s.entrypoint); err != nil {
				t.Fatalf("ENTRYPOINT %s: want the JSON (exec) form: %v", rest, err)
			}
		case "RUN":
			s.runs = append(s.runs, rest)
		case "COPY":
			if words := strings.Fields(rest); len(words) >= 2 {
				s.copies = append(s.copies, words[len(words)-1])
			}
		}
	}
	return stages
}

// splitWords splits on spaces outside double quotes and removes the quotes.
func splitWords(t *testing.T, s string) []string {
	var words []string
	var w strings.Builder
	quoted, in := false, false
	for _, r := range s {
		switch {
		case r == '"':
			quoted, in = !quoted, true
		case r == ' ' && !quoted:
			if in {
				words = append(words, w.String())
				w.Reset()
				in = false
			}
		default:
			w.WriteRune(r)
			in = true
		}
	}
	if quoted {
		t.Fatalf("unbalanced quotes in %q", s)
	}
	if in {
		words = append(words, w.String())
	}
	return words
}

var argRef = regexp.MustCompile(`\$\{?([A-Za-z_][A-Za-z0-9_]*)\}?`)

// TestDockerfileAgrees checks the Dockerfile describes the image hack/image
// builds: the same user, entrypoint, exposed port and labels (with the build
// arguments set to the values the image was built with), and the same build flags.
func TestDockerfileAgrees(t *testing.T) {
	stages := parseDockerfile(t, filepath.Join(built.opts.Root, "Dockerfile"))
	if len(stages) < 2 {
		t.Fatalf("Dockerfile has %d stages, want a build stage and a final one", len(stages))
	}
	final := stages[len(stages)-1]
	// Every base is pinned by digest; the tag stays for the reader.
	for _, st := range stages {
		if !regexp.MustCompile(`@sha256:[0-9a-f]{64}( AS \w+)?$`).MatchString(st.from) {
			t.Errorf("FROM %q is not pinned by digest", st.from)
		}
	}
	if tag, _, _ := strings.Cut(final.from, "@"); !strings.Contains(tag, "distroless/static") || !strings.HasSuffix(tag, ":nonroot") {
		t.Errorf("final FROM %q, want distroless/static...:nonroot, the base this image reproduces", final.from)
	}
	cf, err := openLayout(t).ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	c := cf.Config

	if final.user != c.User {
		t.Errorf("Dockerfile USER %q, image user %q", final.user, c.User)
	}
	if !slices.Equal(final.entrypoint, c.Entrypoint) {
		t.Errorf("Dockerfile ENTRYPOINT %q, image entrypoint %q", final.entrypoint, c.Entrypoint)
	}
	var ports []string
	for _, p := range final.expose {
		if !strings.Contains(p, "/") {
			p += "/tcp"
		}
		ports = append(ports, p)
	}
	var imagePorts []string
	for p := range c.ExposedPorts {
		imagePorts = append(imagePorts, p)
	}
	slices.Sort(ports)
	slices.Sort(imagePorts)
	if !slices.Equal(ports, imagePorts) {
		t.Errorf("Dockerfile EXPOSE %q, image exposed ports %q", ports, imagePorts)
	}

	buildArgs := map[string]string{"VERSION": built.opts.Version, "REVISION": built.opts.Revision}
	labels := map[string]string{}
	for k, v := range final.labels {
		labels[k] = argRef.ReplaceAllStringFunc(v, func(ref string) string {
			name := argRef.FindStringSubmatch(ref)[1]
			if _, declared := final.args[name]; !declared {
				t.Errorf("LABEL %s uses %s, not an ARG of the final stage", k, ref)
			}
			val, ok := buildArgs[name]
			if !ok {
				t.Errorf("LABEL %s uses build argument %s, which hack/image does not set", k, name)
			}
			return val
		})
	}
	for k, v := range c.Labels {
		if got, ok := labels[k]; !ok {
			t.Errorf("image label %s=%q is missing from the Dockerfile", k, v)
		} else if got != v {
			t.Errorf("label %s: Dockerfile %q, image %q", k, got, v)
		}
	}
	for k := range labels {
		if _, ok := c.Labels[k]; !ok {
			t.Errorf("Dockerfile label %s is missing from the image", k)
		}
	}

	// The binaries are built the same way (see BuildBinary), both of them.
	build := strings.Join(stages[0].runs, "\n")
	for _, want := range []string{"CGO_ENABLED=0 go build -trimpath", `-ldflags "-s -w -X main.version=${VERSION}"`,
		ControllerPackage, PluginPackage} {
		if !strings.Contains(build, want) {
			t.Errorf("the Dockerfile's build stage does not run %s", want)
		}
	}
	// And the final stage ships the same files as the image's binary layer.
	files := extract(t, openLayout(t))
	for _, p := range []string{BinaryPath, PluginPath} {
		if _, ok := files[strings.TrimPrefix(p, "/")]; !ok {
			t.Errorf("the image has no %s", p)
		}
		if !slices.Contains(final.copies, p) {
			t.Errorf("the Dockerfile's final stage does not COPY %s (it copies %q)", p, final.copies)
		}
	}
	if len(final.copies) != 2 {
		t.Errorf("the Dockerfile's final stage copies %q, want exactly %s and %s", final.copies, BinaryPath, PluginPath)
	}
}
