// Command sidebyside runs gorun's OSU-method benchmarks (examples/osu/*,
// launched by gorun) and the project's C references of them
// (tests/openmpi/osu_*.c, launched by Open MPI's mpirun) side by side on the
// same machine: interleaved (gorun, Open MPI, gorun, Open MPI, ...),
// repeated, and summarised per message size as the median of each side and
// the ratio gorun/Open MPI.
//
// Run it from the repository root:
//
//	go run ./bench/sidebyside --transport tcp --np 2 --out bench/results
//
// It builds everything it runs into a temporary directory first:
//
//	go build -o $TMP/gorun ./cmd/gorun            (unless --gorun or $GORUN)
//	go build -o $TMP/go/osu_<b> ./examples/osu/<b> (unless --go-bin)
//	mpicc.openmpi -O2 -o $TMP/ompi/osu_<b> tests/openmpi/osu_<b>.c
//
// and then runs, for each benchmark and repeat,
//
//	$TMP/gorun -np N [--gorun-args] $TMP/go/osu_<b> [-m ..] [-i ..] [-x ..]
//	mpirun.openmpi [--allow-run-as-root] -np N [--oversubscribe] [--mca btl tcp,self] [--ompi-args] $TMP/ompi/osu_<b> [...]
//
// Transports: "sm" leaves both runtimes to their default selection (shared
// memory between ranks of one host); "tcp" sets GORUN_BTL=tcp,self for gorun
// and --mca btl tcp,self for Open MPI. GORUN_BTL and OMPI_MCA_btl inherited
// from the caller's environment are removed in both modes.
//
// With --out DIR it writes DIR/results-YYYY-MM-DD-<transport>-np<N>.txt (the
// table, every repeat's figures, the commands and the machine: nproc, CPU
// model, kernel, Go, Open MPI and compiler versions, git commit) and, when
// gnuplot (Debian: gnuplot-nox) or python3 with matplotlib is installed, a
// PNG plot of the same name. Without either it says so and skips the plot.
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// bench describes one OSU-method program.
type bench struct {
	name         string // directory under examples/osu, and osu_<name>.c
	unit         string // unit of the figure
	higherBetter bool   // bandwidths: more is better; latencies: less
}

var benches = []bench{
	{"latency", "us", false},
	{"bw", "MB/s", true},
	{"bibw", "MB/s", true},
	{"mbw_mr", "MB/s", true},
	{"allreduce", "us", false},
	{"bcast", "us", false},
	{"reduce", "us", false},
	{"allgather", "us", false},
	{"alltoall", "us", false},
	{"barrier", "us", false},
}

type config struct {
	root       string
	transport  string
	np         int
	benches    []bench
	repeats    int
	out        string
	gorun      string
	goBin      string
	mpirun     string
	mpicc      string
	gorunArgs  []string
	ompiArgs   []string
	benchArgs  []string
	timeout    time.Duration
	keep       bool
	tmp        string
	gorunEnv   []string
	ompiEnv    []string
	commandLog []string
}

// sample holds the figures of one side: size -> one value per good repeat.
type sample map[int][]float64

type result struct {
	b          bench
	gorun      sample
	ompi       sample
	gorunFails []string
	ompiFails  []string
}

func main() {
	log := func(format string, a ...any) { fmt.Fprintf(os.Stderr, format+"\n", a...) }
	cfg, err := parseFlags()
	if err != nil {
		log("sidebyside: %v", err)
		os.Exit(2)
	}
	if err := run(cfg, log); err != nil {
		log("sidebyside: %v", err)
		os.Exit(1)
	}
}

