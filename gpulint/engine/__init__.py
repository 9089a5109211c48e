"""Files in, findings and fixed text out: reading, parsing, running rules, applying fixes."""
