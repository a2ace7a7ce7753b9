import tabulate

# Relies on an option name the fixture pretends a newer release dropped.
if not hasattr(tabulate, "PRESERVE_WHITESPACE"):
    raise SystemExit("tabulate changed")
print("report ok")
