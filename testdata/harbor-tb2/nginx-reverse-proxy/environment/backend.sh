#!/bin/sh
# A one-file backend: answers every request with "backend ok".
mkdir -p /srv/api && echo 'backend ok' > /srv/api/index.html
cd /srv && exec python3 -m http.server 9000 --bind 127.0.0.1
