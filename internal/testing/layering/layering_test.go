package layering

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/strata-gitops/strata/internal/testing/testenv"
)

const module = "github.com/strata-gitops/strata/"

// testLayer is the rank of test support: above everything.
const testLayer = 1 << 20

// layers reads the table of docs/development.md: package pattern → layer.
func layers(t *testing.T, root string) map[string]int {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(root, "docs", "development.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, table, ok := strings.Cut(string(data), "## Layers")
	if !ok {
		t.Fatal(`docs/development.md has no "## Layers" section`)
	}
	row := regexp.MustCompile(`(?m)^\| (\d+|test) \|[^|]*\| (.*) \|$`)
	pattern := regexp.MustCompile("`([^`]+)`")
	out := map[string]int{}
	for _, m := range row.FindAllStringSubmatch(table, -1) {
		layer := testLayer
		if m[1] != "test" {
			layer, _ = strconv.Atoi(m[1])
		}
		for _, p := range pattern.FindAllStringSubmatch(m[2], -1) {
			out[p[1]] = layer
		}
	}
	if len(out) == 0 {
		t.Fatal("the Layers table of docs/development.md lists no package")
	}
	return out
}

// layerOf finds pkg's layer: an exact entry first, then the longest
// pattern ending in /... that covers it.
func layerOf(pkg string, table map[string]int) (int, bool) {
	if l, ok := table[pkg]; ok {
		return l, true
	}
	best, layer := -1, 0
	for pattern, l := range table {
		prefix, ok := strings.CutSuffix(pattern, "/...")
		if ok && (pkg == prefix || strings.HasPrefix(pkg, prefix+"/")) && len(prefix) > best {
			best, layer = len(prefix), l
		}
	}
	return layer, best >= 0
}

func name(layer int) string {
	if layer == testLayer {
		return "test support"
	}
	return fmt.Sprintf("layer %d", layer)
}

// TestImportsGoDown checks every import of every package of the module
// against the table: never up a layer, and never into test support from
// outside it.
func TestImportsGoDown(t *testing.T) {
	root := testenv.RepoRoot()
	table := layers(t, root)
	cmd := exec.Command("go", "list", "-f", `{{.ImportPath}} {{join .Imports " "}}`, "./...")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		pkg := strings.TrimPrefix(fields[0], module)
		from, ok := layerOf(pkg, table)
		if !ok {
			t.Errorf("package %s is in no layer of docs/development.md: add it to the Layers table", pkg)
			continue
		}
		for _, imp := range fields[1:] {
			dep, ours := strings.CutPrefix(imp, module)
			if !ours {
				continue
			}
			to, ok := layerOf(dep, table)
			if !ok {
				continue // reported as a package of its own
			}
			switch {
			case to == testLayer && from != testLayer:
				t.Errorf("%s (%s) imports test support %s", pkg, name(from), dep)
			case to > from:
				t.Errorf("%s (%s) imports %s (%s), a higher layer", pkg, name(from), dep, name(to))
			}
		}
	}
}

// The check itself: a pattern covers what is below it, an exact entry
// wins over a pattern, and test support ranks above every layer.
func TestLayerOf(t *testing.T) {
	table := map[string]int{"storage/agent/...": 3, "storage/agent": 4, "hack/...": testLayer}
	for pkg, want := range map[string]int{"storage/agent": 4, "storage/agent/disks": 3, "hack/bench": testLayer} {
		if got, ok := layerOf(pkg, table); !ok || got != want {
			t.Errorf("layerOf(%s) = %d, %v; want %d", pkg, got, ok, want)
		}
	}
	if _, ok := layerOf("storage/agentx", table); ok {
		t.Error("storage/agentx was taken for a package below storage/agent")
	}
}

