// Package params declares the runtime's tunables: environment variables
// named GORUN_<AREA>_<KNOB>, each with a default and a line of
// documentation, declared once in the package that reads it and listed by
// `gorun --help-params`.
package params

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"sync"
	"time"
)

// Param describes one tunable.
type Param struct {
	Name    string
	Default string
	Doc     string
}

var (
	mu  sync.Mutex
	all = map[string]Param{}
)

func declare(name, def, doc string) {
	mu.Lock()
	defer mu.Unlock()
	all[name] = Param{name, def, doc}
}

// All lists every declared tunable, sorted by name.
func All() []Param {
	mu.Lock()
	defer mu.Unlock()
	var ps []Param
	for _, p := range all {
		ps = append(ps, p)
	}
	slices.SortFunc(ps, func(a, b Param) int {
		if a.Name < b.Name {
			return -1
		}
		return 1
	})
	return ps
}

// String declares a string tunable and returns a function reading it.
func String(name, def, doc string) func() string {
	declare(name, def, doc)
	return func() string {
		if v, ok := os.LookupEnv(name); ok {
			return v
		}
		return def
	}
}

// Int declares an integer tunable. A malformed value is reported on stderr
// once and the default is used.
func Int(name string, def int, doc string) func() int {
	get := IntCheck(name, def, doc, func(int) error { return nil })
	return func() int {
		n, _ := get()
		return n
	}
}

// IntCheck is Int for a value that must also pass check: one that does
// not is ignored with a warning naming what check wants, as a value that
// does not parse is, and the default is used. Left to the component that
// reads it, such a value failed that component (a shared-memory ring of 3
// slots: the transport did not open, and its ranks went through TCP at a
// quarter of the bandwidth without a word). Its function also reports
// whether the value is the user's (set, and taken), not the default.
func IntCheck(name string, def int, doc string, check func(int) error) func() (int, bool) {
	declare(name, strconv.Itoa(def), doc)
	return func() (int, bool) {
		v, ok := os.LookupEnv(name)
		if !ok || v == "" {
			return def, false
		}
		n, err := strconv.Atoi(v)
		if err == nil {
			err = check(n)
		}
		if err != nil {
			warn(name, v, err)
			return def, false
		}
		return n, true
	}
}

// Duration declares a duration tunable ("50us", "2ms", "3s").
func Duration(name string, def time.Duration, doc string) func() time.Duration {
	declare(name, def.String(), doc)
	return func() time.Duration {
		v, ok := os.LookupEnv(name)
		if !ok || v == "" {
			return def
		}
		d, err := time.ParseDuration(v)
		if err != nil {
			warn(name, v, err)
			return def
		}
		return d
	}
}

// PositiveDuration is Duration for a value that must be above zero (an
// interval a ticker runs at, a timeout): zero or less is ignored with a
// warning, as a value that does not parse is.
func PositiveDuration(name string, def time.Duration, doc string) func() time.Duration {
	get := Duration(name, def, doc)
	return func() time.Duration {
		d := get()
		if d <= 0 {
			warn(name, os.Getenv(name), errors.New("must be above zero"))
			return def
		}
		return d
	}
}

var warned sync.Map

func warn(name, v string, err error) {
	if _, dup := warned.LoadOrStore(name, true); !dup {
		fmt.Fprintf(os.Stderr, "gorun: ignoring %s=%q: %v\n", name, v, err)
	}
}

// Debug reports whether GORUN_DEBUG is 1: the diagnostics of every layer
// (the membership's and wire-up's logs, the shared-memory collectives'
// set-up), declared once here so that each reads it alike.
var Debug = sync.OnceValue(func() bool { return pDebug() == 1 })

var pDebug = Int("GORUN_DEBUG", 0, "1 prints memberlist and wire-up logs, and why a communicator's shared-memory segment is smaller than its full size or missing, on stderr")
