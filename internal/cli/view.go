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
	"time"

	"github.com/spf13/cobra"

	"github.com/steward-evals/steward/internal/record"
	"github.com/steward-evals/steward/internal/report"
	"github.com/steward-evals/steward/internal/status"
)

func newView(env Env) *cobra.Command {
	var runID string
	var port int
	cmd := &cobra.Command{
		Use:   "view [RECORD]",
		Short: "Serve the HTML report of a run, with transcripts, on 127.0.0.1 (refreshing while the run is live)",
		Long: `Serve the newest run of a record (or --run) as the HTML report on
http://127.0.0.1:PORT/ (a random free port unless --port), and print the URL.
RECORD is a record directory (.steward), its record.sqlite, or an eval set
whose record to read (default: the record beside ./steward.yaml). While the
run is live the page refreshes itself as attempts are published. Stop with
Ctrl-C.`,
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
		switch r.URL.Path {
		case "/version":
			v, err := db.Version(ctx)
			if err != nil {
				http.Error(w, err.Error(), http.StatusInternalServerError)
				return
			}
			h.Set("Content-Type", "text/plain; charset=utf-8")
			fmt.Fprint(w, v)
		case "/":
			page, err := viewPage(ctx, db, runID)
			if err != nil {
				http.Error(w, err.Error(), http.StatusInternalServerError)
				return
			}
			h.Set("Content-Type", "text/html; charset=utf-8")
			_, _ = w.Write(page)
		default:
			http.NotFound(w, r)
		}
	})
}

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
			return nil, fmt.Errorf("no run %s in the record %s", runID, db.Path)
		}
	}
	rep, err := report.FromRecord(ctx, db, []string{run.ID}, "")
	if err != nil {
		return nil, err
	}
	if err := report.LoadTranscripts(ctx, db, rep); err != nil {
		return nil, err
	}
	var b bytes.Buffer
	opts := report.HTMLOptions{LiveURL: "version", Version: v, Live: run.Status == status.Running}
	if err := report.HTML(&b, rep, opts); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}
