#!/bin/bash
set -euo pipefail
mkdir -p /app/restored
# Skip the zeroed header and the one data block of the first member; tar reads the rest.
tail -c +1025 /app/backup.tar > /tmp/rest.tar
tar -C /app/restored -xf /tmp/rest.tar --ignore-zeros
