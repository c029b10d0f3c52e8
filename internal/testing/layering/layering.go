// Package layering holds the test that keeps imports going down the
// layers docs/development.md lists. It has no code of its own.
package layering
