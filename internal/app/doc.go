// Package app holds, in its subpackages, the composition roots: what
// `strata controller` (manager), `strata agent` (agent, one node's agent
// and, for the CSI test environment, its node stack) and `strata up` (up)
// assemble from the packages below them.
package app
