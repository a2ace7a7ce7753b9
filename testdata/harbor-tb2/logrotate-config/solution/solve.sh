#!/bin/bash
set -euo pipefail
cat > /etc/logrotate.d/app <<'CONF'
/var/log/app/*.log {
    daily
    rotate 7
    compress
    missingok
    notifempty
}
CONF
