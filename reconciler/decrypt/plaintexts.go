package decrypt

import (
	"slices"
	"sync"
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
