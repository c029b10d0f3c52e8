// Package app holds, in its subpackages, the composition roots: what
// `strata controller` (manager), `strata up` (up) and a node's storage
// stack (nodestack) assemble from the packages below them.
package app