func parseFlags() (*config, error) {
	var names []string
	for _, b := range benches {
		names = append(names, b.name)
	}
	fs := flag.NewFlagSet("sidebyside", flag.ContinueOnError)
	transport := fs.String("transport", "sm", "sm (both runtimes' default selection) or tcp (GORUN_BTL=tcp,self / --mca btl tcp,self)")
	np := fs.Int("np", 2, "number of ranks; Open MPI gets --oversubscribe when it exceeds the CPU count")
	benchList := fs.String("bench", strings.Join(names, ","), "comma-separated benchmarks, or \"all\"")
	repeats := fs.Int("repeats", 5, "repeats of each benchmark on each side (medians are reported)")
	fs.IntVar(repeats, "r", 5, "short for --repeats")
	out := fs.String("out", "", "directory for the dated results file and plot (none: table on stdout only)")
	gorun := fs.String("gorun", os.Getenv("GORUN"), "gorun binary to use instead of building ./cmd/gorun (default $GORUN)")
	goBin := fs.String("go-bin", "", "directory of prebuilt Go benchmarks named osu_<bench> instead of building ./examples/osu/<bench>")
	mpirun := fs.String("mpirun", "mpirun.openmpi", "Open MPI launcher")
	mpicc := fs.String("mpicc", "mpicc.openmpi", "Open MPI compiler wrapper")
	gorunArgs := fs.String("gorun-args", "", "extra gorun flags, space-separated, placed after -np N")
	ompiArgs := fs.String("ompi-args", "", "extra mpirun flags, space-separated, placed after the transport flags (e.g. \"--mca pml ob1\")")
	m := fs.String("m", "", "message sizes passed to both sides as -m (MIN:MAX or MAX, bytes)")
	iters := fs.String("i", "", "timed iterations passed to both sides as -i")
	warm := fs.String("x", "", "warm-up iterations passed to both sides as -x")
	timeout := fs.Duration("timeout", 5*time.Minute, "limit for one run of one benchmark")
	keep := fs.Bool("keep", false, "keep the temporary build directory")
	root := fs.String("root", "", "repository root (default: found from the working directory)")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: go run ./bench/sidebyside [flags]\n\n"+
			"Runs gorun's examples/osu benchmarks and their Open MPI C references\n"+
			"(tests/openmpi) interleaved, and prints medians and gorun/ompi ratios.\n\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(os.Args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(0)
		}
		return nil, err
	}
	if fs.NArg() != 0 {
		return nil, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	cfg := &config{
		transport: *transport,
		np:        *np,
		repeats:   *repeats,
		out:       *out,
		gorun:     *gorun,
		goBin:     *goBin,
		mpirun:    *mpirun,
		mpicc:     *mpicc,
		gorunArgs: strings.Fields(*gorunArgs),
		ompiArgs:  strings.Fields(*ompiArgs),
		timeout:   *timeout,
		keep:      *keep,
	}
	if cfg.transport != "sm" && cfg.transport != "tcp" {
		return nil, fmt.Errorf("--transport must be sm or tcp, not %q", cfg.transport)
	}
	if cfg.np < 1 {
		return nil, fmt.Errorf("--np must be at least 1")
	}
	if cfg.repeats < 1 {
		return nil, fmt.Errorf("--repeats must be at least 1")
	}
	if *benchList == "all" {
		*benchList = strings.Join(names, ",")
	}
	for _, n := range strings.Split(*benchList, ",") {
		n = strings.TrimPrefix(strings.TrimSpace(n), "osu_")
		if n == "" {
			continue
		}
		found := false
		for _, b := range benches {
			if b.name == n {
				cfg.benches = append(cfg.benches, b)
				found = true
			}
		}
		if !found {
			return nil, fmt.Errorf("unknown benchmark %q (known: %s)", n, strings.Join(names, ","))
		}
	}
	if len(cfg.benches) == 0 {
		return nil, fmt.Errorf("no benchmarks selected")
	}
	for _, f := range []struct{ flag, val string }{{"-m", *m}, {"-i", *iters}, {"-x", *warm}} {
		if f.val != "" {
			cfg.benchArgs = append(cfg.benchArgs, f.flag, f.val)
		}
	}
	if *root != "" {
		cfg.root = *root
	} else {
		r, err := findRoot()
		if err != nil {
			return nil, err
		}
		cfg.root = r
	}
	return cfg, nil
}

// findRoot walks up from the working directory to the directory holding
// go.mod and tests/openmpi.
func findRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if isFile(filepath.Join(dir, "go.mod")) && isDir(filepath.Join(dir, "tests", "openmpi")) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no repository root (go.mod and tests/openmpi) above the working directory; use --root")
		}
		dir = parent
	}
}

