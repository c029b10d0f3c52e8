package risk

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// docs/plan.md's table of data-protection kinds is the code's, row for
// row.
func TestTheDocsListEveryDataProtectionKind(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "..", "docs", "plan.md"))
	if err != nil {
		t.Fatal(err)
	}
	rows := regexp.MustCompile("(?m)^\\| `([^`]+)` \\| `([^`]+)` \\|([^|]*)\\|([^|]*)\\|([^|]*)\\|$").FindAllStringSubmatch(string(data), -1)
	var documented []string
	for _, r := range rows {
		documented = append(documented, fmt.Sprintf("%s/%s does=%s of=%s paused=%s", r[1], r[2], strings.TrimSpace(r[3]), strings.Trim(strings.TrimSpace(r[4]), "`"), strings.Trim(strings.TrimSpace(r[5]), "`")))
	}
	var coded []string
	for _, p := range DataProtectors {
		coded = append(coded, fmt.Sprintf("%s/%s does=%s of=%s paused=%s", p.Group, p.Kind, p.Does, p.Of, p.Paused))
	}
	if strings.Join(documented, "\n") != strings.Join(coded, "\n") {
		t.Fatalf("docs/plan.md lists\n%s\n\nthe code (DataProtectors)\n%s", strings.Join(documented, "\n"), strings.Join(coded, "\n"))
	}
}
