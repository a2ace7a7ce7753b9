#!/bin/bash
set -euo pipefail
(setsid /app/backend.sh >/tmp/backend.log 2>&1 &)
cat > /etc/nginx/sites-available/default <<'CONF'
server {
    listen 80 default_server;
    root /var/www/html;
    location /api/ { proxy_pass http://127.0.0.1:9000/api/; }
}
CONF
nginx -t
nginx
