FROM scratch
COPY busybox /bin/busybox
RUN ["/bin/busybox", "mkdir", "-p", "/usr/bin", "/sbin", "/usr/sbin", "/tmp", "/srv", "/etc"]
RUN ["/bin/busybox", "--install", "-s"]
COPY secret.txt /srv/secret.txt
CMD ["httpd", "-f", "-p", "8080", "-h", "/srv"]
