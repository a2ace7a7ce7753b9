#!/bin/sh
mkdir -p /etc/fixture /usr/local/bin
echo enabled > /etc/fixture/mode
printf '#!/bin/sh\necho hi\n' > /usr/local/bin/greet
chmod +x /usr/local/bin/greet
