package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/steward-evals/steward/internal/crashed"
	"github.com/steward-evals/steward/internal/record"
	"github.com/steward-evals/steward/internal/report"
	"github.com/steward-evals/steward/internal/status"
)

func newView(env Env) *cobra.Command {
	var runID string
	var port int
	cmd := &cobra.Command{
		Use:   "view [RECORD]",
		Short: "Serve the record on 127.0.0.1: every run's HTML report with transcripts, the list of runs, any two compared, the flaky samples",
		Long: `Serve the record on http://127.0.0.1:PORT/ (a random free port unless --port),
and print the URL. / is the newest run's HTML report (or --run's), /runs
lists every run (status, counts, spend, when, who) and opens any
(/run/ID), compares any two (/compare?base=ID&head=ID: the verdict and the
answers side by side with their diff), and /flaky is the flaky-sample
ledger. RECORD is a record directory (.steward), its record.sqlite, or an
eval set whose record to read (default: the record beside ./steward.yaml).
While a run is live its page refreshes itself as attempts are published.
Stop with Ctrl-C.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			dir, err := viewRecordDir(args, env)
			if err != nil {
				return exitWith(ExitBadInput, err)
			}
			if port < 0 || port > 65535 {
				return exitWith(ExitBadInput, fmt.Errorf("--port %d: want 0 (any free port) to 65535", port))
			}
			// A reader: never migrates, checkpoints or writes (it serves a live run too).
			db, err := record.OpenReadOnly(ctx, dir)
			if err != nil {
				return err
			}
			defer db.Close()
			if runID != "" {
				runs, err := db.Runs(ctx)
				if err != nil {
					return err
				}
				if !slices.ContainsFunc(runs, func(r record.Run) bool { return r.ID == runID }) {
					return exitWith(ExitBadInput, fmt.Errorf("--run %s: no such run in the record %s", runID, db.Path))
				}
			}
			ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
			if err != nil {
				return exitWith(ExitBadInput, fmt.Errorf("listen on 127.0.0.1:%d: %w", port, err))
			}
			fmt.Fprintf(env.Stdout, "steward view: http://%s/ (record %s; Ctrl-C stops)\n", ln.Addr(), db.Path)
			return serveView(ctx, ln, db, runID)
		},
	}
	cmd.Flags().IntVar(&port, "port", 0, "port on 127.0.0.1 (default: any free port)")
	cmd.Flags().StringVar(&runID, "run", "", "run id (default the newest)")
	return cmd
}

// viewRecordDir finds the record directory for `steward view`; it must
// exist (view never creates a record).
func viewRecordDir(args []string, env Env) (string, error) {
	dir := ""
	if len(args) == 1 {
		st, err := os.Stat(args[0])
		switch {
		case err != nil:
			return "", fmt.Errorf("view %s: %w", args[0], err)
		case st.IsDir() && fileExists(filepath.Join(args[0], record.FileName)):
			dir = args[0]
		case st.IsDir() && fileExists(filepath.Join(args[0], ".steward", record.FileName)):
			dir = filepath.Join(args[0], ".steward")
		case !st.IsDir() && filepath.Base(args[0]) == record.FileName:
			dir = filepath.Dir(args[0])
		case !st.IsDir():
			d, err := resolveRecord("", args[0], env)
			if err != nil {
				return "", err
			}
			dir = d
		default:
			return "", fmt.Errorf("view %s: no record here (want a directory holding %s)", args[0], record.FileName)
		}
	} else {
		d, err := resolveRecord("", "", env)
		if err != nil {
			return "", err
		}
		dir = d
	}
	if !fileExists(filepath.Join(dir, record.FileName)) {
		return "", fmt.Errorf("view: no record at %s (run steward launch first, or name the record directory)", dir)
	}
	return filepath.Abs(dir)
}

func fileExists(p string) bool {
	st, err := os.Stat(p)
	return err == nil && !st.IsDir()
}

// serveView answers on ln until ctx ends: / is the report, /version the
// record's version (the page polls it and reloads when it changes).
func serveView(ctx context.Context, ln net.Listener, db *record.DB, runID string) error {
	srv := &http.Server{Handler: viewHandler(db, runID, ln.Addr().String()), ReadHeaderTimeout: 10 * time.Second,
		BaseContext: func(net.Listener) context.Context { return ctx }}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("serve view: %w", err)
	case <-ctx.Done():
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		if err := srv.Shutdown(sctx); err != nil {
			_ = srv.Close()
		}
		<-errc
		return nil
	}
}

// viewHandler serves the report of runID (the newest run when empty) from
// db. Requests must name the loopback address they were sent to (a web
// page elsewhere cannot read the record through DNS rebinding).
func viewHandler(db *record.DB, runID, addr string) http.Handler {
	_, port, _ := net.SplitHostPort(addr)
	hostOK := map[string]bool{addr: true, "localhost:" + port: true, "[::1]:" + port: true}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Cache-Control", "no-store")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("X-Frame-Options", "DENY")
		if !hostOK[r.Host] {
			http.Error(w, "steward view answers only on "+addr, http.StatusMisdirectedRequest)
			return
		}
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		ctx := r.Context()
		path := r.URL.Path
		var page []byte
		var err error
		switch {
		case path == "/version":
			v, err := db.Version(ctx)
			if err != nil {
				http.Error(w, err.Error(), http.StatusInternalServerError)
				return
			}
			h.Set("Content-Type", "text/plain; charset=utf-8")
			fmt.Fprint(w, v)
			return
		case path == "/":
			page, err = viewPage(ctx, db, runID)
		case path == "/runs":
			page, err = viewRuns(ctx, db)
		case path == "/flaky":
			page, err = viewFlaky(ctx, db)
		case strings.HasPrefix(path, "/run/"):
			page, err = viewPage(ctx, db, strings.TrimPrefix(path, "/run/"))
		case path == "/compare":
			page, err = viewCompare(ctx, db, r.URL.Query().Get("base"), r.URL.Query().Get("head"))
		default:
			http.NotFound(w, r)
			return
		}
		var nf notFound
		switch {
		case errors.As(err, &nf):
			http.Error(w, err.Error(), http.StatusNotFound)
		case err != nil:
			http.Error(w, err.Error(), http.StatusInternalServerError)
		default:
			h.Set("Content-Type", "text/html; charset=utf-8")
			_, _ = w.Write(page)
		}
	})
}

// notFound is a run the record does not hold (404).
type notFound struct{ what string }

func (e notFound) Error() string { return e.what }

func viewPage(ctx context.Context, db *record.DB, runID string) ([]byte, error) {
	// The version is read first: anything published while the page is
	// built changes it, and the page reloads once more.
	v, err := db.Version(ctx)
	if err != nil {
		return nil, err
	}
	runs, err := db.Runs(ctx)
	if err != nil {
		return nil, err
	}
	if len(runs) == 0 {
		return nil, errors.New("the record holds no runs yet")
	}
	run := runs[0]
	if runID != "" {
		found := false
		for _, r := range runs {
			if r.ID == runID {
				run, found = r, true
			}
		}
		if !found {
			return nil, notFound{fmt.Sprintf("no run %s in the record %s", runID, db.Path)}
		}
	}
	rep, err := report.FromRecord(ctx, db, []string{run.ID}, "")
	if err != nil {
		return nil, err
	}
	if err := report.LoadTranscripts(ctx, db, rep); err != nil {
		return nil, err
	}
	if run.Status != status.Running {
		// A live run's page reloads as it publishes: its trend waits for its end.
		if rep.Trends, err = runTrends(ctx, db, run.ID); err != nil {
			return nil, err
		}
	}
	var b bytes.Buffer
	opts := report.HTMLOptions{LiveURL: "/version", Version: v, Live: run.Status == status.Running, Nav: report.ViewerNav}
	if err := report.HTML(&b, rep, opts); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// viewRuns is the list of the record's runs: status, counts, spend, when
// and who, each linked to its report, with a form comparing two.
func viewRuns(ctx context.Context, db *record.DB) ([]byte, error) {
	runs, err := db.Runs(ctx)
	if err != nil {
		return nil, err
	}
	var rows []report.RunListRow
	for _, r := range runs {
		as, err := db.Attempts(ctx, r.ID)
		if err != nil {
			return nil, err
		}
		rep := &report.Report{}
		var usd float64
		for _, a := range as {
			rep.Attempts = append(rep.Attempts, report.AttemptRow{Status: a.Status, Carried: a.CarriedFrom != "", Task: a.Task})
			if a.CarriedFrom == "" {
				usd += a.CostUSD
			}
		}
		rep.Recount()
		owner := crashed.Owner(ctx, db, r)
		who := owner.Host
		if who == "" {
			who = r.Host
		}
		if owner.User != "" {
			who = owner.User + "@" + who
		}
		row := report.RunListRow{ID: r.ID, Title: r.Title, EvalSet: r.EvalSet, Status: string(r.Status), Who: who, Started: r.Started,
			Counts: rep.Counts, SpendUSD: usd}
		if !r.Finished.IsZero() {
			row.Took = r.Finished.Sub(r.Started)
		}
		rows = append(rows, row)
	}
	var b bytes.Buffer
	if err := report.RunsPage(&b, db.Path, rows); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// viewFlaky is the record's flaky-sample ledger (every eval set's runs).
func viewFlaky(ctx context.Context, db *record.DB) ([]byte, error) {
	ledger, err := db.Ledger(ctx, "")
	if err != nil {
		return nil, err
	}
	var rows []report.FlakyListRow
	for _, l := range ledger {
		if l.Flaky() {
			rows = append(rows, report.FlakyListRow{Task: l.Task, Sample: l.Sample, Passed: l.Passed, Failed: l.Failed, Errored: l.Errored, Runs: l.Runs, Last: l.Last})
		}
	}
	var b bytes.Buffer
	if err := report.FlakyPage(&b, db.Path, rows); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// viewCompare judges run head against run base as `steward compare` does
// and shows head's report with the verdict and the side by side.
func viewCompare(ctx context.Context, db *record.DB, base, head string) ([]byte, error) {
	if base == "" || head == "" {
		return nil, notFound{"compare: name both runs (/compare?base=RUN&head=RUN)"}
	}
	runs, err := db.Runs(ctx)
	if err != nil {
		return nil, err
	}
	for _, id := range []string{base, head} {
		if !slices.ContainsFunc(runs, func(r record.Run) bool { return r.ID == id }) {
			return nil, notFound{fmt.Sprintf("no run %s in the record %s", id, db.Path)}
		}
	}
	opts := report.CompareOptions{Confidence: report.DefaultConfidence, MinEffect: report.DefaultMinEffect, MinEffectSet: true}
	rep, err := compareRuns(ctx, db, db, base, head, "run "+base, opts, true)
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	if err := report.HTML(&b, rep, report.HTMLOptions{Nav: report.ViewerNav}); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}
