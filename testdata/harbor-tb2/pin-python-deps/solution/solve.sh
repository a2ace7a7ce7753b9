#!/bin/bash
set -euo pipefail
echo 'tabulate==0.9.0' > /app/requirements.txt
pip install --no-cache-dir -r /app/requirements.txt
python3 /app/report.py
