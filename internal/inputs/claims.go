package inputs

import (
	"encoding/json"
	"reflect"

	igntypes "github.com/coreos/ignition/v2/config/v3_5/types"
)

// Claims lists what an Ignition config declares, by key ("path /etc/x",
// "unit kubelet.service enabled", "drop-in kubelet.service/10-x.conf",
// "user core", "kernel argument nosmt", ...), each with the canonical JSON of what it
// declares there. Two configs conflict where they claim the same key with
// different values: merged, one would silently win, and which one would
// depend on their order. The same value claimed twice is a duplicate, not a
// conflict. Keys are readable: they appear in error messages.
func Claims(cfg igntypes.Config) map[string]string {
	c := map[string]string{}
	put := func(key string, v any) {
		b, err := json.Marshal(v)
		if err != nil {
			// Ignition types always encode; keep the key claimed anyway.
			b = []byte(err.Error())
		}
		c[key] = string(b)
	}
	// Files, directories and links share one namespace in Ignition.
	for _, f := range cfg.Storage.Files {
		put(pathClaim(f.Path), struct{ File igntypes.File }{f})
	}
	for _, d := range cfg.Storage.Directories {
		put(pathClaim(d.Path), struct{ Directory igntypes.Directory }{d})
	}
	for _, l := range cfg.Storage.Links {
		put(pathClaim(l.Path), struct{ Link igntypes.Link }{l})
	}
	for _, d := range cfg.Storage.Disks {
		put("disk "+d.Device, d)
	}
	for _, f := range cfg.Storage.Filesystems {
		put("filesystem "+f.Device, f)
	}
	for _, r := range cfg.Storage.Raid {
		put("raid "+r.Name, r)
	}
	for _, l := range cfg.Storage.Luks {
		put("luks "+l.Name, l)
	}
	for _, u := range cfg.Systemd.Units {
		if u.Contents != nil {
			put("unit "+u.Name+" contents", *u.Contents)
		}
		if u.Enabled != nil {
			put("unit "+u.Name+" enabled", *u.Enabled)
		}
		if u.Mask != nil {
			put("unit "+u.Name+" mask", *u.Mask)
		}
		for _, d := range u.Dropins {
			put("drop-in "+u.Name+"/"+d.Name, d)
		}
	}
	for _, u := range cfg.Passwd.Users {
		put("user "+u.Name, u)
	}
	for _, g := range cfg.Passwd.Groups {
		put("group "+g.Name, g)
	}
	for _, k := range cfg.KernelArguments.ShouldExist {
		put("kernel argument "+string(k), "shouldExist")
	}
	for _, k := range cfg.KernelArguments.ShouldNotExist {
		put("kernel argument "+string(k), "shouldNotExist")
	}
	if !reflect.ValueOf(cfg.Ignition.Proxy).IsZero() {
		put("ignition.proxy", cfg.Ignition.Proxy)
	}
	if !reflect.ValueOf(cfg.Ignition.Timeouts).IsZero() {
		put("ignition.timeouts", cfg.Ignition.Timeouts)
	}
	return c
}

func pathClaim(p string) string { return "path " + p }

// WithoutClaims returns a copy of cfg without the entries whose claim is in
// drop. Merging a config that repeats an entry would otherwise duplicate
// its list fields (a file's append, a filesystem's options).
func WithoutClaims(cfg igntypes.Config, drop map[string]bool) igntypes.Config {
	if len(drop) == 0 {
		return cfg
	}
	out := cfg
	out.Storage.Files = filter(cfg.Storage.Files, func(f igntypes.File) bool { return drop[pathClaim(f.Path)] })
	out.Storage.Directories = filter(cfg.Storage.Directories, func(d igntypes.Directory) bool { return drop[pathClaim(d.Path)] })
	out.Storage.Links = filter(cfg.Storage.Links, func(l igntypes.Link) bool { return drop[pathClaim(l.Path)] })
	out.Storage.Disks = filter(cfg.Storage.Disks, func(d igntypes.Disk) bool { return drop["disk "+d.Device] })
	out.Storage.Filesystems = filter(cfg.Storage.Filesystems, func(f igntypes.Filesystem) bool { return drop["filesystem "+f.Device] })
	out.Storage.Raid = filter(cfg.Storage.Raid, func(r igntypes.Raid) bool { return drop["raid "+r.Name] })
	out.Storage.Luks = filter(cfg.Storage.Luks, func(l igntypes.Luks) bool { return drop["luks "+l.Name] })
	out.Passwd.Users = filter(cfg.Passwd.Users, func(u igntypes.PasswdUser) bool { return drop["user "+u.Name] })
	out.Passwd.Groups = filter(cfg.Passwd.Groups, func(g igntypes.PasswdGroup) bool { return drop["group "+g.Name] })
	out.Systemd.Units = nil
	for _, u := range cfg.Systemd.Units {
		u.Dropins = filter(u.Dropins, func(d igntypes.Dropin) bool { return drop["drop-in "+u.Name+"/"+d.Name] })
		out.Systemd.Units = append(out.Systemd.Units, u)
	}
	return out
}

func filter[T any](in []T, dropped func(T) bool) []T {
	var out []T
	for _, v := range in {
		if !dropped(v) {
			out = append(out, v)
		}
	}
	return out
}
