#!/bin/bash
set -euo pipefail
grep '"level": "error"' /app/events.jsonl > /app/errors.jsonl
