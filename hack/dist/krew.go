package main

import (
	"bytes"
	"errors"
	"fmt"
	"path"
	"regexp"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/version"
)

// The krew plugin manifest (krew.googlecontainertools.github.com/v1alpha2),
// as far as this plugin uses it. The same types read it back, strictly, so
// that a field krew does not know is an error here too.
const (
	krewAPIVersion = "krew.googlecontainertools.github.com/v1alpha2"
	krewKind       = "Plugin"
)

// Manifest is a krew plugin manifest.
type Manifest struct {
	APIVersion string   `yaml:"apiVersion"`
	Kind       string   `yaml:"kind"`
	Metadata   Metadata `yaml:"metadata"`
	Spec       Spec     `yaml:"spec"`
}

// Metadata holds the plugin's name, which krew turns into the kubectl
// command (dashes become underscores in the binary's link name).
type Metadata struct {
	Name string `yaml:"name"`
}

// Spec describes the plugin and where each platform's archive is.
type Spec struct {
	Version          string         `yaml:"version"`
	Homepage         string         `yaml:"homepage,omitempty"`
	ShortDescription string         `yaml:"shortDescription"`
	Description      string         `yaml:"description"`
	Caveats          string         `yaml:"caveats,omitempty"`
	Platforms        []PlatformSpec `yaml:"platforms"`
}

// PlatformSpec is one archive and the platforms (os, arch) it installs on.
type PlatformSpec struct {
	Selector *Selector `yaml:"selector"`
	URI      string    `yaml:"uri"`
	Sha256   string    `yaml:"sha256"`
	// Files is left out: krew then extracts the whole archive, which is
	// what its documentation recommends when the archive holds only what
	// is installed.
	Files []FileOperation `yaml:"files,omitempty"`
	Bin   string          `yaml:"bin"`
}

// Selector is a Kubernetes label selector on the labels os and arch.
type Selector struct {
	MatchLabels      map[string]string `yaml:"matchLabels,omitempty"`
	MatchExpressions []Requirement     `yaml:"matchExpressions,omitempty"`
}

// Requirement is one of a selector's matchExpressions.
type Requirement struct {
	Key      string   `yaml:"key"`
	Operator string   `yaml:"operator"`
	Values   []string `yaml:"values,omitempty"`
}

// FileOperation copies files matching From out of the archive to To.
type FileOperation struct {
	From string `yaml:"from"`
	To   string `yaml:"to"`
}

// Marshal renders the manifest as YAML, fields in krew's documented order.
func (m *Manifest) Marshal() ([]byte, error) {
	var b bytes.Buffer
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(m); err != nil {
		return nil, fmt.Errorf("encoding the krew manifest: %w", err)
	}
	if err := enc.Close(); err != nil {
		return nil, fmt.Errorf("encoding the krew manifest: %w", err)
	}
	return b.Bytes(), nil
}

// krewPlatforms are the (os, arch) pairs krew is released for, which its
// validate-krew-manifest checks selectors against: every platform entry must
// select one of them, and none may be selected by two entries.
var krewPlatforms = []Platform{
	{"windows", "386"}, {"windows", "amd64"}, {"windows", "arm64"},
	{"linux", "386"}, {"linux", "amd64"}, {"linux", "arm"}, {"linux", "arm64"}, {"linux", "ppc64le"},
	{"darwin", "386"}, {"darwin", "amd64"}, {"darwin", "arm64"},
}

var (
	safePluginName = regexp.MustCompile(`^[\w-]+$`)
	sha256Pattern  = regexp.MustCompile(`^[a-f0-9]{64}$`)
	// Windows refuses these as file names, and krew installs on Windows too.
	windowsReserved = []string{"CON", "PRN", "AUX", "NUL", "COM1", "COM2", "COM3", "COM4", "COM5",
		"COM6", "COM7", "COM8", "COM9", "LPT1", "LPT2", "LPT3", "LPT4", "LPT5", "LPT6", "LPT7", "LPT8", "LPT9"}
)

// maxShortDescription is krew-index's review guidance ("a few words", shown
// in a column of `kubectl krew search`), not a rule krew's code enforces.
const maxShortDescription = 50

// ParseManifest reads a manifest strictly (unknown fields are errors) and
// checks it against krew's rules for a manifest in file fileName: those of
// krew's own validation (internal/index/validation) and of the
// validate-krew-manifest check krew-index runs on submissions, written
// again here from their documentation and code. Every problem is reported.
func ParseManifest(fileName string, data []byte) (*Manifest, error) {
	var m Manifest
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&m); err != nil {
		return nil, fmt.Errorf("reading krew manifest %s: %w", fileName, err)
	}
	if err := m.Validate(fileName); err != nil {
		return nil, fmt.Errorf("krew manifest %s: %w", fileName, err)
	}
	return &m, nil
}