func isFile(p string) bool { st, err := os.Stat(p); return err == nil && st.Mode().IsRegular() }
func isDir(p string) bool  { st, err := os.Stat(p); return err == nil && st.IsDir() }

func run(cfg *config, log func(string, ...any)) error {
	tmp, err := os.MkdirTemp("", "sidebyside-")
	if err != nil {
		return err
	}
	cfg.tmp = tmp
	if cfg.keep {
		log("build directory: %s (kept)", tmp)
	} else {
		defer os.RemoveAll(tmp)
	}
	if err := build(cfg, log); err != nil {
		return err
	}
	cfg.gorunEnv = envWithout(os.Environ(), "GORUN_BTL")
	if cfg.transport == "tcp" {
		cfg.gorunEnv = append(cfg.gorunEnv, "GORUN_BTL=tcp,self")
	}
	cfg.ompiEnv = envWithout(os.Environ(), "OMPI_MCA_btl")

	start := time.Now()
	load0 := loadavg()
	var results []*result
	for _, b := range cfg.benches {
		r := &result{b: b, gorun: sample{}, ompi: sample{}}
		results = append(results, r)
		gArgv, oArgv := gorunArgv(cfg, b), ompiArgv(cfg, b)
		cfg.commandLog = append(cfg.commandLog,
			"gorun:    "+envNote(cfg.transport == "tcp", "GORUN_BTL=tcp,self ")+strings.Join(gArgv, " "),
			"Open MPI: "+strings.Join(oArgv, " "))
		for rep := 1; rep <= cfg.repeats; rep++ {
			gd, gerr := runSide(cfg, gArgv, cfg.gorunEnv, r.gorun)
			if gerr != nil {
				r.gorunFails = append(r.gorunFails, fmt.Sprintf("repeat %d: %v", rep, gerr))
			}
			od, oerr := runSide(cfg, oArgv, cfg.ompiEnv, r.ompi)
			if oerr != nil {
				r.ompiFails = append(r.ompiFails, fmt.Sprintf("repeat %d: %v", rep, oerr))
			}
			log("[%s %d/%d] gorun %s, Open MPI %s", b.name, rep, cfg.repeats, status(gd, gerr), status(od, oerr))
		}
	}
	elapsed := time.Since(start)

	var table bytes.Buffer
	title := fmt.Sprintf("gorun vs Open MPI: transport %s, np %d, medians of %d interleaved repeats", cfg.transport, cfg.np, cfg.repeats)
	fmt.Fprintf(&table, "# %s\n\n", title)
	for _, r := range results {
		writeTable(&table, r, cfg)
	}
	os.Stdout.Write(table.Bytes())

	if cfg.out == "" {
		return nil
	}
	if err := os.MkdirAll(cfg.out, 0o755); err != nil {
		return err
	}
	base := resultBase(cfg.out, fmt.Sprintf("results-%s-%s-np%d", start.Format("2006-01-02"), cfg.transport, cfg.np))
	var f bytes.Buffer
	f.Write(table.Bytes())
	fmt.Fprintf(&f, "## Run\n\n")
	fmt.Fprintf(&f, "started   %s\n", start.Format(time.RFC3339))
	fmt.Fprintf(&f, "duration  %s\n", elapsed.Round(time.Second))
	fmt.Fprintf(&f, "loadavg   %s (start), %s (end)\n", load0, loadavg())
	fmt.Fprintf(&f, "invoked   %s\n\n", strings.Join(os.Args, " "))
	fmt.Fprintf(&f, "## Commands\n\n")
	for _, c := range cfg.commandLog {
		fmt.Fprintf(&f, "%s\n", c)
	}
	fmt.Fprintf(&f, "\n## Machine\n\n")
	for _, kv := range machineInfo(cfg) {
		fmt.Fprintf(&f, "%-14s %s\n", kv[0], kv[1])
	}
	fmt.Fprintf(&f, "\n## Every repeat (in run order)\n\n")
	for _, r := range results {
		writeRaw(&f, r)
	}
	txt := base + ".txt"
	if err := os.WriteFile(txt, f.Bytes(), 0o644); err != nil {
		return err
	}
	log("wrote %s", txt)
	png := base + ".png"
	switch err := plot(png, title, results, cfg); {
	case errors.Is(err, errNoPlotter):
		log("no gnuplot and no python3 with matplotlib: skipping the plot (Debian: apt-get install gnuplot-nox)")
	case err != nil:
		log("plot failed: %v", err)
	default:
		log("wrote %s", png)
	}
	return nil
}

