#!/bin/bash
set -euo pipefail
sqlite3 /app/shop.db "CREATE INDEX IF NOT EXISTS orders_customer ON orders(customer);"
