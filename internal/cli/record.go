package cli

import (
	"context"
	"errors"
	"os"
	"path/filepath"

	"github.com/steward-evals/steward/internal/evalset"
	"github.com/steward-evals/steward/internal/record"
)

func openRecord(ctx context.Context, flag string, args []string, env Env) (*record.DB, error) {
	es := ""
	if len(args) > 0 {
		es = args[0]
	}
	dir, err := resolveRecord(flag, es, env)
	if err != nil {
		return nil, err
	}
	return record.Open(ctx, dir)
}

// openRecordRO opens the record for commands that only read it (report,
// tend, lease inspect): nothing is written, so they work on a full disk and
// never wait behind writers. A missing record is bad input (exit 2); a
// damaged one is refused (exit 3).
func openRecordRO(ctx context.Context, flag string, args []string, env Env) (*record.DB, error) {
	es := ""
	if len(args) > 0 {
		es = args[0]
	}
	dir, err := resolveRecord(flag, es, env)
	if err != nil {
		return nil, err
	}
	db, err := record.OpenReadOnly(ctx, dir)
	if errors.Is(err, record.ErrNoRecord) {
		return nil, exitWith(ExitBadInput, err)
	}
	if err != nil {
		return nil, exitWith(ExitInfra, err)
	}
	return db, nil
}

// resolveRecord resolves the record directory: --record, else the eval set's
// fleet setting, else .steward beside ./steward.yaml.
func resolveRecord(flag, evalsetPath string, env Env) (string, error) {
	if flag != "" {
		return filepath.Abs(flag)
	}
	if evalsetPath == "" {
		evalsetPath = "steward.yaml"
	}
	if _, err := os.Stat(evalsetPath); err == nil {
		f, err := evalset.LoadFleet(filepath.Join(filepath.Dir(evalsetPath), "_steward.yaml"), env.Getenv, evalset.FleetOverrides{})
		if err == nil && f.Record != "" {
			return f.Record, nil
		}
		return filepath.Abs(filepath.Join(filepath.Dir(evalsetPath), ".steward"))
	}
	return filepath.Abs(".steward")
}
