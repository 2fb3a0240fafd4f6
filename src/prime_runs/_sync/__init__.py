"""``prime-runs sync``: delivering and closing archived runs."""
