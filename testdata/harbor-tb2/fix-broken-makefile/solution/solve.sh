#!/bin/bash
set -euo pipefail
cd /app/calc
sed -i 's/\$(OBJ)$/$(OBJS)/' Makefile
printf '\nclean:\n\trm -f calc $(OBJS)\n' >> Makefile
make && make check
