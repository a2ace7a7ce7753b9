#!/bin/bash
set -euo pipefail
cat >> /etc/ssh/sshd_config <<'CONF'
PermitRootLogin no
PasswordAuthentication no
AllowUsers deploy
MaxAuthTries 3
CONF
sshd -t
