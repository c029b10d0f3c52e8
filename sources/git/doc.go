// Package git reconciles Flux GitRepository objects: it keeps an incremental
// bare mirror of each remote, resolves the requested ref with Flux's
// precedence, and stores a content-addressed artifact per revision.
package git