func envNote(cond bool, s string) string {
	if cond {
		return s
	}
	return ""
}

func status(d time.Duration, err error) string {
	if err != nil {
		return "FAILED"
	}
	return d.Round(10 * time.Millisecond).String()
}

// resultBase returns dir/name, or dir/name-2, -3, ... when a results file of
// that name exists already.
func resultBase(dir, name string) string {
	base := filepath.Join(dir, name)
	for n := 2; isFile(base + ".txt"); n++ {
		base = filepath.Join(dir, fmt.Sprintf("%s-%d", name, n))
	}
	return base
}

func build(cfg *config, log func(string, ...any)) error {
	goDir := filepath.Join(cfg.tmp, "go")
	ompiDir := filepath.Join(cfg.tmp, "ompi")
	for _, d := range []string{goDir, ompiDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	if cfg.gorun == "" {
		cfg.gorun = filepath.Join(cfg.tmp, "gorun")
		log("building %s", "./cmd/gorun")
		if err := runBuild(cfg.root, "go", "build", "-o", cfg.gorun, "./cmd/gorun"); err != nil {
			return err
		}
	} else if p, err := exec.LookPath(cfg.gorun); err != nil {
		return fmt.Errorf("gorun binary: %v", err)
	} else if cfg.gorun, err = filepath.Abs(p); err != nil {
		return err
	}
	if cfg.goBin != "" {
		abs, err := filepath.Abs(cfg.goBin)
		if err != nil {
			return err
		}
		cfg.goBin = abs
	}
	mpicc, err := exec.LookPath(cfg.mpicc)
	if err != nil {
		return fmt.Errorf("Open MPI compiler: %v (Debian: apt-get install openmpi-bin libopenmpi-dev)", err)
	}
	if _, err := exec.LookPath(cfg.mpirun); err != nil {
		return fmt.Errorf("Open MPI launcher: %v", err)
	}
	for _, b := range cfg.benches {
		if cfg.goBin == "" {
			log("building ./examples/osu/%s", b.name)
			if err := runBuild(cfg.root, "go", "build", "-o", filepath.Join(goDir, "osu_"+b.name), "./examples/osu/"+b.name); err != nil {
				return err
			}
		} else if !isFile(filepath.Join(cfg.goBin, "osu_"+b.name)) {
			return fmt.Errorf("--go-bin %s has no osu_%s", cfg.goBin, b.name)
		}
		src := filepath.Join("tests", "openmpi", "osu_"+b.name+".c")
		if err := runBuild(cfg.root, mpicc, "-O2", "-std=c99", "-Wall", "-Wextra", "-o", filepath.Join(ompiDir, "osu_"+b.name), src); err != nil {
			return err
		}
	}
	return nil
}

func runBuild(dir, name string, args ...string) error {
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if len(out) > 0 {
		os.Stderr.Write(out)
	}
	if err != nil {
		return fmt.Errorf("%s %s: %v", name, strings.Join(args, " "), err)
	}
	return nil
}

func gorunArgv(cfg *config, b bench) []string {
	bin := filepath.Join(cfg.tmp, "go", "osu_"+b.name)
	if cfg.goBin != "" {
		bin = filepath.Join(cfg.goBin, "osu_"+b.name)
	}
	argv := []string{cfg.gorun, "-np", strconv.Itoa(cfg.np)}
	argv = append(argv, cfg.gorunArgs...)
	argv = append(argv, bin)
	return append(argv, cfg.benchArgs...)
}

func ompiArgv(cfg *config, b bench) []string {
	argv := []string{cfg.mpirun}
	if os.Geteuid() == 0 {
		argv = append(argv, "--allow-run-as-root")
	}
	argv = append(argv, "-np", strconv.Itoa(cfg.np))
	if cfg.np > runtime.NumCPU() {
		argv = append(argv, "--oversubscribe")
	}
	if cfg.transport == "tcp" {
		argv = append(argv, "--mca", "btl", "tcp,self")
	}
	argv = append(argv, cfg.ompiArgs...)
	argv = append(argv, filepath.Join(cfg.tmp, "ompi", "osu_"+b.name))
	return append(argv, cfg.benchArgs...)
}

func envWithout(env []string, key string) []string {
	var out []string
	for _, kv := range env {
		if !strings.HasPrefix(kv, key+"=") {
			out = append(out, kv)
		}
	}
	return out
}

// runSide runs one benchmark once and adds its figures to s.
func runSide(cfg *config, argv, env []string, s sample) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(context.Background(), cfg.timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Dir = cfg.root
	cmd.Env = env
	// Launchers leave ranks behind if only they are killed: kill the group.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout = &stdout
	cmd.Stderr = &stderr
	t0 := time.Now()
	err := cmd.Run()
	d := time.Since(t0)
	if ctx.Err() != nil {
		return d, fmt.Errorf("timed out after %s%s", cfg.timeout, tail(stderr.String()))
	}
	if err != nil {
		return d, fmt.Errorf("%v%s", err, tail(stderr.String()+stdout.String()))
	}
	vals, err := parseOSU(stdout.String())
	if err != nil {
		return d, fmt.Errorf("%v%s", err, tail(stderr.String()))
	}
	for size, v := range vals {
		s[size] = append(s[size], v)
	}
	return d, nil
}

func tail(s string) string {
	s = strings.TrimSpace(s)
	if s == "" {
		return ""
	}
	lines := strings.Split(s, "\n")
	if len(lines) > 8 {
		lines = lines[len(lines)-8:]
	}
	return "\n    | " + strings.Join(lines, "\n    | ")
}

// parseOSU reads OSU-format output: '#' comment lines, then "SIZE VALUE"
// lines. Lines that are neither (launcher chatter) are skipped.
func parseOSU(out string) (map[int]float64, error) {
	vals := map[int]float64{}
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Fields(line)
		if len(f) == 1 {
			f = []string{"0", f[0]} // OSU's barrier: no size column
		}
		if len(f) < 2 {
			continue
		}
		size, err1 := strconv.Atoi(f[0])
		v, err2 := strconv.ParseFloat(f[1], 64)
		if err1 != nil || err2 != nil || size < 0 || math.IsNaN(v) || math.IsInf(v, 0) {
			continue
		}
		vals[size] = v
	}
	if len(vals) == 0 {
		return nil, fmt.Errorf("no \"SIZE VALUE\" lines in the output%s", tail(out))
	}
	return vals, nil
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return math.NaN()
	}
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// spread is (max-min)/median in percent: how much the repeats disagree.
func spread(v []float64) float64 {
	if len(v) < 2 {
		return math.NaN()
	}
	lo, hi := v[0], v[0]
	for _, x := range v {
		lo, hi = math.Min(lo, x), math.Max(hi, x)
	}
	return (hi - lo) / median(v) * 100
}

