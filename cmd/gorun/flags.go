package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"sort"
	"strings"

	"github.com/gorun/gorun/launcher"
)

// errHelp asks for the usage on stdout (-h, --help).
var errHelp = errors.New("help requested")

// envFlags collects -x VAR and -x VAR=value.
type envFlags []string

func (e *envFlags) String() string { return strings.Join(*e, ",") }
func (e *envFlags) Set(v string) error {
	if k, _, ok := strings.Cut(v, "="); ok {
		if k == "" {
			return fmt.Errorf("empty variable name in %q", v)
		}
		*e = append(*e, v)
		return nil
	}
	val, ok := os.LookupEnv(v)
	if !ok {
		return fmt.Errorf("-x %s: not set in gorun's environment", v)
	}
	*e = append(*e, v+"="+val)
	return nil
}

// noteFlags are Open MPI flags that gorun accepts without a use for them,
// each with the note printed once on stderr.
var noteFlags = map[string]string{
	"allow-run-as-root": "gorun runs as root without it (it does not refuse root)",
	"oversubscribe":     "gorun allows more ranks than slots by default (with a warning); --nooversubscribe refuses them",
}

// twoValueFlags are Open MPI flags that take two values (--mca NAME
// VALUE); flag.FlagSet cannot parse them, so splitArgs does.
var twoValueFlags = map[string]bool{"mca": true, "gmca": true}

// mcaParam is one --mca NAME VALUE.
type mcaParam struct{ name, value string }

// context is one program of the command line with the flags before it:
// gorun [flags] PROG ARGS [: [-np N] [-x VAR] PROG ARGS]...
type context struct {
	flags []string // in flag.FlagSet's form
	mca   []mcaParam
	notes []string
	prog  []string // program and arguments; empty if none was given
}

// splitArgs splits the command line into contexts at lone ":" arguments
// (mpirun's MPMD form), and each context into its flags and its program.
// fs knows the flags of the context; an unknown flag is an error with a
// suggestion.
func splitArgs(args []string, fs *flag.FlagSet) (ctx context, rest []string, err error) {
	i := 0
	for i < len(args) {
		a := args[i]
		if a == ":" {
			return ctx, args[i:], nil
		}
		if a == "--" {
			i++
			break
		}
		if !strings.HasPrefix(a, "-") || a == "-" {
			break
		}
		name, val, hasVal := strings.Cut(strings.TrimLeft(a, "-"), "=")
		switch {
		case name == "h" || name == "help":
			return ctx, nil, errHelp
		case noteFlags[name] != "":
			ctx.notes = append(ctx.notes, fmt.Sprintf("gorun: note: --%s accepted: %s", name, noteFlags[name]))
			i++
			continue
		case twoValueFlags[name]:
			if hasVal {
				// --mca=NAME VALUE is not a form mpirun knows either.
				return ctx, nil, fmt.Errorf("--%s takes two arguments: --%s NAME VALUE", name, name)
			}
			if i+2 >= len(args) {
				return ctx, nil, fmt.Errorf("--%s needs two arguments: --%s NAME VALUE", name, name)
			}
			ctx.mca = append(ctx.mca, mcaParam{args[i+1], args[i+2]})
			i += 3
			continue
		}
		f := fs.Lookup(name)
		if f == nil {
			return ctx, nil, unknownFlag(a, name, fs)
		}
		ctx.flags = append(ctx.flags, "-"+name)
		if hasVal {
			ctx.flags[len(ctx.flags)-1] += "=" + val
		} else if b, ok := f.Value.(interface{ IsBoolFlag() bool }); !ok || !b.IsBoolFlag() {
			if i+1 >= len(args) {
				return ctx, nil, fmt.Errorf("flag %s needs a value", a)
			}
			ctx.flags = append(ctx.flags, args[i+1])
			i++
		}
		i++
	}
	for i < len(args) && args[i] != ":" {
		ctx.prog = append(ctx.prog, args[i])
		i++
	}
	return ctx, args[i:], nil
}

