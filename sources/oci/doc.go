// Package oci serves Flux's OCIRepository: an OCI artifact's layer, pulled
// from a registry by tag, semver range or digest, optionally checked
// against cosign public keys, stored as an artifact Kustomizations build
// from. docs/sources.md says what is served and what is refused.
package oci