// section is the text of a "### title" section of docs/development.md.
func section(t *testing.T, root, title string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(root, "docs", "development.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, text, ok := strings.Cut(string(data), "### "+title+"\n")
	if !ok {
		t.Fatalf("docs/development.md has no %q section", "### "+title)
	}
	text, _, _ = strings.Cut(text, "\n#")
	return text
}

// rows reads a two-column table: its first column's text, and the
// package patterns of its second.
func rows(text string) map[string][]string {
	row := regexp.MustCompile("(?m)^\\| `?([^|`]+)`? \\| (.*) \\|$")
	pattern := regexp.MustCompile("`([^`]+)`")
	out := map[string][]string{}
	for _, m := range row.FindAllStringSubmatch(text, -1) {
		for _, p := range pattern.FindAllStringSubmatch(m[2], -1) {
			out[m[1]] = append(out[m[1]], p[1])
		}
	}
	return out
}

// covers says whether pattern (a package, or a folder with /...) takes pkg.
func covers(pattern, pkg string) bool {
	prefix, tree := strings.CutSuffix(pattern, "/...")
	return pkg == prefix || tree && strings.HasPrefix(pkg, prefix+"/")
}

func coveredBy(patterns []string, pkg string) bool {
	for _, p := range patterns {
		if covers(p, pkg) {
			return true
		}
	}
	return false
}

// imports lists, for every package of the module, the module's packages
// it imports, without the module's prefix.
func imports(t *testing.T, root string) map[string][]string {
	t.Helper()
	return listed(t, root, "Imports")
}

// listed lists, for every package of the module, the module's packages
// in the field of go list's package (Imports, or Deps: all it imports,
// directly or not), without the module's prefix.
func listed(t *testing.T, root, field string) map[string][]string {
	t.Helper()
	cmd := exec.Command("go", "list", "-f", `{{.ImportPath}} {{join .`+field+` " "}}`, "./...")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	all := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		pkg := strings.TrimPrefix(fields[0], module)
		all[pkg] = []string{}
		for _, imp := range fields[1:] {
			if dep, ours := strings.CutPrefix(imp, module); ours {
				all[pkg] = append(all[pkg], dep)
			}
		}
	}
	return all
}

// No package of one storage backend imports a package of another.
func TestBackendsImportNoOtherBackend(t *testing.T) {
	root := testenv.RepoRoot()
	backends := rows(section(t, root, "Backends keep to themselves"))
	delete(backends, "neutral")
	if len(backends) < 2 {
		t.Fatalf("the Backends table lists %d backends", len(backends))
	}
	for pkg, deps := range imports(t, root) {
		for name, own := range backends {
			if !coveredBy(own, pkg) {
				continue
			}
			for _, dep := range deps {
				for other, theirs := range backends {
					if other != name && coveredBy(theirs, dep) {
						t.Errorf("%s (the %s backend) imports %s, of the %s backend: share through storage/agent/contract instead", pkg, name, dep, other)
					}
				}
			}
		}
	}
}

// What both backends serve through, and the image side, reach no
// backend, directly or through another package.
func TestNeutralPackagesReachNoBackend(t *testing.T) {
	root := testenv.RepoRoot()
	text := section(t, root, "Backends keep to themselves")
	backends := rows(text)
	neutral := backends["neutral"]
	delete(backends, "neutral")
	if len(neutral) == 0 || len(backends) < 2 {
		t.Fatalf("the Backends section lists %d neutral packages and %d backends", len(neutral), len(backends))
	}
	for pkg, deps := range listed(t, root, "Deps") {
		if !coveredBy(neutral, pkg) {
			continue
		}
		for _, dep := range deps {
			for name, theirs := range backends {
				if coveredBy(theirs, dep) {
					t.Errorf("%s, which both backends share, reaches %s of the %s backend: depend on storage/agent/contract instead", pkg, dep, name)
				}
			}
		}
	}
}

// The plan, failover and buildbarn import no controller but their own.
func TestRulesNotControllers(t *testing.T) {
	root := testenv.RepoRoot()
	table := layers(t, root)
	guarded := rows(section(t, root, "Rules, not controllers"))
	if len(guarded) == 0 {
		t.Fatal("the Rules table lists no package")
	}
	// storage/csi/backend is the driver's contract with its backends and
	// its volume IDs, which every caller of a volume reads; the rest of
	// the driver serves CSI calls.
	controller := func(pkg string) bool {
		layer, _ := layerOf(pkg, table)
		return layer == 4 || covers("storage/csi/...", pkg) && pkg != "storage/csi/backend"
	}
	for pkg, deps := range imports(t, root) {
		for patterns, own := range guarded {
			if !covers(patterns, pkg) {
				continue
			}
			for _, dep := range deps {
				if controller(dep) && !coveredBy(own, dep) {
					t.Errorf("%s imports the controller %s: move the rule it needs into rules", pkg, dep)
				}
			}
		}
	}
}