// unknownFlag is the one-line error for a flag gorun does not know, with
// the nearest known name when one is close.
func unknownFlag(arg, name string, fs *flag.FlagSet) error {
	var names []string
	fs.VisitAll(func(f *flag.Flag) { names = append(names, f.Name) })
	for n := range noteFlags {
		names = append(names, n)
	}
	names = append(names, "help", "mca")
	sort.Strings(names)
	best, bestD := "", 3
	for _, n := range names {
		d := editDistance(strings.ToLower(name), n)
		if len(name) >= 3 && strings.HasPrefix(n, strings.ToLower(name)) {
			d = min(d, 1)
		}
		if d < bestD {
			best, bestD = n, d
		}
	}
	if best != "" {
		return fmt.Errorf("unknown flag %s (did you mean %s?); gorun --help lists the flags", arg, dashes(best))
	}
	return fmt.Errorf("unknown flag %s; gorun --help lists the flags", arg)
}

// dashes spells a flag name as the usage does: -x, --name.
func dashes(name string) string {
	if len(name) == 1 || name == "np" {
		return "-" + name
	}
	return "--" + name
}

// editDistance is the Levenshtein distance between a and b.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			c := 1
			if a[i-1] == b[j-1] {
				c = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+c)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// parseFlags parses a context's flags into fs, with flag's own messages
// turned into one line.
func parseFlags(fs *flag.FlagSet, flags []string) error {
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	if err := fs.Parse(flags); err != nil {
		return badValue(fs, err)
	}
	return nil
}

// given reports whether the command line set any of the flags names.
func given(fs *flag.FlagSet, names ...string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || slices.Contains(names, f.Name) })
	return set
}

// badValue is flag's error for a value its flag does not take
// (`invalid value "1.5" for flag -timeout: parse error`) in gorun's
// words: the flag spelt as the usage does and what it wants.
func badValue(fs *flag.FlagSet, err error) error {
	var v, name string
	msg := err.Error()
	if _, serr := fmt.Sscanf(msg, "invalid boolean value %q for -%s", &v, &name); serr == nil {
		return fmt.Errorf("%s=%q: want true or false", dashes(strings.TrimSuffix(name, ":")), v)
	}
	if _, serr := fmt.Sscanf(msg, "invalid value %q for flag -%s", &v, &name); serr != nil {
		return err
	}
	name = strings.TrimSuffix(name, ":")
	want := msg[strings.LastIndex(msg, ": ")+2:]
	if f := fs.Lookup(name); f != nil {
		if g, ok := f.Value.(flag.Getter); ok {
			switch g.Get().(type) {
			case int:
				if strings.HasSuffix(msg, "value out of range") {
					want = "out of range"
					break
				}
				want = "want a whole number"
			case float64:
				want = "want a number"
			}
		}
	}
	return fmt.Errorf("%s %q: %s", dashes(name), v, want)
}

// appFlags parses the context of an MPMD program after a ':': only -np
// (-n) and -x belong to one program; everything else is global and goes
// before the first program.
func appFlags(args []string) (launcher.App, []string, []string, error) {
	fs := flag.NewFlagSet("gorun", flag.ContinueOnError)
	np := fs.Int("np", 1, "")
	fs.IntVar(np, "n", 1, "")
	var env envFlags
	fs.Var(&env, "x", "")
	ctx, rest, err := splitArgs(args, fs)
	if err != nil {
		if errors.Is(err, errHelp) {
			return launcher.App{}, nil, nil, err
		}
		return launcher.App{}, nil, nil, fmt.Errorf("after ':': %w (only -np and -x may be given per program; other flags go before the first program)", err)
	}
	if len(ctx.mca) > 0 {
		return launcher.App{}, nil, nil, errors.New("after ':': --mca goes before the first program")
	}
	if err := parseFlags(fs, ctx.flags); err != nil {
		return launcher.App{}, nil, nil, fmt.Errorf("after ':': %w", err)
	}
	if len(ctx.prog) == 0 {
		return launcher.App{}, nil, nil, errors.New("no program after ':'")
	}
	if *np < 1 {
		return launcher.App{}, nil, nil, fmt.Errorf("-np must be at least 1, not %d", *np)
	}
	return launcher.App{NP: *np, Program: ctx.prog[0], Args: ctx.prog[1:], Env: env}, ctx.notes, rest, nil
}
