package decrypt

import (
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/getsops/sops/v3"
)

// Plaintexts are the values decryption revealed, kept for a caller that
// prints what it rendered (strata plan) and must mask them wherever they
// went: a ConfigMap, a values file, a substituted variable.
type Plaintexts struct {
	mu     sync.Mutex
	values map[string]struct{}
}

// Values are the revealed values, longest first.
func (p *Plaintexts) Values() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]string, 0, len(p.values))
	for v := range p.values {
		out = append(out, v)
	}
	slices.SortFunc(out, func(a, b string) int { return len(b) - len(a) })
	return out
}

func (p *Plaintexts) add(values []string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.values == nil {
		p.values = map[string]struct{}{}
	}
	for _, v := range values {
		if v != "" {
			p.values[v] = struct{}{}
		}
	}
}

// Recording is a Decrypter with d's keys that keeps every value it
// decrypts in the Plaintexts it returns.
func (d *Decrypter) Recording() (*Decrypter, *Plaintexts) {
	p := &Plaintexts{}
	r := *d
	r.revealed = p
	return &r, p
}

// encryptedLeaves are the positions, in walk order, of the leaves SOPS
// encrypted: their values are SOPS's ENC[...] envelopes. A file's
// unencrypted_suffix leaves, its comments and its keys are not secret.
func encryptedLeaves(branches sops.TreeBranches) map[int]bool {
	at := map[int]bool{}
	i := 0
	walkLeaves(branches, func(v any) {
		if s, ok := v.(string); ok && strings.HasPrefix(s, "ENC[") {
			at[i] = true
		}
		i++
	})
	return at
}

// plaintextsAt are the decrypted tree's values at the positions that
// were encrypted: decryption keeps the tree's shape.
func plaintextsAt(branches sops.TreeBranches, at map[int]bool) []string {
	var out []string
	i := 0
	walkLeaves(branches, func(v any) {
		if at[i] {
			out = append(out, fmt.Sprint(v))
		}
		i++
	})
	return out
}

func walkLeaves(branches sops.TreeBranches, leaf func(any)) {
	for _, b := range branches {
		walkValue(b, leaf)
	}
}

func walkValue(v any, leaf func(any)) {
	switch t := v.(type) {
	case sops.TreeBranch:
		for _, item := range t {
			if _, comment := item.Key.(sops.Comment); comment {
				continue
			}
			walkValue(item.Value, leaf)
		}
	case []any:
		for _, e := range t {
			if _, comment := e.(sops.Comment); comment {
				continue
			}
			walkValue(e, leaf)
		}
	default:
		leaf(v)
	}
}
