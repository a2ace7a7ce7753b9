package evalset

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/steward-evals/steward/internal/sandbox"
	"github.com/steward-evals/steward/internal/secret"
)

// Default fleet settings.
const (
	DefaultTendInterval = 10 * time.Second
	// DefaultRecordDir is the record directory's name beside the eval set.
	DefaultRecordDir = ".steward"
	// MaxFleetValue bounds max_sandboxes, max_workers and max_tasks.
	MaxFleetValue = 100000
	// MinTendInterval and MaxTendInterval bound tend_interval.
	MinTendInterval = 100 * time.Millisecond
	MaxTendInterval = time.Hour
)

// Environment variables read for fleet settings.
const (
	EnvMaxSandboxes = "STEWARD_MAX_SANDBOXES"
	EnvMaxWorkers   = "STEWARD_MAX_WORKERS"
	EnvMaxTasks     = "STEWARD_MAX_TASKS"
	EnvSamplesRamp  = "STEWARD_SAMPLES_RAMP"
	EnvTendInterval = "STEWARD_TEND_INTERVAL"
	EnvRecord       = "STEWARD_RECORD"
	EnvTranscripts  = "STEWARD_TRANSCRIPTS"
)

// Source labels used in Fleet.Sources.
const (
	SourceDefault = "default"
	SourceFlag    = "flag"
)

// DefaultFleet returns the defaults for an eval set in dir.
func DefaultFleet(dir string) Fleet {
	return Fleet{
		SamplesRamp:  DefaultRamp,
		TendInterval: Duration(DefaultTendInterval),
		Record:       filepath.Join(dir, DefaultRecordDir),
		Transcripts:  DefaultTranscripts,
		Sources: map[string]string{
			"max_sandboxes": SourceDefault, "max_workers": SourceDefault, "max_tasks": SourceDefault,
			"samples_ramp": SourceDefault, "tend_interval": SourceDefault, "record": SourceDefault,
			"transcripts": SourceDefault,
		},
	}
}

// LoadFleet reads the fleet settings file at path (usually _steward.yaml
// beside the eval set; a missing file means defaults), then applies the
// STEWARD_* variables read through getenv (nil = none) and the flags.
// Relative paths in the file resolve against its directory. On bad input
// it returns a zero Fleet and a *Errors naming every problem, so a running
// supervisor that re-reads the file can keep its last good settings.
func LoadFleet(path string, getenv func(string) string, flags FleetOverrides) (Fleet, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return Fleet{}, fmt.Errorf("resolve fleet file path: %w", err)
	}
	display := displayPath(path, abs)
	errs := &Errors{}
	f := DefaultFleet(filepath.Dir(abs))
	if st, err := os.Stat(abs); err == nil || !errors.Is(err, os.ErrNotExist) {
		if err == nil && st.IsDir() {
			errs.add(Error{File: display, Msg: "is a directory, not a file"})
		} else if data, ok := readLimited(abs, display, errs); ok {
			f.File = abs
			decodeFleetFile(display, filepath.Dir(abs), data, &f, errs, getenv)
		}
	}
	applyFleetEnv(&f, getenv, errs)
	applyFleetFlags(&f, flags, errs)
	if err := errs.orNil(); err != nil {
		return Fleet{}, err
	}
	return f, nil
}