func sizes(r *result) []int {
	seen := map[int]bool{}
	var out []int
	for _, s := range []sample{r.gorun, r.ompi} {
		for k := range s {
			if !seen[k] {
				seen[k] = true
				out = append(out, k)
			}
		}
	}
	sort.Ints(out)
	return out
}

// humanSize writes a byte count exactly, shortened where it is a multiple
// of KiB or MiB.
func humanSize(n int) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%dM", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%dK", n>>10)
	}
	return strconv.Itoa(n)
}

func fmtVal(v float64) string {
	if math.IsNaN(v) {
		return "-"
	}
	return strconv.FormatFloat(v, 'f', 2, 64)
}

func fmtPct(v float64) string {
	if math.IsNaN(v) {
		return "-"
	}
	return strconv.FormatFloat(v, 'f', 0, 64) + "%"
}

// verdict says how gorun compares, from the ratio gorun/ompi.
func verdict(ratio float64, higherBetter bool) string {
	if math.IsNaN(ratio) || ratio <= 0 || math.IsInf(ratio, 0) {
		return "-"
	}
	faster := ratio < 1
	if higherBetter {
		faster = ratio > 1
	}
	f := ratio
	if f < 1 {
		f = 1 / f
	}
	if f < 1.005 {
		return "even"
	}
	if faster {
		return fmt.Sprintf("%.2fx faster", f)
	}
	return fmt.Sprintf("%.2fx slower", f)
}

