package graph

import (
	"reflect"
	"testing"
)

func key(n string) Key { return Key{Namespace: "flux-system", Name: n} }

func TestCycleThroughNamesOnlyMembers(t *testing.T) {
	g := Graph{
		key("a"): {key("b")},
		key("b"): {key("c")},
		key("c"): {key("a")},
		key("d"): {key("a")},
		key("e"): nil,
	}
	if got := FormatCycle(g.CycleThrough(key("a"))); got != "a -> b -> c -> a" {
		t.Errorf("cycle through a = %q", got)
	}
	if got := g.CycleThrough(key("d")); got != nil {
		t.Errorf("d only depends on a cycle, got %v", got)
	}
	if got := g.CycleThrough(key("e")); got != nil {
		t.Errorf("e has no dependencies, got %v", got)
	}
	self := Graph{key("s"): {key("s")}}
	if got := FormatCycle(self.CycleThrough(key("s"))); got != "s -> s" {
		t.Errorf("self cycle = %q", got)
	}
}

func TestWavesOrderChainAndBlockBadOnes(t *testing.T) {
	g := Graph{
		key("crds"):        nil,
		key("controllers"): {key("crds")},
		key("storage"):     {key("controllers")},
		key("apps"):        {key("storage"), key("crds")},
		key("x"):           {key("y")},
		key("y"):           {key("x")},
		key("after-x"):     {key("x")},
		key("orphan"):      {key("nope")},
	}
	waves, blocked := g.Waves()
	want := [][]Key{{key("crds")}, {key("controllers")}, {key("storage")}, {key("apps")}}
	if !reflect.DeepEqual(waves, want) {
		t.Errorf("waves = %v, want %v", waves, want)
	}
	for k, reason := range map[Key]string{
		key("x"):       "dependency cycle: x -> y -> x",
		key("y"):       "dependency cycle: y -> x -> y",
		key("orphan"):  "dependency 'flux-system/nope' not found",
		key("after-x"): "waits for 'flux-system/x', which cannot be applied",
	} {
		if blocked[k] != reason {
			t.Errorf("blocked[%s] = %q, want %q", k.Name, blocked[k], reason)
		}
	}
}
