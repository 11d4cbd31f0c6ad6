package refs

import (
	"reflect"
	"testing"

	"sigs.k8s.io/yaml"
)

// The driver's status object as it creates it: the SecretProviderClass's
// name, and one item per object mounted.
const spcps = `
metadata: {name: web-0-ns-vault, namespace: ns}
status:
  podName: web-0
  secretProviderClassName: vault
  mounted: true
  objects:
  - {id: "secret/db", version: "3"}
  - {id: "secret/api", version: 7}
  - {id: "", version: "1"}
  - {version: "1"}
  - {id: "secret/noversion"}
  - "not an item"
`

func TestMembersExtract(t *testing.T) {
	m, err := CompileMembers("status.secretProviderClassName", "status.objects[*]", "id", "version")
	if err != nil {
		t.Fatal(err)
	}
	var obj map[string]interface{}
	if err := yaml.Unmarshal([]byte(spcps), &obj); err != nil {
		t.Fatal(err)
	}
	if name, ok := m.Name(obj); !ok || name != "vault" {
		t.Errorf("Name = %q, %v", name, ok)
	}
	got := map[string]interface{}{}
	m.Items(obj, func(k string, v interface{}) { got[k] = v })
	want := map[string]interface{}{"secret/db": "3", "secret/api": float64(7)}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Items = %v, want %v", got, want)
	}
	delete(obj["status"].(map[string]interface{}), "secretProviderClassName")
	if _, ok := m.Name(obj); ok {
		t.Error("an object without a name is a member")
	}
}