func writeTable(w io.Writer, r *result, cfg *config) {
	better := "lower is better: ratio < 1 means gorun is faster"
	if r.b.higherBetter {
		better = "higher is better: ratio > 1 means gorun is faster"
	}
	fmt.Fprintf(w, "## %s (%s; %s)\n", r.b.name, r.b.unit, better)
	fmt.Fprintf(w, "%8s %12s %7s %12s %7s %11s  %s\n", "size", "gorun", "range", "Open MPI", "range", "gorun/ompi", "gorun is")
	var logSum float64
	var nRatio int
	for _, size := range sizes(r) {
		g, o := median(r.gorun[size]), median(r.ompi[size])
		ratio := g / o
		rs := "-"
		if !math.IsNaN(ratio) && !math.IsInf(ratio, 0) && ratio > 0 {
			rs = strconv.FormatFloat(ratio, 'f', 2, 64)
			logSum += math.Log(ratio)
			nRatio++
		}
		fmt.Fprintf(w, "%8s %12s %7s %12s %7s %11s  %s\n", humanSize(size),
			fmtVal(g), fmtPct(spread(r.gorun[size])), fmtVal(o), fmtPct(spread(r.ompi[size])),
			rs, verdict(ratio, r.b.higherBetter))
	}
	if nRatio > 1 {
		gm := math.Exp(logSum / float64(nRatio))
		fmt.Fprintf(w, "%8s %12s %7s %12s %7s %11.2f  %s\n", "geomean", "", "", "", "", gm, verdict(gm, r.b.higherBetter))
	}
	for _, side := range []struct {
		name  string
		fails []string
	}{{"gorun", r.gorunFails}, {"Open MPI", r.ompiFails}} {
		if len(side.fails) > 0 {
			fmt.Fprintf(w, "%s failed %d of %d repeats:\n", side.name, len(side.fails), cfg.repeats)
			for _, f := range side.fails {
				fmt.Fprintf(w, "  %s\n", f)
			}
		}
	}
	fmt.Fprintln(w)
}

func writeRaw(w io.Writer, r *result) {
	fmt.Fprintf(w, "### %s (%s)\n", r.b.name, r.b.unit)
	for _, size := range sizes(r) {
		fmt.Fprintf(w, "%8s gorun %s | Open MPI %s\n", humanSize(size), joinVals(r.gorun[size]), joinVals(r.ompi[size]))
	}
	fmt.Fprintln(w)
}

func joinVals(v []float64) string {
	if len(v) == 0 {
		return "-"
	}
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = fmtVal(x)
	}
	return strings.Join(s, " ")
}

func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

