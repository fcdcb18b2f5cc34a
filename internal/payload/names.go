package payload

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
)

// ShortHashLength is how many hex characters of a hash appear in object
// names and in the payload label of a node (label values are at most 63
// characters). 16 hex characters are 64 bits: no collision among the
// payloads of one pool in practice.
const ShortHashLength = 16

// MaxNameLength is the longest name of a Secret or custom resource.
const MaxNameLength = 253

// Short returns the fixed-length prefix of a hash used in names and labels.
func Short(hash string) string {
	if len(hash) <= ShortHashLength {
		return hash
	}
	return hash[:ShortHashLength]
}

// PayloadLabelValue is the value of the nodepool.dev/payload label of a node
// that booted the payload with this hash.
func PayloadLabelValue(payloadHash string) string { return Short(payloadHash) }

// InfrastructureTemplateName is "<pool>-<template hash>" (see TemplateHash).
func InfrastructureTemplateName(pool, templateHash string) string {
	return ObjectName(pool, "-", templateHash)
}

// ObjectName joins pool, infix and the short hash: the name of every
// object a pool owns. A pool name too long to
// fit is cut, and 8 hex characters of its own hash keep two long pool
// names with a common prefix apart; the result is at most MaxNameLength.
func ObjectName(pool, infix, hash string) string {
	suffix := infix + Short(hash)
	if len(pool)+len(suffix) <= MaxNameLength {
		return pool + suffix
	}
	sum := sha256.Sum256([]byte(pool))
	tag := "-" + hex.EncodeToString(sum[:])[:8]
	cut := strings.TrimRight(pool[:MaxNameLength-len(suffix)-len(tag)], "-.")
	return cut + tag + suffix
}