func decodeFleetFile(display, dir string, data []byte, f *Fleet, errs *Errors, getenv func(string) string) {
	d := newDecoder(display, errs)
	d.getenv = envOrEmpty(getenv)
	defer func() {
		// The secrets this file names and the ones that always are; Load
		// checks again against the eval set's (api_key_env, secret_env).
		f.expanded = d.expanded
		refuseSecrets(errs, d.expanded, secret.Names(f.Secrets), nil)
	}()
	doc := parseYAML(display, data, errs)
	d.limit = countNodes(doc) + maxAliasNodes
	d.byteLimit = decodedLimit(len(data))
	root := d.resolve(doc, "")
	if root == nil || isNull(root) {
		return // an empty file keeps the defaults
	}
	if root.Kind != yaml.MappingNode {
		d.errNode(root, "", "%s must be a mapping of fleet settings, got %s", FleetFileName, describe(root))
		return
	}
	var got Fleet
	got.SamplesRamp = f.SamplesRamp
	root, provs := d.providerSections(root)
	d.decodeStruct(root, reflect.ValueOf(&got).Elem(), "")
	if d.blown {
		return
	}
	set := func(key string) (pos, bool) {
		p, ok := d.at[key]
		return p, ok
	}
	errAt := func(key, format string, args ...any) {
		p := d.at[key]
		errs.add(Error{File: display, Line: p.line, Column: p.col, Field: key, Msg: fmt.Sprintf(format, args...)})
	}
	from := func(p pos) string { return fmt.Sprintf("%s:%d", FleetFileName, p.line) }
	for _, k := range []struct {
		key string
		v   int
		dst *int
	}{{"max_sandboxes", got.MaxSandboxes, &f.MaxSandboxes}, {"max_workers", got.MaxWorkers, &f.MaxWorkers}, {"max_tasks", got.MaxTasks, &f.MaxTasks}} {
		p, ok := set(k.key)
		if !ok {
			continue
		}
		if msg := checkFleetInt(k.v); msg != "" {
			errAt(k.key, "%s", msg)
			continue
		}
		*k.dst = k.v
		f.Sources[k.key] = from(p)
	}
	if p, ok := set("samples_ramp"); ok {
		f.SamplesRamp = got.SamplesRamp
		f.Sources["samples_ramp"] = from(p)
	}
	if p, ok := set("tend_interval"); ok {
		if msg := checkTend(got.TendInterval.D()); msg != "" {
			errAt("tend_interval", "%s", msg)
		} else {
			f.TendInterval = got.TendInterval
			f.Sources["tend_interval"] = from(p)
		}
	}
	if p, ok := set("transcripts"); ok {
		if msg := checkTranscripts(got.Transcripts); msg != "" {
			errAt("transcripts", "%s", msg)
		} else {
			f.Transcripts = got.Transcripts
			f.Sources["transcripts"] = from(p)
		}
	}
	if p, ok := set("limits"); ok {
		before := len(errs.List)
		checkLimits(got.Limits, "limits", func(k string) bool { _, ok := set(k); return ok }, func(k, format string, args ...any) {
			if _, ok := set(k); !ok {
				k = "limits"
			}
			errAt(k, format, args...)
		})
		if len(errs.List) == before {
			f.Limits = got.Limits
			f.Sources["limits"] = from(p)
		}
	}
	if p, ok := set("secrets"); ok {
		bad := false
		for _, name := range got.Secrets {
			if !envNameRE.MatchString(name) {
				errAt("secrets", "%q is not an environment variable name (name the variable holding the secret, not the secret)", name)
				bad = true
			}
		}
		if !bad {
			f.Secrets = got.Secrets
			f.Sources["secrets"] = from(p)
		}
	}
	for _, ps := range provs {
		p, ok := set(ps.sec.Key)
		if !ok {
			continue
		}
		bad := false
		if ps.sec.Check != nil {
			for _, pr := range ps.sec.Check(ps.val, dir) {
				key := ps.sec.Key
				if pr.Field != "" {
					key += "." + pr.Field
				}
				if _, ok := set(key); !ok {
					key = ps.sec.Key
				}
				errAt(key, "%s", pr.Message)
				bad = true
			}
		}
		if !bad {
			if f.Providers == nil {
				f.Providers = map[string]any{}
			}
			f.Providers[ps.sec.Key] = ps.val
			f.Sources[ps.sec.Key] = from(p)
		}
	}
	if p, ok := set("record"); ok {
		if strings.TrimSpace(got.Record) == "" {
			errAt("record", "must name a directory")
		} else {
			r := got.Record
			if !filepath.IsAbs(r) {
				r = filepath.Join(dir, r)
			}
			f.Record = filepath.Clean(r)
			f.Sources["record"] = from(p)
		}
	}
}

