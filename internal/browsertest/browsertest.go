// Package browsertest drives Debian's chromium headless (through chromedp)
// for the tests of the HTML report: it opens a page, collects every
// console error, uncaught exception, refused resource (CSP) and JavaScript
// dialog, and saves screenshots. Only tests import it.
package browsertest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
)

// Browser is one headless chromium tab.
type Browser struct {
	Ctx context.Context
	t   testing.TB

	mu       sync.Mutex
	problems []string
}

// Find returns the path of a chromium binary. When none is installed the
// test skips, except under CI=true, where it fails: CI must install it.
func Find(t testing.TB) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "headless-shell"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("chromium is not installed (apt-get install chromium): the browser tests cannot run")
	}
	t.Skip("chromium is not installed (apt-get install chromium)")
	return ""
}

// Start opens a headless tab; everything ends with the test.
func Start(t testing.TB) *Browser {
	t.Helper()
	exe := Find(t)
	// Chromium may still write its profile while it exits: the directory
	// is removed after it, errors ignored (t.TempDir would fail the test).
	dir, err := os.MkdirTemp("", "steward-chromium-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(exe),
		chromedp.NoSandbox, // tests run as root in containers
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("allow-file-access-from-files", false),
		chromedp.WindowSize(1280, 900),
		chromedp.UserDataDir(dir),
	)
	actx, cancelA := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelC := chromedp.NewContext(actx)
	ctx, cancelT := context.WithTimeout(ctx, 2*time.Minute)
	b := &Browser{Ctx: ctx, t: t}
	t.Cleanup(func() { cancelT(); cancelC(); cancelA() })
	chromedp.ListenTarget(ctx, func(ev any) {
		switch e := ev.(type) {
		case *runtime.EventConsoleAPICalled:
			if e.Type == runtime.APITypeError || e.Type == runtime.APITypeWarning || e.Type == runtime.APITypeAssert {
				var args []string
				for _, a := range e.Args {
					args = append(args, string(a.Value)+a.Description)
				}
				b.problem("console %s: %s", e.Type, strings.Join(args, " "))
			}
		case *runtime.EventExceptionThrown:
			msg := e.ExceptionDetails.Text
			if e.ExceptionDetails.Exception != nil {
				msg += " " + e.ExceptionDetails.Exception.Description
			}
			b.problem("uncaught exception: %s", msg)
		case *log.EventEntryAdded:
			if e.Entry.Level == log.LevelError || e.Entry.Level == log.LevelWarning {
				b.problem("browser log %s (%s): %s", e.Entry.Level, e.Entry.Source, e.Entry.Text)
			}
		case *page.EventJavascriptDialogOpening:
			b.problem("a JavaScript dialog opened (%s): %q", e.Type, e.Message)
			go func() { _ = chromedp.Run(ctx, page.HandleJavaScriptDialog(false)) }()
		}
	})
	if err := chromedp.Run(ctx, log.Enable(), runtime.Enable()); err != nil {
		t.Fatalf("start chromium %s: %v", exe, err)
	}
	return b
}

func (b *Browser) problem(format string, args ...any) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.problems = append(b.problems, fmt.Sprintf(format, args...))
}

// Problems returns every console error, exception, log error and dialog so far.
func (b *Browser) Problems() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.problems...)
}

// Run runs chromedp actions, failing the test on error.
func (b *Browser) Run(what string, actions ...chromedp.Action) {
	b.t.Helper()
	if err := chromedp.Run(b.Ctx, actions...); err != nil {
		b.t.Fatalf("%s: %v", what, err)
	}
}

// SetInput sets the value of the form field with this id as a user would
// and fires its input event.
func (b *Browser) SetInput(id, value string) {
	b.t.Helper()
	js := fmt.Sprintf(`(function(){var e=document.getElementById(%q); e.value=%q; e.dispatchEvent(new Event('input', {bubbles:true})); return e.value})()`, id, value)
	var got string
	b.Eval(js, &got)
	if got != value {
		b.t.Fatalf("set #%s to %q: it holds %q", id, value, got)
	}
}

// Eval evaluates a JavaScript expression into out.
func (b *Browser) Eval(expr string, out any) {
	b.t.Helper()
	b.Run("evaluate "+expr, chromedp.Evaluate(expr, out))
}

// FileURL is the file:// URL of path.
func FileURL(t testing.TB, path string) string {
	abs, err := filepath.Abs(path)
	if err != nil {
		t.Fatal(err)
	}
	return "file://" + filepath.ToSlash(abs)
}

// UpdateEnv, set to 1, makes ShotPath point into the package's
// testdata/screenshots (committed for review and linked from the docs);
// otherwise screenshots go to a temporary directory, so a test run leaves
// the tree clean.
const UpdateEnv = "STEWARD_UPDATE_SCREENSHOTS"

// ShotPath is where the screenshot called name goes.
func ShotPath(t testing.TB, name string) string {
	if os.Getenv(UpdateEnv) == "1" {
		return filepath.Join("testdata", "screenshots", name)
	}
	return filepath.Join(t.TempDir(), name)
}

// Screenshot saves the visible page as a PNG at path.
func (b *Browser) Screenshot(path string) {
	b.t.Helper()
	var png []byte
	b.Run("screenshot", chromedp.CaptureScreenshot(&png))
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		b.t.Fatal(err)
	}
	if err := os.WriteFile(path, png, 0o644); err != nil {
		b.t.Fatal(err)
	}
}
