#!/bin/sh
# The server runs in the background (in the command's own process group),
# its output away from the command's: an exec ends when every holder of
# its output has closed it. (nohup is not in this image's busybox.)
mkdir -p /srv/www
echo ready > /srv/www/status.txt
httpd -f -p 127.0.0.1:8080 -h /srv/www > /tmp/httpd.log 2>&1 &
# Leave only once it answers.
for i in $(seq 1 100); do
  wget -q -O /dev/null http://127.0.0.1:8080/status.txt && exit 0
  sleep 0.1
done
echo "the server did not answer" >&2
exit 1
