package inputs

import (
	"fmt"
	"net"
	"net/url"
	"regexp"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

// Grammar of image references and registry locations, after
// github.com/distribution/reference (without IPv6 literals). Values that
// pass are safe to write unquoted-free into TOML, YAML and env files.
const (
	domainComponent = `(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])`
	domainRe        = domainComponent + `(?:\.` + domainComponent + `)*(?::[0-9]+)?`
	pathComponent   = `[a-z0-9]+(?:(?:[._]|__|[-]+)[a-z0-9]+)*`
	tagRe           = `[\w][\w.-]{0,127}`
	digestRe        = `[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9A-Fa-f]{32,}`
)

var (
	imageRef    = regexp.MustCompile(`^(?:` + domainRe + `/)?` + pathComponent + `(?:/` + pathComponent + `)*(?::` + tagRe + `)?(?:@` + digestRe + `)?$`)
	registryLoc = regexp.MustCompile(`^` + domainRe + `(?:/` + pathComponent + `)*$`)
	noProxyItem = regexp.MustCompile(`^[A-Za-z0-9*.\-_:/\[\]]+$`)
)

// validateImage checks an image reference such as quay.io/org/img:tag@sha256:....
func validateImage(s string) error {
	if s == "" {
		return fmt.Errorf("is empty: set an image reference such as registry.example/org/image@sha256:<digest>")
	}
	if len(s) > 512 || !imageRef.MatchString(s) {
		return fmt.Errorf("%q is not a valid image reference: use [registry[:port]/]path[:tag][@sha256:<digest>] in lower case", s)
	}
	return nil
}

// validateRegistryLocation checks a registry or repository prefix, such as
// quay.io or mirror.corp:5000/org.
func validateRegistryLocation(s string) error {
	if s == "" {
		return fmt.Errorf("is empty: set a registry or repository such as quay.io/org")
	}
	if len(s) > 512 || !registryLoc.MatchString(s) {
		return fmt.Errorf("%q is not a registry or repository: use host[:port][/path], no scheme, tag, digest or wildcard", s)
	}
	return nil
}

// validateProxyURL checks an HTTP(S) proxy URL such as http://proxy.corp:3128.
func validateProxyURL(s string) error {
	if strings.ContainsAny(s, "\"'\\$`\t\r\n ") {
		return fmt.Errorf("%q contains quotes, backslashes, '$', backticks or whitespace: percent-encode them", s)
	}
	u, err := url.Parse(s)
	if err != nil {
		return fmt.Errorf("%q is not a URL: %w", s, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return fmt.Errorf("%q must start with http:// or https://", s)
	}
	if u.Hostname() == "" {
		return fmt.Errorf("%q has no host: use http://host:port", s)
	}
	if (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" {
		return fmt.Errorf("%q has a path, query or fragment: a proxy URL is scheme://[user:password@]host[:port]", s)
	}
	if p := u.Port(); p != "" {
		if _, err := net.LookupPort("tcp", p); err != nil {
			return fmt.Errorf("%q has an invalid port %q", s, p)
		}
	}
	return nil
}

// validateNoProxy checks one NoProxy entry: a host, a .domain, an IP, a
// CIDR, host:port or "*".
func validateNoProxy(s string) error {
	if s == "" {
		return fmt.Errorf("is empty: remove it or write a host, .domain, IP or CIDR")
	}
	if len(s) > 253 || !noProxyItem.MatchString(s) {
		return fmt.Errorf("%q is not a host, .domain, IP or CIDR (allowed: letters, digits and . - _ : / * [ ])", s)
	}
	return nil
}

// validateHost checks a host name or IP address.
func validateHost(s string) error {
	if net.ParseIP(s) != nil {
		return nil
	}
	if errs := validation.IsDNS1123Subdomain(strings.ToLower(s)); len(errs) > 0 {
		return fmt.Errorf("%q is neither an IP address nor a DNS name: %s", s, strings.Join(errs, "; "))
	}
	return nil
}

// normalizeList sorts a copy of items and drops duplicates; nil stays nil.
func normalizeList(items []string) []string {
	if len(items) == 0 {
		return nil
	}
	out := append([]string(nil), items...)
	slices.Sort(out)
	return slices.Compact(out)
}
