package config

import (
	"reflect"
	"strings"
	"testing"
)

// tagOf returns the name in the json tag of the field of the struct at
// base that ptr points to, or "" when ptr points to none of its fields.
func tagOf(base reflect.Value, ptr any) string {
	p := reflect.ValueOf(ptr).Pointer()
	for i := 0; i < base.NumField(); i++ {
		if base.Field(i).Addr().Pointer() == p && base.Field(i).Type() == reflect.TypeOf(ptr).Elem() {
			name, _, _ := strings.Cut(base.Type().Field(i).Tag.Get("json"), ",")
			return name
		}
	}
	return ""
}

// TestSchemaMatchesTypes: the schema has one entry per field of Resource
// (but kind) and of Override, in the order Resource declares them, each
// keyed as its struct field's json tag.
func TestSchemaMatchesTypes(t *testing.T) {
	var r Resource
	rv := reflect.ValueOf(&r).Elem()
	var want []string
	for i := 0; i < rv.NumField(); i++ {
		name, _, _ := strings.Cut(rv.Type().Field(i).Tag.Get("json"), ",")
		want = append(want, name)
	}
	if !reflect.DeepEqual(resourceKeys, want) {
		t.Errorf("resourceKeys = %v,\nthe fields of Resource are %v", resourceKeys, want)
	}
	var o Override
	ov := reflect.ValueOf(&o).Elem()
	held := map[string]bool{}
	for _, f := range schema {
		if got := tagOf(rv, f.v.addr(&r)); got != f.key {
			t.Errorf("entry %q reaches the Resource field tagged %q", f.key, got)
		}
		if f.v.overridable() {
			held[f.key] = true
			if got := tagOf(ov, f.v.overrideAddr(&o)); got != f.key {
				t.Errorf("entry %q reaches the Override field tagged %q", f.key, got)
			}
		}
		if f.strategies != nil && !f.belongs(KindPacer) {
			t.Errorf("entry %q names strategies but is no field of kind pacer", f.key)
		}
	}
	for i := 0; i < ov.NumField(); i++ {
		name, _, _ := strings.Cut(ov.Type().Field(i).Tag.Get("json"), ",")
		if !held[name] {
			t.Errorf("Override field %s (%q) has no entry that overrides hold", ov.Type().Field(i).Name, name)
		}
	}
}

// TestSchemaDerived pins the lists the messages are built from.
func TestSchemaDerived(t *testing.T) {
	for _, tt := range []struct {
		name      string
		got, want any
	}{
		{name: "overrideKeys", got: overrideKeys, want: []string{"tiers", "hard_limit", "burst", "count", "period", "domain_limit"}},
		{name: "overrideFields", got: overrideFields, want: map[Kind][]string{
			KindTiers: {"tiers", "hard_limit"}, KindGCRA: {"burst", "count", "period"}, KindCopies: {"domain_limit"}}},
		{name: "overrideKinds", got: overrideKinds, want: []Kind{KindTiers, KindGCRA, KindCopies}},
	} {
		if !reflect.DeepEqual(tt.got, tt.want) {
			t.Errorf("%s = %v, want %v", tt.name, tt.got, tt.want)
		}
	}
}