// Validate checks the manifest against krew's rules; fileName is the
// manifest's file name, which must be the plugin's name with ".yaml".
func (m *Manifest) Validate(fileName string) error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }

	if m.APIVersion != krewAPIVersion {
		bad("apiVersion is %q, krew reads %q", m.APIVersion, krewAPIVersion)
	}
	if m.Kind != krewKind {
		bad("kind is %q, want %q", m.Kind, krewKind)
	}
	base := path.Base(fileName)
	if path.Ext(base) != ".yaml" {
		bad("file name %q must end in .yaml", base)
	}
	name := m.Metadata.Name
	switch {
	case !safePluginName.MatchString(name):
		bad("metadata.name %q must match %s", name, safePluginName)
	case slices.ContainsFunc(windowsReserved, func(r string) bool { return strings.EqualFold(r, name) }):
		bad("metadata.name %q is a reserved file name on Windows", name)
	}
	if want := strings.TrimSuffix(base, ".yaml"); name != want {
		bad("metadata.name %q must be the file name without .yaml, %q", name, want)
	}

	s := m.Spec
	if s.Version == "" {
		bad("spec.version is required")
	} else if err := checkKrewVersion(s.Version); err != nil {
		bad("spec.version: %w", err)
	}
	switch {
	case s.ShortDescription == "":
		bad("spec.shortDescription is required")
	case strings.ContainsAny(s.ShortDescription, "\r\n"):
		bad("spec.shortDescription must be one line")
	case len(s.ShortDescription) > maxShortDescription:
		bad("spec.shortDescription is %d characters; krew-index asks for a few words (at most %d here)",
			len(s.ShortDescription), maxShortDescription)
	}
	if strings.TrimSpace(s.Description) == "" {
		bad("spec.description is required")
	}
	if len(s.Platforms) == 0 {
		bad("spec.platforms must name at least one platform")
	}
	for i, p := range s.Platforms {
		for _, err := range p.check() {
			bad("spec.platforms[%d]: %w", i, err)
		}
	}
	if err := checkOverlaps(s.Platforms); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// checkKrewVersion is krew's version rule: semantic versioning with a
// leading "v" (krew compares versions to offer upgrades).
func checkKrewVersion(v string) error {
	if !strings.HasPrefix(v, "v") {
		return fmt.Errorf("%q does not start with \"v\"", v)
	}
	if _, err := version.ParseSemantic(v); err != nil {
		return fmt.Errorf("%q is not a semantic version: %w", v, err)
	}
	return nil
}

func (p PlatformSpec) check() []error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if p.URI == "" {
		bad("uri is required")
	} else if !strings.HasSuffix(p.URI, ".tar.gz") && !strings.HasSuffix(p.URI, ".zip") {
		bad("uri %q must be a .tar.gz or .zip archive", p.URI)
	}
	if p.Sha256 == "" {
		bad("sha256 is required")
	} else if !sha256Pattern.MatchString(p.Sha256) {
		bad("sha256 %q must match %s", p.Sha256, sha256Pattern)
	}
	if p.Bin == "" {
		bad("bin is required")
	}
	if p.Files != nil && len(p.Files) == 0 {
		bad("files must be left out or name at least one file")
	}
	for i, f := range p.Files {
		if f.From == "" || f.To == "" {
			bad("files[%d] needs from and to", i)
		}
	}
	if err := p.Selector.check(); err != nil {
		bad("selector: %w", err)
	} else if !slices.ContainsFunc(krewPlatforms, p.Selector.Matches) {
		bad("selector %s selects none of the platforms krew runs on", p.Selector)
	}
	return errs
}

func (s *Selector) check() error {
	switch {
	case s == nil:
		return errors.New("required")
	case s.MatchLabels == nil && len(s.MatchExpressions) == 0:
		return errors.New("must not be empty")
	case s.MatchLabels != nil && len(s.MatchLabels) == 0:
		return errors.New("matchLabels is given but empty")
	case s.MatchExpressions != nil && len(s.MatchExpressions) == 0:
		return errors.New("matchExpressions is given but empty")
	}
	for k := range s.MatchLabels {
		if k != "os" && k != "arch" {
			return fmt.Errorf("key %q: krew selects on os and arch only", k)
		}
	}
	for _, r := range s.MatchExpressions {
		if r.Key != "os" && r.Key != "arch" {
			return fmt.Errorf("key %q: krew selects on os and arch only", r.Key)
		}
	}
	if _, err := metav1.LabelSelectorAsSelector(s.labelSelector()); err != nil {
		return err
	}
	return nil
}

func (s *Selector) labelSelector() *metav1.LabelSelector {
	ls := &metav1.LabelSelector{MatchLabels: s.MatchLabels}
	for _, r := range s.MatchExpressions {
		ls.MatchExpressions = append(ls.MatchExpressions, metav1.LabelSelectorRequirement{
			Key: r.Key, Operator: metav1.LabelSelectorOperator(r.Operator), Values: r.Values})
	}
	return ls
}

// Matches reports whether krew on platform p would pick this selector.
func (s *Selector) Matches(p Platform) bool {
	if s == nil {
		return false
	}
	sel, err := metav1.LabelSelectorAsSelector(s.labelSelector())
	return err == nil && sel.Matches(labels.Set{"os": p.OS, "arch": p.Arch})
}

func (s *Selector) String() string {
	if s == nil {
		return "<none>"
	}
	return metav1.FormatLabelSelector(s.labelSelector())
}

// checkOverlaps refuses a platform krew runs on that two entries select:
// krew would install whichever comes first, silently.
func checkOverlaps(platforms []PlatformSpec) error {
	var errs []error
	for _, env := range krewPlatforms {
		var at []int
		for i, p := range platforms {
			if p.Selector.Matches(env) {
				at = append(at, i)
			}
		}
		if len(at) > 1 {
			errs = append(errs, fmt.Errorf("spec.platforms %v all select %s", at, env))
		}
	}
	return errors.Join(errs...)
}
