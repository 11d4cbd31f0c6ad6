package main

import (
	"strings"
	"testing"
)

func TestScenarioTableIsValid(t *testing.T) {
	o := testOptions()
	names := map[string]bool{}
	for _, s := range scenarios(o) {
		if names[s.name] {
			t.Errorf("scenario %s appears twice", s.name)
		}
		names[s.name] = true
		if err := s.validate(o); err != nil {
			t.Errorf("scenario %s: %v", s.name, err)
		}
	}
	for _, want := range []string{"default", "keybomb", "2.5k", "10k", "50k", "fleet"} {
		if !names[want] {
			t.Errorf("no scenario %s", want)
		}
	}
	// The comparison: the default run measures the controller
	// beside the zero-logic patcher, the 10k one beside the floor too.
	def, big := scenarioNamed(o, "default"), scenarioNamed(o, "10k")
	if def.targets.patcherP99 != 1.3 || big.targets.floorPeakRSS != 1.2 || big.targets.floorCPUReady != 1.3 {
		t.Errorf("targets: default patcher %v, 10k floor RSS %v and CPU %v; want 1.3, 1.2, 1.3",
			def.targets.patcherP99, big.targets.floorPeakRSS, big.targets.floorCPUReady)
	}
}

func TestScenarioValidationNamesWhatIsWrong(t *testing.T) {
	o := testOptions()
	tests := []struct {
		name   string
		change func(s *scenario, o *options)
		want   string
	}{
		{"no controller", func(s *scenario, _ *options) { s.programs = []string{progFloor, progPatcher} }, "lack the controller"},
		{"unknown program", func(s *scenario, _ *options) { s.programs = append(s.programs, "reloader") }, `unknown program "reloader"`},
		{"target without its reference", func(s *scenario, _ *options) { s.programs = []string{progController, progFloor} }, "compares with a program it does not run"},
		{"too many changes", func(s *scenario, _ *options) { s.changes = []int{9} }, "9 changes is not in 1..8"},
		{"no changes", func(s *scenario, _ *options) { s.changes = []int{0} }, "0 changes is not in 1..8"},
		{"bad scale", func(s *scenario, _ *options) { s.scales = []int{1, 0} }, "scale 0 is not positive"},
		{"too many singles", func(_ *scenario, o *options) { o.singles = 3 }, "--singles 3 needs 6 workloads, it has 4"},
		{"no scales", func(s *scenario, _ *options) { s.scales = nil }, "needs objects, scales and changes"},
		{"no name", func(s *scenario, _ *options) { s.name = "" }, "without a name"},
		{"controller twice", func(s *scenario, _ *options) { s.programs = append(s.programs, progController) }, "run the controller 2 times"},
		{"pairs without the patcher", func(s *scenario, _ *options) {
			s.programs, s.targets.patcherP99 = []string{progFloor, progController}, 0
		}, "no patcher to pair the controller with"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o := o
			s := *scenarioNamed(o, "default")
			tc.change(&s, &o)
			err := s.validate(o)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("validate = %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

func TestSelectScenariosKeepsOrderAndRejectsUnknown(t *testing.T) {
	o := testOptions()
	got, err := selectScenarios(o, []string{"10k", "default"})
	if err != nil || len(got) != 2 || got[0].name != "10k" || got[1].name != "default" {
		t.Fatalf("selectScenarios = %v, %v", got, err)
	}
	if _, err := selectScenarios(o, []string{"default", "bogus"}); err == nil || !strings.Contains(err.Error(), `unknown scenario "bogus"`) {
		t.Errorf("unknown scenario: err = %v", err)
	}
	o.changes = []int{200}
	if _, err := selectScenarios(o, []string{"default"}); err == nil {
		t.Errorf("200 changes over 4 Deployments: want an error")
	}
}

func TestObjectSetsGiveEachSingleChangeAWorkloadOfItsOwn(t *testing.T) {
	o := testOptions()
	for _, name := range []string{"default", "10k", "50k"} {
		sc := scenarioNamed(o, name)
		objs := sc.objects(o, 1)
		used := map[string]bool{}
		for round := range sc.singleRounds() {
			for _, r := range objs.singles(round, o.singles) {
				if used[r.wl.key()] {
					t.Errorf("%s: %s takes two single changes", name, r.wl.key())
				}
				used[r.wl.key()] = true
			}
		}
		for _, n := range []int{1, objs.maxFanOut()} {
			seen := map[string]bool{}
			for _, r := range objs.fanOut(n) {
				if seen[r.id()] {
					t.Errorf("%s: fan-out of %d changes %s twice", name, n, r.id())
				}
				seen[r.id()] = true
			}
			if len(seen) != n {
				t.Errorf("%s: fan-out of %d has %d changes", name, n, len(seen))
			}
		}
	}
}