func checkFleetInt(v int) string {
	switch {
	case v < 0:
		return fmt.Sprintf("must be 0 (unset) or more, got %d", v)
	case v > MaxFleetValue:
		return fmt.Sprintf("%d is above the maximum %d", v, MaxFleetValue)
	}
	return ""
}

// DefaultTranscripts is the transcripts setting when none is given.
const DefaultTranscripts = "full"

func checkTranscripts(v string) string {
	switch v {
	case "full", "metadata", "off":
		return ""
	}
	return fmt.Sprintf("%q is not a capture mode: use full, metadata or off", v)
}

func checkTend(v time.Duration) string {
	switch {
	case v < MinTendInterval:
		return fmt.Sprintf("%s is too short: the minimum is %s", v, MinTendInterval)
	case v > MaxTendInterval:
		return fmt.Sprintf("%s is too long: the maximum is %s", v, MaxTendInterval)
	}
	return ""
}

func applyFleetEnv(f *Fleet, getenv func(string) string, errs *Errors) {
	if getenv == nil {
		return
	}
	bad := func(name, format string, args ...any) {
		errs.add(Error{File: "env", Field: name, Msg: fmt.Sprintf(format, args...)})
	}
	for _, k := range []struct {
		env, key string
		dst      *int
	}{{EnvMaxSandboxes, "max_sandboxes", &f.MaxSandboxes}, {EnvMaxWorkers, "max_workers", &f.MaxWorkers}, {EnvMaxTasks, "max_tasks", &f.MaxTasks}} {
		s := strings.TrimSpace(getenv(k.env))
		if s == "" {
			continue
		}
		v, err := strconv.Atoi(s)
		if err != nil {
			bad(k.env, "%q is not a whole number", s)
			continue
		}
		if msg := checkFleetInt(v); msg != "" {
			bad(k.env, "%s", msg)
			continue
		}
		*k.dst = v
		f.Sources[k.key] = "env " + k.env
	}
	if s := strings.TrimSpace(getenv(EnvSamplesRamp)); s != "" {
		r, err := ParseRamp(s)
		if err != nil {
			bad(EnvSamplesRamp, "%v", err)
		} else {
			f.SamplesRamp = r
			f.Sources["samples_ramp"] = "env " + EnvSamplesRamp
		}
	}
	if s := strings.TrimSpace(getenv(EnvTendInterval)); s != "" {
		v, err := ParseDuration(s)
		if err == nil {
			if msg := checkTend(v.D()); msg != "" {
				err = errors.New(msg)
			}
		}
		if err != nil {
			bad(EnvTendInterval, "%v", err)
		} else {
			f.TendInterval = v
			f.Sources["tend_interval"] = "env " + EnvTendInterval
		}
	}
	if s := strings.TrimSpace(getenv(EnvTranscripts)); s != "" {
		if msg := checkTranscripts(s); msg != "" {
			bad(EnvTranscripts, "%s", msg)
		} else {
			f.Transcripts = s
			f.Sources["transcripts"] = "env " + EnvTranscripts
		}
	}
	if s := strings.TrimSpace(getenv(EnvRecord)); s != "" {
		if abs, err := filepath.Abs(s); err != nil {
			bad(EnvRecord, "cannot resolve %q: %v", s, err)
		} else {
			f.Record = abs
			f.Sources["record"] = "env " + EnvRecord
		}
	}
}

