package config

import (
	"reflect"
	"strings"
	"testing"
)

func TestNotificationErrors(t *testing.T) {
	_, err := Parse([]byte(`
notifications:
  sinks:
    - {name: chat, type: slack, urlSecret: {name: notify, key: slack}}
    - {name: chat, type: msteams, urlSecret: {name: Not_A_Name}, send: [restart, reload, restart]}
    - {type: webhook, urlSecret: {key: "a/b"}, ratePerSecond: -1, burst: 5000, queueSize: 100000, colour: red}
`))
	if err == nil {
		t.Fatal("Parse succeeded")
	}
	want := []string{
		`notifications.sinks[1].name: duplicate sink "chat" (also notifications.sinks[0])`,
		`notifications.sinks[1].send[1]: must be one of restart, hold, rolloutFailed, rolloutRecovered, got "reload"`,
		`notifications.sinks[1].send[2]: duplicate "restart"`,
		`notifications.sinks[1].type: must be one of slack, teams, googleChat, webhook, got "msteams"`,
		`notifications.sinks[1].urlSecret.key: required`,
		`notifications.sinks[1].urlSecret.name: invalid "Not_A_Name": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')`,
		`notifications.sinks[2].burst: must be between 1 and 1000, got 5000`,
		`notifications.sinks[2].colour: unknown field`,
		`notifications.sinks[2].name: required`,
		`notifications.sinks[2].queueSize: must be between 1 and 10000, got 100000`,
		`notifications.sinks[2].ratePerSecond: must be more than 0 and at most 100, got -1`,
		`notifications.sinks[2].urlSecret.key: invalid "a/b": a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')`,
		`notifications.sinks[2].urlSecret.name: required`,
	}
	if got := errorLines(t, err); !reflect.DeepEqual(got, want) {
		t.Errorf("errors:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// A sink's defaults are filled in (access.Needs asks to read its URL's
// Secret: internal/access tests it).
func TestNotificationSinks(t *testing.T) {
	c, err := Parse([]byte(`
notifications:
  sinks:
    - {name: chat, type: slack, urlSecret: {name: notify, key: slack}, send: [hold]}
    - {name: audit, type: webhook, urlSecret: {name: notify, key: audit}, ratePerSecond: 0.5, burst: 2, queueSize: 10}
`))
	if err != nil {
		t.Fatal(err)
	}
	want := []Sink{
		{Name: "chat", Type: "slack", URLSecret: FileSecretKey{Name: "notify", Key: "slack"}, Send: []string{"hold"}, RatePerSecond: 1, Burst: 5, QueueSize: 100},
		{Name: "audit", Type: "webhook", URLSecret: FileSecretKey{Name: "notify", Key: "audit"}, Send: NotificationKinds(), RatePerSecond: 0.5, Burst: 2, QueueSize: 10},
	}
	if !reflect.DeepEqual(c.Sinks, want) {
		t.Errorf("sinks:\n%+v\nwant\n%+v", c.Sinks, want)
	}
}
