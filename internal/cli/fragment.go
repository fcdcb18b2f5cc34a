package cli

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"

	igntypes "github.com/coreos/ignition/v2/config/v3_5/types"
	"github.com/vincent-petithory/dataurl"

	"nodepool.dev/nodepool/internal/inputs"
)

// fragmentLines renders an Ignition fragment as lines a person can read
// and diff: files with their decoded content, directories, links, systemd
// units and drop-ins, kernel arguments, users, and anything else as JSON.
// Secret content is redacted: every file of the pull-secret component, and
// every file only its owner may read (mode 0600 and the like); a digest of
// the content shows whether it changed.
func fragmentLines(c inputs.Component, raw []byte) []string {
	var cfg igntypes.Config
	if err := json.Unmarshal(raw, &cfg); err != nil {
		return []string{"(not an Ignition config: " + err.Error() + ")"}
	}
	var out []string
	for _, f := range cfg.Storage.Files {
		mode := 0o644
		if f.Mode != nil {
			mode = *f.Mode
		}
		out = append(out, fmt.Sprintf("file %s (mode %04o)", f.Path, mode))
		secret := c == inputs.PullSecret || mode&0o077 == 0
		out = append(out, contentLines(f.Contents, secret)...)
		for _, a := range f.Append {
			out = append(out, "  append:")
			out = append(out, contentLines(a, secret)...)
		}
	}
	for _, d := range cfg.Storage.Directories {
		out = append(out, "directory "+d.Path)
	}
	for _, l := range cfg.Storage.Links {
		target := ""
		if l.Target != nil {
			target = *l.Target
		}
		out = append(out, fmt.Sprintf("link %s -> %s", l.Path, target))
	}
	for _, u := range cfg.Systemd.Units {
		head := "unit " + u.Name
		if u.Enabled != nil {
			head += fmt.Sprintf(" (enabled: %v)", *u.Enabled)
		}
		if u.Mask != nil && *u.Mask {
			head += " (masked)"
		}
		out = append(out, head)
		if u.Contents != nil {
			out = append(out, textLines(*u.Contents)...)
		}
		for _, d := range u.Dropins {
			out = append(out, fmt.Sprintf("unit %s drop-in %s", u.Name, d.Name))
			if d.Contents != nil {
				out = append(out, textLines(*d.Contents)...)
			}
		}
	}
	for _, k := range cfg.KernelArguments.ShouldExist {
		out = append(out, "kernel argument "+string(k))
	}
	for _, k := range cfg.KernelArguments.ShouldNotExist {
		out = append(out, "kernel argument removed "+string(k))
	}
	for _, u := range cfg.Passwd.Users {
		out = append(out, "user "+u.Name)
		for _, k := range u.SSHAuthorizedKeys {
			out = append(out, "  ssh key "+string(k))
		}
	}
	rest := cfg
	rest.Storage.Files, rest.Storage.Directories, rest.Storage.Links = nil, nil, nil
	rest.Systemd.Units = nil
	rest.KernelArguments = igntypes.KernelArguments{}
	rest.Passwd.Users = nil
	rest.Ignition.Version = ""
	if b, err := json.MarshalIndent(rest, "", "  "); err == nil && !bytes.Equal(b, emptyRest) {
		out = append(out, "other settings:")
		out = append(out, textLines(string(b))...)
	}
	if len(out) == 0 {
		out = append(out, "(empty)")
	}
	return out
}

var emptyRest, _ = json.MarshalIndent(igntypes.Config{}, "", "  ")

// contentLines is a file's content, indented.
func contentLines(r igntypes.Resource, secret bool) []string {
	if r.Source == nil {
		return []string{"  (no content)"}
	}
	if !strings.HasPrefix(*r.Source, "data:") {
		return []string{"  from " + *r.Source}
	}
	du, err := dataurl.DecodeString(*r.Source)
	if err != nil {
		return []string{"  (content not decodable: " + err.Error() + ")"}
	}
	data := du.Data
	if r.Compression != nil && *r.Compression == "gzip" {
		zr, err := gzip.NewReader(bytes.NewReader(data))
		if err != nil {
			return []string{"  (gzip content not decodable: " + err.Error() + ")"}
		}
		if data, err = io.ReadAll(io.LimitReader(zr, 32<<20)); err != nil {
			return []string{"  (gzip content not decodable: " + err.Error() + ")"}
		}
	}
	sum := sha256.Sum256(data)
	digest := "sha256:" + hex.EncodeToString(sum[:])[:16]
	switch {
	case secret:
		return []string{fmt.Sprintf("  [redacted: %d bytes, %s]", len(data), digest)}
	case !utf8.Valid(data) || bytes.IndexByte(data, 0) >= 0:
		return []string{fmt.Sprintf("  [binary: %d bytes, %s]", len(data), digest)}
	}
	return textLines(string(data))
}

// textLines indents text under a heading line.
func textLines(s string) []string {
	s = strings.TrimSuffix(s, "\n")
	var out []string
	for _, l := range strings.Split(s, "\n") {
		out = append(out, "  | "+l)
	}
	return out
}