func applyFleetFlags(f *Fleet, fl FleetOverrides, errs *Errors) {
	bad := func(name, format string, args ...any) {
		errs.add(Error{File: "flag", Field: name, Msg: fmt.Sprintf(format, args...)})
	}
	for _, sec := range sandbox.Sections() {
		for _, sf := range sec.Flags {
			v, ok := fl.ProviderFlags[sf.Name]
			if !ok {
				continue
			}
			settings, had := f.Providers[sec.Key]
			if !had {
				settings = sec.New()
			}
			if err := sf.Apply(settings, v); err != nil {
				bad(sf.Name, "%v", err)
				continue
			}
			if f.Providers == nil {
				f.Providers = map[string]any{}
			}
			f.Providers[sec.Key] = settings
			f.Sources[sec.Key+"."+sf.Name] = SourceFlag
		}
	}
	for name := range fl.ProviderFlags {
		if !providerFlag(name) {
			bad(name, "no provider declares this flag")
		}
	}
	for _, k := range []struct {
		key string
		v   *int
		dst *int
	}{{"max_sandboxes", fl.MaxSandboxes, &f.MaxSandboxes}, {"max_workers", fl.MaxWorkers, &f.MaxWorkers}, {"max_tasks", fl.MaxTasks, &f.MaxTasks}} {
		if k.v == nil {
			continue
		}
		if msg := checkFleetInt(*k.v); msg != "" {
			bad(k.key, "%s", msg)
			continue
		}
		*k.dst = *k.v
		f.Sources[k.key] = SourceFlag
	}
	if fl.SamplesRamp != nil {
		r, err := ParseRamp(*fl.SamplesRamp)
		if err != nil {
			bad("samples_ramp", "%v", err)
		} else {
			f.SamplesRamp = r
			f.Sources["samples_ramp"] = SourceFlag
		}
	}
	if fl.TendInterval != nil {
		if msg := checkTend(*fl.TendInterval); msg != "" {
			bad("tend_interval", "%s", msg)
		} else {
			f.TendInterval = Duration(*fl.TendInterval)
			f.Sources["tend_interval"] = SourceFlag
		}
	}
	if fl.Record != nil {
		if strings.TrimSpace(*fl.Record) == "" {
			bad("record", "must name a directory")
		} else if abs, err := filepath.Abs(*fl.Record); err != nil {
			bad("record", "cannot resolve %q: %v", *fl.Record, err)
		} else {
			f.Record = abs
			f.Sources["record"] = SourceFlag
		}
	}
}

// ProviderSettings are the sections of providers that have one, by key,
// as sandbox.RunInfo carries them (each section's Value of what was decoded).
func (f Fleet) ProviderSettings() map[string]any {
	out := map[string]any{}
	for _, sec := range sandbox.Sections() {
		v, ok := f.Providers[sec.Key]
		if !ok {
			continue
		}
		if sec.Value != nil {
			v = sec.Value(v)
		}
		out[sec.Key] = v
	}
	return out
}

// providerFlag says whether a registered section declares the flag name.
func providerFlag(name string) bool {
	for _, sec := range sandbox.Sections() {
		for _, sf := range sec.Flags {
			if sf.Name == name {
				return true
			}
		}
	}
	return false
}

// providerSection is one provider section of the fleet file, decoded.
type providerSection struct {
	sec sandbox.Section
	val any // the pointer sec.New made, filled
}

// providerSections decodes the top-level keys that registered provider
// sections own, strictly and with positions like the rest of the file,
// and returns the mapping without them (for the Fleet struct) and what
// they decoded to.
func (d *decoder) providerSections(root *yaml.Node) (*yaml.Node, []providerSection) {
	secs := sandbox.Sections()
	if len(secs) == 0 || root.Kind != yaml.MappingNode {
		return root, nil
	}
	byKey := map[string]sandbox.Section{}
	for _, s := range secs {
		byKey[s.Key] = s
	}
	rest := *root
	rest.Content = nil
	var out []providerSection
	seen := map[string]*yaml.Node{}
	for i := 0; i+1 < len(root.Content); i += 2 {
		k, v := root.Content[i], root.Content[i+1]
		sec, ok := byKey[k.Value]
		if !ok || k.Kind != yaml.ScalarNode {
			rest.Content = append(rest.Content, k, v)
			continue
		}
		if prev, dup := seen[sec.Key]; dup {
			d.errNode(k, sec.Key, "%q appears twice (the other is on line %d); keep one", sec.Key, prev.Line)
			continue
		}
		seen[sec.Key] = k
		val := sec.New()
		d.decodeValue(k, v, reflect.ValueOf(val).Elem(), sec.Key)
		out = append(out, providerSection{sec: sec, val: val})
	}
	return &rest, out
}
