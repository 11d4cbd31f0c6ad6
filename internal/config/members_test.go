package config

import (
	"reflect"
	"strings"
	"testing"
)

// csiSources are the default source kinds and the CSI driver's
// SecretProviderClassPodStatuses, as examples/config.yaml shows them.
const csiSources = `
sources:
- {name: configmap, version: v1, resource: configmaps, dataFields: [data, binaryData]}
- {name: secret, version: v1, resource: secrets, dataFields: [data]}
- name: secretproviderclasspodstatus
  group: secrets-store.csi.x-k8s.io
  version: v1
  resource: secretproviderclasspodstatuses
  lifecycle: updatesOnly
  nameFrom: status.secretProviderClassName
  items: {path: "status.objects[*]", key: id, value: version}
references:
- {source: configmap, from: ["volumes[*].configMap"], name: name}
- {source: secretproviderclasspodstatus, from: ["volumes[*].csi"], name: volumeAttributes.secretProviderClass}
`

func TestUpdatesOnlySourceParses(t *testing.T) {
	c, err := Parse([]byte(csiSources))
	if err != nil {
		t.Fatal(err)
	}
	k := c.Sources[2]
	if k.Members == nil || k.Members.NameFrom() != "status.secretProviderClassName" || k.DataFields != nil {
		t.Fatalf("source kind %+v", k)
	}
	if c.Sources[0].Members != nil {
		t.Error("a ConfigMap kind has members")
	}
	if got := c.SourceLifecycle.UpdatesOnly; !reflect.DeepEqual(got, []string{"secretproviderclasspodstatus"}) {
		t.Errorf("UpdatesOnly = %v", got)
	}
	if !c.SourceLifecycle.Unknown("secretproviderclasspodstatus") || c.SourceLifecycle.Unknown("configmap") {
		t.Error("Unknown: only the updatesOnly kind's absent sources are unknown")
	}
}

func TestUpdatesOnlySourceErrors(t *testing.T) {
	tests := []struct {
		name string
		file string
		want []string
	}{
		{
			name: "updatesOnly without its paths",
			file: `
sources:
- {name: configmap, version: v1, resource: configmaps, dataFields: [data]}
- {name: secret, version: v1, resource: secrets, dataFields: [data]}
- {name: spc, group: x.io, version: v1, resource: spcs, lifecycle: updatesOnly, dataFields: [data]}`,
			want: []string{
				`sources[2].dataFields: must be left out with lifecycle: updatesOnly, whose data are its items`,
				`sources[2].items.key: required`,
				`sources[2].items.path: required`,
				`sources[2].items.value: required`,
				`sources[2].nameFrom: required`,
			},
		},
		{
			name: "bad paths",
			file: `
sources:
- {name: configmap, version: v1, resource: configmaps, dataFields: [data]}
- {name: secret, version: v1, resource: secrets, dataFields: [data]}
- name: spc
  group: x.io
  version: v1
  resource: spcs
  lifecycle: updatesOnly
  nameFrom: "status.names[*]"
  items: {path: "status.objects[0]", key: "id[*]", value: "a..b", extra: x}`,
			want: []string{
				`sources[2].items.extra: unknown field`,
				`sources[2].items.key: must not contain [*]: it reads one value`,
				`sources[2].items.path: unexpected character '[' at offset 14: only [*] is supported`,
				`sources[2].items.value: empty segment at offset 2`,
				`sources[2].nameFrom: must not contain [*]: it reads one value`,
			},
		},
		{
			name: "paths of updatesOnly on another kind, unknown lifecycle",
			file: `
sources:
- {name: configmap, version: v1, resource: configmaps, dataFields: [data], nameFrom: status.name, items: {path: x}}
- {name: secret, version: v1, resource: secrets, dataFields: [data], lifecycle: membersOnly}`,
			want: []string{
				`sources[0].items: only with lifecycle: updatesOnly; a kind's data are its dataFields otherwise`,
				`sources[0].nameFrom: only with lifecycle: updatesOnly`,
				`sources[1].lifecycle: must be empty or "updatesOnly", got "membersOnly"`,
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Parse([]byte(tt.file))
			if err == nil {
				t.Fatalf("Parse succeeded: %+v", c)
			}
			if got := errorLines(t, err); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("errors:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tt.want, "\n"))
			}
		})
	}
}