// machineInfo describes where the figures were taken.
func machineInfo(cfg *config) [][2]string {
	first := func(name string, args ...string) string {
		cmd := exec.Command(name, args...)
		cmd.Dir = cfg.root
		out, err := cmd.CombinedOutput()
		if err != nil {
			return "unavailable (" + err.Error() + ")"
		}
		line, _, _ := strings.Cut(strings.TrimSpace(string(out)), "\n")
		return strings.TrimSpace(line)
	}
	cpu := "unknown"
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "model name" {
				cpu = strings.TrimSpace(v)
				break
			}
		}
	}
	mem := "unknown"
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		line, _, _ := strings.Cut(string(b), "\n")
		mem = strings.Join(strings.Fields(line)[1:], " ")
	}
	commit := first("git", "rev-parse", "--short", "HEAD")
	if !strings.HasPrefix(commit, "unavailable") {
		if st := first("git", "status", "--porcelain", "--untracked-files=no"); st != "" && !strings.HasPrefix(st, "unavailable") {
			commit += " (uncommitted changes)"
		}
	}
	host, _ := os.Hostname()
	return [][2]string{
		{"host", host},
		{"nproc", first("nproc")},
		{"cpu", cpu},
		{"memory", mem},
		{"kernel", first("uname", "-srm")},
		{"go", first("go", "version")},
		{"gorun", cfg.gorun},
		{"gorun commit", commit},
		{"open mpi", first(cfg.mpirun, "--version")},
		{"mpicc", first(cfg.mpicc, "--version")},
	}
}

var errNoPlotter = errors.New("no plotter")

// plotSeries is one benchmark's medians in plotting order, NaN for missing.
type plotSeries struct {
	Name   string    `json:"name"`
	Unit   string    `json:"unit"`
	Sizes  []int     `json:"sizes"`
	Gorun  []float64 `json:"gorun"`
	Ompi   []float64 `json:"ompi"`
	Ratios []float64 `json:"ratios"`
}

// plotData keeps the benchmarks with a size axis (barrier has none) and
// drops size 0, which a log axis cannot show; both stay in the table.
func plotData(results []*result) []plotSeries {
	var ps []plotSeries
	for _, r := range results {
		s := plotSeries{Name: r.b.name, Unit: r.b.unit}
		for _, size := range sizes(r) {
			if size == 0 {
				continue
			}
			g, o := median(r.gorun[size]), median(r.ompi[size])
			s.Sizes = append(s.Sizes, size)
			s.Gorun = append(s.Gorun, g)
			s.Ompi = append(s.Ompi, o)
			s.Ratios = append(s.Ratios, g/o)
		}
		if len(s.Sizes) > 1 {
			ps = append(ps, s)
		}
	}
	return ps
}

func plot(png, title string, results []*result, cfg *config) error {
	ps := plotData(results)
	if len(ps) == 0 {
		return nil
	}
	if gp, err := exec.LookPath("gnuplot"); err == nil {
		return gnuplot(gp, png, title, ps)
	}
	if py, err := exec.LookPath("python3"); err == nil {
		if exec.Command(py, "-c", "import matplotlib").Run() == nil {
			return matplotlib(py, png, title, ps)
		}
	}
	return errNoPlotter
}

func gnuplotNum(v float64) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return "NaN"
	}
	return strconv.FormatFloat(v, 'g', 8, 64)
}

func gnuplot(gp, png, title string, ps []plotSeries) error {
	panels := len(ps) + 1 // one per benchmark, then the ratios
	cols := 3
	if panels < cols {
		cols = panels
	}
	rows := (panels + cols - 1) / cols
	var s strings.Builder
	term := "png"
	if out, err := exec.Command(gp, "-e", "set terminal").CombinedOutput(); err == nil && strings.Contains(string(out), "pngcairo") {
		term = "pngcairo"
	}
	fmt.Fprintf(&s, "set terminal %s size %d,%d font \"sans,9\"\n", term, 520*cols, 400*rows+40)
	fmt.Fprintf(&s, "set output %q\n", png)
	for i, p := range ps {
		fmt.Fprintf(&s, "$d%d << EOD\n", i)
		for j := range p.Sizes {
			fmt.Fprintf(&s, "%d %s %s %s\n", p.Sizes[j], gnuplotNum(p.Gorun[j]), gnuplotNum(p.Ompi[j]), gnuplotNum(p.Ratios[j]))
		}
		fmt.Fprintf(&s, "EOD\n")
	}
	fmt.Fprintf(&s, "set multiplot layout %d,%d title %q\n", rows, cols, title)
	s.WriteString("set logscale x 2\nset format x '%.0b%B'\nset grid\nset key top left\nset xlabel 'message size (bytes)'\n")
	for i, p := range ps {
		better := "lower is better"
		if p.Unit == "MB/s" {
			better = "higher is better"
		}
		fmt.Fprintf(&s, "set logscale y\nset title %q\nset ylabel %q\n", p.Name+" ("+better+")", p.Unit)
		fmt.Fprintf(&s, "plot $d%d using 1:2 with linespoints lw 2 title 'gorun', $d%d using 1:3 with linespoints lw 2 title 'Open MPI'\n", i, i)
	}
	s.WriteString("set logscale y 2\nset title 'gorun / Open MPI (latency < 1 and bandwidth > 1: gorun faster)'\nset ylabel 'ratio (log scale)'\nset key top left\n")
	var plots []string
	for i, p := range ps {
		plots = append(plots, fmt.Sprintf("$d%d using 1:4 with linespoints title %q", i, p.Name))
	}
	plots = append(plots, "1 with lines lc 'black' dt 2 notitle")
	fmt.Fprintf(&s, "plot %s\n", strings.Join(plots, ", "))
	s.WriteString("unset multiplot\n")
	cmd := exec.Command(gp)
	cmd.Stdin = strings.NewReader(s.String())
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("gnuplot: %v: %s", err, out)
	}
	return nil
}

