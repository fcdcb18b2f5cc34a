// Package config carries into the nodepool binary the manifests it installs
// itself: the CRDs of nodepool and of the sim provider, which
// `nodepool dev up` creates, so the binary needs no checkout. They are the
// files of this folder that `make generate` writes, not copies.
package config

import "embed"

// CRDs holds crd/bases/*.yaml (nodepool) and sim/crd/bases/*.yaml (the sim
// provider).
//
//go:embed crd/bases/*.yaml sim/crd/bases/*.yaml
var CRDs embed.FS

// CRDDirs are the folders of CRDs in CRDs.
var CRDDirs = []string{"crd/bases", "sim/crd/bases"}

// Policies holds the ValidatingAdmissionPolicies (and their bindings) a
// release installs, as it installs them: `nodepool dev up` applies the
// same files, with the identities they name (production's ServiceAccounts).
//
//go:embed rbac/admission_policy.yaml rbac/machinedeployment_policy.yaml payload-server/base/admission_policy.yaml
var Policies embed.FS

// PolicyFiles are the files of Policies.
var PolicyFiles = []string{"rbac/admission_policy.yaml", "rbac/machinedeployment_policy.yaml", "payload-server/base/admission_policy.yaml"}
