package restart

import (
	"encoding/json"
	"os"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/restart-controller/restart-controller/internal/catalog"
	"github.com/restart-controller/restart-controller/internal/checksum"
	"github.com/restart-controller/restart-controller/internal/config"
)

const examplePath = "../../examples/config.yaml"

// Annotation keys of the example source, spelled out so that a silent change
// of the defaults shows up here.
const (
	optInKey        = "com.xing.deployment-restart"
	appliedKey      = "com.xing.deployment-restart.applied-config-checksums"
	templateHashKey = "com.xing.deployment-restart.applied-template-hash"
	timestampKey    = "com.xing.deployment-restart.timestamp"
	rolloutKey      = "com.xing.deployment-restart.rollout"
	holdKey         = "com.xing.deployment-restart.hold"
	releaseKey      = "com.xing.deployment-restart.release"
	ignoreKey       = "com.xing.deployment-restart.ignore"
	ignoreSrcKey    = "com.xing.deployment-restart.ignore-sources"
)

func exampleConfig(t testing.TB) *config.Config {
	t.Helper()
	data, err := os.ReadFile(examplePath)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Parse(data)
	if err != nil {
		t.Fatalf("examples/config.yaml: %v", err)
	}
	want := config.Annotations{OptIn: optInKey, AppliedChecksums: appliedKey, RestartTimestamp: timestampKey, AppliedTemplateHash: templateHashKey,
		Rollout: rolloutKey, Hold: holdKey, Release: releaseKey, Ignore: ignoreKey, IgnoreSources: ignoreSrcKey}
	if cfg.Annotations != want {
		t.Fatalf("example annotations %+v, want %+v", cfg.Annotations, want)
	}
	return cfg
}

func fromYAML(t testing.TB, s string) *unstructured.Unstructured {
	t.Helper()
	j, err := yaml.YAMLToJSON([]byte(s))
	if err != nil {
		t.Fatalf("fixture: %v", err)
	}
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(j); err != nil {
		t.Fatalf("fixture: %v", err)
	}
	return u
}

// sourceState reduces a source object holding data, as the informer does.
func sourceState(t testing.TB, id catalog.SourceID, data map[string]string) *catalog.SourceState {
	t.Helper()
	return sourceStateIn(t, id, data, nil)
}

// at returns a copy of a source state at the given resourceVersion.
func at(s *catalog.SourceState, rv string) *catalog.SourceState {
	out := s.DeepCopyObject().(*catalog.SourceState)
	out.ResourceVersion = rv
	return out
}

// v1 is a state's checksum in the format of version 1 (before issue 8).
func v1(s *catalog.SourceState, keys []string) string {
	sum, ok := s.ChecksumOf(1, keys)
	if !ok {
		panic("version 1 unknown")
	}
	return sum
}

// sourceStateIn reduces a ConfigMap holding data and binaryData (base64 text).
func sourceStateIn(t testing.TB, id catalog.SourceID, data, binaryData map[string]string) *catalog.SourceState {
	t.Helper()
	u := &unstructured.Unstructured{Object: map[string]interface{}{}}
	u.SetAPIVersion("v1")
	u.SetKind("ConfigMap")
	u.SetNamespace(id.Namespace)
	u.SetName(id.Name)
	if err := unstructured.SetNestedStringMap(u.Object, data, "data"); err != nil {
		t.Fatal(err)
	}
	if binaryData != nil {
		if err := unstructured.SetNestedStringMap(u.Object, binaryData, "binaryData"); err != nil {
			t.Fatal(err)
		}
	}
	out, err := catalog.ReduceSource([]string{"data", "binaryData"})(u)
	if err != nil {
		t.Fatal(err)
	}
	return out.(*catalog.SourceState)
}

// annotation encodes an applied-checksums annotation.
func annotation(t testing.TB, m map[string]string) string {
	t.Helper()
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// sourceMap is a SourceLookup over a map.
type sourceMap map[catalog.SourceID]*catalog.SourceState

func (m sourceMap) Source(id catalog.SourceID) (*catalog.SourceState, bool) {
	s, ok := m[id]
	return s, ok
}

// dueAt is a WindowLookup: the end of each source's open window.
type dueAt map[catalog.SourceID]time.Time

// Updating: the windows of a dueAt hold updates; see createdOnly.
func (d dueAt) Updating(id catalog.SourceID, now time.Time) bool {
	_, open := d.Due(id, now)
	return open
}

// createdOnly holds windows opened by sources' creation alone.
type createdOnly struct{ dueAt }

func (createdOnly) Updating(catalog.SourceID, time.Time) bool { return false }

func (d dueAt) Due(id catalog.SourceID, now time.Time) (time.Time, bool) {
	due, ok := d[id]
	if !ok || !now.Before(due) {
		return time.Time{}, false
	}
	return due, true
}

// testSums keys the checksums of these tests; any 32 bytes do.
var testSums = func() checksum.Hasher {
	h, err := checksum.NewHasher([]byte("restart-controller tests' checksum key, 32+ bytes"))
	if err != nil {
		panic(err)
	}
	return h
}()

// v2 is the unkeyed version-2 checksum the release before keyed checksums
// would have recorded.
func v2(s *catalog.SourceState, keys []string) string {
	sum, _ := s.ChecksumOf(2, keys)
	return sum
}

// otherKey stands for a key that replaced the one a checksum was made with.
var otherKey = func() checksum.Hasher {
	h, err := checksum.NewHasher([]byte("another key, replaced since: 32 bytes or more"))
	if err != nil {
		panic(err)
	}
	return h
}()