const matplotlibScript = `
import json, math, sys
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
png, title, ps = sys.argv[1], sys.argv[2], json.loads(sys.stdin.read())
n = len(ps) + 1
cols = min(3, n)
rows = (n + cols - 1) // cols
fig, axes = plt.subplots(rows, cols, figsize=(5.2 * cols, 4 * rows), squeeze=False)
axes = [a for row in axes for a in row]
def clean(v):
    return [float("nan") if x is None else x for x in v]
for ax, p in zip(axes, ps):
    ax.plot(p["sizes"], clean(p["gorun"]), "o-", label="gorun")
    ax.plot(p["sizes"], clean(p["ompi"]), "s-", label="Open MPI")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    better = "higher is better" if p["unit"] == "MB/s" else "lower is better"
    ax.set_title("%s (%s)" % (p["name"], better))
    ax.set_xlabel("message size (bytes)")
    ax.set_ylabel(p["unit"])
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
ax = axes[len(ps)]
for p in ps:
    ax.plot(p["sizes"], clean(p["ratios"]), "o-", label=p["name"])
ax.axhline(1.0, color="black", linestyle="--")
ax.set_xscale("log", base=2)
ax.set_yscale("log", base=2)
ax.set_title("gorun / Open MPI (latency < 1, bandwidth > 1: gorun faster)")
ax.set_xlabel("message size (bytes)")
ax.set_ylabel("ratio (log scale)")
ax.grid(True, alpha=0.3)
ax.legend()
for a in axes[len(ps) + 1:]:
    a.axis("off")
fig.suptitle(title)
fig.tight_layout()
fig.savefig(png, dpi=100)
`

func matplotlib(py, png, title string, ps []plotSeries) error {
	// JSON has no NaN: send null, which the script turns back into NaN.
	type jsSeries struct {
		Name   string     `json:"name"`
		Unit   string     `json:"unit"`
		Sizes  []int      `json:"sizes"`
		Gorun  []*float64 `json:"gorun"`
		Ompi   []*float64 `json:"ompi"`
		Ratios []*float64 `json:"ratios"`
	}
	nullable := func(v []float64) []*float64 {
		out := make([]*float64, len(v))
		for i := range v {
			if !math.IsNaN(v[i]) && !math.IsInf(v[i], 0) {
				x := v[i]
				out[i] = &x
			}
		}
		return out
	}
	var js []jsSeries
	for _, p := range ps {
		js = append(js, jsSeries{p.Name, p.Unit, p.Sizes, nullable(p.Gorun), nullable(p.Ompi), nullable(p.Ratios)})
	}
	data, err := json.Marshal(js)
	if err != nil {
		return err
	}
	cmd := exec.Command(py, "-c", matplotlibScript, png, title)
	cmd.Stdin = bytes.NewReader(data)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("matplotlib: %v: %s", err, out)
	}
	return nil
}
