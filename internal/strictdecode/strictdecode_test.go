package strictdecode

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
)

// upper is a value written in the file as any string, kept upper-cased.
type upper string

func (u *upper) DecodeValue(v interface{}) error {
	s, ok := v.(string)
	if !ok {
		return fmt.Errorf("must be a word, got %s", Describe(v))
	}
	*u = upper(strings.ToUpper(s))
	return nil
}

type item struct {
	Name  string  `json:"name"`
	Count int     `json:"count,omitempty"`
	Ratio float64 `json:"ratio"`
	On    bool    `json:"on"`
	Word  upper   `json:"word"`
	Skip  string  `json:"-"`
}

type doc struct {
	Items []item `json:"items"`
	Top   item   `json:"top"`
}

// Every problem is reported, under its path, and the rest is decoded.
func TestDecodeReportsEveryProblemUnderItsPath(t *testing.T) {
	tree := map[string]interface{}{
		"top": map[string]interface{}{"name": "t", "count": int64(3), "ratio": 0.5, "on": true, "word": "a"},
		"items": []interface{}{
			map[string]interface{}{"name": "x", "count": 1.5, "nmae": "typo"},
			map[string]interface{}{"name": 7, "ratio": "half", "on": "yes", "word": 1, "Skip": "no"},
			nil,
			map[string]interface{}{"count": float64(1 << 60)},
		},
		"extra": map[string]interface{}{},
	}
	var d doc
	var got []string
	Decode(tree, &d, func(path string, err error) { got = append(got, path+": "+err.Error()) })
	want := []string{
		"extra: unknown field",
		"items[0].count: must be an integer, got number 1.5",
		"items[0].nmae: unknown field",
		"items[1].Skip: unknown field",
		"items[1].name: must be a string, got number 7",
		"items[1].on: must be a boolean, got string \"yes\"",
		"items[1].ratio: must be a number, got string \"half\"",
		"items[1].word: must be a word, got number 1",
		"items[3].count: must be an integer, got number 1.152921504606847e+18",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("problems:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if wantTop := (item{Name: "t", Count: 3, Ratio: 0.5, On: true, Word: "A"}); d.Top != wantTop {
		t.Errorf("top %+v, want %+v", d.Top, wantTop)
	}
	if len(d.Items) != 4 || d.Items[0].Name != "x" || d.Items[2] != (item{}) {
		t.Errorf("items %+v", d.Items)
	}
}

func TestDecodeMismatchedContainers(t *testing.T) {
	var got []error
	var d doc
	Decode(map[string]interface{}{"items": map[string]interface{}{}, "top": []interface{}{}}, &d, func(path string, err error) {
		got = append(got, fmt.Errorf("%s: %w", path, err))
	})
	if len(got) != 2 || got[0].Error() != "items: must be a list, got a map" || got[1].Error() != "top: must be a map, got a list" {
		t.Errorf("problems %v", got)
	}
	var unknown []error
	Decode(map[string]interface{}{"nope": 1}, &d, func(_ string, err error) { unknown = append(unknown, err) })
	if len(unknown) != 1 || !errors.Is(unknown[0], ErrUnknownField) {
		t.Errorf("unknown key: %v", unknown)
	}
}
