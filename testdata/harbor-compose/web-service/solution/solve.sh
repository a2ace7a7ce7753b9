#!/bin/sh
set -e
wget -q -O /app/fetched.txt http://web:8080/secret.txt
