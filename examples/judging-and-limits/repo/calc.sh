#!/bin/sh
# add A B: prints A + B. It has a bug for the agent to fix.
echo $(( $1 - $2 ))
