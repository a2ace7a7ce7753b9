package report

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// Format is one report format: the one table `steward report --format`,
// `steward merge --format`, `launch --report-dir` and the action's
// report-dir read. Adding a format is a renderer and a row here.
type Format struct {
	// Name is what --format takes; Aliases are other spellings of it.
	Name    string
	Aliases []string
	// Help describes it in --format's help ("" : the name says it).
	Help string
	// File is its file in a report directory (launch --report-dir, the
	// action's report-dir); "" is written to none.
	File string
	// Transcripts: it shows the attempts' transcripts and artifacts, which
	// are loaded for it (LoadTranscripts); Trends: the eval set's trend up
	// to the run (Report.Trends).
	Transcripts, Trends bool
	// Render writes the report in this format with default options; nil for
	// a format that is a directory of files (inspect: WriteInspect).
	Render func(w io.Writer, rep *Report) error
}

// Formats are the report formats, in the order help texts list them and
// report directories are written (the action's: what loses least first).
var Formats = []Format{
	{Name: "terminal", Render: func(w io.Writer, rep *Report) error { return Terminal(w, rep, TerminalOptions{}) }},
	{Name: "markdown", Aliases: []string{"md"}, File: "report.md", Render: func(w io.Writer, rep *Report) error { return Markdown(w, rep, MarkdownOptions{}) }},
	{Name: "json", File: "report.json", Transcripts: true, Render: JSON},
	{Name: "junit", File: "junit.xml", Render: JUnit},
	{Name: "comment", Render: func(w io.Writer, rep *Report) error {
		_, err := io.WriteString(w, Comment(rep, CommentOptions{}))
		return err
	}},
	{Name: "html", Help: "one self-contained page with transcripts", File: "report.html", Transcripts: true, Trends: true,
		Render: func(w io.Writer, rep *Report) error { return HTML(w, rep, HTMLOptions{}) }},
	{Name: "inspect", Help: "one Inspect log per task in --log-dir", Transcripts: true},
}

// LookupFormat finds a format by its name or an alias.
func LookupFormat(name string) (Format, bool) {
	for _, f := range Formats {
		if f.Name == name {
			return f, true
		}
		for _, a := range f.Aliases {
			if a == name {
				return f, true
			}
		}
	}
	return Format{}, false
}

// FormatNames lists the formats' names for a message: "terminal,
// markdown, … or inspect"; withHelp adds each one's Help in parentheses;
// rendered keeps only the formats with a Render (those one stream takes).
func FormatNames(withHelp, rendered bool) string {
	var names []string
	for _, f := range Formats {
		if rendered && f.Render == nil {
			continue
		}
		n := f.Name
		if withHelp && f.Help != "" {
			n += " (" + f.Help + ")"
		}
		names = append(names, n)
	}
	return orList(names)
}

// FormatFiles lists the files a report directory gets: "report.md,
// report.json, junit.xml and report.html".
func FormatFiles() string {
	var files []string
	for _, f := range Formats {
		if f.File != "" {
			files = append(files, f.File)
		}
	}
	if len(files) < 2 {
		return strings.Join(files, "")
	}
	return strings.Join(files[:len(files)-1], ", ") + " and " + files[len(files)-1]
}

func orList(s []string) string {
	if len(s) < 2 {
		return strings.Join(s, "")
	}
	return strings.Join(s[:len(s)-1], ", ") + " or " + s[len(s)-1]
}

// WriteFile renders rep in f into path.
func (f Format) WriteFile(path string, rep *Report) error {
	out, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("write %s: %w", filepath.Base(path), err)
	}
	if err := f.Render(out, rep); err != nil {
		out.Close()
		return fmt.Errorf("write %s: %w", filepath.Base(path), err)
	}
	if err := out.Close(); err != nil {
		return fmt.Errorf("write %s: %w", filepath.Base(path), err)
	}
	return nil
}

// WriteFiles writes rep into dir in every format that has a File, but those
// skip names (the action writes its summary and comment with options of its
// own).
func WriteFiles(dir string, rep *Report, skip ...string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("write reports: %w", err)
	}
next:
	for _, f := range Formats {
		if f.File == "" || f.Render == nil {
			continue
		}
		for _, s := range skip {
			if s == f.Name {
				continue next
			}
		}
		if err := f.WriteFile(filepath.Join(dir, f.File), rep); err != nil {
			return err
		}
	}
	return nil
}
