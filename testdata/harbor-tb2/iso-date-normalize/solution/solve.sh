#!/bin/bash
set -euo pipefail
cat > /app/normalize.py <<'PY'
import re
from datetime import datetime

text = open("/app/letters.txt").read()
text = re.sub(r"\b(\d{2})/(\d{2})/(\d{4})\b", r"\3-\1-\2", text)
text = re.sub(r"\b(\d{2})\.(\d{2})\.(\d{4})\b", r"\3-\2-\1", text)
text = re.sub(
    r"\b(January|February|March|April|May|June|July|August|September|October|November|December) (\d{1,2}), (\d{4})\b",
    lambda m: datetime.strptime(m.group(0), "%B %d, %Y").strftime("%Y-%m-%d"),
    text,
)
print(text, end="")
PY
python3 /app/normalize.py > /app/letters.iso.txt
